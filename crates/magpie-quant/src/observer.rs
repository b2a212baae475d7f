//! Observers (`torch.ao.quantization.MinMaxObserver`, `PerChannelMinMaxObserver`): they record
//! the running min and max of what passes through them and turn those into a scale and zero point
//! with PyTorch's `_calculate_qparams` (f32 arithmetic, its `eps` floor and zero-point rules).

use crate::data::with_slice;
use crate::qtype::{QDType, QScheme};
use magpie_core::{DType, Error, Result, Tensor};

/// The constructor arguments both observers share, with PyTorch's defaults (`quint8`, `reduce_range
/// = false`, no custom range, `eps = torch.finfo(torch.float32).eps`); the scheme defaults to the
/// observer's own (`per_tensor_affine` / `per_channel_affine`) when `None`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObserverOptions {
    pub dtype: QDType,
    pub qscheme: Option<QScheme>,
    pub reduce_range: bool,
    pub quant_min: Option<i64>,
    pub quant_max: Option<i64>,
    pub eps: f32,
}

impl Default for ObserverOptions {
    fn default() -> Self {
        ObserverOptions { dtype: QDType::QUInt8, qscheme: None, reduce_range: false, quant_min: None, quant_max: None, eps: f32::EPSILON }
    }
}

/// What both observers compute from (min, max): the checked options and the integer range.
#[derive(Debug, Clone, Copy)]
struct QParamRule {
    dtype: QDType,
    qscheme: QScheme,
    quant_min: i64,
    quant_max: i64,
    customized: bool,
    eps: f32,
}

impl QParamRule {
    fn new(op: &str, o: &ObserverOptions, qscheme: QScheme) -> Result<QParamRule> {
        let customized = o.quant_min.is_some() && o.quant_max.is_some();
        let (quant_min, quant_max) = match (o.quant_min, o.quant_max) {
            (Some(lo), Some(hi)) => {
                if !(lo <= 0 && 0 <= hi) {
                    return Err(Error::value(op, "Used-specified quantization range must include 0."));
                }
                if lo >= hi {
                    return Err(Error::value(op, "qmin must be strictly less than qmax for user-specified quantization range."));
                }
                let len = hi - lo + 1;
                match o.dtype {
                    QDType::QInt8 if !(0 < len && len <= 256) => {
                        return Err(Error::value(op, "quantization range should be positive and not exceed the maximum bit range (=256)."));
                    }
                    QDType::QInt32 if !(0 < len && len <= 1 << 32) => {
                        return Err(Error::value(op, "quantization range should be positive and not exceed the maximum bit range (=4294967296)."));
                    }
                    _ => {}
                }
                // floor division, as Python's `//`
                if o.reduce_range { (lo.div_euclid(2), hi.div_euclid(2)) } else { (lo, hi) }
            }
            _ => match (o.dtype, o.reduce_range) {
                (QDType::QInt8, true) => (-64, 63),
                (QDType::QInt8, false) => (-128, 127),
                (QDType::QUInt8, true) => (0, 127),
                (QDType::QUInt8, false) => (0, 255),
                (QDType::QInt32, _) => (i32::MIN as i64, i32::MAX as i64),
            },
        };
        Ok(QParamRule { dtype: o.dtype, qscheme, quant_min, quant_max, customized, eps: o.eps })
    }

