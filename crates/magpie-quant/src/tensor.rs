//! `QuantizedTensor`: integer values with the scale(s) and zero point(s) that map them to reals
//! (`torch.quantize_per_tensor`, `torch.quantize_per_channel`, `dequantize`, `int_repr`, `q_scale`, ...).

use crate::data::with_slice;
use crate::qtype::{QDType, QScheme};
use crate::rounding::{inv_scale, quantize_scalar, quantize_vec8};
use magpie_core::{DType, Error, Result, Tensor};

/// How the integers of a [`QuantizedTensor`] map to reals: `real = (q - zero_point) * scale`.
#[derive(Debug, Clone, PartialEq)]
pub enum Quantizer {
    /// One scale and zero point for the whole tensor.
    PerTensor { scale: f64, zero_point: i64 },
    /// One scale and zero point per index along `axis`.
    PerChannel { scales: Vec<f64>, zero_points: Vec<i64>, axis: usize },
}

/// A quantized tensor (what `torch.quantize_per_tensor` returns): its integer values (kept as a
/// dense `u8` / `i8` / `i32` tensor, `int_repr()`), its quantized dtype and its [`Quantizer`].
/// CPU only, inference only (no autograd through it, as in PyTorch).
#[derive(Debug, Clone)]
pub struct QuantizedTensor {
    values: Tensor,
    dtype: QDType,
    quantizer: Quantizer,
}

fn check_zero_point(op: &str, zp: i64, dtype: QDType) -> Result<()> {
    if zp > dtype.qmax() {
        return Err(Error::value(op, format!("{op} zero_point {zp} is above upper bound.")));
    }
    if zp < dtype.qmin() {
        return Err(Error::value(op, format!("{op} zero_point {zp} is below lower bound.")));
    }
    Ok(())
}

fn check_float_input(x: &Tensor) -> Result<()> {
    if x.dtype() != DType::F32 {
        let name = match x.dtype() {
            DType::F64 => "Double".to_string(),
            DType::F16 => "Half".to_string(),
            DType::BF16 => "BFloat16".to_string(),
            DType::I32 => "Int".to_string(),
            DType::I64 => "Long".to_string(),
            other => format!("{other:?}"),
        };
        return Err(Error::dtype("quantize", format!("Quantize only works on Float Tensor, got {name}")));
    }
    Ok(())
}

/// Integers in `dtype`'s storage type as a tensor of `shape`.
fn int_tensor(q: Vec<i32>, dtype: QDType, shape: &[usize]) -> Result<Tensor> {
    match dtype {
        QDType::QUInt8 => Tensor::from_vec(q.into_iter().map(|v| v as u8).collect::<Vec<u8>>(), shape),
        QDType::QInt8 => Tensor::from_vec(q.into_iter().map(|v| v as i8).collect::<Vec<i8>>(), shape),
        QDType::QInt32 => Tensor::from_vec(q, shape),
    }
}

/// `torch.quantize_per_tensor(x, scale, zero_point, dtype)`: `q = clamp(round(x / scale) +
/// zero_point)` with PyTorch's x86 arithmetic (`x * (1/scale)` in f32, ties to even, the zero
/// point added after rounding). `x` must be float32; the zero point must fit `dtype`.
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_quant::{quantize_per_tensor, QDType};
/// let q = quantize_per_tensor(&Tensor::from_vec(vec![0.5f32, 1.5, 2.5, -300.0], &[4])?, 1.0, 1, QDType::QInt8)?;
/// assert_eq!(q.int_repr()?.to_vec::<i8>()?, vec![1, 3, 3, -128]);
/// assert_eq!((q.q_scale()?, q.q_zero_point()?), (1.0, 1));
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn quantize_per_tensor(x: &Tensor, scale: f64, zero_point: i64, dtype: QDType) -> Result<QuantizedTensor> {
    check_float_input(x)?;
    check_zero_point("quantize_tensor_per_tensor_affine", zero_point, dtype)?;
    let inv = inv_scale(scale);
    let (zp, lo, hi) = (zero_point as i32, dtype.qmin() as i32, dtype.qmax() as i32);
    let q: Vec<i32> = with_slice::<f32, _>("quantize_per_tensor", x, DType::F32, |xs| match dtype {
        QDType::QInt32 => xs.iter().map(|&v| quantize_scalar(v, inv, zp, lo, hi)).collect(),
        _ => xs.iter().map(|&v| quantize_vec8(v, inv, zp, lo, hi)).collect(),
    })?;
    Ok(QuantizedTensor { values: int_tensor(q, dtype, x.shape())?, dtype, quantizer: Quantizer::PerTensor { scale, zero_point } })
}

