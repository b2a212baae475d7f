//! `torch.linalg`: decompositions, solves, inverses, norms, determinants.
