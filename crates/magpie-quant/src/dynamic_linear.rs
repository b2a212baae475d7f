//! `DynamicQuantizedLinear` (`torch.ao.nn.quantized.dynamic.Linear`): an int8 weight, a float
//! bias, and a forward that quantizes its input on every call, as PyTorch's x86 (fbgemm) kernel:
//! the input's min and max give a per-tensor quint8 scale and zero point (7-bit with
//! `reduce_range`, PyTorch's default on x86), an int8 GEMM accumulates in i32, and the result is
//! corrected for the zero points, scaled back to float and the bias added.

use crate::data::with_slice;
use crate::gemm::{gemm_u8i8, Int8Kernel, PackedB};
use crate::observer::{MinMaxObserver, ObserverOptions, PerChannelMinMaxObserver};
use crate::qparams::choose_quantization_params;
use crate::qtype::{QDType, QScheme};
use crate::rounding::quantize_vec8;
use crate::simd::fma_kernel;
use crate::tensor::{quantize_per_channel, quantize_per_tensor, QuantizedTensor, Quantizer};
use magpie_core::{DType, Error, Result, Tensor};
use magpie_nn::Module;

/// A linear layer with a qint8 weight (per tensor or per output channel) and dynamically
/// quantized input. Inference only: it has no parameters and records no gradient.
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_nn::{Linear, Module};
/// use magpie_quant::DynamicQuantizedLinear;
/// let lin = Linear::new(8, 3, true)?;
/// let q = DynamicQuantizedLinear::from_float(&lin, false)?;
/// let x = Tensor::randn(&[2, 8])?;
/// let (y, y_float) = (q.forward(&x)?, lin.forward(&x)?);
/// assert_eq!(y.shape(), &[2, 3]);
/// let err = y.sub(&y_float)?.abs()?.max()?.item()?.to_f64();
/// assert!(err < 0.1, "int8 error {err}");
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub struct DynamicQuantizedLinear {
    weight: QuantizedTensor,
    bias: Option<Vec<f32>>,
    packed: PackedB,
    w_scales: Vec<f32>,
    w_zero_points: Vec<i32>,
    /// `Σ_k w[j, k] - w_zp[j] · K` per output (fbgemm's column offsets).
    col_offsets: Vec<i32>,
    pub in_features: usize,
    pub out_features: usize,
    /// Quantize the input to 7 bits (0..=127), as PyTorch does on x86 (its default: true).
    pub reduce_range: bool,
    kernel: Int8Kernel,
}

impl DynamicQuantizedLinear {
    /// The layer PyTorch's `quantize_dynamic` makes from a float `Linear`: its weight observed by
    /// `MinMaxObserver(qint8, per_tensor_symmetric)` or, with `per_channel`,
    /// `PerChannelMinMaxObserver(ch_axis=0, qint8, per_channel_symmetric)`, then quantized.
    pub fn from_float(linear: &magpie_nn::Linear, per_channel: bool) -> Result<DynamicQuantizedLinear> {
        Self::from_weights(&linear.weight, linear.bias.as_ref(), per_channel)
    }

    /// [`from_float`](Self::from_float) from a `[out, in]` weight and optional `[out]` bias.
    pub fn from_weights(weight: &Tensor, bias: Option<&Tensor>, per_channel: bool) -> Result<DynamicQuantizedLinear> {
        const OP: &str = "DynamicQuantizedLinear";
        if weight.ndim() != 2 {
            return Err(Error::shape(OP, format!("weight must be 2-D [out, in], got {:?}", weight.shape())));
        }
        let w = weight.detach().to_dtype(DType::F32)?;
        let qweight = if per_channel {
            let opts = ObserverOptions { dtype: QDType::QInt8, qscheme: Some(QScheme::PerChannelSymmetric), ..Default::default() };
            let mut obs = PerChannelMinMaxObserver::new(0, opts)?;
            obs.forward(&w)?;
            let (s, z) = obs.qparams()?;
            let n = s.len();
            let s = Tensor::from_vec(s.into_iter().map(f64::from).collect::<Vec<f64>>(), &[n])?;
            quantize_per_channel(&w, &s, &Tensor::from_vec(z, &[n])?, 0, QDType::QInt8)?
        } else {
            let opts = ObserverOptions { dtype: QDType::QInt8, qscheme: Some(QScheme::PerTensorSymmetric), ..Default::default() };
            let mut obs = MinMaxObserver::new(opts)?;
            obs.forward(&w)?;
            let (s, z) = obs.qparams()?;
            quantize_per_tensor(&w, s as f64, z, QDType::QInt8)?
        };
        let bias = match bias {
            Some(b) => Some(b.detach().to_dtype(DType::F32)?.contiguous()?.to_vec::<f32>()?),
            None => None,
        };
        Self::new(qweight, bias)
    }

