//! `torch.nn.functional`: the stateless forms of the layers. The ops live in
//! `magpie_core::ops::nn` (so the registry and every device share them); this module is the
//! place users look for them, by PyTorch's names.

pub use magpie_core::ops::nn::loss::*;
pub use magpie_core::ops::nn::*;
