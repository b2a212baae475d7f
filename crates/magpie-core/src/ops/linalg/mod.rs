//! `torch.linalg`: decompositions, solves, inverses, norms, determinants (dense kernels in f64).
