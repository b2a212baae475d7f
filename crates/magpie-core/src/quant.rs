//! Quantized weight matrices (GGUF / ggml block formats) kept in their blocks in memory, and
//! `y = x Wᵀ` on them: the inference-only weight of a quantized linear layer. The kernels are in
//! `backend::cpu::quant` (CPU) and `backend::cuda::quant` (decode GEMV on device buffers).

use crate::autograd::is_grad_enabled;
use crate::backend::cpu::quant::{dequantize_rows, quant_matmul};
use crate::{DType, Device, Error, Result, Tensor};
use std::sync::Arc;

pub use crate::backend::cpu::quant::QuantType;

/// An `[rows, cols]` weight matrix stored as `rows` runs of `cols / block` blocks of `ty`
/// (ggml's layout for a GGUF tensor with `ne = [cols, rows]`). Cheap to clone (shared bytes).
#[derive(Clone, Debug)]
pub struct QuantMatrix {
    ty: QuantType,
    rows: usize,
    cols: usize,
    data: Arc<[u8]>,
}

impl QuantMatrix {
    /// Wraps `data`; an error when `cols` is not a whole number of blocks or `data` is not
    /// exactly `rows x cols` weights of `ty`.
    pub fn new(ty: QuantType, rows: usize, cols: usize, data: impl Into<Arc<[u8]>>) -> Result<QuantMatrix> {
        let data = data.into();
        let need = ty.matrix_bytes("QuantMatrix", rows, cols)?;
        if data.len() != need {
            return Err(Error::shape("QuantMatrix", format!("a {rows}x{cols} {ty} matrix has {need} bytes, got {}", data.len())));
        }
        Ok(QuantMatrix { ty, rows, cols, data })
    }

    /// The block format.
    pub fn ty(&self) -> QuantType {
        self.ty
    }

    /// `[rows, cols]` (`[out_features, in_features]` for a linear layer).
    pub fn shape(&self) -> [usize; 2] {
        [self.rows, self.cols]
    }

    /// The block bytes, row after row.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// A matrix with row `i` taken from row `perm[i]` (whole rows of blocks move, so this is
    /// exact): used to undo a row permutation a converter applied.
    pub fn permute_rows(&self, perm: &[usize]) -> Result<QuantMatrix> {
        if perm.len() != self.rows || perm.iter().any(|&p| p >= self.rows) {
            return Err(Error::shape("QuantMatrix::permute_rows", format!("a permutation of {} rows is needed, got {} indices", self.rows, perm.len())));
        }
        let rb = self.data.len().checked_div(self.rows).unwrap_or(0);
        let mut out = Vec::with_capacity(self.data.len());
        for &p in perm {
            out.extend_from_slice(&self.data[p * rb..(p + 1) * rb]);
        }
        QuantMatrix::new(self.ty, self.rows, self.cols, out)
    }

    /// The matrix dequantized to an f32 CPU tensor `[rows, cols]` (bit-exact with ggml).
    pub fn dequantize(&self) -> Result<Tensor> {
        Tensor::from_vec(dequantize_rows(self.ty, &self.data, self.rows, self.cols)?, &[self.rows, self.cols])
    }

    /// `x Wᵀ` for `x` of shape `[..., cols]` (f32, f16 or bf16, on the CPU), in x's dtype.
    /// The weight is a constant: it has no gradient. Where x requires grad, the gradient
    /// reaching x is `g W` with W dequantized in the backward (so adapters or inputs before a
    /// quantized layer can still be trained).
    pub fn matmul_t(&self, x: &Tensor) -> Result<Tensor> {
        let op = "quant_linear";
        if x.device() != Device::Cpu {
            return Err(Error::unsupported(op, format!("quantized matmul on {:?} is not implemented (CPU only; CUDA has the decode GEMV on device buffers)", x.device())));
        }
        let dt = x.dtype();
        if !matches!(dt, DType::F32 | DType::F16 | DType::BF16) {
            return Err(Error::dtype(op, format!("input must be float32, float16 or bfloat16, got {dt}")));
        }
        let k = *x.shape().last().ok_or_else(|| Error::shape(op, "input must have at least one dimension"))?;
        if k != self.cols {
            return Err(Error::shape(op, format!("input's last dimension is {k} but the weight is {}x{}", self.rows, self.cols)));
        }
        let m = x.numel().checked_div(k).unwrap_or_else(|| x.shape()[..x.ndim() - 1].iter().product());
        let xs = x.to_dtype(DType::F32)?.contiguous()?.to_vec::<f32>()?;
        let y = quant_matmul(self.ty, &self.data, self.rows, k, &xs, m)?;
        let mut shape = x.shape().to_vec();
        if let Some(last) = shape.last_mut() {
            *last = self.rows;
        }
        let y = Tensor::from_vec(y, &shape)?.to_dtype(dt)?;
        if is_grad_enabled() && x.requires_grad() {
            let w = self.clone();
            crate::autograd::record(op, &[x], std::slice::from_ref(&y), move |_, g| {
                let gy = &g[0];
                Ok(vec![Some(gy.matmul(&w.dequantize()?.to_dtype(gy.dtype())?)?)])
            });
        }
        Ok(y)
    }
}
