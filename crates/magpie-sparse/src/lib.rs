//! Sparse tensors (`torch.sparse`): COO and CSR [`SparseTensor`]s built from index and value
//! tensors, with PyTorch's construction checks, `coalesce`, conversions to and from strided
//! tensors, `add`/`mul`, `sum`, `transpose`, and [`mm`] (sparse @ dense) on the CPU and on CUDA
//! with gradients w.r.t. the dense operand and the sparse operand's values. [`embedding`] is
//! `Embedding(sparse=True)`'s lookup, whose weight gradient is sparse ([`sparse_grad`]), what
//! `magpie_optim::SparseAdam` consumes. See docs/sparse.md.
//!
//! ```
//! use magpie_core::Tensor;
//! use magpie_sparse::{mm, to_sparse};
//! let a = Tensor::from_vec(vec![0f64, 2., 1., 0.], &[2, 2])?;
//! let s = to_sparse(&a)?;                                  // COO, 2 entries
//! let x = Tensor::from_vec(vec![1f64, 2., 3., 4.], &[2, 2])?;
//! assert_eq!(mm(&s, &x)?.to_vec::<f64>()?, a.matmul(&x)?.to_vec::<f64>()?);
//! assert_eq!(s.to_sparse_csr()?.crow_indices()?.to_vec::<i64>()?, vec![0, 1, 2]);
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod arith;
mod coalesce;
mod construct;
mod convert;
mod cuda;
mod embedding;
mod grad;
mod mm;
mod reduce;
mod tensor;

pub use arith::add_dense;
pub use construct::{sparse_coo_tensor, sparse_csr_tensor};
pub use convert::{to_sparse, to_sparse_csr, to_sparse_dim};
pub use embedding::embedding;
pub use grad::{set_sparse_grad, sparse_grad};
pub use mm::{matmul, mm};
pub use reduce::Summed;
pub use tensor::{SparseLayout, SparseTensor};
