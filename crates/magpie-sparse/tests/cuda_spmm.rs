//! The CUDA SpMM (NVRTC kernel) against the CPU path on random sparse matrices of several sizes
//! (odd ones, empty rows, nnz = 0), products and both gradients, float32 and float64; CUDA sparse
//! tensors through conversions. Skipped where CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1
//! (then they fail); without CUDA, moving a sparse tensor there is a clean error.

mod common;
use common::*;
use magpie_core::backend::cuda;
use magpie_core::{DType, Device};
use magpie_sparse::mm;

const GPU: Device = Device::Cuda(0);

fn have_cuda() -> bool {
    if cuda::is_available() {
        return true;
    }
    if std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("MAGPIE_REQUIRE_CUDA=1 but CUDA is not available");
    }
    eprintln!("skipped: CUDA is not available");
    false
}

#[test]
fn missing_cuda_is_an_error_not_a_crash() {
    if cuda::is_available() {
        return;
    }
    let mut rng = Rng::new(1);
    let s = random_coo(&mut rng, 4, 4, 5, &[], DType::F32);
    let e = s.to_device(GPU).unwrap_err();
    assert!(!e.to_string().is_empty());
}

#[test]
fn cuda_spmm_matches_cpu_with_gradients() {
    if !have_cuda() {
        return;
    }
    let mut rng = Rng::new(11);
    for dtype in [DType::F32, DType::F64] {
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
        for &(m, k, n, nnz, empty) in CASES {
            let what = format!("{dtype} {m}x{k}x{n} nnz {nnz}");
            let s = random_coo(&mut rng, m, k, nnz, empty, dtype).requires_grad_(true).unwrap();
            let d = random_dense(&mut rng, k, n, dtype).with_requires_grad().unwrap();
            let g = random_dense(&mut rng, m, n, dtype);
            let y = mm(&s, &d).unwrap();
            y.backward_with(Some(&g), false, false).unwrap();

            let sg = s.detach().to_device(GPU).unwrap().requires_grad_(true).unwrap();
            let dg = d.detach().to_device(GPU).unwrap().with_requires_grad().unwrap();
            let yg = mm(&sg, &dg).unwrap();
            assert_eq!(yg.device(), GPU);
            assert!(max_rel(&yg.to_device(Device::Cpu).unwrap(), &y) < tol, "{what}: product");
            yg.backward_with(Some(&g.to_device(GPU).unwrap()), false, false).unwrap();
            assert!(max_rel(&dg.grad().unwrap().to_device(Device::Cpu).unwrap(), &d.grad().unwrap()) < tol, "{what}: dense gradient");
            if nnz > 0 {
                let gv = sg.values_raw().grad().unwrap();
                assert_eq!(gv.device(), GPU);
                assert!(max_rel(&gv.to_device(Device::Cpu).unwrap(), &s.values_raw().grad().unwrap()) < tol, "{what}: values gradient");
            }
            // the CSR form on the device, and to_dense there
            let csr = sg.detach().to_sparse_csr().unwrap();
            assert_eq!(csr.device(), GPU);
            assert!(max_rel(&mm(&csr, &dg.detach()).unwrap().to_device(Device::Cpu).unwrap(), &y) < tol, "{what}: CSR product");
            // duplicates are summed in another order on the GPU (atomics): f32 rounding differs
            assert!(max_rel(&sg.to_dense().unwrap().to_device(Device::Cpu).unwrap(), &s.to_dense().unwrap()) < tol, "{what}: to_dense");
        }
    }
}
