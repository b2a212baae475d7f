//! Random sparse matrices for the SpMM tests (an xorshift stream: no dependency, same on every machine).

#![allow(dead_code)]

use magpie_core::{DType, Tensor};
use magpie_sparse::{sparse_coo_tensor, SparseTensor};

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [-1, 1).
    pub fn f(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
    pub fn below(&mut self, n: usize) -> i64 {
        (self.next() % n.max(1) as u64) as i64
    }
}

/// A random `m x k` COO matrix of `nnz` entries in `dtype` (duplicates possible; rows listed in
/// `empty_rows` get none; entries in random order).
pub fn random_coo(rng: &mut Rng, m: usize, k: usize, nnz: usize, empty_rows: &[i64], dtype: DType) -> SparseTensor {
    let mut rows = Vec::with_capacity(nnz);
    let mut cols = Vec::with_capacity(nnz);
    while rows.len() < nnz && m > 0 && k > 0 && empty_rows.len() < m {
        let r = rng.below(m);
        if empty_rows.contains(&r) {
            continue;
        }
        rows.push(r);
        cols.push(rng.below(k));
    }
    let n = rows.len();
    rows.extend(cols);
    let idx = Tensor::from_vec(rows, &[2, n]).unwrap();
    let v: Vec<f64> = (0..n).map(|_| rng.f()).collect();
    let vals = Tensor::from_vec(v, &[n]).unwrap().to_dtype(dtype).unwrap();
    sparse_coo_tensor(&idx, &vals, Some(&[m, k])).unwrap()
}

/// A random dense `[r, c]` tensor in `dtype`.
pub fn random_dense(rng: &mut Rng, r: usize, c: usize, dtype: DType) -> Tensor {
    let v: Vec<f64> = (0..r * c).map(|_| rng.f()).collect();
    Tensor::from_vec(v, &[r, c]).unwrap().to_dtype(dtype).unwrap()
}

/// Largest |a - b| / (1 + |b|).
pub fn max_rel(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape(), b.shape());
    let x: Vec<f64> = a.to_dtype(DType::F64).unwrap().to_vec().unwrap();
    let y: Vec<f64> = b.to_dtype(DType::F64).unwrap().to_vec().unwrap();
    x.iter().zip(&y).map(|(p, q)| (p - q).abs() / (1.0 + q.abs())).fold(0.0, f64::max)
}

/// The shapes the SpMM tests run: (m, k, n, nnz, empty rows), odd sizes, empty rows, nnz = 0,
/// a single column, and one larger product.
pub const CASES: &[(usize, usize, usize, usize, &[i64])] = &[
    (1, 1, 1, 1, &[]),
    (7, 5, 3, 9, &[2, 4]),
    (33, 17, 13, 70, &[0, 32]),
    (64, 64, 1, 200, &[]),
    (5, 8, 6, 0, &[]),
    (129, 257, 65, 1500, &[1, 2, 3]),
    (300, 200, 130, 4000, &[]),
];