/// `(outer, channels, inner)` sizes around `axis` of a row-major `shape`.
fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product())
}

/// `torch.quantize_per_channel(x, scales, zero_points, axis, dtype)`: one scale and zero point per
/// index along `axis` (`scales` of any float dtype, kept as f64; `zero_points` of an integer
/// dtype). As in PyTorch, `axis` must be in `[0, ndim)` (no negative axes).
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_quant::{quantize_per_channel, QDType};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 1.0, 2.0], &[2, 2])?;
/// let q = quantize_per_channel(&x, &Tensor::from_vec(vec![0.5f64, 1.0], &[2])?, &Tensor::from_vec(vec![0i64, 10], &[2])?, 0, QDType::QUInt8)?;
/// assert_eq!(q.int_repr()?.to_vec::<u8>()?, vec![2, 4, 11, 12]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn quantize_per_channel(x: &Tensor, scales: &Tensor, zero_points: &Tensor, axis: i64, dtype: QDType) -> Result<QuantizedTensor> {
    const OP: &str = "quantize_tensor_per_channel_affine";
    check_float_input(x)?;
    let nd = x.ndim();
    if axis < 0 || axis as usize >= nd {
        return Err(Error::index("quantize_per_channel", format!("Channel axis out of range in per channel affine quantization. Got: {axis}Expected: [0, {nd})")));
    }
    let axis = axis as usize;
    if !matches!(zero_points.dtype(), DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8) {
        return Err(Error::unsupported("quantize_per_channel", "float zero points (per_channel_affine_float_qparams) are not supported; pass integer zero points"));
    }
    let scales: Vec<f64> = scales.to_dtype(DType::F64)?.contiguous()?.to_vec::<f64>()?;
    let zero_points: Vec<i64> = zero_points.to_dtype(DType::I64)?.contiguous()?.to_vec::<i64>()?;
    if scales.len() != zero_points.len() {
        return Err(Error::value("quantize_per_channel", "number of elements in scales and zero_points must match"));
    }
    let (outer, c, inner) = split_at_axis(x.shape(), axis);
    if scales.len() != c {
        return Err(Error::value("quantize_per_channel", format!("length of scales must equal to channel, expected {c} got, {}", scales.len())));
    }
    for &zp in &zero_points {
        check_zero_point(OP, zp, dtype)?;
    }
    let (lo, hi) = (dtype.qmin() as i32, dtype.qmax() as i32);
    let q: Vec<i32> = with_slice::<f32, _>("quantize_per_channel", x, DType::F32, |xs| {
        let mut q = Vec::with_capacity(xs.len());
        for o in 0..outer {
            for ch in 0..c {
                let (inv, zp) = (inv_scale(scales[ch]), zero_points[ch] as i32);
                let base = (o * c + ch) * inner;
                q.extend(xs[base..base + inner].iter().map(|&v| quantize_scalar(v, inv, zp, lo, hi)));
            }
        }
        q
    })?;
    Ok(QuantizedTensor { values: int_tensor(q, dtype, x.shape())?, dtype, quantizer: Quantizer::PerChannel { scales, zero_points, axis } })
}

impl QuantizedTensor {
    /// A quantized tensor from integer values already in `dtype`'s storage type (what
    /// `torch._make_per_tensor_quantized_tensor` / `_make_per_channel_quantized_tensor` do).
    pub fn from_int_repr(values: &Tensor, dtype: QDType, quantizer: Quantizer) -> Result<QuantizedTensor> {
        const OP: &str = "QuantizedTensor::from_int_repr";
        if values.dtype() != dtype.int_dtype() {
            return Err(Error::dtype(OP, format!("{dtype} values are stored as {:?}, got {:?}", dtype.int_dtype(), values.dtype())));
        }
        match &quantizer {
            Quantizer::PerTensor { zero_point, .. } => check_zero_point(OP, *zero_point, dtype)?,
            Quantizer::PerChannel { scales, zero_points, axis } => {
                if *axis >= values.ndim() || values.shape()[*axis] != scales.len() || scales.len() != zero_points.len() {
                    return Err(Error::shape(OP, format!("{} scales and {} zero points do not match axis {axis} of shape {:?}", scales.len(), zero_points.len(), values.shape())));
                }
                for &zp in zero_points {
                    check_zero_point(OP, zp, dtype)?;
                }
            }
        }
        Ok(QuantizedTensor { values: values.contiguous()?, dtype, quantizer })
    }

