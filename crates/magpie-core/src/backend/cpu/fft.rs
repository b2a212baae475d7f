//! FFT kernels on contiguous host buffers (rustfft): one plan per (length, direction, precision)
//! kept by a process-wide planner, lines batched over the other dims, in parallel when large.
//!
//! The three transforms are PyTorch's `_fft_c2c`, `_fft_r2c` (one-sided) and `_fft_c2r`. Multi-dim
//! real transforms do the half-spectrum dim (the last of `dims`) alone and the other dims as c2c,
//! in the order pocketfft and PyTorch's CUDA path use, so the result for a non-Hermitian c2r input
//! is defined (the imaginary parts that a Hermitian spectrum cannot have are ignored).

use num_complex::Complex;
use rayon::prelude::*;
use rustfft::{Fft, FftDirection, FftNum, FftPlanner};
use std::sync::{Arc, Mutex, OnceLock};

/// Below this many elements a transform runs on the calling thread.
const PAR_MIN: usize = 1 << 15;

/// f32 and f64: the precisions with a plan cache.
pub trait FftFloat: FftNum + num_traits::Float {
    /// The planner of this precision (it keeps every plan it made, so each length is planned once).
    fn planner() -> &'static Mutex<FftPlanner<Self>>;
}

impl FftFloat for f32 {
    fn planner() -> &'static Mutex<FftPlanner<f32>> {
        static P: OnceLock<Mutex<FftPlanner<f32>>> = OnceLock::new();
        P.get_or_init(|| Mutex::new(FftPlanner::new()))
    }
}

impl FftFloat for f64 {
    fn planner() -> &'static Mutex<FftPlanner<f64>> {
        static P: OnceLock<Mutex<FftPlanner<f64>>> = OnceLock::new();
        P.get_or_init(|| Mutex::new(FftPlanner::new()))
    }
}

/// The cached plan for `n` points in one direction.
fn plan<T: FftFloat>(n: usize, inverse: bool) -> Arc<dyn Fft<T>> {
    let dir = if inverse { FftDirection::Inverse } else { FftDirection::Forward };
    // a poisoned lock only means another thread panicked while planning; the cache is still valid
    let mut p = T::planner().lock().unwrap_or_else(|e| e.into_inner());
    p.plan_fft(n, dir)
}

/// Runs the plan over consecutive lines of `n` points in `buf` (a multiple of `n` long).
fn run_lines<T: FftFloat>(buf: &mut [Complex<T>], n: usize, inverse: bool) {
    if n <= 1 || buf.is_empty() {
        return;
    }
    let p = plan::<T>(n, inverse);
    let scratch_len = p.get_inplace_scratch_len();
    let zero = Complex::new(T::zero(), T::zero());
    if buf.len() < PAR_MIN {
        let mut scratch = vec![zero; scratch_len];
        p.process_with_scratch(buf, &mut scratch);
        return;
    }
    let lines_per = (PAR_MIN / 4 / n).max(1);
    buf.par_chunks_mut(lines_per * n).for_each(|c| {
        let mut scratch = vec![zero; scratch_len];
        p.process_with_scratch(c, &mut scratch);
    });
}

/// Unnormalized c2c along dim `d` of the contiguous `buf` of `shape`, in place.
pub fn c2c_dim<T: FftFloat>(buf: &mut [Complex<T>], shape: &[usize], d: usize, inverse: bool) {
    let n = shape[d];
    let inner: usize = shape[d + 1..].iter().product();
    if n <= 1 || buf.is_empty() {
        return;
    }
    if inner == 1 {
        run_lines(buf, n, inverse);
        return;
    }
    // move dim d last ([outer, inner, n]), transform the now contiguous lines, move it back
    let block = n * inner;
    let mut t = vec![Complex::new(T::zero(), T::zero()); buf.len()];
    let gather = |(o, dst): (usize, &mut [Complex<T>])| {
        let src = &buf[o * block..(o + 1) * block];
        for i in 0..inner {
            for k in 0..n {
                dst[i * n + k] = src[k * inner + i];
            }
        }
    };
    if buf.len() < PAR_MIN {
        t.chunks_mut(block).enumerate().for_each(gather);
    } else {
        t.par_chunks_mut(block).enumerate().for_each(gather);
    }
    run_lines(&mut t, n, inverse);
    let scatter = |(o, dst): (usize, &mut [Complex<T>])| {
        let src = &t[o * block..(o + 1) * block];
        for k in 0..n {
            for i in 0..inner {
                dst[k * inner + i] = src[i * n + k];
            }
        }
    };
    if buf.len() < PAR_MIN {
        buf.chunks_mut(block).enumerate().for_each(scatter);
    } else {
        buf.par_chunks_mut(block).enumerate().for_each(scatter);
    }
}

/// Multiplies every element by `scale` and conjugates it when `conj`.
pub fn scale_conj<T: FftFloat>(buf: &mut [Complex<T>], scale: T, conj: bool) {
    if scale == T::one() && !conj {
        return;
    }
    let f = |z: &mut Complex<T>| {
        *z = Complex::new(z.re * scale, if conj { -z.im * scale } else { z.im * scale });
    };
    if buf.len() < PAR_MIN {
        buf.iter_mut().for_each(f);
    } else {
        buf.par_iter_mut().for_each(f);
    }
}

/// Multiplies positions `1..=count` along dim `d` by `w` (the interior of a half spectrum:
/// PyTorch's doubling in the c2r backward, and its inverse).
pub fn weight_interior<T: FftFloat>(buf: &mut [Complex<T>], shape: &[usize], d: usize, count: usize, w: T) {
    let m = shape[d];
    let inner: usize = shape[d + 1..].iter().product();
    for (i, z) in buf.iter_mut().enumerate() {
        let k = (i / inner) % m;
        if (1..=count).contains(&k) {
            *z = *z * w;
        }
    }
}