    /// `_calculate_qparams(min_val, max_val)` for one channel (or the whole tensor).
    fn qparams(&self, min_val: f32, max_val: f32) -> (f32, i64) {
        let (qmin, qmax) = (self.quant_min, self.quant_max);
        let min_neg = nan_min(min_val, 0.0);
        let max_pos = nan_max(max_val, 0.0);
        if self.qscheme.is_symmetric() {
            let m = nan_max(-min_neg, max_pos);
            let scale = nan_max(m / ((qmax - qmin) as f64 / 2.0) as f32, self.eps);
            let zp = match self.dtype {
                QDType::QUInt8 if self.customized => (qmin + qmax).div_euclid(2),
                QDType::QUInt8 => 128,
                _ => 0,
            };
            (scale, zp)
        } else {
            let scale = nan_max((max_pos - min_neg) / (qmax - qmin) as f32, self.eps);
            // torch.round(...).to(torch.int) and int32 tensor arithmetic
            let r = f32_to_i32((min_neg / scale).round_ties_even());
            let zp = (qmin as i32).wrapping_sub(r).clamp(qmin as i32, qmax as i32);
            (scale, zp as i64)
        }
    }
}

/// A float -> int32 conversion as x86 does it (NaN and overflow give `i32::MIN`).
fn f32_to_i32(v: f32) -> i32 {
    // NaN is in no range
    if !(-2_147_483_648.0..2_147_483_648.0).contains(&v) {
        i32::MIN
    } else {
        v as i32
    }
}

/// `torch.min` of two values: NaN wins.
fn nan_min(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        a.min(b)
    }
}

/// `torch.max` of two values: NaN wins.
fn nan_max(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        a.max(b)
    }
}

/// `torch.aminmax` of a slice (NaN propagates).
fn aminmax(xs: impl Iterator<Item = f32>) -> (f32, f32) {
    xs.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| (nan_min(lo, v), nan_max(hi, v)))
}

fn float_input(op: &str, x: &Tensor) -> Result<Tensor> {
    match x.dtype() {
        DType::F32 => Ok(x.detach()),
        DType::F64 | DType::F16 | DType::BF16 => x.detach().to_dtype(DType::F32),
        other => Err(Error::dtype(op, format!("observers take floating-point tensors, got {other:?}"))),
    }
}

fn scalar_outputs(scales: Vec<f32>, zps: Vec<i64>) -> Result<(Tensor, Tensor)> {
    let n = scales.len();
    Ok((Tensor::from_vec(scales, &[n])?, Tensor::from_vec(zps, &[n])?))
}

/// `MinMaxObserver`: the running min and max of every tensor it sees, turned into one scale and
/// zero point (`per_tensor_affine` or `per_tensor_symmetric`).
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_quant::{MinMaxObserver, ObserverOptions, QDType, QScheme};
/// let mut obs = MinMaxObserver::new(ObserverOptions { dtype: QDType::QInt8, qscheme: Some(QScheme::PerTensorSymmetric), ..Default::default() })?;
/// obs.forward(&Tensor::from_vec(vec![-2.55f32, 1.0], &[2])?)?;
/// let (scale, zero_point) = obs.calculate_qparams()?;
/// assert_eq!(scale.to_vec::<f32>()?, vec![2.55f32 / 127.5]);
/// assert_eq!(zero_point.to_vec::<i64>()?, vec![0]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MinMaxObserver {
    rule: QParamRule,
    /// The running minimum (`+inf` before any input).
    pub min_val: f32,
    /// The running maximum (`-inf` before any input).
    pub max_val: f32,
}

