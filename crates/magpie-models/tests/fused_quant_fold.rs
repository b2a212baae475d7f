//! The folded Q4_K decode GEMV of the fused engine (`fused::QuantFold`) against a float64 host
//! reference on random inputs: 1-4 decode rows, odd output counts (77, 131, a gate | up of 2 x 77
//! rows), K of 256, 512, 2048 and 2304 (9 super-blocks: a partial round of 64-weight pieces), bf16
//! and f16, x coded per lane and by the block (one row), every epilogue (store, residual add, SwiGLU, rotary embedding + KV-cache write) with and
//! without the RMSNorm on the input. The kernel codes its input to 8 bits per 32 values, so the
//! bound per output is the coding error (half a step of each group's grid times the weights'
//! magnitudes, scaled by the norm) plus the roundings of the epilogue, derived per element; a
//! misplaced row, a missed norm or rotation moves values by their whole scale. Skips without
//! CUDA unless `MAGPIE_REQUIRE_CUDA=1`.

use magpie_core::backend::cuda::{self, kern::elem_ptr};
use magpie_core::{DType, Device, Tensor};
use magpie_io::gguf::{dequantize, quantize, GgmlType};
use magpie_models::fused::{ActKind, GemvEpi, GemvNorm, QuantFold};

const DEV: Device = Device::Cuda(0);

fn gpu() -> bool {
    if cuda::is_available() {
        return true;
    }
    if std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("MAGPIE_REQUIRE_CUDA=1 but CUDA is not available: {}", cuda::unavailable("test"));
    }
    eprintln!("skipped: no CUDA");
    false
}

/// Deterministic values in [-scale, scale).
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// `v` on the device as `dt`, and the values it holds (rounded to `dt`).
fn dev_tensor(v: &[f32], dt: DType) -> (Tensor, Vec<f32>) {
    let t = Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap().to_dtype(dt).unwrap().to_device(DEV).unwrap();
    let held = host(&t);
    (t, held)
}

fn host(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32).unwrap().to_device(Device::Cpu).unwrap().contiguous().unwrap().to_vec::<f32>().unwrap()
}

fn addr(t: &Tensor) -> u64 {
    elem_ptr("test", t).unwrap().0
}

/// Unit roundoff of the storage dtype.
fn unit(dt: DType) -> f64 {
    if dt == DType::BF16 { 2f64.powi(-8) } else { 2f64.powi(-11) }
}

/// A random Q4_K weight [n, k]: its blocks on the device and its values (dequantized on the host).
fn weight(n: usize, k: usize, seed: u64) -> (Tensor, Vec<f32>) {
    let blocks = quantize(GgmlType::Q4_K, &values(n * k, seed, 0.2)).unwrap();
    let w = dequantize(GgmlType::Q4_K, &blocks, n * k).unwrap();
    let len = blocks.len();
    (Tensor::from_vec(blocks, &[len]).unwrap().to_device(DEV).unwrap(), w)
}

/// Exact sums `y[b][i] = r_b sum_j W[i, j] x'[b, j]` with x' = nw * x (nw: None without the norm),
/// and the bound on the kernel's deviation from them: half a step of each 32-value group's 8-bit
/// grid (amax / 127) times the weights' magnitudes, scaled like y, plus f32 rounding.
fn reference(w: &[f32], x: &[f32], nw: Option<&[f32]>, m: usize, n: usize, k: usize, eps: f32) -> (Vec<f64>, Vec<f64>) {
    let (mut y, mut e) = (vec![0f64; m * n], vec![0f64; m * n]);
    for b in 0..m {
        let xr = &x[b * k..(b + 1) * k];
        let xs: Vec<f64> = (0..k).map(|j| xr[j] as f64 * nw.map_or(1.0, |g| g[j] as f64)).collect();
        let r = match nw {
            Some(_) => 1.0 / ((xr.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / k as f64 + eps as f64).sqrt()),
            None => 1.0,
        };
        let steps: Vec<f64> = xs.chunks(32).map(|g| g.iter().fold(0f64, |a, v| a.max(v.abs())) / 127.0).collect();
        for i in 0..n {
            let wr = &w[i * k..(i + 1) * k];
            let (mut s, mut code_err, mut mag) = (0f64, 0f64, 0f64);
            for j in 0..k {
                s += wr[j] as f64 * xs[j];
                code_err += 0.5 * steps[j / 32] * (wr[j] as f64).abs();
                mag += (wr[j] as f64 * xs[j]).abs() + (wr[j] as f64).abs() * steps[j / 32];
            }
            y[b * n + i] = r * s;
            e[b * n + i] = r * (code_err * 1.001 + 1e-5 * mag) + 1e-6;
        }
    }
    (y, e)
}

