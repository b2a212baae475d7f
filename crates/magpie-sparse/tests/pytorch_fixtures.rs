//! magpie-sparse against PyTorch (tests/fixtures/sparse.json, written by make_sparse_fixtures.py):
//! construction errors, coalesce, to_dense, conversions, add/mul, sum, transpose, sparse.mm values
//! and gradients (float32, float64), Embedding(sparse=True)'s gradient.

use magpie_core::{DType, Tensor};
use magpie_sparse::*;
use serde_json::Value;

fn fixture() -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sparse.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn shape(v: &Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
}

/// A fixture tensor in its dtype.
fn t(v: &Value) -> Tensor {
    let sh = shape(&v["shape"]);
    let data = v["data"].as_array().unwrap();
    match v["dtype"].as_str().unwrap() {
        "int64" => Tensor::from_vec(data.iter().map(|x| x.as_i64().unwrap()).collect::<Vec<_>>(), &sh).unwrap(),
        "int32" => Tensor::from_vec(data.iter().map(|x| x.as_i64().unwrap() as i32).collect::<Vec<_>>(), &sh).unwrap(),
        "float32" => Tensor::from_vec(data.iter().map(|x| x.as_f64().unwrap() as f32).collect::<Vec<_>>(), &sh).unwrap(),
        "float64" => Tensor::from_vec(data.iter().map(|x| x.as_f64().unwrap()).collect::<Vec<_>>(), &sh).unwrap(),
        d => panic!("dtype {d}"),
    }
}

fn close(what: &str, got: &Tensor, want: &Value, tol: f64) {
    assert_eq!(got.shape(), shape(&want["shape"]).as_slice(), "{what}: shape");
    let g: Vec<f64> = got.to_dtype(DType::F64).unwrap().to_vec().unwrap();
    let w: Vec<f64> = want["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}[{i}]: {a} vs {b}");
    }
}