impl MinMaxObserver {
    /// `MinMaxObserver(dtype, qscheme, reduce_range, quant_min, quant_max, eps)`, with PyTorch's checks.
    pub fn new(options: ObserverOptions) -> Result<MinMaxObserver> {
        const OP: &str = "MinMaxObserver";
        let qscheme = options.qscheme.unwrap_or(QScheme::PerTensorAffine);
        if qscheme.is_per_channel() {
            return Err(Error::unsupported(OP, "MinMaxObserver's qscheme only support torch.per_tensor_symmetric and torch.per_tensor_affine."));
        }
        let rule = QParamRule::new(OP, &options, qscheme)?;
        if qscheme == QScheme::PerTensorSymmetric && options.reduce_range && options.dtype == QDType::QUInt8 {
            return Err(Error::unsupported(OP, "Cannot reduce range for symmetric quantization for quint8"));
        }
        Ok(MinMaxObserver { rule, min_val: f32::INFINITY, max_val: f32::NEG_INFINITY })
    }
    /// The integer range the qparams target (`quant_min`, `quant_max`), after `reduce_range`.
    pub fn quant_range(&self) -> (i64, i64) {
        (self.rule.quant_min, self.rule.quant_max)
    }
    /// Records `x`'s min and max and returns `x` (empty tensors are ignored).
    pub fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
        if x.numel() == 0 {
            return Ok(x.clone());
        }
        let xf = float_input("MinMaxObserver", x)?;
        let (lo, hi) = with_slice::<f32, _>("MinMaxObserver", &xf, DType::F32, |s| aminmax(s.iter().copied()))?;
        self.min_val = nan_min(lo, self.min_val);
        self.max_val = nan_max(hi, self.max_val);
        Ok(x.clone())
    }
    /// `calculate_qparams()`: `(scale [1] float32, zero_point [1] int64)`; `(1.0, 0)` before any
    /// input, as PyTorch returns (it also warns).
    pub fn calculate_qparams(&self) -> Result<(Tensor, Tensor)> {
        let (s, z) = self.qparams()?;
        scalar_outputs(vec![s], vec![z])
    }
    /// The same scale and zero point as plain numbers.
    pub fn qparams(&self) -> Result<(f32, i64)> {
        if self.min_val == f32::INFINITY && self.max_val == f32::NEG_INFINITY {
            return Ok((1.0, 0));
        }
        if self.min_val > self.max_val {
            return Err(Error::value("MinMaxObserver", format!("min {} should be less than max {}", self.min_val, self.max_val)));
        }
        Ok(self.rule.qparams(self.min_val, self.max_val))
    }
    /// The quantized dtype it targets.
    pub fn dtype(&self) -> QDType {
        self.rule.dtype
    }
    /// Its scheme.
    pub fn qscheme(&self) -> QScheme {
        self.rule.qscheme
    }
}

/// `PerChannelMinMaxObserver`: min and max per index along `ch_axis`, one scale and zero point
/// per channel (`per_channel_affine` or `per_channel_symmetric`).
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_quant::{ObserverOptions, PerChannelMinMaxObserver, QDType, QScheme};
/// let opts = ObserverOptions { dtype: QDType::QInt8, qscheme: Some(QScheme::PerChannelSymmetric), ..Default::default() };
/// let mut obs = PerChannelMinMaxObserver::new(0, opts)?;
/// obs.forward(&Tensor::from_vec(vec![1.0f32, -2.0, 0.5, 0.25], &[2, 2])?)?;
/// let (scales, zero_points) = obs.calculate_qparams()?;
/// assert_eq!(scales.to_vec::<f32>()?, vec![2.0 / 127.5, 0.5 / 127.5]);
/// assert_eq!(zero_points.to_vec::<i64>()?, vec![0, 0]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct PerChannelMinMaxObserver {
    rule: QParamRule,
    /// The channel axis (negative counts from the end, as in PyTorch).
    pub ch_axis: i64,
    /// Running minimum per channel (empty before any input).
    pub min_val: Vec<f32>,
    /// Running maximum per channel.
    pub max_val: Vec<f32>,
}