fn silu(v: f64) -> f64 {
    v / (1.0 + (-v).exp())
}

struct Case {
    m: usize,
    k: usize,
    norm: bool,
    dt: DType,
    /// `QuantFold::warp_coding` (one-row launches of k <= 2048 code x per lane).
    warp: bool,
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in [DType::BF16, DType::F16] {
        for m in 1..=4 {
            for (k, norm) in [(256, true), (512, false), (2048, true), (2304, true)] {
                v.push(Case { m, k, norm, dt, warp: true });
                if m == 1 && k <= 2048 {
                    v.push(Case { m, k, norm, dt, warp: false });
                }
            }
        }
    }
    v
}

#[test]
fn folded_store_and_residual_match_the_reference() {
    if !gpu() {
        return;
    }
    let dev = cuda::device::device("test", 0).unwrap();
    for (ci, c) in cases().into_iter().enumerate() {
        let mut qf = QuantFold::new(&dev, c.dt).unwrap();
        qf.warp_coding = c.warp;
        let (m, k, u) = (c.m, c.k, unit(c.dt));
        eprintln!("{} m {m} k {k} norm {} warp coding {}", c.dt, c.norm, c.warp);
        let seed = 100 * ci as u64;
        let (xt, x) = dev_tensor(&values(m * k, seed + 1, 2.0), c.dt);
        let (gt, g) = dev_tensor(&values(k, seed + 2, 0.5).iter().map(|v| 1.0 + v).collect::<Vec<_>>(), c.dt);
        let norm = c.norm.then(|| GemvNorm { rms: true, w: addr(&gt), b: 0, eps: 1e-5 });
        let gref = c.norm.then_some(&g[..]);
        // store, 77 rows (odd: the last warp's second row is clamped and not written)
        let n = 77;
        let (wt, w) = weight(n, k, seed + 3);
        let (yt, _) = dev_tensor(&vec![0.0; m * n], c.dt);
        // SAFETY: every buffer is a live device tensor of the sizes the call reads and writes.
        unsafe { qf.gemv(&dev, m, n, k, addr(&xt), addr(&wt), norm, GemvEpi::Store { y: addr(&yt), out: c.dt, amax: 0 }).unwrap() };
        let got = host(&yt);
        let (y, e) = reference(&w, &x, gref, m, n, k, 1e-5);
        for i in 0..m * n {
            let tol = e[i] + u * y[i].abs() * 1.01;
            assert!((got[i] as f64 - y[i]).abs() <= tol, "{} m {m} k {k} norm {}: store y[{i}] = {} against {} (bound {tol})", c.dt, c.norm, got[i], y[i]);
        }
        // residual add into 131 rows of a residual stream (the engine's o / down: no norm)
        let n = 131;
        let (wt, w) = weight(n, k, seed + 4);
        let (rt, res) = dev_tensor(&values(m * n, seed + 5, 1.0), c.dt);
        // SAFETY: as above.
        unsafe { qf.gemv(&dev, m, n, k, addr(&xt), addr(&wt), None, GemvEpi::Residual { res: addr(&rt), bias: 0 }).unwrap() };
        let got = host(&rt);
        let (y, e) = reference(&w, &x, None, m, n, k, 1e-5);
        for i in 0..m * n {
            let want = res[i] as f64 + y[i];
            let tol = e[i] + u * (y[i].abs() + want.abs()) * 1.01 + 1e-6;
            assert!((got[i] as f64 - want).abs() <= tol, "{} m {m} k {k}: residual x[{i}] = {} against {want} (bound {tol})", c.dt, got[i]);
        }
    }
}

