//! Misaligned f16/bf16 products on CUDA (`backend::cuda::blas`, `blas_pad`): odd extents, odd
//! leading dims and element offsets make `matmul` run on zero-padded aligned copies of its
//! operands; each product is checked against the f64 product on the CPU and against the same
//! product without padding, for plain, transposed, batched, broadcast and offset operands, and
//! through autograd (the three products of a linear layer with an odd output width).
//! Skipped without CUDA unless MAGPIE_REQUIRE_CUDA=1.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::backend::cuda::blas::{pad_min_macs, set_pad_min_macs};
use magpie_core::{DType, Device, Tensor};
use util::{gpu, Rng};

const GPU: Device = Device::Cuda(0);

/// The tests set the process-wide padding threshold: one at a time.
static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn rnd(rng: &mut Rng, shape: &[usize], dt: DType) -> Tensor {
    util::rand(rng, shape, dt, -1.0, 1.0)
}

/// Max |got - want| over the elements, with `got` on any device.
#[track_caller]
fn max_err(what: &str, got: &Tensor, want: &Tensor) -> f64 {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    g.iter().zip(&w).map(|(a, b)| {
        assert!(a.is_finite(), "{what}: non-finite result {a}");
        (a - b).abs()
    }).fold(0.0, f64::max)
}

/// `a @ b` on the GPU with padding forced and with padding off, both against the f64 CPU product
/// (`a`, `b` are CPU tensors; `view` makes the GPU operands from their GPU copies).
fn check(what: &str, a: &Tensor, b: &Tensor, view: &dyn Fn(&Tensor, &Tensor) -> (Tensor, Tensor)) {
    let dt = a.dtype();
    let want = a.to_dtype(DType::F64).unwrap().matmul(&b.to_dtype(DType::F64).unwrap()).unwrap();
    let k = a.shape()[a.ndim() - 1];
    // inputs in [-1, 1): each product term is rounded at most once to the dtype and summed in f32
    let eps = if dt == DType::BF16 { 2f64.powi(-8) } else { 2f64.powi(-11) };
    let tol = eps * (1.0 + (k as f64).sqrt()) * 2.0;
    let (ga, gb) = view(&a.to_device(GPU).unwrap(), &b.to_device(GPU).unwrap());
    set_pad_min_macs(0);
    let padded = ga.matmul(&gb).unwrap();
    set_pad_min_macs(usize::MAX);
    let plain = ga.matmul(&gb).unwrap();
    set_pad_min_macs(0);
    assert_eq!(padded.dtype(), dt, "{what}: dtype");
    assert_eq!(padded.device(), GPU, "{what}: device");
    assert!(padded.is_contiguous(), "{what}: the padded product is not contiguous");
    let e = max_err(&format!("{what} padded"), &padded, &want);
    assert!(e <= tol, "{what}: padded product error {e} > {tol}");
    let e = max_err(&format!("{what} unpadded"), &plain, &want);
    assert!(e <= tol, "{what}: unpadded product error {e} > {tol}");
    let e = max_err(&format!("{what} padded vs unpadded"), &padded, &plain.to_dtype(DType::F64).unwrap());
    assert!(e <= tol, "{what}: padded vs unpadded {e} > {tol}");
}