impl PerChannelMinMaxObserver {
    /// `PerChannelMinMaxObserver(ch_axis, dtype, qscheme, reduce_range, quant_min, quant_max, eps)`.
    pub fn new(ch_axis: i64, options: ObserverOptions) -> Result<PerChannelMinMaxObserver> {
        const OP: &str = "PerChannelMinMaxObserver";
        let qscheme = options.qscheme.unwrap_or(QScheme::PerChannelAffine);
        if !qscheme.is_per_channel() {
            return Err(Error::unsupported(OP, "PerChannelMinMaxObserver's qscheme only support torch.per_channel_symmetric, torch.per_channel_affine and torch.per_channel_affine_float_qparams."));
        }
        let rule = QParamRule::new(OP, &options, qscheme)?;
        if qscheme == QScheme::PerChannelSymmetric && options.reduce_range && options.dtype == QDType::QUInt8 {
            return Err(Error::unsupported(OP, "Cannot reduce range for symmetric quantization for quint8"));
        }
        Ok(PerChannelMinMaxObserver { rule, ch_axis, min_val: Vec::new(), max_val: Vec::new() })
    }
    /// The integer range the qparams target, after `reduce_range`.
    pub fn quant_range(&self) -> (i64, i64) {
        (self.rule.quant_min, self.rule.quant_max)
    }
    /// The channel axis as an index into `x`'s dimensions.
    pub fn axis_for(&self, ndim: usize) -> Result<usize> {
        let a = if self.ch_axis < 0 { self.ch_axis + ndim as i64 } else { self.ch_axis };
        if a < 0 || a >= ndim as i64 {
            return Err(Error::index("PerChannelMinMaxObserver", format!("list index out of range (ch_axis {} for a {ndim}-d input)", self.ch_axis)));
        }
        Ok(a as usize)
    }
    /// Records the per-channel min and max of `x` and returns `x` (empty tensors are ignored).
    pub fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
        const OP: &str = "PerChannelMinMaxObserver";
        if x.numel() == 0 {
            return Ok(x.clone());
        }
        let axis = self.axis_for(x.ndim())?;
        let xf = float_input(OP, x)?;
        let shape = x.shape().to_vec();
        let (outer, c, inner): (usize, usize, usize) = (shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product());
        let (lo, hi) = with_slice::<f32, _>(OP, &xf, DType::F32, |s| {
            let mut lo = vec![f32::INFINITY; c];
            let mut hi = vec![f32::NEG_INFINITY; c];
            for o in 0..outer {
                for ch in 0..c {
                    let base = (o * c + ch) * inner;
                    let (l, h) = aminmax(s[base..base + inner].iter().copied());
                    lo[ch] = nan_min(lo[ch], l);
                    hi[ch] = nan_max(hi[ch], h);
                }
            }
            (lo, hi)
        })?;
        if self.min_val.is_empty() {
            (self.min_val, self.max_val) = (lo, hi);
        } else {
            if self.min_val.len() != c {
                return Err(Error::shape(OP, format!("The size of tensor a ({c}) must match the size of tensor b ({}) at non-singleton dimension 0", self.min_val.len())));
            }
            for ch in 0..c {
                self.min_val[ch] = nan_min(lo[ch], self.min_val[ch]);
                self.max_val[ch] = nan_max(hi[ch], self.max_val[ch]);
            }
        }
        Ok(x.clone())
    }
    /// `calculate_qparams()`: `(scales [C] float32, zero_points [C] int64)`; `([1.0], [0])`
    /// before any input, as PyTorch returns.
    pub fn calculate_qparams(&self) -> Result<(Tensor, Tensor)> {
        let (s, z) = self.qparams()?;
        scalar_outputs(s, z)
    }
    /// The same scales and zero points as plain vectors.
    pub fn qparams(&self) -> Result<(Vec<f32>, Vec<i64>)> {
        if self.min_val.is_empty() {
            return Ok((vec![1.0], vec![0]));
        }
        if let Some(i) = (0..self.min_val.len()).find(|&i| self.min_val[i] > self.max_val[i]) {
            return Err(Error::value("PerChannelMinMaxObserver", format!("min {:?} should be less than max {:?} (channel {i})", self.min_val, self.max_val)));
        }
        Ok(self.min_val.iter().zip(&self.max_val).map(|(&lo, &hi)| self.rule.qparams(lo, hi)).unzip())
    }
    /// The quantized dtype it targets.
    pub fn dtype(&self) -> QDType {
        self.rule.dtype
    }
    /// Its scheme.
    pub fn qscheme(&self) -> QScheme {
        self.rule.qscheme
    }
}
