//! The layers of `torch.nn`, one file per kind.

mod attention;
mod container;
mod dropout;
mod embedding;
mod linear;
mod norm;
mod rnn;
mod transformer;

pub use container::{ModuleDict, ModuleList, Sequential};
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use linear::{Identity, Linear};
pub use norm::{LayerNorm, RMSNorm};
// sequence models: attention, transformers, recurrent layers
pub use attention::{MhaArgs, MhaOptions, MultiheadAttention};
pub use rnn::{RNNBase, RNNCell, RnnCellBase, RnnMode, RnnOptions, RnnWeights, GRU, GRUCell, LSTM, LSTMCell, RNN};
pub use transformer::{
    generate_square_subsequent_mask, TransformerActivation, DecoderMasks, Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer, TransformerMasks,
    TransformerOptions,
};