    /// A layer from a quantized qint8 weight `[out, in]` (per tensor, or per channel along axis 0)
    /// and an optional float bias (PyTorch's `set_weight_bias`).
    pub fn new(weight: QuantizedTensor, bias: Option<Vec<f32>>) -> Result<DynamicQuantizedLinear> {
        const OP: &str = "DynamicQuantizedLinear";
        if weight.dtype() != QDType::QInt8 {
            return Err(Error::unsupported(OP, format!("Unsupported dtype on dynamic quantized linear: {} (the weight must be torch.qint8)", weight.dtype())));
        }
        let [out_features, in_features] = *weight.shape() else {
            return Err(Error::shape(OP, format!("weight must be 2-D [out, in], got {:?}", weight.shape())));
        };
        if let Some(b) = &bias {
            if b.len() != out_features {
                return Err(Error::shape(OP, format!("bias must have shape [{out_features}], got [{}]", b.len())));
            }
        }
        let (w_scales, w_zero_points): (Vec<f32>, Vec<i32>) = match weight.quantizer() {
            Quantizer::PerTensor { scale, zero_point } => (vec![*scale as f32; out_features], vec![*zero_point as i32; out_features]),
            Quantizer::PerChannel { scales, zero_points, axis } => {
                if *axis != 0 {
                    return Err(Error::unsupported(OP, format!("per-channel weights must be quantized along axis 0, got axis {axis}")));
                }
                (scales.iter().map(|&s| s as f32).collect(), zero_points.iter().map(|&z| z as i32).collect())
            }
        };
        let w8: Vec<i8> = weight.int_repr()?.to_vec::<i8>()?;
        let packed = PackedB::pack(&w8, out_features, in_features)?;
        let col_offsets = (0..out_features).map(|j| packed.row_sums()[j].wrapping_sub(w_zero_points[j].wrapping_mul(in_features as i32))).collect();
        Ok(DynamicQuantizedLinear { weight, bias, packed, w_scales, w_zero_points, col_offsets, in_features, out_features, reduce_range: true, kernel: Int8Kernel::best() })
    }

    /// The quantized weight (`weight()` in PyTorch).
    pub fn weight(&self) -> &QuantizedTensor {
        &self.weight
    }
    /// The float bias.
    pub fn bias(&self) -> Option<&[f32]> {
        self.bias.as_deref()
    }
    /// The GEMM kernel this layer runs.
    pub fn kernel(&self) -> Int8Kernel {
        self.kernel
    }
    /// Chooses the GEMM kernel (an error if this CPU lacks it); all give identical results.
    pub fn set_kernel(&mut self, kernel: Int8Kernel) -> Result<()> {
        if !Int8Kernel::available().contains(&kernel) {
            return Err(Error::unsupported("DynamicQuantizedLinear", format!("this CPU cannot run the {kernel:?} kernel")));
        }
        self.kernel = kernel;
        Ok(())
    }

    /// The forward on `rows x in_features` floats, into `rows x out_features` floats.
    fn forward_rows(&self, x: &[f32], rows: usize) -> Result<Vec<f32>> {
        let (k, n) = (self.in_features, self.out_features);
        if rows == 0 {
            return Ok(Vec::new());
        }
        let (lo, hi) = find_min_max(x);
        let qp = choose_quantization_params(lo, hi, 0, 255, false, false, self.reduce_range)?;
        let kp = self.packed.k_padded();
        let mut a = vec![0u8; rows * kp];
        let mut row_sums = vec![0i32; rows];
        quantize_rows(x, k, kp, 1.0f32 / qp.scale, qp.zero_point, &mut a, &mut row_sums);
        let mut acc = vec![0i32; rows * n];
        gemm_u8i8(&a, rows, kp, &self.packed, &mut acc, self.reduce_range, self.kernel)?;
        let mut y = vec![0f32; rows * n];
        let zeros;
        let bias = match &self.bias {
            Some(b) => b.as_slice(),
            None => {
                zeros = vec![0f32; n];
                zeros.as_slice()
            }
        };
        let cols = Columns { col_offsets: &self.col_offsets, w_zero_points: &self.w_zero_points, w_scales: &self.w_scales, bias };
        requantize_for_float(&acc, &row_sums, qp.zero_point, qp.scale, &cols, &mut y);
        Ok(y)
    }
}