#[test]
fn folded_swiglu_and_rotary_cache_write_match_the_reference() {
    if !gpu() {
        return;
    }
    let dev = cuda::device::device("test", 0).unwrap();
    for (ci, c) in cases().into_iter().enumerate() {
        let mut qf = QuantFold::new(&dev, c.dt).unwrap();
        qf.warp_coding = c.warp;
        let (m, k, u) = (c.m, c.k, unit(c.dt));
        eprintln!("{} m {m} k {k} norm {} warp coding {}", c.dt, c.norm, c.warp);
        let seed = 1000 + 100 * ci as u64;
        let (xt, x) = dev_tensor(&values(m * k, seed + 1, 2.0), c.dt);
        let (gt, g) = dev_tensor(&values(k, seed + 2, 0.5).iter().map(|v| 1.0 + v).collect::<Vec<_>>(), c.dt);
        let norm = c.norm.then(|| GemvNorm { rms: true, w: addr(&gt), b: 0, eps: 1e-5 });
        let gref = c.norm.then_some(&g[..]);
        // SwiGLU over a gate | up weight of 2 x 77 rows
        let inter = 77;
        let (wt, w) = weight(2 * inter, k, seed + 3);
        let (at, _) = dev_tensor(&vec![0.0; m * inter], c.dt);
        // SAFETY: every buffer is a live device tensor of the sizes the call reads and writes.
        unsafe { qf.gemv(&dev, m, 2 * inter, k, addr(&xt), addr(&wt), norm, GemvEpi::Gated { out: addr(&at), bias: 0, kind: ActKind::Silu }).unwrap() };
        let got = host(&at);
        let (y, e) = reference(&w, &x, gref, m, 2 * inter, k, 1e-5);
        for b in 0..m {
            for i in 0..inter {
                let (gi, ui) = (b * 2 * inter + i, b * 2 * inter + inter + i);
                let (gv, uv) = (y[gi], y[ui]);
                let want = silu(gv) * uv;
                // silu' is within [-0.1, 1.1]; each of gate, up, silu and the product is rounded once
                let dg = e[gi] + u * gv.abs();
                let du = e[ui] + u * uv.abs();
                let tol = (1.1 * dg * (uv.abs() + du) + (silu(gv).abs() + 1.1 * dg) * du + u * 2.0 * want.abs()) * 1.05 + 1e-6;
                let v = got[b * inter + i] as f64;
                assert!((v - want).abs() <= tol, "{} m {m} k {k} norm {}: act[{b}, {i}] = {v} against {want} (bound {tol})", c.dt, c.norm);
            }
        }
        // q|k|v of 2 query heads and 1 kv head of 64: rotary embedding, q out, k and v into the caches
        let (h, kvh, d, max_len) = (2usize, 1usize, 64usize, 8usize);
        let n = (h + 2 * kvh) * d;
        let half = d / 2;
        let (wt, w) = weight(n, k, seed + 4);
        let pos: Vec<i32> = [3, 7, 0, 5][..m].to_vec();
        let post = Tensor::from_vec(pos.clone(), &[m]).unwrap().to_device(DEV).unwrap();
        let angle = |p: usize, i: usize| p as f64 / 10000f64.powf(2.0 * i as f64 / d as f64);
        let cos: Vec<f32> = (0..max_len * half).map(|t| angle(t / half, t % half).cos() as f32).collect();
        let sin: Vec<f32> = (0..max_len * half).map(|t| angle(t / half, t % half).sin() as f32).collect();
        let (cost, sint) = (Tensor::from_vec(cos.clone(), &[cos.len()]).unwrap().to_device(DEV).unwrap(), Tensor::from_vec(sin.clone(), &[sin.len()]).unwrap().to_device(DEV).unwrap());
        let cache_sh = max_len * d;
        let cache_sb = kvh * cache_sh;
        let (qt, _) = dev_tensor(&vec![0.0; m * h * d], c.dt);
        let (kt, _) = dev_tensor(&vec![0.0; m * cache_sb], c.dt);
        let (vt, _) = dev_tensor(&vec![0.0; m * cache_sb], c.dt);
        let epi = GemvEpi::Qkv { q: addr(&qt), kc: addr(&kt), vc: addr(&vt), bias: 0, pos: addr(&post), cos: addr(&cost), sin: addr(&sint), heads: (h, kvh, d), cache_strides: (cache_sb as i64, cache_sh as i64) };
        // SAFETY: as above.
        unsafe { qf.gemv(&dev, m, n, k, addr(&xt), addr(&wt), norm, epi).unwrap() };
        let (q, kc, vc) = (host(&qt), host(&kt), host(&vt));
        let (y, e) = reference(&w, &x, gref, m, n, k, 1e-5);
        let mut written = vec![vec![false; m * cache_sb]; 2];
        for b in 0..m {
            let p = pos[b] as usize;
            for hh in 0..h + 2 * kvh {
                for i in 0..half {
                    let (r0, r1) = (b * n + hh * d + i, b * n + hh * d + i + half);
                    let (x0, x1) = (y[r0], y[r1]);
                    let (d0, d1) = (e[r0] + u * x0.abs(), e[r1] + u * x1.abs());
                    let (want0, want1) = if hh < h + kvh {
                        let (c_, s_) = (cos[p * half + i] as f64, sin[p * half + i] as f64);
                        (x0 * c_ - x1 * s_, x1 * c_ + x0 * s_)
                    } else {
                        (x0, x1)
                    };
                    let (t0, t1) = ((d0 + d1 + u * want0.abs()) * 1.05 + 1e-6, (d0 + d1 + u * want1.abs()) * 1.05 + 1e-6);
                    let (buf, at) = if hh < h {
                        (&q, b * h * d + hh * d)
                    } else if hh < h + kvh {
                        written[0][b * cache_sb + (hh - h) * cache_sh + p * d + i] = true;
                        written[0][b * cache_sb + (hh - h) * cache_sh + p * d + i + half] = true;
                        (&kc, b * cache_sb + (hh - h) * cache_sh + p * d)
                    } else {
                        written[1][b * cache_sb + (hh - h - kvh) * cache_sh + p * d + i] = true;
                        written[1][b * cache_sb + (hh - h - kvh) * cache_sh + p * d + i + half] = true;
                        (&vc, b * cache_sb + (hh - h - kvh) * cache_sh + p * d)
                    };
                    let (g0, g1) = (buf[at + i] as f64, buf[at + i + half] as f64);
                    assert!((g0 - want0).abs() <= t0 && (g1 - want1).abs() <= t1, "{} m {m} k {k} norm {}: row {b} head {hh} pair {i}: ({g0}, {g1}) against ({want0}, {want1}) (bounds {t0}, {t1})", c.dt, c.norm);
                }
            }
        }
        // nothing written outside each sequence's position
        for (which, cache) in [(0, &kc), (1, &vc)] {
            for (j, v) in cache.iter().enumerate() {
                assert!(written[which][j] || *v == 0.0, "{} m {m} k {k}: cache {which} element {j} written outside its position", c.dt);
            }
        }
    }
}

