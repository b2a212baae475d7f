//! `EmbeddingBag`: sums, averages or maxes bags of embeddings without building the
//! intermediate `[bags, len, dim]` tensor.

use crate::layers::embedding::init_table;
use crate::module::Module;
use magpie_core::ops::nn::embedding_bag;
use magpie_core::{Error, Result, Tensor};

/// `nn.EmbeddingBag(num_embeddings, embedding_dim, max_norm=None, norm_type=2, mode='mean',
/// include_last_offset=False, padding_idx=None)`: weight `[num, dim]` ~ N(0, 1) (the
/// `padding_idx` row zero). Input is `[B, L]` (fixed-length bags) or 1-D with `offsets`.
pub struct EmbeddingBag {
    pub weight: Tensor,
    pub max_norm: Option<f64>,
    pub norm_type: f64,
    /// `"sum"`, `"mean"` or `"max"`.
    pub mode: String,
    pub include_last_offset: bool,
    pub padding_idx: Option<i64>,
}

impl EmbeddingBag {
    /// A new table with PyTorch's initialisation.
    pub fn new(num_embeddings: usize, embedding_dim: usize, mode: &str, padding_idx: Option<i64>) -> Result<EmbeddingBag> {
        if !["sum", "mean", "max"].contains(&mode) {
            return Err(Error::value("EmbeddingBag", format!("mode has to be one of sum, mean or max, got {mode}")));
        }
        let n = num_embeddings as i64;
        let padding_idx = match padding_idx {
            Some(p) if p >= n || p < -n => return Err(Error::value("EmbeddingBag", "padding_idx must be within num_embeddings")),
            Some(p) if p < 0 => Some(p + n),
            p => p,
        };
        let w = init_table(num_embeddings, embedding_dim, padding_idx)?;
        Ok(EmbeddingBag { weight: w.with_requires_grad()?, max_norm: None, norm_type: 2.0, mode: mode.into(), include_last_offset: false, padding_idx })
    }
    /// `forward(input, offsets, per_sample_weights)`: one row per bag.
    pub fn forward_bags(&self, input: &Tensor, offsets: Option<&Tensor>, per_sample_weights: Option<&Tensor>) -> Result<Tensor> {
        embedding_bag(input, &self.weight, offsets, self.max_norm, self.norm_type, &self.mode, per_sample_weights, self.include_last_offset, self.padding_idx)
    }
}

impl Module for EmbeddingBag {
    fn type_name(&self) -> &'static str {
        "EmbeddingBag"
    }
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        self.forward_bags(input, None, None)
    }
    /// `[input]`, `[input, offsets]` or `[input, offsets, per_sample_weights]`.
    fn forward_many(&self, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
        match xs {
            [i] => Ok(vec![self.forward_bags(i, None, None)?]),
            [i, o] => Ok(vec![self.forward_bags(i, Some(o), None)?]),
            [i, o, w] => Ok(vec![self.forward_bags(i, Some(o), Some(w))?]),
            _ => Err(Error::value("EmbeddingBag", format!("forward takes 1 to 3 inputs but {} were given", xs.len()))),
        }
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        vec![("weight", &self.weight)]
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        vec![("weight", &mut self.weight)]
    }
}
