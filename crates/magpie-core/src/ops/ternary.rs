//! Ops of three operands or more: `lerp`, `addcmul`, `addcdiv`, `clamp` with tensor bounds.
