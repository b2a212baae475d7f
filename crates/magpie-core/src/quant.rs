//! Quantized weight matrices (GGUF / ggml block formats) kept in their blocks in memory, and
//! `y = x Wᵀ` on them: the inference-only weight of a quantized linear layer. The kernels are in
//! `backend::cpu::quant` (CPU) and `backend::cuda::quant` (CUDA: the decode GEMV for up to 8
//! rows, dequantization then cuBLAS for more).

use crate::autograd::is_grad_enabled;
use crate::backend::cpu::quant::{dequantize_rows, quant_matmul};
use crate::{DType, Device, Error, Result, Tensor};
use std::sync::Arc;

pub use crate::backend::cpu::quant::QuantType;

/// An `[rows, cols]` weight matrix stored as `rows` runs of `cols / block` blocks of `ty`
/// (ggml's layout for a GGUF tensor with `ne = [cols, rows]`). Cheap to clone (shared bytes).
/// [`to_device`](Self::to_device) adds a copy of the blocks on a GPU, where
/// [`matmul_t`](Self::matmul_t) then runs.
#[derive(Clone, Debug)]
pub struct QuantMatrix {
    ty: QuantType,
    rows: usize,
    cols: usize,
    data: Arc<[u8]>,
    /// The blocks on a CUDA device (a u8 tensor), when moved there.
    gpu: Option<Tensor>,
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
        Ok(QuantMatrix { ty, rows, cols, data, gpu: None })
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

    /// Where [`matmul_t`](Self::matmul_t) runs: the CPU, or the GPU holding a copy of the blocks.
    pub fn device(&self) -> Device {
        self.gpu.as_ref().map_or(Device::Cpu, |t| t.device())
    }

    /// The matrix with its blocks on `device`, still quantized: for `cuda:N` the blocks are
    /// copied to that GPU once, and `matmul_t` then takes inputs on it; for the CPU, the host
    /// matrix. The host bytes are kept (for [`dequantize`](Self::dequantize) and `bytes`).
    ///
    /// ```
    /// use magpie_core::quant::{QuantMatrix, QuantType};
    /// use magpie_core::Device;
    /// let q = QuantMatrix::new(QuantType::Q8_0, 1, 32, vec![0u8; 34]).unwrap();
    /// assert_eq!(q.to_device(Device::Cpu).unwrap().device(), Device::Cpu);
    /// ```
    pub fn to_device(&self, device: Device) -> Result<QuantMatrix> {
        let mut out = self.clone();
        out.gpu = match device {
            Device::Cpu => None,
            d if self.device() == d => self.gpu.clone(),
            d => Some(Tensor::from_vec(self.data.to_vec(), &[self.data.len()])?.to_device(d)?),
        };
        Ok(out)
    }

    /// A matrix with row `i` taken from row `perm[i]` (whole rows of blocks move, so this is
    /// exact): used to undo a row permutation a converter applied. On the device of `self`.
    pub fn permute_rows(&self, perm: &[usize]) -> Result<QuantMatrix> {
        if perm.len() != self.rows || perm.iter().any(|&p| p >= self.rows) {
            return Err(Error::shape("QuantMatrix::permute_rows", format!("a permutation of {} rows is needed, got {} indices", self.rows, perm.len())));
        }
        let rb = self.data.len().checked_div(self.rows).unwrap_or(0);
        let mut out = Vec::with_capacity(self.data.len());
        for &p in perm {
            out.extend_from_slice(&self.data[p * rb..(p + 1) * rb]);
        }
        QuantMatrix::new(self.ty, self.rows, self.cols, out)?.to_device(self.device())
    }

    /// The matrix dequantized to an f32 CPU tensor `[rows, cols]` (bit-exact with ggml).
    pub fn dequantize(&self) -> Result<Tensor> {
        Tensor::from_vec(dequantize_rows(self.ty, &self.data, self.rows, self.cols)?, &[self.rows, self.cols])
    }

