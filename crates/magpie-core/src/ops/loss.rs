//! Loss functions (`cross_entropy`, `nll_loss`, `mse_loss`, ...) with all reductions.
