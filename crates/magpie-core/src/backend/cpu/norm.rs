//! Fused f32 layer norm over the last `n` elements of each row: the forward writes the output,
//! the mean and the reciprocal standard deviation in one sweep per row (the row stays in L1
//! between its passes), the backward computes dx, dweight and dbias together. Rows run in
//! parallel groups under the best SIMD level; the weight and bias gradients are per-task
//! partial column sums added at the end. Reference: the composite in `ops/nn/norm.rs`.

use super::rows::{sum_f32_wide, PAR_MIN};
use rayon::prelude::*;

/// Rows per parallel task for rows of `n` elements.
fn rows_per_task(n: usize) -> usize {
    ((1 << 14) / n.max(1)).max(1)
}

/// Sum of squared deviations from `m`.
#[inline(always)]
fn sq_dev(x: &[f32], m: f32) -> f32 {
    // 16 lanes: one AVX-512 register or two AVX2 ones
    let mut acc = [0f32; 16];
    let c = x.chunks_exact(16);
    let r = c.remainder();
    for v in c {
        for k in 0..16 {
            let d = v[k] - m;
            acc[k] += d * d;
        }
    }
    let mut a = [0f32; 8];
    for k in 0..8 {
        a[k] = acc[k] + acc[8 + k];
    }
    let mut s = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    for &v in r {
        s += (v - m) * (v - m);
    }
    s
}

#[inline(always)]
fn fwd_row(x: &[f32], y: &mut [f32], w: Option<&[f32]>, b: Option<&[f32]>, eps: f32) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = sum_f32_wide(x) / n;
    let var = sq_dev(x, mean) / n;
    let rstd = 1.0 / (var + eps).sqrt();
    match (w, b) {
        (Some(w), Some(b)) => {
            for (((o, &v), &wv), &bv) in y.iter_mut().zip(x).zip(w).zip(b) {
                *o = (v - mean) * rstd * wv + bv;
            }
        }
        (Some(w), None) => {
            for ((o, &v), &wv) in y.iter_mut().zip(x).zip(w) {
                *o = (v - mean) * rstd * wv;
            }
        }
        (None, Some(b)) => {
            for ((o, &v), &bv) in y.iter_mut().zip(x).zip(b) {
                *o = (v - mean) * rstd + bv;
            }
        }
        (None, None) => {
            for (o, &v) in y.iter_mut().zip(x) {
                *o = (v - mean) * rstd;
            }
        }
    }
    (mean, rstd)
}

crate::simd_kernel! {
    /// Layer norm of a block of `n`-element rows.
    fn fwd_rows(x: &[f32], n: usize, w: Option<&[f32]>, b: Option<&[f32]>, eps: f32, y: &mut [f32], mean: &mut [f32], rstd: &mut [f32]) {
        for (((yr, xr), mr), rr) in y.chunks_mut(n).zip(x.chunks(n)).zip(mean.iter_mut()).zip(rstd.iter_mut()) {
            (*mr, *rr) = fwd_row(xr, yr, w, b, eps);
        }
    }
}

/// Layer norm of the `n`-element rows of `x` into `y`, with each row's mean and rstd.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_forward(
    x: &[f32],
    n: usize,
    w: Option<&[f32]>,
    b: Option<&[f32]>,
    eps: f32,
    y: &mut [f32],
    mean: &mut [f32],
    rstd: &mut [f32],
) {
    if n == 0 {
        return;
    }
    if x.len() < PAR_MIN {
        fwd_rows(x, n, w, b, eps, y, mean, rstd);
        return;
    }
    let per = rows_per_task(n);
    y.par_chunks_mut(per * n)
        .zip(x.par_chunks(per * n))
        .zip(mean.par_chunks_mut(per))
        .zip(rstd.par_chunks_mut(per))
        .for_each(|(((y, x), m), r)| fwd_rows(x, n, w, b, eps, y, m, r));
}

