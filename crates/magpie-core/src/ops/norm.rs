//! Normalization: `layer_norm`, `rms_norm`, `group_norm`, `batch_norm`, `instance_norm`, `normalize`.
