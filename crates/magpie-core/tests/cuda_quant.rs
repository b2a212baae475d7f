//! The quantized decode GEMV on CUDA (`backend::cuda::quant`) against the CPU quantized matmul
//! (`backend::cpu::quant`, itself tested against the GGUF dequantizer), for Q8_0, Q4_0, Q4_K and
//! Q6_K, f32/f16/bf16 activations, 1..8 rows, odd output counts and K longer than one
//! shared-memory tile; plus the argument errors. Skipped without CUDA unless
//! MAGPIE_REQUIRE_CUDA=1.
//!
//! Also: the device dequantizer against the CPU one (bit-exact in f32, the same rounding in
//! f16/bf16), and `QuantMatrix::matmul_t` on CUDA (GEMV rows and the dequantize + cuBLAS path
//! for more rows) against the CPU.
//!
//! Bound: both sides multiply the same weights by the same (dtype-rounded) activations in f32,
//! in different orders, so they differ by at most 2 K u Σ|x w| (u = 2^-24, a worst case for two
//! length-K f32 sums) plus the output's rounding to the dtype, ≤ ε(dtype) Σ|x w|
//! (ε = 2^-8 bf16, 2^-11 f16); plus, for the 4- and 6-bit types, the kernel's offset trick: a
//! unit (≤ 32 weights) sums x (B + q) with B = 128 and removes B Σx afterwards, adding at most
//! 34 u Σ|x| (B + q) step per unit (step = the weight's scale, `bias_of` below). A wrong x
//! element or a wrong scale changes y far beyond that.
//!
//! Q4_K with f16/bf16 activations rounds x to 8-bit codes (per 32 values s = amax / 127,
//! q_x = rint(x · 127 / amax)) and sums per sub-block (d·sc) s Σ q_w q_x − (dmin·m) Σx. Checked
//! twice: (1) against that sum in f64 with the codes computed here as the kernel does (what is
//! left is f32 rounding: ≤ ((K/32 + 32) u + ε) T, T the sum of the terms' magnitudes), which
//! catches any wrong code, scale or index; (2) against the CPU's exact product, with the error
//! the rounding of x allows: Σ |(d·sc) q_w| · |x − s q_x| ≤ 0.5001 Σ |(d·sc) q_w| s (the 0.0001
//! covers 127 / amax not being exactly 1 / s), the bound `docs/gguf.md` states. The same checks
//! cover several matrices in one launch and K split over 1, 2 or 4 warps
//! (`quant_gemv_parts_raw`, `Q8Launch`).

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::backend::cpu::quant::{dequantize_rows, quant_matmul, QuantType};
use magpie_core::backend::cuda::device::device;
use magpie_core::backend::cuda::kern::elem_ptr;
use magpie_core::backend::cuda::quant::{dequantize_raw, quant_gemv_parts_raw, quant_gemv_raw, Q8Launch, QuantGemv, QuantPart};
use magpie_core::quant::QuantMatrix;
use magpie_core::{DType, Tensor};
use util::{gpu, Rng};

/// Random valid blocks: random bytes with finite f16 scale fields of a realistic size.
fn random_blocks(ty: QuantType, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let n = ty.matrix_bytes("test", rows, cols).unwrap();
    let mut b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
    let fields: &[usize] = match ty {
        QuantType::Q8_0 | QuantType::Q4_0 => &[0],
        QuantType::Q4_K => &[0, 2],
        QuantType::Q6_K => &[208],
    };
    for blk in b.chunks_exact_mut(ty.block_bytes()) {
        for &o in fields {
            let v = magpie_core::half::f16::from_f64(rng.uniform(0.001, 0.011)).to_bits().to_le_bytes();
            blk[o..o + 2].copy_from_slice(&v);
        }
    }
    b
}