/// Per-output-column constants of the requantization.
struct Columns<'a> {
    col_offsets: &'a [i32],
    w_zero_points: &'a [i32],
    w_scales: &'a [f32],
    bias: &'a [f32],
}

fma_kernel! {
    /// fbgemm's `FindMinMax` (min and max of a non-empty slice; `(0, 0)` for an empty one).
    fn find_min_max(x: &[f32]) -> (f32, f32) {
        let Some(&x0) = x.first() else { return (0.0, 0.0) };
        let (mut lo, mut hi) = (x0, x0);
        for &v in x {
            lo = if v < lo { v } else { lo };
            hi = if v > hi { v } else { hi };
        }
        (lo, hi)
    }
}

fma_kernel! {
    /// Quantizes each row of `x` (`k` floats) to quint8 into `a` (rows of `kp` bytes, zero padded)
    /// as fbgemm's vector path does, and sums each row's quantized values.
    fn quantize_rows(x: &[f32], k: usize, kp: usize, inv: f32, zp: i32, a: &mut [u8], row_sums: &mut [i32]) {
        for ((src, dst), sum) in x.chunks_exact(k.max(1)).zip(a.chunks_exact_mut(kp.max(1))).zip(row_sums.iter_mut()) {
            let mut s = 0i32;
            for (d, &v) in dst.iter_mut().zip(src) {
                let q = quantize_vec8(v, inv, zp, 0, 255);
                *d = q as u8;
                s += q;
            }
            *sum = s;
        }
    }
}

fma_kernel! {
    /// fbgemm's `ReQuantizeForFloat`: `y = fma(float(acc - a_zp * col_offset - row_sum * w_zp),
    /// a_scale * w_scale, bias)` (one rounding, as its AVX2 path; bit-identical to PyTorch's outputs).
    fn requantize_for_float(acc: &[i32], row_sums: &[i32], a_zp: i32, a_scale: f32, c: &Columns, y: &mut [f32]) {
        let n = c.bias.len();
        let mult: Vec<f32> = c.w_scales.iter().map(|&s| a_scale * s).collect();
        for ((acc, y), &rs) in acc.chunks_exact(n.max(1)).zip(y.chunks_exact_mut(n.max(1))).zip(row_sums) {
            for j in 0..n {
                let raw = acc[j].wrapping_sub(a_zp.wrapping_mul(c.col_offsets[j])).wrapping_sub(rs.wrapping_mul(c.w_zero_points[j]));
                y[j] = (raw as f32).mul_add(mult[j], c.bias[j]);
            }
        }
    }
}

impl Module for DynamicQuantizedLinear {
    fn type_name(&self) -> &'static str {
        "DynamicQuantizedLinear"
    }
    /// `y = x Wᵀ + b` on float32 `x` of shape `[..., in_features]` (at least 2-D, as PyTorch's kernel requires).
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        const OP: &str = "quantized::linear_dynamic";
        if x.dtype() != DType::F32 {
            return Err(Error::dtype(OP, format!("expected scalar type Float but found {:?}", x.dtype())));
        }
        if x.ndim() < 2 {
            return Err(Error::shape(OP, "The dimension of input tensor should be larger than or equal to 2"));
        }
        let k = x.shape()[x.ndim() - 1];
        if k != self.in_features {
            return Err(Error::shape(OP, format!("The number of rows in the packB should be equal to K: {k}")));
        }
        let rows: usize = x.shape()[..x.ndim() - 1].iter().product();
        let y = with_slice::<f32, _>(OP, x, DType::F32, |xs| self.forward_rows(xs, rows))??;
        let mut shape = x.shape().to_vec();
        let last = shape.len() - 1;
        shape[last] = self.out_features;
        Tensor::from_vec(y, &shape)
    }
}