/// Sizes and positions of the lines of `shape` along `d`: (outer, n, inner).
fn split(shape: &[usize], d: usize) -> (usize, usize, usize) {
    (shape[..d].iter().product(), shape[d], shape[d + 1..].iter().product())
}

/// The one-sided forward r2c along dim `d`: `shape[d]` real points give `shape[d] / 2 + 1`
/// complex ones (unnormalized). Returns the new buffer and its shape.
pub fn r2c_dim<T: FftFloat>(x: &[T], shape: &[usize], d: usize) -> (Vec<Complex<T>>, Vec<usize>) {
    let (outer, n, inner) = split(shape, d);
    let m = n / 2 + 1;
    let mut full: Vec<Complex<T>> = x.iter().map(|&v| Complex::new(v, T::zero())).collect();
    c2c_dim(&mut full, shape, d, false);
    let mut oshape = shape.to_vec();
    oshape[d] = m;
    let mut out = Vec::with_capacity(outer * m * inner);
    for o in 0..outer {
        out.extend_from_slice(&full[o * n * inner..o * n * inner + m * inner]);
    }
    (out, oshape)
}

/// The inverse c2r along dim `d` from a half spectrum of `shape[d] == n / 2 + 1` points to `n`
/// real ones (unnormalized): the spectrum is completed by Hermitian symmetry
/// (`X[n - k] = conj(X[k])`), so the imaginary parts of `X[0]` (and `X[n / 2]` for even `n`) drop out.
pub fn c2r_dim<T: FftFloat>(x: &[Complex<T>], shape: &[usize], d: usize, n: usize) -> (Vec<T>, Vec<usize>) {
    let (outer, m, inner) = split(shape, d);
    let mut fshape = shape.to_vec();
    fshape[d] = n;
    let zero = Complex::new(T::zero(), T::zero());
    let mut full = vec![zero; outer * n * inner];
    for o in 0..outer {
        let src = &x[o * m * inner..(o + 1) * m * inner];
        let dst = &mut full[o * n * inner..(o + 1) * n * inner];
        for k in 0..n {
            let (kk, cj) = if k < m { (k, false) } else { (n - k, true) };
            if kk >= m {
                continue;
            }
            for i in 0..inner {
                let z = src[kk * inner + i];
                dst[k * inner + i] = if cj { z.conj() } else { z };
            }
        }
    }
    c2c_dim(&mut full, &fshape, d, true);
    (full.into_iter().map(|z| z.re).collect(), fshape)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The O(n^2) DFT along the last dim.
    fn dft(x: &[Complex<f64>], n: usize, inverse: bool) -> Vec<Complex<f64>> {
        let sgn = if inverse { 1.0 } else { -1.0 };
        let mut out = vec![Complex::new(0.0, 0.0); x.len()];
        for (line, o) in x.chunks(n).zip(out.chunks_mut(n)) {
            for (k, ok) in o.iter_mut().enumerate() {
                for (j, v) in line.iter().enumerate() {
                    let a = sgn * 2.0 * std::f64::consts::PI * (j * k) as f64 / n as f64;
                    *ok += v * Complex::new(a.cos(), a.sin());
                }
            }
        }
        out
    }

    fn rand(n: usize, seed: u64) -> Vec<Complex<f64>> {
        let mut s = seed;
        let mut r = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) - 0.5
        };
        (0..n).map(|_| Complex::new(r(), r())).collect()
    }

    #[test]
    fn c2c_matches_dft_along_every_dim() {
        for shape in [[3usize, 5, 4], [2, 7, 1], [1, 8, 9]] {
            for d in 0..3 {
                for inverse in [false, true] {
                    let x = rand(shape.iter().product(), 7 + d as u64);
                    let mut got = x.clone();
                    c2c_dim(&mut got, &shape, d, inverse);
                    // the reference: move d last, DFT, move back
                    let (outer, n, inner) = split(&shape, d);
                    let mut t = vec![Complex::new(0.0, 0.0); x.len()];
                    for o in 0..outer {
                        for k in 0..n {
                            for i in 0..inner {
                                t[(o * inner + i) * n + k] = x[(o * n + k) * inner + i];
                            }
                        }
                    }
                    let r = dft(&t, n, inverse);
                    for o in 0..outer {
                        for k in 0..n {
                            for i in 0..inner {
                                let a = got[(o * n + k) * inner + i];
                                let b = r[(o * inner + i) * n + k];
                                assert!((a - b).norm() < 1e-9, "{shape:?} d={d} inv={inverse}: {a} vs {b}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn r2c_then_c2r_round_trips_odd_and_even() {
        for n in [1usize, 2, 7, 8, 15] {
            let x: Vec<f64> = rand(3 * n, n as u64).iter().map(|z| z.re).collect();
            let (h, hs) = r2c_dim(&x, &[3, n], 1);
            assert_eq!(hs, vec![3, n / 2 + 1]);
            let full = dft(&x.iter().map(|&v| Complex::new(v, 0.0)).collect::<Vec<_>>(), n, false);
            for r in 0..3 {
                for k in 0..n / 2 + 1 {
                    assert!((h[r * (n / 2 + 1) + k] - full[r * n + k]).norm() < 1e-9);
                }
            }
            let (y, ys) = c2r_dim(&h, &hs, 1, n);
            assert_eq!(ys, vec![3, n]);
            for (a, b) in y.iter().zip(&x) {
                assert!((a / n as f64 - b).abs() < 1e-9, "n={n}");
            }
        }
    }
}