fn ints(what: &str, got: &Tensor, want: &Value) {
    assert_eq!(got.shape(), shape(&want["shape"]).as_slice(), "{what}: shape");
    let w: Vec<i64> = want["data"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
    assert_eq!(got.to_vec::<i64>().unwrap(), w, "{what}");
}

#[test]
fn construction_errors_match_pytorch() {
    let fx = fixture();
    for c in fx["coo_errors"].as_array().unwrap() {
        let e = sparse_coo_tensor(&t(&c["indices"]), &t(&c["values"]), Some(&shape(&c["size"]))).unwrap_err().to_string();
        assert!(e.contains(c["error"].as_str().unwrap()), "got '{e}', PyTorch says '{}'", c["error"]);
    }
    for c in fx["csr_errors"].as_array().unwrap() {
        let e = sparse_csr_tensor(&t(&c["crow"]), &t(&c["col"]), &t(&c["values"]), Some(&shape(&c["size"]))).unwrap_err().to_string();
        assert!(e.contains(c["error"].as_str().unwrap()), "got '{e}', PyTorch says '{}'", c["error"]);
    }
}

#[test]
fn coo_ops_match_pytorch() {
    let fx = fixture();
    let tol = 1e-12;
    for (n, c) in fx["coo"].as_array().unwrap().iter().enumerate() {
        let size = shape(&c["size"]);
        let s = sparse_coo_tensor(&t(&c["indices"]), &t(&c["values"]), Some(&size)).unwrap();
        let o = sparse_coo_tensor(&t(&c["other_indices"]), &t(&c["other_values"]), Some(&size)).unwrap();
        let d = t(&c["dense_operand"]);
        assert_eq!(s.is_coalesced(), c["is_coalesced"].as_bool().unwrap(), "case {n}: is_coalesced");
        let co = s.coalesce().unwrap();
        assert!(co.is_coalesced());
        ints(&format!("case {n}: coalesced indices"), &co.indices().unwrap(), &c["coalesced_indices"]);
        close(&format!("case {n}: coalesced values"), &co.values().unwrap(), &c["coalesced_values"], tol);
        if s.nnz() > 1 {
            assert!(s.values().is_err() && s.indices().is_err(), "case {n}: values() of an uncoalesced tensor");
        }
        close(&format!("case {n}: to_dense"), &s.to_dense().unwrap(), &c["dense"], tol);
        let sum: f64 = s.sum().unwrap().to_vec::<f64>().unwrap()[0];
        assert!((sum - c["sum"].as_f64().unwrap()).abs() < 1e-12, "case {n}: sum");
        for sc in c["sums"].as_array().unwrap() {
            let dims: Vec<i64> = sc["dims"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
            let r = s.sum_dims(&dims).unwrap();
            assert_eq!(matches!(r, Summed::Sparse(_)), sc["is_sparse"].as_bool().unwrap(), "case {n}: sum over {dims:?} sparse or dense");
            close(&format!("case {n}: sum over {dims:?}"), &r.to_dense().unwrap(), &sc["dense"], tol);
        }
        let sum = s.add(&o).unwrap();
        assert_eq!(sum.nnz(), c["add_nnz_uncoalesced"].as_u64().unwrap() as usize, "case {n}: nnz of s + o");
        close(&format!("case {n}: s + o"), &sum.to_dense().unwrap(), &c["add_dense"], tol);
        let csum = s.coalesce().unwrap().add(&o.coalesce().unwrap()).unwrap();
        assert_eq!(csum.is_coalesced(), c["add_coalesced"].as_bool().unwrap(), "case {n}: coalesced + coalesced");
        assert_eq!(csum.nnz(), c["add_nnz_coalesced"].as_u64().unwrap() as usize, "case {n}: nnz of coalesced sum");
        close(&format!("case {n}: s * 2.5"), &s.mul_scalar(2.5).unwrap().to_dense().unwrap(), &c["mul_scalar"], tol);
        close(&format!("case {n}: s * o"), &s.mul(&o).unwrap().to_dense().unwrap(), &c["mul_sparse"], tol);
        close(&format!("case {n}: s * d"), &s.mul_dense(&d).unwrap().to_dense().unwrap(), &c["mul_dense"], tol);
        close(&format!("case {n}: d + s"), &add_dense(&d, &s).unwrap(), &c["dense_plus"], tol);
        assert!(s.add_dense(&d).unwrap_err().to_string().contains("add(sparse, dense) is not supported. Use add(dense, sparse) instead."));
        if let Some(tr) = c.get("transpose_dense") {
            let st = s.transpose(0, 1).unwrap();
            assert!(!st.is_coalesced());
            assert_eq!(st.shape(), shape(&c["transpose_size"]).as_slice());
            close(&format!("case {n}: transpose"), &st.to_dense().unwrap(), tr, tol);
        } else if s.dense_dim() > 0 {
            let e = s.transpose(0, -1).unwrap_err().to_string();
            assert!(e.contains("sparse transpose: transposed dimensions must be sparse"), "case {n}: {e}");
        }
        if let Some(csr) = c.get("csr") {
            let m = s.to_sparse_csr().unwrap();
            assert_eq!(m.layout(), SparseLayout::Csr);
            ints(&format!("case {n}: crow"), &m.crow_indices().unwrap(), &csr["crow"]);
            ints(&format!("case {n}: col"), &m.col_indices().unwrap(), &csr["col"]);
            close(&format!("case {n}: csr values"), &m.values().unwrap(), &csr["values"], tol);
            close(&format!("case {n}: csr to_dense"), &m.to_dense().unwrap(), &c["dense"], tol);
            // and back: CSR -> COO gives the coalesced COO tensor
            let back = m.to_sparse().unwrap();
            ints(&format!("case {n}: csr -> coo"), &back.indices().unwrap(), &c["coalesced_indices"]);
            let twice: Vec<f64> = m.add(&m).unwrap().to_dense().unwrap().to_vec().unwrap();
            let want: Vec<f64> = t(&c["dense"]).mul_scalar(2.0).unwrap().to_vec().unwrap();
            assert_eq!(twice, want, "case {n}: csr + csr");
            assert_eq!(m.add(&m).unwrap().layout(), SparseLayout::Csr);
            close(&format!("case {n}: csr * 2.5"), &m.mul_scalar(2.5).unwrap().to_dense().unwrap(), &c["mul_scalar"], tol);
            close(&format!("case {n}: csr + dense"), &m.add_dense(&d).unwrap(), &c["dense_plus"], tol);
        } else if s.sparse_dim() != 2 {
            assert!(s.to_sparse_csr().unwrap_err().to_string().contains("sparse_dim()!=2 is not supported"));
        }
    }
}

#[test]
fn dense_to_sparse_matches_pytorch() {
    let fx = fixture();
    for (n, c) in fx["dense"].as_array().unwrap().iter().enumerate() {
        let x = t(&c["x"]);
        let s = match c["sparse_dim"].as_u64() {
            Some(sd) => to_sparse_dim(&x, sd as usize).unwrap(),
            None => to_sparse(&x).unwrap(),
        };
        assert!(s.is_coalesced());
        ints(&format!("case {n}: indices"), &s.indices().unwrap(), &c["indices"]);
        close(&format!("case {n}: values"), &s.values().unwrap(), &c["values"], 0.0);
        close(&format!("case {n}: round trip"), &s.to_dense().unwrap(), &c["x"], 0.0);
        if let Some(csr) = c.get("csr") {
            let m = to_sparse_csr(&x).unwrap();
            ints(&format!("case {n}: crow"), &m.crow_indices().unwrap(), &csr["crow"]);
            ints(&format!("case {n}: col"), &m.col_indices().unwrap(), &csr["col"]);
            close(&format!("case {n}: csr values"), &m.values().unwrap(), &csr["values"], 0.0);
        }
    }
}

#[test]
fn mm_values_and_gradients_match_pytorch() {
    let fx = fixture();
    for (n, c) in fx["mm"].as_array().unwrap().iter().enumerate() {
        let tol = if c["dtype"] == "float32" { 2e-6 } else { 1e-12 };
        let size = shape(&c["size"]);
        let s = sparse_coo_tensor(&t(&c["indices"]), &t(&c["values"]), Some(&size)).unwrap().requires_grad_(true).unwrap();
        let d = t(&c["D"]).with_requires_grad().unwrap();
        let y = mm(&s, &d).unwrap();
        close(&format!("case {n}: out"), &y, &c["out"], tol);
        y.backward_with(Some(&t(&c["G"])), false, false).unwrap();
        close(&format!("case {n}: grad D"), &d.grad().unwrap(), &c["grad_D"], tol);
        let gs = s.grad().unwrap().unwrap();
        assert!(gs.is_coalesced());
        ints(&format!("case {n}: grad indices"), &gs.indices().unwrap(), &c["grad_indices"]);
        close(&format!("case {n}: grad values"), &gs.values().unwrap(), &c["grad_values"], tol);
        // the CSR form gives the same product and dense gradient
        let csr = s.detach().to_sparse_csr().unwrap();
        let d2 = t(&c["D"]).with_requires_grad().unwrap();
        let y2 = mm(&csr, &d2).unwrap();
        close(&format!("case {n}: csr out"), &y2, &c["out"], tol);
        y2.backward_with(Some(&t(&c["G"])), false, false).unwrap();
        close(&format!("case {n}: csr grad D"), &d2.grad().unwrap(), &c["grad_D"], tol);
    }
}

#[test]
fn mm_errors() {
    let i = Tensor::from_vec(vec![0i64, 1], &[2, 1]).unwrap();
    let s = sparse_coo_tensor(&i, &Tensor::from_vec(vec![1f32], &[1]).unwrap(), Some(&[2, 3])).unwrap();
    let e = mm(&s, &Tensor::zeros(&[4, 2]).unwrap()).unwrap_err().to_string();
    assert!(e.contains("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x2)"), "{e}");
    let e = mm(&s, &Tensor::zeros(&[3, 2]).unwrap().to_dtype(DType::F64).unwrap()).unwrap_err().to_string();
    assert!(e.contains("expected scalar type Float but found Double"), "{e}");
    let e = mm(&s, &Tensor::zeros(&[3]).unwrap()).unwrap_err().to_string();
    assert!(e.contains("matrices expected, got 1D tensor"), "{e}");
}

#[test]
fn embedding_sparse_gradient_matches_pytorch() {
    let fx = fixture();
    for c in fx["embedding"].as_array().unwrap() {
        let w = t(&c["weight"]).with_requires_grad().unwrap();
        let pad = c["padding_idx"].as_i64();
        let cc = t(&c["C"]);
        let idx = Tensor::from_vec(vec![1i64, 3, 1, 4], &[2, 2]).unwrap();
        embedding(&idx, &w, pad, None, 2.0).unwrap().mul(&cc).unwrap().sum().unwrap().backward().unwrap();
        let idx2 = Tensor::from_vec(vec![0i64, 3], &[2]).unwrap();
        embedding(&idx2, &w, pad, None, 2.0).unwrap().mul(&cc.select(0, 0).unwrap()).unwrap().sum().unwrap().backward().unwrap();
        assert!(w.grad().is_none());
        let g = sparse_grad(&w).unwrap();
        assert_eq!(g.is_coalesced(), c["grad_coalesced"].as_bool().unwrap());
        ints("embedding grad indices", g.indices_raw().unwrap(), &c["grad_indices"]);
        close("embedding grad values", g.values_raw(), &c["grad_values"], 1e-12);
        close("embedding grad dense", &g.to_dense().unwrap(), &c["grad_dense"], 1e-12);
        set_sparse_grad(&w, None);
        assert!(sparse_grad(&w).is_none());
    }
}
