//! `torch.special` functions (gamma family, Bessel functions, error functions, orthogonal polynomials).
