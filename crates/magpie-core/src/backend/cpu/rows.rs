//! f32 kernels over the rows of a contiguous matrix: sums (of rows and of columns), softmax and
//! log_softmax with their backward, the per-row log-sum-exp and backward of cross entropy, and
//! GELU. Reductions keep explicit 8-lane accumulator arrays so that they vectorize without
//! reassociation flags; heavy math (`expf`) runs in flat loops the loop vectorizer handles.
//! Each kernel works on a block of rows and is compiled for AVX2 (`simd_kernel!`); the
//! `par_*` drivers split rows into blocks over rayon.
//! The references they are tested against are the composites in `ops/` (tests/cpu_fused.rs).

use super::vmath::expf_f;
use rayon::prelude::*;

/// Lanes of the accumulator arrays (one AVX2 register of f32).
const L: usize = 8;
/// Below this many elements a kernel runs on the calling thread.
pub const PAR_MIN: usize = 1 << 15;
/// Elements per parallel task (a group of rows).
const TASK: usize = 1 << 14;

/// The sum of an 8-lane accumulator array, pairwise.
#[inline(always)]
fn hsum(a: [f32; L]) -> f32 {
    ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
}

/// The sum of at most a few thousand values: 4 x 8 independent lanes (latency-bound loops
/// otherwise), combined pairwise.
#[inline(always)]
fn block_sum(x: &[f32]) -> f32 {
    let mut acc = [[0f32; L]; 4];
    let chunks = x.chunks_exact(4 * L);
    let rem = chunks.remainder();
    for c in chunks {
        for j in 0..4 {
            for k in 0..L {
                acc[j][k] += c[j * L + k];
            }
        }
    }
    let mut tail = [0f32; L];
    let c8 = rem.chunks_exact(L);
    let r8 = c8.remainder();
    for c in c8 {
        for k in 0..L {
            tail[k] += c[k];
        }
    }
    let mut s = (hsum(acc[0]) + hsum(acc[1])) + (hsum(acc[2]) + hsum(acc[3])) + hsum(tail);
    for &v in r8 {
        s += v;
    }
    s
}

/// Cascade (pairwise over blocks of 1024) sum of f32 values in f32, without recursion so that
/// it inlines into vectorized callers. Error grows with log(n), as PyTorch's cascade sum.
#[inline(always)]
pub fn sum_f32(x: &[f32]) -> f32 {
    cascade_sum(x, block_sum)
}

/// [`sum_f32`] with [`block_sum_wide`] for the blocks: faster where AVX-512 is compiled in, with
/// another order of additions (so not for the `sum` op, whose rounding matches PyTorch's cases).
#[inline(always)]
pub(crate) fn sum_f32_wide(x: &[f32]) -> f32 {
    cascade_sum(x, block_sum_wide)
}

/// The sum of at most a few thousand values: two flat 16-lane accumulator loops, which LLVM
/// turns into whole-register adds for AVX-512 and AVX2 alike (standalone, 1024 rows of 256, 1
/// thread, AVX-512: 0.051 ms with [`block_sum`], 0.030 ms with this).
#[inline(always)]
fn block_sum_wide(x: &[f32]) -> f32 {
    let (mut a, mut b) = ([0f32; 2 * L], [0f32; 2 * L]);
    let chunks = x.chunks_exact(4 * L);
    let rem = chunks.remainder();
    for c in chunks {
        for k in 0..2 * L {
            a[k] += c[k];
        }
        for k in 0..2 * L {
            b[k] += c[2 * L + k];
        }
    }
    let mut a8 = [0f32; L];
    for k in 0..L {
        a8[k] = (a[k] + a[L + k]) + (b[k] + b[L + k]);
    }
    let mut s = hsum(a8);
    for &v in rem {
        s += v;
    }
    s
}

/// The cascade of [`sum_f32`] over blocks of 1024 summed by `block`.
#[inline(always)]
fn cascade_sum(x: &[f32], block: impl Fn(&[f32]) -> f32) -> f32 {
    const B: usize = 1024;
    if x.len() <= B {
        return block(x);
    }
    // a binary counter of partial sums: level i holds the sum of 2^i blocks
    let mut stack = [0f32; 64];
    let mut levels = 0usize;
    for (count, blk) in x.chunks(B).enumerate() {
        let mut s = block(blk);
        let mut c = count;
        while c & 1 == 1 {
            levels -= 1;
            s += stack[levels];
            c >>= 1;
        }
        stack[levels] = s;
        levels += 1;
    }
    let mut s = 0f32;
    for l in (0..levels).rev() {
        s += stack[l];
    }
    s
}