/// Per weight, `(B + 64) * step (+ the Q4_K minimum)`: what the kernel's offset sums carry
/// beyond |w| (see the bound above).
fn bias_of(ty: QuantType, blocks: &[u8]) -> Vec<f64> {
    let f16 = |b: &[u8], o: usize| magpie_core::half::f16::from_le_bytes([b[o], b[o + 1]]).to_f64();
    let mut out = Vec::new();
    for b in blocks.chunks_exact(ty.block_bytes()) {
        match ty {
            QuantType::Q8_0 => out.extend([0.0; 32]),
            QuantType::Q4_0 => out.extend([200.0 * f16(b, 0).abs(); 32]),
            QuantType::Q4_K => {
                let (d, dmin, s) = (f16(b, 0), f16(b, 2), &b[4..16]);
                for j in 0..8 {
                    let (sc, mn) = if j < 4 { (s[j] & 63, s[j + 4] & 63) } else { ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)) };
                    out.extend([200.0 * (d * sc as f64).abs() + (dmin * mn as f64).abs(); 32]);
                }
            }
            QuantType::Q6_K => {
                let d = f16(b, 208);
                // element 128c + 32s + l has scale 8c + 2s + l / 16
                for e in 0..256 {
                    let (c, s, l) = (e / 128, e % 128 / 32, e % 32);
                    out.push(200.0 * (d * (b[192 + 8 * c + 2 * s + l / 16] as i8) as f64).abs());
                }
            }
        }
    }
    out
}

/// The codes and scales the Q4_K kernel gives x (f16/bf16 activations), computed as it does in f32.
fn q8_codes(x: &[f32]) -> (Vec<i32>, Vec<f32>) {
    let (mut q, mut s) = (Vec::with_capacity(x.len()), Vec::new());
    for g in x.chunks(32) {
        let a = g.iter().fold(0f32, |m, v| m.max(v.abs()));
        let inv = if a > 0.0 { 127.0f32 / a } else { 0.0 };
        q.extend(g.iter().map(|v| (v * inv).round_ties_even() as i32));
        s.push(a / 127.0f32);
    }
    (q, s)
}

/// Per Q4_K weight: its sub-block's `d · sc` and `dmin · m` (exact in f32) and its 4-bit code.
fn q4k_parts(blocks: &[u8]) -> (Vec<f64>, Vec<f64>, Vec<i32>) {
    let f16 = |b: &[u8], o: usize| magpie_core::half::f16::from_le_bytes([b[o], b[o + 1]]).to_f64();
    let (mut d1, mut m1, mut q) = (Vec::new(), Vec::new(), Vec::new());
    for b in blocks.chunks_exact(144) {
        let (d, dmin, s) = (f16(b, 0), f16(b, 2), &b[4..16]);
        for j in 0..8 {
            let (sc, mn) = if j < 4 { (s[j] & 63, s[j + 4] & 63) } else { ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)) };
            for l in 0..32 {
                d1.push(d * sc as f64);
                m1.push(dmin * mn as f64);
                q.push(((b[16 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 15) as i32);
            }
        }
    }
    (d1, m1, q)
}

