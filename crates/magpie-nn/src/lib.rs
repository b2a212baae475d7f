//! torch-magpie's `torch.nn`: the [`Module`] trait, layers, losses, `functional`, `init` and
//! `utils`, with PyTorch's parameter names so state dicts move between the two.
//!
//! ```
//! use magpie_nn::{Linear, Module, ModuleExt};
//! use magpie_core::Tensor;
//! let fc = Linear::new(4, 2, true)?;
//! let y = fc.forward(&Tensor::ones(&[3, 4])?)?;
//! assert_eq!(y.shape(), &[3, 2]);
//! let names: Vec<String> = fc.named_parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["weight", "bias"]);
//! # Ok::<(), magpie_core::Error>(())
//! ```
//!
//! # What is here
//!
//! | Kind | Modules |
//! |---|---|
//! | Linear | [`Linear`], [`Bilinear`] (`forward2`), [`Identity`] |
//! | Embeddings | [`Embedding`], [`EmbeddingBag`] (`forward_bags`: sum / mean / max, offsets, per-sample weights) |
//! | Convolution | [`Conv1d`], [`Conv2d`], [`Conv3d`], [`ConvTranspose1d`], [`ConvTranspose2d`], [`ConvTranspose3d`] ([`ConvOptions`]: stride, padding incl. `same`/`valid`, padding modes, dilation, groups) |
//! | Pooling | [`MaxPool1d`]/[`MaxPool2d`]/[`MaxPool3d`], [`AvgPool1d`]/[`AvgPool2d`]/[`AvgPool3d`], [`AdaptiveAvgPool1d`]/[`AdaptiveAvgPool2d`]/[`AdaptiveAvgPool3d`], [`AdaptiveMaxPool1d`]/[`AdaptiveMaxPool2d`]/[`AdaptiveMaxPool3d`] |
//! | Normalisation | [`LayerNorm`], [`RMSNorm`], [`GroupNorm`], [`BatchNorm1d`]/[`BatchNorm2d`]/[`BatchNorm3d`], [`InstanceNorm1d`]/[`InstanceNorm2d`]/[`InstanceNorm3d`] |
//! | Dropout | [`Dropout`], [`Dropout1d`]/[`Dropout2d`]/[`Dropout3d`], [`AlphaDropout`], [`FeatureAlphaDropout`] |
//! | Shape, resampling | [`Flatten`], [`Unflatten`], [`Upsample`] |
//! | Activations | [`ReLU`], [`ReLU6`], [`LeakyReLU`], [`PReLU`], [`RReLU`], [`ELU`], [`SELU`], [`CELU`], [`GELU`], [`SiLU`], [`Mish`], [`Sigmoid`], [`Tanh`], [`Hardtanh`], [`Hardsigmoid`], [`Hardswish`], [`Softplus`], [`Softsign`], [`Softshrink`], [`Hardshrink`], [`Tanhshrink`], [`Threshold`], [`LogSigmoid`], [`Softmax`], [`LogSoftmax`], [`Softmin`], [`Softmax2d`], [`GLU`] |
//! | Containers | [`Sequential`], [`ModuleList`], [`ModuleDict`] |
//! | Losses ([`loss`]) | `CrossEntropyLoss`, `NLLLoss`, `MSELoss`, `L1Loss`, `SmoothL1Loss`, `HuberLoss`, `BCELoss`, `BCEWithLogitsLoss`, `KLDivLoss`, `CosineEmbeddingLoss`, `MarginRankingLoss`, `TripletMarginLoss`, `HingeEmbeddingLoss`, `SoftMarginLoss`, `MultiMarginLoss`, `MultiLabelMarginLoss`, `MultiLabelSoftMarginLoss`, `GaussianNLLLoss`, `PoissonNLLLoss`, `CTCLoss` |
//!
//! Modules with several inputs (`Bilinear`, losses) have typed methods (`forward2(input, target)`,
//! `forward3`, `forward_ctc`) and implement [`Module::forward_many`]. Every layer and loss is
//! checked against PyTorch (outputs, input and parameter gradients, running statistics) by
//! `tests/layers_vs_pytorch.rs`, with PyTorch's state dicts loaded strictly.

pub mod functional;
pub mod init;
pub mod layers;
pub mod loss;
mod module;
pub mod utils;

pub use layers::*;
pub use module::{LoadReport, Module, ModuleExt, StateDict};