#[test]
fn padded_products_match() {
    if gpu().is_none() {
        return;
    }
    let _g = lock();
    let saved = pad_min_macs();
    let mut rng = Rng::new(7);
    let plain = |a: &Tensor, b: &Tensor| (a.clone(), b.clone());
    // transposed operands: contiguous transposes viewed back (cuBLAS op flags)
    let tt = |t: &Tensor| t.t().unwrap().contiguous().unwrap().t().unwrap();
    let both_t = |a: &Tensor, b: &Tensor| (tt(a), tt(b));
    let a_t = |a: &Tensor, b: &Tensor| (tt(a), b.clone());
    let b_t = |a: &Tensor, b: &Tensor| (a.clone(), tt(b));
    for dt in [DType::BF16, DType::F16] {
        for (m, k, n) in [(7usize, 13usize, 5usize), (129, 65, 33), (64, 50, 100), (33, 64, 257), (1, 9, 3), (13, 16, 24), (40, 24, 16)] {
            let (a, b) = (rnd(&mut rng, &[m, k], dt), rnd(&mut rng, &[k, n], dt));
            let what = format!("{dt:?} {m}x{k}@{k}x{n}");
            check(&what, &a, &b, &plain);
            check(&format!("{what} a,b transposed"), &a, &b, &both_t);
            check(&format!("{what} a transposed"), &a, &b, &a_t);
            check(&format!("{what} b transposed"), &a, &b, &b_t);
        }
        // batched, broadcast batch, a batch of transposed operands
        let (a, b) = (rnd(&mut rng, &[3, 17, 9], dt), rnd(&mut rng, &[3, 9, 11], dt));
        check(&format!("{dt:?} batched"), &a, &b, &plain);
        check(&format!("{dt:?} batched, b transposed"), &a, &b, &|a, b| (a.clone(), b.transpose(1, 2).unwrap().contiguous().unwrap().transpose(1, 2).unwrap()));
        let (a, b) = (rnd(&mut rng, &[2, 1, 5, 6], dt), rnd(&mut rng, &[3, 6, 4], dt));
        check(&format!("{dt:?} broadcast batch"), &a, &b, &plain);
        // aligned extents at an odd element offset (a misaligned address) and an odd leading dim (33)
        let big = rnd(&mut rng, &[32, 33], dt);
        let a = big.narrow(1, 1, 16).unwrap().contiguous().unwrap();
        let b = rnd(&mut rng, &[16, 24], dt);
        let gbig = big.to_device(GPU).unwrap();
        check(&format!("{dt:?} offset operand"), &a, &b, &|_, b| (gbig.narrow(1, 1, 16).unwrap(), b.clone()));
    }
    set_pad_min_macs(saved);
}

#[test]
fn padded_linear_gradients_match() {
    if gpu().is_none() {
        return;
    }
    let _g = lock();
    let saved = pad_min_macs();
    set_pad_min_macs(0);
    let mut rng = Rng::new(8);
    // an LM-head-like layer: an odd output width (the vocabulary), bf16, all three products
    let (rows, inf, outf) = (48usize, 32usize, 1001usize);
    let x = rnd(&mut rng, &[rows, inf], DType::BF16);
    let w = rnd(&mut rng, &[outf, inf], DType::BF16);
    let go = rnd(&mut rng, &[rows, outf], DType::BF16);
    let leaf = |t: &Tensor| t.to_device(GPU).unwrap().requires_grad_(true).unwrap();
    let (xg, wg) = (leaf(&x), leaf(&w));
    let y = magpie_core::ops::nn::linear(&xg, &wg, None).unwrap();
    y.backward_with(Some(&go.to_device(GPU).unwrap()), false, false).unwrap();
    let leaf64 = |t: &Tensor| t.to_dtype(DType::F64).unwrap().requires_grad_(true).unwrap();
    let (x64, w64) = (leaf64(&x), leaf64(&w));
    let y64 = magpie_core::ops::nn::linear(&x64, &w64, None).unwrap();
    y64.backward_with(Some(&go.to_dtype(DType::F64).unwrap()), false, false).unwrap();
    let eps = 2f64.powi(-8);
    let e = max_err("linear y", &y.detach(), &y64.detach());
    assert!(e <= eps * (1.0 + (inf as f64).sqrt()) * 2.0, "linear y error {e}");
    let e = max_err("linear dx", &xg.grad().unwrap(), &x64.grad().unwrap());
    assert!(e <= eps * (1.0 + (outf as f64).sqrt()) * 2.0, "linear dx error {e}");
    let e = max_err("linear dw", &wg.grad().unwrap(), &w64.grad().unwrap());
    assert!(e <= eps * (1.0 + (rows as f64).sqrt()) * 2.0, "linear dw error {e}");
    set_pad_min_macs(saved);
}