/// Checks one output of the 8-bit-activation Q4_K kernel (see the module's doc): `xf` the x row
/// (f32 of its f16/bf16 values), `w` the weight row's parts, `want` the CPU's exact product.
fn check_q8_output(what: &str, got: f64, want: f64, xf: &[f32], w: (&[f64], &[f64], &[i32]), eps: f64) {
    let (d1, m1, qw) = w;
    let k = xf.len();
    let u = 2f64.powi(-24);
    let (qx, s) = q8_codes(xf);
    let (mut y, mut t, mut act) = (0f64, 0f64, 0f64);
    for g in 0..k / 32 {
        let r = 32 * g..32 * g + 32;
        let dot: i64 = r.clone().map(|e| (qw[e] * qx[e]) as i64).sum();
        let adot: i64 = r.clone().map(|e| (qw[e] * qx[e]).abs() as i64).sum();
        let (sx, ax): (f64, f64) = (r.clone().map(|e| xf[e] as f64).sum(), r.clone().map(|e| (xf[e] as f64).abs()).sum());
        let sg = s[g] as f64;
        y += d1[32 * g] * sg * dot as f64 - m1[32 * g] * sx;
        t += (d1[32 * g] * sg).abs() * adot as f64 + m1[32 * g].abs() * ax;
        act += r.map(|e| (d1[e] * qw[e] as f64).abs()).sum::<f64>() * 0.5001 * sg;
    }
    let bound = ((k as f64 / 32.0 + 32.0) * u + eps) * t + 1e-30;
    assert!((got - y).abs() <= bound, "{what}: {got}, the 8-bit-code sum gives {y}, bound {bound}");
    // the CPU's f32 product of the exact weights has its own rounding, ≤ 2 K u Σ|x w|
    let mag: f64 = (0..k).map(|e| (xf[e] as f64).abs() * (d1[e] * qw[e] as f64 - m1[e]).abs()).sum();
    let bound2 = bound + act + 2.0 * k as f64 * u * mag;
    assert!((got - want).abs() <= bound2, "{what}: {got}, the CPU's exact product {want}, bound {bound2}");
}

#[test]
fn quant_gemv_matches_the_cpu_kernel() {
    let Some(g) = gpu() else { return };
    let dev = device("test", 0).unwrap();
    let mut rng = Rng::new(17);
    for ty in QuantType::ALL {
        let be = ty.block_elems();
        // K: one block; 80-160 units per row (one pass); 144-288 units (two passes of 256 threads);
        // odd n, not a multiple of the rows per thread block; a tall matrix (one-row launches
        // take 8 rows per block from 32768 rows)
        for (n, k) in [(77, be), (131, 5120), (33, 4 * be), (19, 9216), (32771, 256)] {
            let w = random_blocks(ty, n, k, &mut rng);
            let wd = dequantize_rows(ty, &w, n, k).unwrap();
            let bias = bias_of(ty, &w);
            let parts = if ty == QuantType::Q4_K { Some(q4k_parts(&w)) } else { None };
            let wt = Tensor::from_vec(w.clone(), &[w.len()]).unwrap().to_device(g).unwrap();
            let wp = elem_ptr("test", &wt).unwrap().0;
            for dt in [DType::F32, DType::F16, DType::BF16] {
                for m in [1usize, 2, 3, 5, 8] {
                    let x = util::rand(&mut rng, &[m, k], dt, -1.0, 1.0);
                    let xf = x.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
                    let want = quant_matmul(ty, &w, n, k, &xf, m).unwrap();
                    let xg = x.to_device(g).unwrap();
                    let yg = Tensor::zeros(&[m, n]).unwrap().to_dtype(dt).unwrap().to_device(g).unwrap();
                    let spec = QuantGemv { ty, dtype: dt, m, n, k };
                    // SAFETY: the tensors are live, contiguous and sized as the spec says.
                    unsafe { quant_gemv_raw(&dev, &spec, wp, elem_ptr("test", &xg).unwrap().0, k, elem_ptr("test", &yg).unwrap().0, n) }.unwrap();
                    assert_eq!(yg.dtype(), dt);
                    let got = yg.to_f64_vec().unwrap();
                    let eps = match dt {
                        DType::BF16 => 2f64.powi(-8),
                        DType::F16 => 2f64.powi(-11),
                        _ => 0.0,
                    };
                    if spec.rounds_activations() {
                        let (d1, m1, qw) = parts.as_ref().unwrap();
                        for i in 0..m {
                            for j in 0..n {
                                let r = j * k..(j + 1) * k;
                                let what = format!("{ty} {dt} m={m} n={n} k={k}: y[{i},{j}]");
                                check_q8_output(&what, got[i * n + j], want[i * n + j] as f64, &xf[i * k..(i + 1) * k], (&d1[r.clone()], &m1[r.clone()], &qw[r]), eps);
                            }
                        }
                        continue;
                    }
                    for i in 0..m {
                        for j in 0..n {
                            let mag: f64 = (0..k).map(|kk| (xf[i * k + kk] as f64 * wd[j * k + kk] as f64).abs()).sum();
                            let off: f64 = (0..k).map(|kk| (xf[i * k + kk] as f64).abs() * bias[j * k + kk]).sum();
                            let bound = (2.0 * k as f64 * 2f64.powi(-24) + eps) * mag + 34.0 * 2f64.powi(-24) * off + 1e-30;
                            let (a, b) = (got[i * n + j], want[i * n + j] as f64);
                            assert!((a - b).abs() <= bound, "{ty} {dt} m={m} n={n} k={k}: y[{i},{j}] = {a}, CPU {b}, bound {bound}");
                        }
                    }
                }
            }
        }
    }
}

