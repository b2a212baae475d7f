//! The layers of `torch.nn`, one file per kind.

mod attention;
mod container;
mod dropout;
mod embedding;
mod linear;
mod quant_linear;
mod nd;
mod norm;
mod rnn;
mod transformer;

pub use container::{ModuleDict, ModuleList, Sequential};
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use linear::{Identity, Linear};
pub use quant_linear::{AnyLinear, QuantLinear};
pub use norm::{LayerNorm, RMSNorm};
// sequence models: attention, transformers, recurrent layers
pub use attention::{MhaArgs, MhaOptions, MultiheadAttention};
pub use rnn::{RNNBase, RNNCell, RnnCellBase, RnnMode, RnnOptions, RnnWeights, GRU, GRUCell, LSTM, LSTMCell, RNN};
pub use transformer::{
    generate_square_subsequent_mask, TransformerActivation, DecoderMasks, Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer, TransformerMasks,
    TransformerOptions,
};

// layers added by the nn-layers work (activations, conv, pooling, norms, dropout variants, ...)
mod activation;
mod bilinear;
mod channel_norm;
mod conv;
mod dropout_nd;
mod embedding_bag;
mod pool;
mod reshape;

pub use activation::{
    Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, RReLU, ReLU, ReLU6, SiLU, Sigmoid, Softmax, Softmax2d, Softmin, Softplus,
    Softshrink, Softsign, Tanh, Tanhshrink, Threshold, CELU, ELU, GELU, GLU, SELU,
};
pub use bilinear::Bilinear;
pub use channel_norm::{BatchNorm1d, BatchNorm2d, BatchNorm3d, BatchNormNd, GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, InstanceNormNd};
pub use conv::{Conv1d, Conv2d, Conv3d, ConvNd, ConvOptions, ConvPadding, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, ConvTransposeNd};
pub use dropout_nd::{AlphaDropout, Dropout1d, Dropout2d, Dropout3d, DropoutNd, FeatureAlphaDropout};
pub use embedding_bag::EmbeddingBag;
pub use pool::{
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveAvgPoolNd, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d, AdaptiveMaxPoolNd, AvgPool1d, AvgPool2d,
    AvgPool3d, AvgPoolNd, MaxPool1d, MaxPool2d, MaxPool3d, MaxPoolNd,
};
pub use reshape::{Flatten, Unflatten, Upsample};