    /// `x Wᵀ` for `x` of shape `[..., cols]` (f32, f16 or bf16, on the matrix's
    /// [`device`](Self::device)), in x's dtype. On CUDA, up to 8 rows of x run the quantized
    /// GEMV (f32 sums of the exact weights); more rows dequantize W to x's dtype and use cuBLAS.
    /// The weight is a constant: it has no gradient. Where x requires grad, the gradient
    /// reaching x is `g W` with W dequantized in the backward (so adapters or inputs before a
    /// quantized layer can still be trained).
    pub fn matmul_t(&self, x: &Tensor) -> Result<Tensor> {
        let op = "quant_linear";
        if x.device() != self.device() {
            return Err(Error::device(op, format!("the quantized weight is on {} but the input is on {}; move the layer (QuantMatrix::to_device)", self.device(), x.device())));
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
        let mut shape = x.shape().to_vec();
        if let Some(last) = shape.last_mut() {
            *last = self.rows;
        }
        let y = match &self.gpu {
            Some(w) => self.cuda_matmul_t(w, x, m, k)?.reshape_to(&shape)?,
            None => {
                let xs = x.to_dtype(DType::F32)?.contiguous()?.to_vec::<f32>()?;
                let y = quant_matmul(self.ty, &self.data, self.rows, k, &xs, m)?;
                Tensor::from_vec(y, &shape)?.to_dtype(dt)?
            }
        };
        if is_grad_enabled() && x.requires_grad() {
            let w = self.clone();
            crate::autograd::record(op, &[x], std::slice::from_ref(&y), move |_, g| {
                let gy = &g[0];
                Ok(vec![Some(gy.matmul(&w.dequantize()?.to_dtype(gy.dtype())?.to_device(gy.device())?)?)])
            });
        }
        Ok(y)
    }

    /// The CUDA product `[m, k] x Wᵀ` (W's blocks in `w`, on x's device), as `[m, rows]`.
    #[cfg(feature = "cuda")]
    fn cuda_matmul_t(&self, w: &Tensor, x: &Tensor, m: usize, k: usize) -> Result<Tensor> {
        use crate::backend::cuda::kern::elem_ptr;
        use crate::backend::cuda::ops::empty;
        use crate::backend::cuda::quant::{dequantize_raw, quant_gemv_raw, QuantGemv, MAX_ROWS};
        let op = "quant_linear";
        let Device::Cuda(ord) = x.device() else {
            return Err(Error::device(op, "expected a CUDA input"));
        };
        // no autograd record from the pieces below: matmul_t records its own
        let _g = crate::autograd::no_grad();
        let (dt, n) = (x.dtype(), self.rows);
        let mut xc = x.contiguous()?;
        let (mut xp, dev) = elem_ptr(op, &xc)?;
        if !xp.is_multiple_of(16) {
            // the GEMV reads x with 16-byte loads: a view at an odd offset is copied
            xc = xc.copy()?;
            xp = elem_ptr(op, &xc)?.0;
        }
        let (wp, _) = elem_ptr(op, w)?;
        if m <= MAX_ROWS {
            let y = empty(op, ord, dt, &[m, n])?;
            let (yp, _) = elem_ptr(op, &y)?;
            let g = QuantGemv { ty: self.ty, dtype: dt, m, n, k };
            // SAFETY: w holds this matrix's blocks (checked at construction, copied whole), x is
            // a live contiguous [m, k] tensor of dt at a 16-byte-aligned address, y a new [m, n]
            // tensor of dt (its own allocation).
            unsafe { quant_gemv_raw(&dev, &g, wp, xp, k, yp, n)? };
            return Ok(y);
        }
        let wd = empty(op, ord, dt, &[n, k])?;
        let (dp, _) = elem_ptr(op, &wd)?;
        // SAFETY: w holds the n x k matrix's blocks, wd is a new n x k tensor of dt.
        unsafe { dequantize_raw(&dev, self.ty, dt, n, k, wp, dp)? };
        xc.reshape(&[m as i64, k as i64])?.matmul(&wd.t()?)
    }

    #[cfg(not(feature = "cuda"))]
    fn cuda_matmul_t(&self, _w: &Tensor, _x: &Tensor, _m: usize, _k: usize) -> Result<Tensor> {
        Err(crate::backend::cuda::unavailable("quant_linear"))
    }
}