/// Q4_K with bf16/f16 x, several matrices in one launch (as q|k|v) and K split over 1, 2 or 4
/// warps: every output as the reference's bound, and nothing written past a part's n columns.
#[test]
fn quant_gemv_parts_and_split_k_match_the_cpu() {
    let Some(g) = gpu() else { return };
    let dev = device("test", 0).unwrap();
    let mut rng = Rng::new(23);
    let ty = QuantType::Q4_K;
    // odd row counts (not multiples of the 2-row groups); K = 7936 leaves the last 2048-chunk a
    // partial one (124 units of 64), K = 8192 a whole one; both split into 1, 2 or 4
    for k in [7936usize, 8192] {
        let ns = [77usize, 19, 131];
        let ws: Vec<Vec<u8>> = ns.iter().map(|&n| random_blocks(ty, n, k, &mut rng)).collect();
        let parts_ref: Vec<_> = ws.iter().map(|w| q4k_parts(w)).collect();
        let wts: Vec<Tensor> = ws.iter().map(|w| Tensor::from_vec(w.clone(), &[w.len()]).unwrap().to_device(g).unwrap()).collect();
        let ldy = 136;
        let launches = [None, Some((1, 1)), Some((1, 2)), Some((2, 4)), Some((1, 4))];
        // (one part: the single-matrix kernel at split 1, the general one at split 2 or 4)
        let cases = launches.iter().flat_map(|l| [(DType::BF16, 1usize, *l, 3usize), (DType::BF16, 3, *l, 3), (DType::BF16, 1, *l, 1)]);
        for (dt, m, launch, nparts) in cases.chain([(DType::F16, 2, None, 3), (DType::F16, 2, None, 1)]) {
            let x = util::rand(&mut rng, &[m, k], dt, -1.0, 1.0);
            let xf = x.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
            let xg = x.to_device(g).unwrap();
            let ys: Vec<Tensor> = ns.iter().map(|_| Tensor::zeros(&[m, ldy]).unwrap().to_dtype(dt).unwrap().to_device(g).unwrap()).collect();
            let parts: Vec<QuantPart> = (0..3).map(|i| QuantPart { w: elem_ptr("test", &wts[i]).unwrap().0, n: ns[i], y: elem_ptr("test", &ys[i]).unwrap().0 }).collect();
            let spec = QuantGemv { ty, dtype: dt, m, n: 0, k };
            let launch = launch.map(|(b, s)| Q8Launch { blocks_per_sm: b, split: s });
            // SAFETY: the tensors are live and sized as the spec and parts say (y: m rows of ldy).
            unsafe { quant_gemv_parts_raw(&dev, &spec, &parts[..nparts], elem_ptr("test", &xg).unwrap().0, k, ldy, launch, false) }.unwrap();
            let eps = if dt == DType::BF16 { 2f64.powi(-8) } else { 2f64.powi(-11) };
            for (p, &n) in ns.iter().enumerate() {
                let got = ys[p].to_f64_vec().unwrap();
                if p >= nparts {
                    assert!(got.iter().all(|&v| v == 0.0), "part {p} was not in the launch but was written");
                    continue;
                }
                let want = quant_matmul(ty, &ws[p], n, k, &xf, m).unwrap();
                let (d1, m1, qw) = &parts_ref[p];
                for i in 0..m {
                    for j in 0..ldy {
                        let what = format!("{dt} m={m} k={k} launch {launch:?}: part {p} y[{i},{j}]");
                        if j >= n {
                            assert_eq!(got[i * ldy + j], 0.0, "{what} lies past n = {n}");
                            continue;
                        }
                        let r = j * k..(j + 1) * k;
                        check_q8_output(&what, got[i * ldy + j], want[i * n + j] as f64, &xf[i * k..(i + 1) * k], (&d1[r.clone()], &m1[r.clone()], &qw[r]), eps);
                    }
                }
            }
        }
        // a split that does not divide K's 2048-chunks is an error naming the op
        let bad = Q8Launch { blocks_per_sm: 1, split: 4 };
        let spec = QuantGemv { ty, dtype: DType::BF16, m: 1, n: 0, k: 2048 };
        let part = QuantPart { w: elem_ptr("test", &wts[0]).unwrap().0, n: 8, y: 0 };
        // SAFETY: rejected before any launch (the split does not divide K = 2048's one chunk).
        let e = unsafe { quant_gemv_parts_raw(&dev, &spec, &[part], 0, 2048, 8, Some(bad), false) }.unwrap_err().to_string();
        assert!(e.contains("quant_gemv") && e.contains("split"), "{e}");
    }
}