    /// The quantized dtype (`torch.quint8`, ...).
    pub fn dtype(&self) -> QDType {
        self.dtype
    }
    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.values.shape()
    }
    /// The scale(s) and zero point(s).
    pub fn quantizer(&self) -> &Quantizer {
        &self.quantizer
    }
    /// `qscheme()`: `per_tensor_affine` or `per_channel_affine` (a quantized tensor is affine
    /// whatever scheme its observer used, as in PyTorch).
    pub fn qscheme(&self) -> QScheme {
        match self.quantizer {
            Quantizer::PerTensor { .. } => QScheme::PerTensorAffine,
            Quantizer::PerChannel { .. } => QScheme::PerChannelAffine,
        }
    }
    /// `int_repr()`: the stored integers as a `uint8` / `int8` / `int32` tensor.
    pub fn int_repr(&self) -> Result<Tensor> {
        Ok(self.values.clone())
    }
    /// The stored integers widened to i32, row-major.
    pub fn int_values(&self) -> Result<Vec<i32>> {
        match self.dtype {
            QDType::QUInt8 => Ok(self.values.to_vec::<u8>()?.into_iter().map(i32::from).collect()),
            QDType::QInt8 => Ok(self.values.to_vec::<i8>()?.into_iter().map(i32::from).collect()),
            QDType::QInt32 => self.values.to_vec::<i32>(),
        }
    }
    /// `q_scale()`: the scale of a per-tensor quantized tensor.
    pub fn q_scale(&self) -> Result<f64> {
        match self.quantizer {
            Quantizer::PerTensor { scale, .. } => Ok(scale),
            _ => Err(Error::value("q_scale", "Expected quantizer->qscheme() == kPerTensorAffine to be true, but got false.")),
        }
    }
    /// `q_zero_point()`: the zero point of a per-tensor quantized tensor.
    pub fn q_zero_point(&self) -> Result<i64> {
        match self.quantizer {
            Quantizer::PerTensor { zero_point, .. } => Ok(zero_point),
            _ => Err(Error::value("q_zero_point", "Expected quantizer->qscheme() == kPerTensorAffine to be true, but got false.")),
        }
    }
    fn per_channel(&self, op: &str) -> Result<(&[f64], &[i64], usize)> {
        match &self.quantizer {
            Quantizer::PerChannel { scales, zero_points, axis } => Ok((scales, zero_points, *axis)),
            _ => Err(Error::value(op, "Expected quantizer->qscheme() == kPerChannelAffine || quantizer->qscheme() == kPerChannelAffineFloatQParams to be true, but got false.")),
        }
    }
    /// `q_per_channel_scales()`: a float64 tensor, one scale per channel.
    pub fn q_per_channel_scales(&self) -> Result<Tensor> {
        let (s, _, _) = self.per_channel("q_per_channel_scales")?;
        Tensor::from_vec(s.to_vec(), &[s.len()])
    }
    /// `q_per_channel_zero_points()`: an int64 tensor, one zero point per channel.
    pub fn q_per_channel_zero_points(&self) -> Result<Tensor> {
        let (_, z, _) = self.per_channel("q_per_channel_zero_points")?;
        Tensor::from_vec(z.to_vec(), &[z.len()])
    }
    /// `q_per_channel_axis()`.
    pub fn q_per_channel_axis(&self) -> Result<usize> {
        Ok(self.per_channel("q_per_channel_axis")?.2)
    }

    /// `dequantize()`: a float32 tensor of `(q - zero_point) * scale`, with PyTorch's rounding
    /// (per tensor: in f32 with the scale rounded to f32; per channel: the product in f64).
    pub fn dequantize(&self) -> Result<Tensor> {
        let q = self.int_values()?;
        let out: Vec<f32> = match &self.quantizer {
            Quantizer::PerTensor { scale, zero_point } => {
                let (s, zp) = (*scale as f32, *zero_point as i32);
                q.iter().map(|&v| s * v.wrapping_sub(zp) as f32).collect()
            }
            Quantizer::PerChannel { scales, zero_points, axis } => {
                let (outer, c, inner) = split_at_axis(self.values.shape(), *axis);
                let mut out = Vec::with_capacity(q.len());
                for o in 0..outer {
                    for ch in 0..c {
                        let (s, zp) = (scales[ch], zero_points[ch] as f32);
                        let base = (o * c + ch) * inner;
                        out.extend(q[base..base + inner].iter().map(|&v| ((v as f32 - zp) as f64 * s) as f32));
                    }
                }
                out
            }
        };
        Tensor::from_vec(out, self.values.shape())
    }
}