/// `sum(a[i] * b[i])` with 8 lanes.
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [[0f32; L]; 2];
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let ca = a.chunks_exact(2 * L);
    let ra = ca.remainder();
    for (x, y) in ca.zip(b.chunks_exact(2 * L)) {
        for j in 0..2 {
            for k in 0..L {
                acc[j][k] += x[j * L + k] * y[j * L + k];
            }
        }
    }
    let mut s = hsum(acc[0]) + hsum(acc[1]);
    let off = n - ra.len();
    for (x, y) in ra.iter().zip(&b[off..]) {
        s += x * y;
    }
    s
}

/// The max of a row (NaN-ignoring; a NaN still poisons the exp sum that follows, as it must).
#[inline(always)]
pub(crate) fn row_max(x: &[f32]) -> f32 {
    // 16 lanes of plain compare-selects (a NaN never wins), not `f32::max`, whose NaN
    // handling puts a compare and a blend on the loop's dependency chain
    let mut acc = [f32::NEG_INFINITY; 2 * L];
    let c = x.chunks_exact(2 * L);
    let r = c.remainder();
    for v in c {
        for k in 0..2 * L {
            acc[k] = if v[k] > acc[k] { v[k] } else { acc[k] };
        }
    }
    let mut m = acc.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    for &v in r {
        m = m.max(v);
    }
    m
}

/// Elements per step of [`exp_sum`]: its exps go to a stack buffer of this size when not kept.
const EXP_STEP: usize = 64;

/// `sum(exp(x - m))`, the exps also written to `o` when given (`F`: multiply-adds fused, see
/// `simd::fmadd`). Each step of [`EXP_STEP`] elements is one flat loop of [`expf_f`] (which the
/// loop vectorizer runs 8 or 16 lanes wide, as the CPU allows) and then a 16-lane sum of the
/// step's exps while they are in L1.
#[inline(always)]
pub(crate) fn exp_sum<const F: bool>(x: &[f32], m: f32, mut o: Option<&mut [f32]>) -> f32 {
    let mut buf = [0f32; EXP_STEP];
    let mut acc = [0f32; 2 * L];
    let mut s = 0f32;
    for (i, xc) in x.chunks(EXP_STEP).enumerate() {
        let dst: &mut [f32] = match o.as_deref_mut() {
            Some(o) => &mut o[i * EXP_STEP..i * EXP_STEP + xc.len()],
            None => &mut buf[..xc.len()],
        };
        for (d, &v) in dst.iter_mut().zip(xc) {
            *d = expf_f::<F>(v - m);
        }
        let c = dst.chunks_exact(2 * L);
        for &v in c.remainder() {
            s += v;
        }
        for v in c {
            for k in 0..2 * L {
                acc[k] += v[k];
            }
        }
    }
    let mut a8 = [0f32; L];
    for k in 0..L {
        a8[k] = acc[k] + acc[L + k];
    }
    hsum(a8) + s
}

/// `log(sum(exp(x)))` of a row, stable (max subtracted): NaN with NaNs, `m` when the max is
/// infinite (all -inf gives -inf, as the composite).
#[inline(always)]
fn logsumexp_row<const F: bool>(x: &[f32]) -> f32 {
    let m = row_max(x);
    if m == f32::NEG_INFINITY || m == f32::INFINITY {
        return if x.iter().any(|v| v.is_nan()) { f32::NAN } else { m };
    }
    m + exp_sum::<F>(x, m, None).ln()
}

crate::simd_kernel! {
    /// Softmax (`log = false`) or log_softmax of the `n`-element rows of `x` into `o`.
    pub fn softmax_rows(x: &[f32], o: &mut [f32], n: usize, log: bool) {
        for (xr, or) in x.chunks(n).zip(o.chunks_mut(n)) {
            let m = row_max(xr);
            let s = exp_sum::<FMA>(xr, m, Some(&mut *or));
            if log {
                let shift = m + s.ln();
                for (ov, &xv) in or.iter_mut().zip(xr) {
                    *ov = xv - shift;
                }
            } else {
                let inv = 1.0 / s;
                for ov in or.iter_mut() {
                    *ov *= inv;
                }
            }
        }
    }
}

crate::simd_kernel! {
    /// The input gradient of softmax (`y * (g - sum(g * y))`) or, with `log`, of log_softmax
    /// (`g - exp(y) * sum(g)`), over `n`-element rows of output `y` and output gradient `g`.
    pub fn softmax_backward_rows(g: &[f32], y: &[f32], o: &mut [f32], n: usize, log: bool) {
        for ((gr, yr), or) in g.chunks(n).zip(y.chunks(n)).zip(o.chunks_mut(n)) {
            if log {
                let s = sum_f32(gr);
                for ((ov, &gv), &yv) in or.iter_mut().zip(gr).zip(yr) {
                    *ov = gv - expf_f::<FMA>(yv) * s;
                }
            } else {
                let d = dot(gr, yr);
                for ((ov, &gv), &yv) in or.iter_mut().zip(gr).zip(yr) {
                    *ov = yv * (gv - d);
                }
            }
        }
    }
}

