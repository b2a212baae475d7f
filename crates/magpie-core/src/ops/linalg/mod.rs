//! `torch.linalg`: decompositions, solves, inverses, norms and determinants. Dense kernels run
//! in f64 on each matrix of a batch (`dense`); every op records a backward rule written with
//! tensor ops, or is a composition of ops that do.

mod compose;
mod cuda_path;
mod decomp;
pub(crate) mod dense;
mod householder;
mod ldl;
mod lu;
mod norms;
mod solve;
mod spectral;
mod util;

pub use compose::{lstsq, matrix_exp, matrix_power, tensorinv, tensorsolve, vander};
pub use decomp::{eigh, householder_product, matrix_rank, pinv, qr, svd, svdvals};
pub use householder::{geqrf, ormqr};
pub use ldl::{ldl_factor, ldl_factor_ex, ldl_solve};
pub use lu::{lu_factor_ex, lu_full, lu_solve, lu_unpack};
pub use norms::{cond, linalg_norm, matrix_norm, torch_norm, vector_norm, NormOrd};
pub use solve::{cholesky, cholesky_ex, cholesky_inverse, cholesky_solve, det, inv, logdet, slogdet, solve, solve_triangular};
pub use spectral::{matrix_sqrth, polar};
pub(crate) use solve::lu_infos;
pub(crate) use norms::norm_on_device;
