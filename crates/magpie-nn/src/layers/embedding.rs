//! `Embedding`: a lookup table of vectors, with an optional padding row.

use crate::module::Module;
use magpie_core::autograd::no_grad;
use magpie_core::ops::nn::embedding;
use magpie_core::{default_dtype, Device, Error, Result, Tensor};

/// `nn.Embedding(num_embeddings, embedding_dim, padding_idx)`: weight `[num, dim]` ~ N(0, 1);
/// the `padding_idx` row starts at zero and gets no gradient. With `sparse` (`with_sparse(true)`,
/// PyTorch's `sparse=True`) the weight's gradient is a sparse COO tensor of the looked-up rows,
/// read with `magpie_sparse::sparse_grad(&weight)` (`.grad` stays empty), for `SparseAdam`.
pub struct Embedding {
    pub weight: Tensor,
    pub padding_idx: Option<i64>,
    pub max_norm: Option<f64>,
    pub norm_type: f64,
    pub sparse: bool,
}

/// A `[num, dim]` table ~ N(0, 1) with the (validated, non-negative) `padding_idx` row zero, as
/// `nn.Embedding` and `nn.EmbeddingBag` initialise it.
pub(crate) fn init_table(num_embeddings: usize, embedding_dim: usize, padding_idx: Option<i64>) -> Result<Tensor> {
    let w = Tensor::zeros_on(&[num_embeddings, embedding_dim], default_dtype(), Device::Cpu)?;
    w.normal_(0.0, 1.0)?;
    if let Some(p) = padding_idx {
        let _g = no_grad();
        w.select(0, p)?.zero_()?;
    }
    Ok(w)
}

impl Embedding {
    /// A new table with PyTorch's initialisation.
    pub fn new(num_embeddings: usize, embedding_dim: usize, padding_idx: Option<i64>) -> Result<Embedding> {
        let padding_idx = match padding_idx {
            Some(p) if p >= num_embeddings as i64 || p < -(num_embeddings as i64) => {
                return Err(Error::value("Embedding", "Padding_idx must be within num_embeddings"));
            }
            Some(p) if p < 0 => Some(p + num_embeddings as i64),
            p => p,
        };
        let w = init_table(num_embeddings, embedding_dim, padding_idx)?;
        Ok(Embedding { weight: w.with_requires_grad()?, padding_idx, max_norm: None, norm_type: 2.0, sparse: false })
    }
    /// A table from a given weight `[num, dim]` (`Embedding.from_pretrained` without freezing).
    pub fn from_weight(weight: Tensor, padding_idx: Option<i64>) -> Result<Embedding> {
        if weight.ndim() != 2 {
            return Err(Error::shape("Embedding", format!("Embeddings parameter is expected to be 2-dimensional, got {:?}", weight.shape())));
        }
        Ok(Embedding { weight, padding_idx, max_norm: None, norm_type: 2.0, sparse: false })
    }
    /// PyTorch's `sparse=` flag: with `true` the weight gets sparse gradients.
    ///
    /// ```
    /// use magpie_core::Tensor;
    /// use magpie_nn::{Embedding, Module};
    /// let emb = Embedding::new(10, 4, None)?.with_sparse(true);
    /// emb.forward(&Tensor::from_vec(vec![2i64, 7, 2], &[3])?)?.sum()?.backward()?;
    /// let g = magpie_sparse::sparse_grad(&emb.weight).unwrap();
    /// assert_eq!((g.nnz(), g.shape()), (3, &[10usize, 4][..]));
    /// # Ok::<(), magpie_core::Error>(())
    /// ```
    pub fn with_sparse(mut self, sparse: bool) -> Embedding {
        self.sparse = sparse;
        self
    }
}

impl Module for Embedding {
    fn type_name(&self) -> &'static str {
        "Embedding"
    }
    fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        if self.sparse && self.weight.requires_grad() {
            return magpie_sparse::embedding(idx, &self.weight, self.padding_idx, self.max_norm, self.norm_type);
        }
        embedding(idx, &self.weight, self.padding_idx, self.max_norm, self.norm_type)
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        vec![("weight", &self.weight)]
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        vec![("weight", &mut self.weight)]
    }
}
