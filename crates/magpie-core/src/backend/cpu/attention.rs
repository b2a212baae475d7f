//! Fused scaled-dot-product attention on f32 CPU matrices (what PyTorch's CPU flash-attention
//! path does): one task per key/value matrix (and the query matrices that share it under GQA),
//! walking blocks of `BLOCK` query rows; each block's scores are a small GEMM, soft-maxed in
//! cache and multiplied into the values, so no `[L, S]` matrix is ever materialized. The
//! backward recomputes the probabilities from the saved per-row log-sum-exp. Under the causal
//! mask (top-left aligned, as PyTorch's `is_causal`) a block only multiplies the keys its last
//! row can see. The reference both are tested against is the composite in `ops/nn/attention.rs`.

use super::rows::{dot, exp_sum, row_max};

/// Query rows per block: the score block (`BLOCK x S`) stays in cache, and under the causal
/// mask the work over the keys drops to about `(1 + BLOCK / L) / 2` of the full product.
const BLOCK: usize = 32;

/// A matrix inside a storage slice: row `i` starts at `offset + i * row_stride` and its
/// `cols` elements are contiguous.
#[derive(Clone, Copy)]
pub struct Mat<'a> {
    /// The whole storage.
    pub data: &'a [f32],
    /// Index of element (0, 0).
    pub offset: usize,
    /// Distance between rows.
    pub row_stride: usize,
    /// Elements per row.
    pub cols: usize,
}

impl<'a> Mat<'a> {
    #[inline(always)]
    fn row(&self, i: usize) -> &'a [f32] {
        let s = self.offset + i * self.row_stride;
        &self.data[s..s + self.cols]
    }
}

/// The sizes every task shares: `l` query rows, `s` key rows, head dims `e` (queries, keys) and
/// `ev` (values), the score scale and the causal flag.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    /// Query rows.
    pub l: usize,
    /// Key / value rows.
    pub s: usize,
    /// Query / key width.
    pub e: usize,
    /// Value width.
    pub ev: usize,
    /// Multiplies `q . k`.
    pub scale: f32,
    /// Query row `i` sees keys `0..=i` only.
    pub causal: bool,
}

impl Dims {
    /// How many keys query row `i` attends to.
    #[inline(always)]
    fn keys(&self, i: usize) -> usize {
        if self.causal {
            (i + 1).min(self.s)
        } else {
            self.s
        }
    }
}

/// A strided operand of [`mm`]: element `(i, j)` at `data[off + i * rs + j * cs]`.
#[derive(Clone, Copy)]
struct Op<'a> {
    data: &'a [f32],
    off: usize,
    rs: usize,
    cs: usize,
}