#[test]
fn dequantize_on_the_device_matches_the_cpu() {
    let Some(g) = gpu() else { return };
    let dev = device("test", 0).unwrap();
    let mut rng = Rng::new(5);
    for ty in QuantType::ALL {
        let (n, k) = (7, 3 * ty.block_elems());
        let w = random_blocks(ty, n, k, &mut rng);
        let want = dequantize_rows(ty, &w, n, k).unwrap();
        let wt = Tensor::from_vec(w.clone(), &[w.len()]).unwrap().to_device(g).unwrap();
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let out = Tensor::zeros(&[n, k]).unwrap().to_dtype(dt).unwrap().to_device(g).unwrap();
            // SAFETY: wt holds the n x k matrix's blocks, out n x k values of dt.
            unsafe { dequantize_raw(&dev, ty, dt, n, k, elem_ptr("test", &wt).unwrap().0, elem_ptr("test", &out).unwrap().0) }.unwrap();
            let got = out.to_f64_vec().unwrap();
            let want_dt = Tensor::from_vec(want.clone(), &[n, k]).unwrap().to_dtype(dt).unwrap().to_f64_vec().unwrap();
            for (i, (a, b)) in got.iter().zip(&want_dt).enumerate() {
                assert!(a.to_bits() == b.to_bits(), "{ty} {dt}: element {i} is {a}, the CPU dequantizer gives {b}");
            }
        }
    }
}

#[test]
fn quant_matrix_matmul_on_cuda_matches_the_cpu() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng::new(23);
    for ty in QuantType::ALL {
        let (n, k) = (45, 2 * QuantType::Q4_K.block_elems());
        let q = QuantMatrix::new(ty, n, k, random_blocks(ty, n, k, &mut rng)).unwrap();
        let qg = q.to_device(g).unwrap();
        assert_eq!(qg.device(), g);
        // [2, 3, k]: 6 rows on the GEMV; [20, k]: dequantize then cuBLAS
        for shape in [vec![2usize, 3, k], vec![20, k], vec![1, k]] {
            let x = util::rand(&mut rng, &shape, DType::F32, -1.0, 1.0);
            let want = q.matmul_t(&x).unwrap();
            let got = qg.matmul_t(&x.to_device(g).unwrap()).unwrap();
            assert_eq!(got.shape(), want.shape());
            assert_eq!(got.device(), g);
            // the cuBLAS path may run f32 GEMMs on TF32 tensor cores (10-bit mantissas): an
            // absolute tolerance on the scale of the outputs
            let top = want.to_f64_vec().unwrap().iter().fold(0f64, |a, v| a.max(v.abs()));
            util::assert_close(&format!("{ty} {shape:?}"), &got.to_device(magpie_core::Device::Cpu).unwrap(), &want, 2e-3, 5e-3 * top);
        }
        let e = qg.matmul_t(&util::rand(&mut rng, &[1, k], DType::F32, -1.0, 1.0)).unwrap_err().to_string();
        assert!(e.contains("quant_linear") && e.contains("cpu"), "{e}");
    }
}

