//! `torch.nn.functional` ops that are not plain elementwise activations: convolution,
//! pooling, interpolation, normalization, losses, embeddings, dropout and attention.
//! Raw kernels (conv, pooling windows, resampling, gathers) record their own backward rules
//! written with the same kernels, so they are differentiable to any order; the rest are
//! composites of existing ops.

pub mod add_layer_norm;
pub mod antialias;
pub mod attention;
pub mod attention_lse;
pub mod bias_gelu;
mod attention_fused;
#[cfg(feature = "cuda")]
mod attention_cuda;
pub mod conv;
mod conv_gemm;
pub(crate) mod cross_entropy;
pub mod ctc;
pub mod dropout;
pub mod embedding;
mod embedding_rows;
pub mod fold;
pub(crate) mod gather;
pub mod grid_sample;
pub mod grid_sample_3d;
pub mod interpolate;
pub(crate) mod layer_norm;
pub(crate) mod linear;
#[cfg(feature = "cuda")]
mod linear_amp;
pub mod lm_head_loss;
pub mod loss;
pub mod norm;
pub mod pool;
pub mod pool_backward;
pub(crate) mod resample;
pub(crate) mod util;

pub use add_layer_norm::{add_layer_norm, add_layer_norm_residual};
pub use antialias::upsample_aa;
pub use attention::scaled_dot_product_attention;
pub use attention_lse::sdpa_with_lse;
pub use bias_gelu::bias_gelu;
pub use conv::{bilinear, conv, conv_transpose, linear, Padding};
pub use conv_gemm::set_conv_via_gemm;
pub use ctc::ctc_loss;
pub use dropout::{alpha_dropout, dropout, native_dropout_backward};
pub use embedding::{embedding, embedding_bag, one_hot};
pub use fold::{fold, unfold};
pub use grid_sample::grid_sample;
pub use grid_sample_3d::grid_sample_3d;
pub use interpolate::interpolate;
pub use lm_head_loss::lm_head_cross_entropy;
pub use loss::Reduction;
pub use norm::{cdist, cosine_similarity, instance_norm, local_response_norm, native_batch_norm, native_group_norm, native_layer_norm, normalize, pairwise_distance, pdist, rms_norm};
pub use pool_backward::max_pool2d_with_indices_backward;
pub use pool::{adaptive_avg_pool, adaptive_max_pool, avg_pool, max_pool, max_unpool};
