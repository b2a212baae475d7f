//! The CPU SpMM and its gradients against the dense reference (`to_dense().matmul`, and autograd
//! through it) on random sparse matrices of several sizes: odd ones, empty rows, nnz = 0, duplicates.

mod common;
use common::*;
use magpie_core::DType;
use magpie_sparse::{mm, sparse_coo_tensor};

#[test]
fn spmm_matches_dense_matmul_with_gradients() {
    let mut rng = Rng::new(7);
    for dtype in [DType::F32, DType::F64] {
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
        for &(m, k, n, nnz, empty) in CASES {
            let s = random_coo(&mut rng, m, k, nnz, empty, dtype).requires_grad_(true).unwrap();
            let d = random_dense(&mut rng, k, n, dtype).with_requires_grad().unwrap();
            let g = random_dense(&mut rng, m, n, dtype);
            let y = mm(&s, &d).unwrap();
            // reference: the dense matrix built from a second leaf holding the same values
            let v2 = s.values_raw().detach().with_requires_grad().unwrap();
            let s2 = sparse_coo_tensor(s.indices_raw().unwrap(), &v2, Some(&[m, k])).unwrap();
            let d_ref = d.detach().with_requires_grad().unwrap();
            let y_ref = s2.to_dense().unwrap().matmul(&d_ref).unwrap();
            assert!(max_rel(&y, &y_ref) < tol, "{dtype} {m}x{k}x{n} nnz {nnz}: product");
            y.backward_with(Some(&g), false, false).unwrap();
            y_ref.backward_with(Some(&g), false, false).unwrap();
            assert!(max_rel(&d.grad().unwrap(), &d_ref.grad().unwrap()) < tol, "{dtype} {m}x{k}x{n}: dense gradient");
            if nnz > 0 {
                assert!(max_rel(&s.values_raw().grad().unwrap(), &v2.grad().unwrap()) < tol, "{dtype} {m}x{k}x{n}: values gradient");
            }
        }
    }
}