#[test]
fn folded_gemv_refuses_what_it_does_not_fold() {
    if !gpu() {
        return;
    }
    let dev = cuda::device::device("test", 0).unwrap();
    assert!(QuantFold::new(&dev, DType::F32).is_err(), "float32 activations are not coded to 8 bits");
    let qf = QuantFold::new(&dev, DType::BF16).unwrap();
    let (wt, _) = weight(8, 256, 7);
    let (xt, _) = dev_tensor(&values(5 * 256, 8, 1.0), DType::BF16);
    let (yt, _) = dev_tensor(&[0.0; 5 * 8], DType::BF16);
    let store = GemvEpi::Store { y: addr(&yt), out: DType::BF16, amax: 0 };
    // SAFETY: the calls are refused before any launch.
    unsafe {
        assert!(qf.gemv(&dev, 5, 8, 256, addr(&xt), addr(&wt), None, store).is_err(), "5 rows");
        assert!(qf.gemv(&dev, 1, 8, 200, addr(&xt), addr(&wt), None, store).is_err(), "k not whole Q4_K blocks");
        assert!(qf.gemv(&dev, 1, 8, 256, addr(&xt), addr(&wt), Some(GemvNorm { rms: false, w: addr(&xt), b: 0, eps: 1e-5 }), store).is_err(), "LayerNorm");
        assert!(qf.gemv(&dev, 1, 8, 256, addr(&xt), addr(&wt), None, GemvEpi::Store { y: addr(&yt), out: DType::F32, amax: 0 }).is_err(), "f32 output");
        assert!(qf.gemv(&dev, 1, 7, 256, addr(&xt), addr(&wt), None, GemvEpi::Gated { out: addr(&yt), bias: 0, kind: ActKind::Silu }).is_err(), "odd gate | up");
    }
}