/// One row's backward: dx written when asked, g*xhat and g added into `dw`/`db` accumulators.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn bwd_row(g: &[f32], x: &[f32], mean: f32, rstd: f32, w: Option<&[f32]>, dx: Option<&mut [f32]>, dw: &mut [f32], db: &mut [f32], want_wb: bool) {
    let n = x.len();
    if want_wb {
        for (((dwv, dbv), &gv), &xv) in dw.iter_mut().zip(db.iter_mut()).zip(g).zip(x) {
            *dwv += gv * (xv - mean) * rstd;
            *dbv += gv;
        }
    }
    let Some(dx) = dx else { return };
    // a = mean(g*w), c = mean(g*w*xhat); dx = rstd * (g*w - a - xhat * c)
    let (mut a8, mut c8) = ([0f32; 8], [0f32; 8]);
    let (mut a, mut c) = (0f32, 0f32);
    let full = n - n % 8;
    match w {
        Some(w) => {
            for ((gv, wv), xv) in g[..full].chunks_exact(8).zip(w[..full].chunks_exact(8)).zip(x[..full].chunks_exact(8)) {
                for k in 0..8 {
                    let gw = gv[k] * wv[k];
                    a8[k] += gw;
                    c8[k] += gw * (xv[k] - mean);
                }
            }
            for i in full..n {
                let gw = g[i] * w[i];
                a += gw;
                c += gw * (x[i] - mean);
            }
        }
        None => {
            for (gv, xv) in g[..full].chunks_exact(8).zip(x[..full].chunks_exact(8)) {
                for k in 0..8 {
                    a8[k] += gv[k];
                    c8[k] += gv[k] * (xv[k] - mean);
                }
            }
            for i in full..n {
                a += g[i];
                c += g[i] * (x[i] - mean);
            }
        }
    }
    let inv_n = 1.0 / n as f32;
    let a = (a + a8.iter().sum::<f32>()) * inv_n;
    let c = (c + c8.iter().sum::<f32>()) * inv_n * rstd;
    match w {
        Some(w) => {
            for (((d, &gv), &wv), &xv) in dx.iter_mut().zip(g).zip(w).zip(x) {
                *d = rstd * (gv * wv - a - (xv - mean) * rstd * c);
            }
        }
        None => {
            for ((d, &gv), &xv) in dx.iter_mut().zip(g).zip(x) {
                *d = rstd * (gv - a - (xv - mean) * rstd * c);
            }
        }
    }
}

crate::simd_kernel! {
    /// The backward of a block of rows (`dx` for all of them when given).
    fn bwd_rows(g: &[f32], x: &[f32], n: usize, mean: &[f32], rstd: &[f32], w: Option<&[f32]>, dx: Option<&mut [f32]>, dw: &mut [f32], db: &mut [f32], want_wb: bool) {
        match dx {
            Some(dx) => {
                for (r, d) in dx.chunks_mut(n).enumerate() {
                    let s = r * n..(r + 1) * n;
                    bwd_row(&g[s.clone()], &x[s], mean[r], rstd[r], w, Some(d), dw, db, want_wb);
                }
            }
            None => {
                for r in 0..mean.len() {
                    let s = r * n..(r + 1) * n;
                    bwd_row(&g[s.clone()], &x[s], mean[r], rstd[r], w, None, dw, db, want_wb);
                }
            }
        }
    }
}

/// The layer norm backward over `n`-element rows: `dx` (when given) and the weight and bias
/// gradients (when `dwdb` is given: `(dw, db)`, each `n` elements, overwritten).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_backward(
    g: &[f32],
    x: &[f32],
    n: usize,
    mean: &[f32],
    rstd: &[f32],
    w: Option<&[f32]>,
    dx: Option<&mut [f32]>,
    dwdb: Option<(&mut [f32], &mut [f32])>,
) {
    if n == 0 {
        return;
    }
    let want_wb = dwdb.is_some();
    let rows = mean.len();
    // a task: rows r0.. (as many as its dx slice holds, or a task's worth) -> partial dw, db
    let task = |r0: usize, dx: Option<&mut [f32]>| -> (Vec<f32>, Vec<f32>) {
        let (mut dw, mut db) = if want_wb { (vec![0f32; n], vec![0f32; n]) } else { (Vec::new(), Vec::new()) };
        let r1 = match &dx {
            Some(d) => r0 + d.len() / n,
            None => (r0 + rows_per_task(n)).min(rows),
        };
        let s = r0 * n..r1 * n;
        bwd_rows(&g[s.clone()], &x[s], n, &mean[r0..r1], &rstd[r0..r1], w, dx, &mut dw, &mut db, want_wb);
        (dw, db)
    };
    let per = rows_per_task(n);
    let par = x.len() >= PAR_MIN;
    let parts: Vec<(Vec<f32>, Vec<f32>)> = match dx {
        Some(dx) if par => dx.par_chunks_mut(per * n).enumerate().map(|(t, d)| task(t * per, Some(d))).collect(),
        Some(dx) => vec![task(0, Some(dx))],
        None if par => (0..rows.div_ceil(per)).into_par_iter().map(|t| task(t * per, None)).collect(),
        None => (0..rows.div_ceil(per)).map(|t| task(t * per, None)).collect(),
    };
    if let Some((dw, db)) = dwdb {
        dw.fill(0.0);
        db.fill(0.0);
        for (pw, pb) in &parts {
            for (o, v) in dw.iter_mut().zip(pw) {
                *o += v;
            }
            for (o, v) in db.iter_mut().zip(pb) {
                *o += v;
            }
        }
    }
}