impl<'a> Op<'a> {
    /// Row-major rows of `m` from row `r0` on.
    fn rows(m: Mat<'a>, r0: usize) -> Op<'a> {
        Op { data: m.data, off: m.offset + r0 * m.row_stride, rs: m.row_stride, cs: 1 }
    }
    /// The transpose of `m` (its columns as rows).
    fn cols(m: Mat<'a>) -> Op<'a> {
        Op { data: m.data, off: m.offset, rs: 1, cs: m.row_stride }
    }
    /// A row-major `? x n` buffer, or its transpose.
    fn buf(data: &'a [f32], n: usize, transposed: bool) -> Op<'a> {
        if transposed { Op { data, off: 0, rs: 1, cs: n } } else { Op { data, off: 0, rs: n, cs: 1 } }
    }
    /// Whether a `rows x cols` matrix read through this operand stays inside `data`.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        rows == 0 || cols == 0 || self.off + (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// `dst = alpha * a b` (or `dst += alpha * a b` with `acc`) for an `m x k` `a` and `k x n` `b`;
/// `dst` is row-major `m x n`. Single-threaded: the tasks are the parallelism.
#[allow(clippy::too_many_arguments)]
fn mm(dst: &mut [f32], acc: bool, m: usize, n: usize, k: usize, a: Op, b: Op, alpha: f32) {
    assert!(dst.len() >= m * n && a.fits(m, k) && b.fits(k, n), "attention: GEMM operands out of bounds (internal error)");
    if m * n == 0 {
        return;
    }
    if k == 0 {
        if !acc {
            dst[..m * n].fill(0.0);
        }
        return;
    }
    // SAFETY: every element the product reads or writes lies inside its slice (checked just
    // above), `dst` does not alias `a` or `b` (a `&mut` borrow), and the pointers are f32.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            acc,
            a.data.as_ptr().add(a.off),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr().add(b.off),
            b.cs as isize,
            b.rs as isize,
            1.0,
            alpha,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// The `(rows, keys)` of the block starting at query row `r0`: `keys` is what its last row sees.
#[inline(always)]
fn block(d: &Dims, r0: usize) -> (usize, usize) {
    let r1 = (r0 + BLOCK).min(d.l);
    (r1 - r0, if d.causal { r1.min(d.s) } else { d.s })
}

/// The exps `exp(sc - shift)` of the first `nv` scores of a row into `p`, zeros after them;
/// returns their sum.
#[inline(always)]
fn exp_row(sc: &[f32], shift: f32, nv: usize, p: &mut [f32]) -> f32 {
    p[nv..].fill(0.0);
    exp_sum::<false>(&sc[..nv], shift, Some(&mut p[..nv]))
}

crate::simd_kernel! {
    /// The forward of one task: the query matrices `qs` against keys `k` and values `v`;
    /// writes `qs.len() * l * ev` outputs and `qs.len() * l` log-sum-exps (`-inf` for a row with
    /// no visible key, whose output is 0 as PyTorch's safe softmax gives).
    pub fn forward_task(qs: &[Mat], k: Mat, v: Mat, d: Dims, out: &mut [f32], lse: &mut [f32]) {
        let (mut sc, mut p) = (vec![0f32; BLOCK * d.s], vec![0f32; BLOCK * d.s]);
        for (g, q) in qs.iter().enumerate() {
            for r0 in (0..d.l).step_by(BLOCK) {
                let (rb, n) = block(&d, r0);
                let (sc, p) = (&mut sc[..rb * n], &mut p[..rb * n]);
                mm(sc, false, rb, n, d.e, Op::rows(*q, r0), Op::cols(k), d.scale);
                for ii in 0..rb {
                    let (i, r) = (r0 + ii, g * d.l + r0 + ii);
                    let (row, pr) = (&sc[ii * n..(ii + 1) * n], &mut p[ii * n..(ii + 1) * n]);
                    let nv = d.keys(i);
                    let m = row_max(&row[..nv]);
                    if nv == 0 || m == f32::NEG_INFINITY {
                        pr.fill(0.0);
                        lse[r] = f32::NEG_INFINITY;
                        continue;
                    }
                    let sum = exp_row(row, m, nv, pr);
                    let inv = 1.0 / sum;
                    for x in pr[..nv].iter_mut() {
                        *x *= inv;
                    }
                    lse[r] = m + sum.ln();
                }
                let o = &mut out[(g * d.l + r0) * d.ev..(g * d.l + r0 + rb) * d.ev];
                mm(o, false, rb, d.ev, n, Op::buf(p, n, false), Op::rows(v, 0), 1.0);
            }
        }
    }
}

/// The gradients one backward task writes: `dq` (`qs.len() * l * e`, row-major) and the task's
/// `dk` (`s * e`) and `dv` (`s * ev`), all overwritten.
pub struct Grads<'a> {
    /// Query gradients of the task's query matrices.
    pub dq: &'a mut [f32],
    /// Key gradient (summed over the query matrices sharing the keys).
    pub dk: &'a mut [f32],
    /// Value gradient.
    pub dv: &'a mut [f32],
}

crate::simd_kernel! {
    /// The backward of one task: from the output gradients `gs`, the outputs `os` and the saved
    /// log-sum-exps, per block `P = exp(S - lse)`, `dP = dO V^T`, `dS = P (dP - rowsum(dO O))`,
    /// then `dq = dS k * scale`, `dk += dS^T q * scale`, `dv += P^T dO`.
    pub fn backward_task(qs: &[Mat], gs: &[Mat], os: &[Mat], lse: &[f32], k: Mat, v: Mat, d: Dims, out: Grads) {
        out.dk.fill(0.0);
        out.dv.fill(0.0);
        let (mut sc, mut p) = (vec![0f32; BLOCK * d.s], vec![0f32; BLOCK * d.s]);
        for (g, ((q, go), o)) in qs.iter().zip(gs).zip(os).enumerate() {
            for r0 in (0..d.l).step_by(BLOCK) {
                let (rb, n) = block(&d, r0);
                let (sc, p) = (&mut sc[..rb * n], &mut p[..rb * n]);
                mm(sc, false, rb, n, d.e, Op::rows(*q, r0), Op::cols(k), d.scale);
                for ii in 0..rb {
                    let (i, r) = (r0 + ii, g * d.l + r0 + ii);
                    let pr = &mut p[ii * n..(ii + 1) * n];
                    let nv = if lse[r] == f32::NEG_INFINITY { 0 } else { d.keys(i) };
                    exp_row(&sc[ii * n..(ii + 1) * n], lse[r], nv, pr);
                }
                // dP into the score buffer, then dS (scale folded in) in place
                mm(sc, false, rb, n, d.ev, Op::rows(*go, r0), Op::cols(v), 1.0);
                for ii in 0..rb {
                    let i = r0 + ii;
                    let di = dot(go.row(i), o.row(i));
                    for (x, &pv) in sc[ii * n..(ii + 1) * n].iter_mut().zip(&p[ii * n..(ii + 1) * n]) {
                        *x = pv * (*x - di) * d.scale;
                    }
                }
                let dq = &mut out.dq[(g * d.l + r0) * d.e..(g * d.l + r0 + rb) * d.e];
                mm(dq, false, rb, d.e, n, Op::buf(sc, n, false), Op::rows(k, 0), 1.0);
                mm(&mut out.dk[..n * d.e], true, n, d.e, rb, Op::buf(sc, n, true), Op::rows(*q, r0), 1.0);
                mm(&mut out.dv[..n * d.ev], true, n, d.ev, rb, Op::buf(p, n, true), Op::rows(*go, r0), 1.0);
            }
        }
    }
}