crate::simd_kernel! {
    /// `out[i] = log(sum(exp(row i)))` over the `n`-element rows of `x`.
    pub fn logsumexp_rows(x: &[f32], n: usize, out: &mut [f32]) {
        for (o, r) in out.iter_mut().zip(x.chunks(n)) {
            *o = logsumexp_row::<FMA>(r);
        }
    }
}

crate::simd_kernel! {
    no_avx512;
    /// `out[i] = sum(row i)` over the `n`-element rows of `x`. AVX2 at most: LLVM vectorizes
    /// [`block_sum`] into 4-lane registers with shuffles in the AVX-512 variant (`sum rows
    /// 4096x4096`: 3.25 vs 2.75 ms in a standalone copy, 1 thread); two flat 16-lane loops ran
    /// at 2.42 ms but sum in another order, which moved two int64 `masked.std`/`masked.var`
    /// conformance cases off PyTorch's rounding.
    pub fn sum_rows(x: &[f32], n: usize, out: &mut [f32]) {
        for (o, r) in out.iter_mut().zip(x.chunks(n)) {
            *o = sum_f32(r);
        }
    }
}

crate::simd_kernel! {
    /// Cross entropy's input gradient over the `n`-class rows of logits `x`:
    /// `(exp(x - lse) - onehot(t)) * scale`, zero rows where `t == ignore`.
    pub fn cross_entropy_backward_rows(x: &[f32], lse: &[f32], t: &[i64], scale: &[f32], ignore: i64, n: usize, o: &mut [f32]) {
        for (i, (xr, or)) in x.chunks(n).zip(o.chunks_mut(n)).enumerate() {
            if t[i] == ignore {
                or.fill(0.0);
                continue;
            }
            let (s, l) = (scale[i], lse[i]);
            for (ov, &xv) in or.iter_mut().zip(xr) {
                *ov = expf_f::<FMA>(xv - l) * s;
            }
            or[t[i] as usize] -= s;
        }
    }
}

crate::simd_kernel! {
    /// GELU (`tanh`: its tanh approximation) of `x` into `o`.
    pub fn gelu_block(x: &[f32], o: &mut [f32], tanh: bool) {
        if tanh {
            for (ov, &xv) in o.iter_mut().zip(x) {
                *ov = super::vmath::gelu_tanh::<FMA>(xv);
            }
        } else {
            for (ov, &xv) in o.iter_mut().zip(x) {
                *ov = super::vmath::gelu_erf::<FMA>(xv);
            }
        }
    }
}

crate::simd_kernel! {
    /// GELU's input gradient `g * gelu'(x)` into `o`.
    pub fn gelu_backward_block(x: &[f32], g: &[f32], o: &mut [f32], tanh: bool) {
        if tanh {
            for ((ov, &xv), &gv) in o.iter_mut().zip(x).zip(g) {
                *ov = gv * super::vmath::gelu_tanh_grad::<FMA>(xv);
            }
        } else {
            for ((ov, &xv), &gv) in o.iter_mut().zip(x).zip(g) {
                *ov = gv * super::vmath::gelu_erf_grad::<FMA>(xv);
            }
        }
    }
}

/// Runs `f(first_row, out_block)` over blocks of whole `m`-element rows of `out`, in parallel
/// tasks of about `TASK` elements of work when the total (`work_per_row` per row) is large.
pub fn par_rows<O: Send>(out: &mut [O], m: usize, work_per_row: usize, f: impl Fn(usize, &mut [O]) + Sync + Send) {
    let rows = out.len().checked_div(m).unwrap_or(0);
    if rows == 0 {
        return;
    }
    if rows * work_per_row < PAR_MIN || rows == 1 {
        f(0, out);
        return;
    }
    let per = (TASK / work_per_row.max(1)).max(1);
    out.par_chunks_mut(per * m).enumerate().for_each(|(t, b)| f(t * per, b));
}

