//! Activation functions (`relu`, `gelu`, `silu`, ...) as elementwise ops with gradients.