#[test]
fn quant_gemv_rejects_misaligned_activations() {
    let Some(g) = gpu() else { return };
    let dev = device("test", 0).unwrap();
    let (n, k) = (4, 64);
    let wt = Tensor::zeros(&[QuantType::Q8_0.matrix_bytes("test", n, k).unwrap()]).unwrap().to_dtype(DType::U8).unwrap().to_device(g).unwrap();
    let x = Tensor::zeros(&[2, k + 8]).unwrap().to_device(g).unwrap();
    let y = Tensor::zeros(&[2, n]).unwrap().to_device(g).unwrap();
    let spec = QuantGemv { ty: QuantType::Q8_0, dtype: DType::F32, m: 2, n, k };
    let (wp, xp, yp) = (elem_ptr("test", &wt).unwrap().0, elem_ptr("test", &x).unwrap().0, elem_ptr("test", &y).unwrap().0);
    // SAFETY: the calls are refused before anything is launched (x + 4 bytes, row stride 71).
    let e = unsafe { quant_gemv_raw(&dev, &spec, wp, xp + 4, k + 8, yp, n) }.unwrap_err().to_string();
    assert!(e.contains("16-byte aligned"), "{e}");
    let e = unsafe { quant_gemv_raw(&dev, &spec, wp, xp, k + 7, yp, n) }.unwrap_err().to_string();
    assert!(e.contains("multiple of 8"), "{e}");
    // SAFETY: aligned, in bounds: accepted
    unsafe { quant_gemv_raw(&dev, &spec, wp, xp, k + 8, yp, n) }.unwrap();
}

#[test]
fn quant_gemv_argument_errors() {
    let spec = |ty, dtype, m, n, k| QuantGemv { ty, dtype, m, n, k };
    let e = spec(QuantType::Q4_K, DType::BF16, 1, 8, 300).check().unwrap_err().to_string();
    assert!(e.contains("quant_gemv") && e.contains("blocks of 256"), "{e}");
    let e = spec(QuantType::Q8_0, DType::F32, 9, 8, 64).check().unwrap_err().to_string();
    assert!(e.contains("1 to 8"), "{e}");
    let e = spec(QuantType::Q8_0, DType::F32, 0, 8, 64).check().unwrap_err().to_string();
    assert!(e.contains("1 to 8"), "{e}");
    let e = spec(QuantType::Q4_0, DType::F64, 1, 8, 64).check().unwrap_err().to_string();
    assert!(e.contains("float32"), "{e}");
    assert_eq!(spec(QuantType::Q6_K, DType::F16, 2, 3, 512).check().unwrap(), 3 * 2 * 210);
    // which GEMVs round x to 8-bit codes: Q4_K with f16/bf16 x whose codes fit in shared memory
    assert!(spec(QuantType::Q4_K, DType::BF16, 1, 8, 32768).rounds_activations());
    assert!(spec(QuantType::Q4_K, DType::F16, 8, 8, 4096).rounds_activations());
    assert!(!spec(QuantType::Q4_K, DType::BF16, 8, 8, 8192).rounds_activations());
    assert!(!spec(QuantType::Q4_K, DType::F32, 1, 8, 2048).rounds_activations());
    assert!(!spec(QuantType::Q6_K, DType::BF16, 1, 8, 2048).rounds_activations());
}