/// The sums of the `n`-element rows of `x` into `out` (one per row).
pub fn row_sums(x: &[f32], n: usize, out: &mut [f32]) {
    if n == 0 {
        out.fill(0.0);
        return;
    }
    if out.len() == 1 && x.len() >= 1 << 18 {
        // one long row: split it over threads
        let parts: Vec<f32> = x.par_chunks(1 << 16).map(|c| {
            let mut o = [0f32];
            sum_rows(c, c.len(), &mut o);
            o[0]
        }).collect();
        out[0] = sum_f32(&parts);
        return;
    }
    par_rows(out, 1, n, |r0, o| sum_rows(&x[r0 * n..(r0 + o.len()) * n], n, o));
}

/// Column strip width (floats) a task accumulates across rows.
const STRIP: usize = 64;

crate::simd_kernel! {
    no_avx512;
    /// Adds rows `r0..r1` of the row-major `[_, cols]` matrix `x`, restricted to columns
    /// `c0..c0 + o.len()`, into `o` (overwritten), two-level (blocks of 128 rows) for accuracy.
    /// AVX2 at most: a standalone copy at `sum cols 4096x1024` took 0.84 ms with AVX-512 and
    /// 0.75 ms with AVX2 (1 thread); full strips use a fixed-width loop (0.99 -> 0.84 ms and
    /// 0.79 -> 0.75 ms there).
    fn col_strip(x: &[f32], cols: usize, r0: usize, r1: usize, c0: usize, o: &mut [f32]) {
        for (i, o) in o.chunks_mut(STRIP).enumerate() {
            let c0 = c0 + i * STRIP;
            let w = o.len();
            let mut total = [0f32; STRIP];
            let mut r = r0;
            while r < r1 {
                let end = (r + 128).min(r1);
                let mut acc = [0f32; STRIP];
                if w == STRIP {
                    for rr in r..end {
                        let row = &x[rr * cols + c0..rr * cols + c0 + STRIP];
                        for k in 0..STRIP {
                            acc[k] += row[k];
                        }
                    }
                } else {
                    for rr in r..end {
                        let row = &x[rr * cols + c0..rr * cols + c0 + w];
                        for (a, &v) in acc[..w].iter_mut().zip(row) {
                            *a += v;
                        }
                    }
                }
                for k in 0..w {
                    total[k] += acc[k];
                }
                r = end;
            }
            o.copy_from_slice(&total[..w]);
        }
    }
}

/// The sums of the columns of the row-major `[rows, cols]` matrix `x` into `out` (`cols`
/// elements): strips of columns in parallel, or slabs of rows when the columns are few.
pub fn col_sums(x: &[f32], rows: usize, cols: usize, out: &mut [f32], par: bool) {
    if cols == 0 {
        return;
    }
    let big = par && rows * cols >= PAR_MIN;
    if big && cols < 4 * STRIP && rows >= 256 {
        let threads = rayon::current_num_threads().max(1);
        let slab = rows.div_ceil(threads * 2).max(128);
        let parts: Vec<Vec<f32>> = (0..rows.div_ceil(slab))
            .into_par_iter()
            .map(|s| {
                let mut p = vec![0f32; cols];
                col_strip(x, cols, s * slab, ((s + 1) * slab).min(rows), 0, &mut p);
                p
            })
            .collect();
        out.fill(0.0);
        for p in &parts {
            for (o, v) in out.iter_mut().zip(p) {
                *o += v;
            }
        }
    } else if big {
        out.par_chunks_mut(STRIP).enumerate().for_each(|(i, o)| col_strip(x, cols, 0, rows, i * STRIP, o));
    } else {
        col_strip(x, cols, 0, rows, 0, out);
    }
}

/// GELU of `x` (or, with `g`, its input gradient) into `o`, in parallel chunks when large.
pub fn par_gelu(x: &[f32], g: Option<&[f32]>, o: &mut [f32], tanh: bool) {
    let f = |k: usize, o: &mut [f32]| {
        let r = k * TASK..k * TASK + o.len();
        match g {
            Some(g) => gelu_backward_block(&x[r.clone()], &g[r], o, tanh),
            None => gelu_block(&x[r], o, tanh),
        }
    };
    if o.len() < PAR_MIN {
        f(0, o);
    } else {
        o.par_chunks_mut(TASK).enumerate().for_each(|(k, c)| f(k, c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_match_f64() {
        for n in [0usize, 1, 7, 8, 33, 1023, 1024, 1025, 5000, 70_000] {
            let x: Vec<f32> = (0..n).map(|i| ((i * 7919 % 1000) as f32) / 1000.0 - 0.3).collect();
            let want: f64 = x.iter().map(|&v| v as f64).sum();
            for got in [sum_f32(&x) as f64, sum_f32_wide(&x) as f64] {
                assert!((got - want).abs() <= 1e-5 * (1.0 + want.abs()), "n={n}: {got} vs {want}");
            }
        }
    }
}
