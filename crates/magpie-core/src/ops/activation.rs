//! Activation functions (`relu`, `gelu`, `silu`, ...) as elementwise ops with gradients.
//! Parametric ones compute in f64 through [`map_float`] / [`map_keep`] and record their
//! backward rule with tensor ops; `glu`, `prelu`, `softsign`, `tanhshrink` are compositions.

use crate::ops::unary::math::one_minus;
use crate::ops::unary::cuda_expr::{self as cx, ilit, lit, Out};
use crate::ops::unary::{map_float, map_keep, record_unary};
use crate::backend::cpu::activations::{self as act, f32k};
use crate::backend::cpu::{self, rows};
use crate::act_backward;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// SELU's fixed `alpha` and `scale`.
const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

// Masks combine with `mul`: bool * bool is a logical and.
//
// Each backward below runs a fused one-pass kernel (`backend/cpu/activations.rs`) when
// `act::fast_backward` holds (f32/f64 CPU, no graph of the gradient), else the tensor-op rule,
// which stays differentiable for double backward.

/// True when `x` is an f32 CPU tensor: the vectorized f32 forward kernels (and GELU's) serve it.
fn f32_cpu(x: &Tensor) -> bool {
    x.dtype() == crate::DType::F32 && x.device() == crate::Device::Cpu
}

/// GELU's input gradient with tensor ops (differentiable again): the reference of the fused
/// derivative and its double-backward path.
pub(crate) fn gelu_grad_composite(x: &Tensor, g: &Tensor, tanh: bool) -> Result<Tensor> {
    const K: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)
    const C: f64 = 0.044_715;
    if !tanh {
        let cdf = x.mul_scalar(FRAC_1_SQRT_2)?.erf()?.add_scalar(1.0)?.mul_scalar(0.5)?;
        let pdf = x.mul(x)?.mul_scalar(-0.5)?.exp()?.mul_scalar(1.0 / (2.0 * PI).sqrt())?;
        return g.mul(&cdf.add(&x.mul(&pdf)?)?);
    }
    let x2 = x.mul(x)?;
    let inner = x.mul(&x2.mul_scalar(C)?.add_scalar(1.0)?)?.mul_scalar(K)?;
    let t = inner.tanh()?;
    let dinner = x2.mul_scalar(3.0 * C)?.add_scalar(1.0)?.mul_scalar(K)?;
    let left = t.add_scalar(1.0)?.mul_scalar(0.5)?;
    let right = x.mul(&one_minus(&t.mul(&t)?)?)?.mul(&dinner)?.mul_scalar(0.5)?;
    g.mul(&left.add(&right)?)
}

/// GELU (`g` None) or its input gradient `g * gelu'(x)` on CUDA with one elementwise kernel
/// (f32 arithmetic, f64 for double); None when the elementwise kernels do not take the dtype.
#[cfg(feature = "cuda")]
fn gelu_cuda(x: &Tensor, g: Option<&Tensor>, tanh: bool) -> Result<Option<Tensor>> {
    use crate::backend::cuda::elementwise::{map, supported, Opnd};
    let d = x.dtype();
    if !d.is_float() || !supported(d) || g.is_some_and(|g| g.dtype() != d || g.device() != x.device()) {
        return Ok(None);
    }
    let shape = match g {
        Some(g) => crate::shape::broadcast_shapes("gelu_backward", x.shape(), g.shape())?,
        None => x.shape().to_vec(),
    };
    let compute = if d == crate::DType::F64 { crate::DType::F64 } else { crate::DType::F32 };
    let crate::Device::Cuda(ord) = x.device() else { return Ok(None) };
    let out = crate::backend::cuda::ops::empty("gelu", ord, d, &shape)?;
    // K = sqrt(2/pi), C = 0.044715; 1/sqrt(2) and 1/sqrt(2 pi) for the erf form
    let (name, expr) = match (tanh, g.is_some()) {
        (true, false) => ("gelu_tanh", "(C)0.5 * x * ((C)1 + m_tanh((C)0.7978845608028654 * (x + (C)0.044715 * x * x * x)))"),
        (false, false) => ("gelu_erf", "x * (C)0.5 * ((C)1 + m_erf(x * (C)0.7071067811865476))"),
        (true, true) => (
            "gelu_tanh_bwd",
            // the tanh is evaluated twice: expressions cannot hold statements
            "y * ((C)0.5 * ((C)1 + m_tanh((C)0.7978845608028654 * (x + (C)0.044715 * x * x * x))) + (C)0.5 * x \
             * ((C)1 - m_tanh((C)0.7978845608028654 * (x + (C)0.044715 * x * x * x)) * m_tanh((C)0.7978845608028654 * (x + (C)0.044715 * x * x * x))) \
             * ((C)0.7978845608028654 * ((C)1 + (C)3 * (C)0.044715 * x * x)))",
        ),
        (false, true) => (
            "gelu_erf_bwd",
            "y * ((C)0.5 * ((C)1 + m_erf(x * (C)0.7071067811865476)) + x * (C)0.3989422804014327 * m_exp((C)-0.5 * x * x))",
        ),
    };
    let mut ins = vec![Opnd { t: x, load_as: compute }];
    if let Some(g) = g {
        ins.push(Opnd { t: g, load_as: compute });
    }
    map("gelu", name, expr, compute, &out, &ins)?;
    Ok(Some(out))
}

/// `where(mask, g, 0)`.
fn pass(mask: &Tensor, g: &Tensor) -> Result<Tensor> {
    mask.where_(g, &g.zeros_like()?)
}

impl Tensor {
    /// `torch.relu(x)`: `max(x, 0)` (NaN stays NaN); integers keep their dtype.
    pub fn relu(&self) -> Result<Tensor> {
        let cuda = if self.dtype().is_bool() { None } else { cx::unary("relu", self, Out::Keep, "x > (C)0 || x != x ? x : (C)0", Some("x > 0 ? x : (i64)0"), None)? };
        let out = match cuda {
            Some(o) => o,
            None => map_keep("relu", self, |v| if v > 0.0 || v.is_nan() { v } else { 0.0 }, |v| v.max(0))?,
        };
        record_unary("relu", self, &out, |_, y, g| {
            // the gradient passes where the output is > 0 only (0 at 0, as PyTorch's)
            if let Some(d) = cx::grad("relu_backward", y, g, "x > (C)0 ? y : (C)0")? {
                return Ok(d);
            }
            if act::fast_backward(y, g) {
                return act_backward!("relu", y, g, relu_bwd);
            }
            pass(&y.gt_scalar(0.0)?, g)
        });
        Ok(out)
    }
    /// `F.hardtanh(x, min_val, max_val)`: clamps to `[min_val, max_val]` (integers clamp to the
    /// bounds truncated to integers and keep their dtype).
    pub fn hardtanh(&self, min_val: f64, max_val: f64) -> Result<Tensor> {
        if min_val > max_val {
            return Err(Error::value("hardtanh", "min_val cannot be greater than max_val"));
        }
        let (lo, hi) = (min_val as i64, max_val as i64);
        let (lf, hf) = (lit(min_val), lit(max_val));
        let cuda = if self.dtype().is_bool() {
            None
        } else {
            let (li, hii) = (ilit(lo), ilit(hi));
            cx::unary("hardtanh", self, Out::Keep, &format!("x < {lf} ? {lf} : (x > {hf} ? {hf} : x)"), Some(&format!("x < {li} ? {li} : (x > {hii} ? {hii} : x)")), None)?
        };
        let out = if let Some(o) = cuda {
            o
        } else if f32_cpu(self) {
            act::forward_f32(self, |x, o| f32k::hardtanh_fwd(x, o, min_val as f32, max_val as f32))?
        } else {
            map_keep(
                "hardtanh",
                self,
                move |v| if v < min_val { min_val } else if v > max_val { max_val } else { v },
                move |v| v.max(lo).min(hi),
            )?
        };
        let gexpr = format!("x > {lf} && x < {hf} ? y : (C)0");
        record_unary("hardtanh", self, &out, move |x, _, g| {
            if let Some(d) = cx::grad("hardtanh_backward", x, g, &gexpr)? {
                return Ok(d);
            }
            if act::fast_backward(x, g) {
                return act_backward!("hardtanh", x, g, hardtanh_bwd, min_val, max_val);
            }
            pass(&x.gt_scalar(min_val)?.mul(&x.lt_scalar(max_val)?)?, g)
        });
        Ok(out)
    }
    /// `F.relu6(x)`: `hardtanh(x, 0, 6)`.
    pub fn relu6(&self) -> Result<Tensor> {
        self.hardtanh(0.0, 6.0)
    }
    /// `F.threshold(x, threshold, value)`: `value` where `x <= threshold`, else `x`.
    pub fn threshold(&self, threshold: f64, value: f64) -> Result<Tensor> {
        let (ti, vi) = (threshold, value as i64);
        let (td, vf) = (format!("((double)({threshold:e}))"), lit(value));
        let cuda = if self.dtype().is_bool() {
            None
        } else {
            // integers compare in double, as the CPU path does
            let vii = ilit(vi);
            cx::unary("threshold", self, Out::Keep, &format!("(double)x <= {td} ? {vf} : x"), Some(&format!("(double)x <= {td} ? {vii} : x")), None)?
        };
        let out = match cuda {
            Some(o) => o,
            None => map_keep("threshold", self, move |v| if v <= threshold { value } else { v }, move |v| if (v as f64) <= ti { vi } else { v })?,
        };
        let gexpr = format!("(double)x > {td} ? y : (C)0");
        record_unary("threshold", self, &out, move |x, _, g| {
            if let Some(d) = cx::grad("threshold_backward", x, g, &gexpr)? {
                return Ok(d);
            }
            if act::fast_backward(x, g) {
                return act_backward!("threshold", x, g, threshold_bwd, threshold);
            }
            pass(&x.gt_scalar(threshold)?, g)
        });
        Ok(out)
    }
    /// `F.elu(x, alpha)` with PyTorch's general form `scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))`
    /// (shared by `selu` and `celu`).
    pub fn elu_full(&self, alpha: f64, scale: f64, input_scale: f64) -> Result<Tensor> {
        let (sf, saf, isf, kf) = (lit(scale), lit(scale * alpha), lit(input_scale), lit(input_scale * alpha * scale));
        let out = if let Some(o) = cx::unary("elu", self, Out::Float, &format!("x > (C)0 ? {sf} * x : {saf} * m_expm1(x * {isf})"), None, None)? {
            o
        } else if f32_cpu(self) {
            let (s, sa, is) = (scale as f32, (scale * alpha) as f32, input_scale as f32);
            act::forward_f32(self, |x, o| f32k::elu_fwd(x, o, s, sa, is))?
        } else {
            map_float("elu", self, move |v| if v > 0.0 { scale * v } else { scale * alpha * (v * input_scale).exp_m1() })?
        };
        let gexpr = format!("x > (C)0 ? y * {sf} : y * {kf} * m_exp(x * {isf})");
        record_unary("elu", self, &out, move |x, _, g| {
            if let Some(d) = cx::grad("elu_backward", x, g, &gexpr)? {
                return Ok(d);
            }
            if act::fast_backward(x, g) {
                return act_backward!("elu", x, g, elu_bwd, scale, input_scale, input_scale * alpha * scale);
            }
            let neg = x.mul_scalar(input_scale)?.exp()?.mul_scalar(input_scale * alpha * scale)?;
            let d = x.gt_scalar(0.0)?.where_(&neg.full_like(scale)?, &neg)?;
            g.mul(&d)
        });
        Ok(out)
    }
    /// `F.elu(x, alpha)`.
    pub fn elu(&self, alpha: f64) -> Result<Tensor> {
        self.elu_full(alpha, 1.0, 1.0)
    }
    /// `F.selu(x)`.
    pub fn selu(&self) -> Result<Tensor> {
        self.elu_full(SELU_ALPHA, SELU_SCALE, 1.0)
    }
    /// `F.celu(x, alpha)`: `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.
    pub fn celu(&self, alpha: f64) -> Result<Tensor> {
        if alpha == 0.0 {
            return Err(Error::value("celu", "ZeroDivisionError: alpha must not be zero for celu"));
        }
        self.elu_full(alpha, 1.0, 1.0 / alpha)
    }
    /// `F.leaky_relu(x, negative_slope)`.
    pub fn leaky_relu(&self, negative_slope: f64) -> Result<Tensor> {
        let nf = lit(negative_slope);
        let out = if let Some(o) = cx::unary("leaky_relu", self, Out::Float, &format!("x > (C)0 ? x : x * {nf}"), None, None)? {
            o
        } else if f32_cpu(self) {
            act::forward_f32(self, |x, o| f32k::leaky_relu_fwd(x, o, negative_slope))?
        } else {
            map_float("leaky_relu", self, move |v| if v > 0.0 { v } else { v * negative_slope })?
        };
        let gexpr = format!("x > (C)0 ? y : y * {nf}");
        record_unary("leaky_relu", self, &out, move |x, _, g| {
            if let Some(d) = cx::grad("leaky_relu_backward", x, g, &gexpr)? {
                return Ok(d);
            }
            if act::fast_backward(x, g) {
                return act_backward!("leaky_relu", x, g, leaky_relu_bwd, negative_slope);
            }
            x.gt_scalar(0.0)?.where_(g, &g.mul_scalar(negative_slope)?)
        });
        Ok(out)
    }
    /// `F.hardswish(x)`: `x * relu6(x + 3) / 6`.
    pub fn hardswish(&self) -> Result<Tensor> {
        // the clamp keeps NaN (both comparisons fail), as the CPU's `clamp`
        let out = if let Some(o) = cx::unary("hardswish", self, Out::Float, "x * (x + (C)3 < (C)0 ? (C)0 : (x + (C)3 > (C)6 ? (C)6 : x + (C)3)) / (C)6", None, None)? {
            o
        } else if f32_cpu(self) {
            act::forward_f32(self, f32k::hardswish_fwd)?
        } else {
            map_float("hardswish", self, |v| v * (v + 3.0).clamp(0.0, 6.0) / 6.0)?
        };
        record_unary("hardswish", self, &out, |x, _, g| {
            if let Some(d) = cx::grad("hardswish_backward", x, g, "x < (C)-3 ? (C)0 : (x <= (C)3 ? y * (x / (C)3 + (C)0.5) : y)")? {
                return Ok(d);
            }
            if act::fast_backward(x, g) {
                return act_backward!("hardswish", x, g, hardswish_bwd);
            }
            let mid = g.mul(&x.mul_scalar(1.0 / 3.0)?.add_scalar(0.5)?)?;
            let z = g.zeros_like()?;
            x.lt_scalar(-3.0)?.where_(&z, &x.le_scalar(3.0)?.where_(&mid, g)?)
        });
        Ok(out)
    }
    /// `F.hardsigmoid(x)`: `relu6(x + 3) / 6`.
    pub fn hardsigmoid(&self) -> Result<Tensor> {
        let out = if let Some(o) = cx::unary("hardsigmoid", self, Out::Float, "(x + (C)3 < (C)0 ? (C)0 : (x + (C)3 > (C)6 ? (C)6 : x + (C)3)) / (C)6", None, None)? {
            o
        } else if f32_cpu(self) {
            act::forward_f32(self, f32k::hardsigmoid_fwd)?
        } else {
            map_float("hardsigmoid", self, |v| (v + 3.0).clamp(0.0, 6.0) / 6.0)?
        };
        record_unary("hardsigmoid", self, &out, |x, _, g| {
            if let Some(d) = cx::grad("hardsigmoid_backward", x, g, "x > (C)-3 && x < (C)3 ? y * ((C)1 / (C)6) : (C)0")? {
                return Ok(d);
            }
            if act::fast_backward(x, g) {
                return act_backward!("hardsigmoid", x, g, hardsigmoid_bwd);
            }
            pass(&x.gt_scalar(-3.0)?.mul(&x.lt_scalar(3.0)?)?, &g.mul_scalar(1.0 / 6.0)?)
        });
        Ok(out)
    }
    /// `F.hardshrink(x, lambd)`: 0 inside `[-lambd, lambd]`, else `x`.
    pub fn hardshrink(&self, lambd: f64) -> Result<Tensor> {
        // the comparisons in double, as the CPU's f64 ones
        let ld = format!("((double)({lambd:e}))");
        let out = match cx::unary("hardshrink", self, Out::Float, &format!("(double)x >= -{ld} && (double)x <= {ld} ? (C)0 : x"), None, None)? {
            Some(o) => o,
            None => map_float("hardshrink", self, move |v| if v >= -lambd && v <= lambd { 0.0 } else { v })?,
        };
        let gexpr = format!("(double)x >= -{ld} && (double)x <= {ld} ? (C)0 : y");
        record_unary("hardshrink", self, &out, move |x, _, g| {
            if let Some(d) = cx::grad("hardshrink_backward", x, g, &gexpr)? {
                return Ok(d);
            }
            if act::fast_backward(x, g) {
                return act_backward!("hardshrink", x, g, shrink_bwd, lambd);
            }
            let inside = x.ge_scalar(-lambd)?.mul(&x.le_scalar(lambd)?)?;
            inside.where_(&g.zeros_like()?, g)
        });
        Ok(out)
    }
    /// `F.softshrink(x, lambd)`: shrinks toward 0 by `lambd >= 0`.
    pub fn softshrink(&self, lambd: f64) -> Result<Tensor> {
        if lambd.is_nan() || lambd < 0.0 {
            return Err(Error::value("softshrink", format!("lambda must be in range [0, max_value_of_input_dtype], but found {lambd}")));
        }
        // the comparisons in double, as the CPU's f64 ones
        let (lf, ld) = (lit(lambd), format!("((double)({lambd:e}))"));
        let out = match cx::unary("softshrink", self, Out::Float, &format!("(double)x > {ld} ? x - {lf} : ((double)x < -{ld} ? x + {lf} : (C)0)"), None, None)? {
            Some(o) => o,
            None => map_float("softshrink", self, move |v| if v > lambd { v - lambd } else if v < -lambd { v + lambd } else { 0.0 })?,
        };
        let gexpr = format!("(double)x >= -{ld} && (double)x <= {ld} ? (C)0 : y");
        record_unary("softshrink", self, &out, move |x, _, g| {
            if let Some(d) = cx::grad("softshrink_backward", x, g, &gexpr)? {
                return Ok(d);
            }
            if act::fast_backward(x, g) {
                return act_backward!("softshrink", x, g, shrink_bwd, lambd);
            }
            let inside = x.ge_scalar(-lambd)?.mul(&x.le_scalar(lambd)?)?;
            inside.where_(&g.zeros_like()?, g)
        });
        Ok(out)
    }
    /// `F.tanhshrink(x)`: `x - tanh(x)`.
    pub fn tanhshrink(&self) -> Result<Tensor> {
        let x = if self.dtype().is_integral() { self.to_dtype(crate::default_dtype())? } else { self.clone() };
        x.sub(&x.tanh()?)
    }
    /// `F.softsign(x)`: `x / (1 + |x|)`.
    pub fn softsign(&self) -> Result<Tensor> {
        self.div(&self.abs()?.add_scalar(1)?)
    }
    /// `F.softplus(x, beta, threshold)`: `log(1 + exp(beta x)) / beta`, linear where `beta x > threshold`.
    pub fn softplus(&self, beta: f64, threshold: f64) -> Result<Tensor> {
        let _prof = crate::profiler::op("softplus", &[self]);
        if let Some(c) = crate::amp::tensors("softplus", &[self])? {
            return c.args[0].softplus(beta, threshold);
        }
        let (bf, tf) = (lit(beta), lit(threshold));
        // the stable form of log(1 + e^z) / beta, as the CPU f32 kernel
        let fexpr = format!("x * {bf} > {tf} ? x : (m_fmax(x * {bf}, (C)0) + m_log1p(m_exp(-m_fabs(x * {bf})))) / {bf}");
        let out = if let Some(o) = cx::unary("softplus", self, Out::Float, &fexpr, None, None)? {
            o
        } else if f32_cpu(self) {
            act::forward_f32(self, |x, o| f32k::softplus_fwd(x, o, beta as f32, threshold as f32))?
        } else {
            map_float("softplus", self, move |v| if v * beta > threshold { v } else { (v * beta).exp().ln_1p() / beta })?
        };
        let gexpr = format!("x * {bf} > {tf} ? y : y / ((C)1 + m_exp(-(x * {bf})))");
        record_unary("softplus", self, &out, move |x, _, g| {
            if let Some(d) = cx::grad("softplus_backward", x, g, &gexpr)? {
                return Ok(d);
            }
            if act::fast_backward(x, g) {
                return act_backward!("softplus", x, g, softplus_bwd, beta, threshold);
            }
            let z = x.mul_scalar(beta)?;
            let s = z.sigmoid()?;
            z.gt_scalar(threshold)?.where_(g, &g.mul(&s)?)
        });
        Ok(out)
    }
    /// `F.silu(x)`: `x * sigmoid(x)`.
    pub fn silu(&self) -> Result<Tensor> {
        if self.device().is_cuda() && self.dtype().is_float() {
            // no CUDA kernel of its own yet: x * sigmoid(x) from two native elementwise kernels
            // (autograd differentiates the composite)
            return self.mul(&self.sigmoid()?);
        }
        let out = if f32_cpu(self) {
            act::forward_f32(self, f32k::silu_fwd)?
        } else {
            map_float("silu", self, |v| v / (1.0 + (-v).exp()))?
        };
        record_unary("silu", self, &out, |x, _, g| {
            if act::fast_backward(x, g) {
                return act_backward!("silu", x, g, silu_bwd);
            }
            let s = x.sigmoid()?;
            g.mul(&s.mul(&x.mul(&one_minus(&s)?)?.add_scalar(1.0)?)?)
        });
        Ok(out)
    }
    /// `F.mish(x)`: `x * tanh(softplus(x))`.
    pub fn mish(&self) -> Result<Tensor> {
        let out = if let Some(o) = cx::unary("mish", self, Out::Float, &format!("x * m_tanh({MISH_SP})"), None, None)? {
            o
        } else if f32_cpu(self) {
            act::forward_f32(self, f32k::mish_fwd)?
        } else {
            map_float("mish", self, |v| v * softplus1(v).tanh())?
        };
        record_unary("mish", self, &out, |x, _, g| {
            let t = format!("m_tanh({MISH_SP})");
            let gexpr = format!("y * ({t} + x / ((C)1 + m_exp(-x)) * ((C)1 - {t} * {t}))");
            if let Some(d) = cx::grad("mish_backward", x, g, &gexpr)? {
                return Ok(d);
            }
            if act::fast_backward(x, g) {
                return act_backward!("mish", x, g, mish_bwd);
            }
            let t = x.softplus(1.0, 20.0)?.tanh()?;
            let d = t.add(&x.mul(&x.sigmoid()?)?.mul(&one_minus(&t.mul(&t)?)?)?)?;
            g.mul(&d)
        });
        Ok(out)
    }
    /// `F.gelu(x, approximate)`: `x * Phi(x)`, or its tanh approximation with `approximate = "tanh"`.
    pub fn gelu(&self, approximate: &str) -> Result<Tensor> {
        let _prof = crate::profiler::op("gelu", &[self]);
        const K: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)
        const C: f64 = 0.044_715;
        #[cfg(feature = "cuda")]
        if self.device().is_cuda() && matches!(approximate, "none" | "tanh") {
            let tanh = approximate == "tanh";
            if let Some(out) = gelu_cuda(self, None, tanh)? {
                // the kernel's derivative when no graph of the gradient is built, else the composite rule
                record_unary("gelu", self, &out, move |x, _, g| {
                    if !crate::autograd::is_grad_enabled() {
                        if let Some(d) = gelu_cuda(x, Some(g), tanh)? {
                            return Ok(d);
                        }
                    }
                    gelu_grad_composite(x, g, tanh)
                });
                return Ok(out);
            }
        }
        match approximate {
            "none" | "tanh" if f32_cpu(self) => {
                let tanh = approximate == "tanh";
                let out = cpu::read(self, |xs: &[f32]| {
                    let mut o = vec![0f32; xs.len()];
                    rows::par_gelu(xs, None, &mut o, tanh);
                    o
                })?;
                let out = Tensor::from_vec(out, self.shape())?;
                // the fused derivative when no graph of the gradient is built, else the composite rule
                record_unary("gelu", self, &out, move |x, _, g| {
                    if crate::autograd::is_grad_enabled() || g.dtype() != crate::DType::F32 || g.device() != crate::Device::Cpu || g.shape() != x.shape() {
                        gelu_grad_composite(x, g, tanh)
                    } else {
                        let d = cpu::read(x, |xs: &[f32]| {
                            cpu::read(g, |gs: &[f32]| {
                                let mut o = vec![0f32; xs.len()];
                                rows::par_gelu(xs, Some(gs), &mut o, tanh);
                                o
                            })
                        })??;
                        Tensor::from_vec(d, x.shape())
                    }
                });
                Ok(out)
            }
            "none" => {
                let out = map_float("gelu", self, |v| v * 0.5 * (1.0 + libm::erf(v * FRAC_1_SQRT_2)))?;
                record_unary("gelu", self, &out, |x, _, g| gelu_grad_composite(x, g, false));
                Ok(out)
            }
            "tanh" => {
                let out = map_float("gelu", self, |v| 0.5 * v * (1.0 + (K * (v + C * v * v * v)).tanh()))?;
                record_unary("gelu", self, &out, |x, _, g| gelu_grad_composite(x, g, true));
                Ok(out)
            }
            _ => Err(Error::value("gelu", "approximate argument must be either none or tanh.")),
        }
    }
    /// `F.logsigmoid(x)`: `log(sigmoid(x))`, stable for large |x|.
    pub fn logsigmoid(&self) -> Result<Tensor> {
        let out = if let Some(o) = cx::unary("logsigmoid", self, Out::Float, "(x < (C)0 ? x : (C)0) - m_log1p(m_exp(-m_fabs(x)))", None, None)? {
            o
        } else if f32_cpu(self) {
            act::forward_f32(self, f32k::logsigmoid_fwd)?
        } else {
            map_float("logsigmoid", self, |v| v.min(0.0) - (-v.abs()).exp().ln_1p())?
        };
        record_unary("logsigmoid", self, &out, |x, _, g| {
            if let Some(d) = cx::grad("logsigmoid_backward", x, g, "y / ((C)1 + m_exp(x))")? {
                return Ok(d);
            }
            if act::fast_backward(x, g) {
                return act_backward!("logsigmoid", x, g, logsigmoid_bwd);
            }
            g.mul(&x.neg_raw()?.sigmoid()?)
        });
        Ok(out)
    }
    /// `F.glu(x, dim)`: `a * sigmoid(b)` for the two halves `a`, `b` of `x` along `dim`.
    pub fn glu(&self, dim: i64) -> Result<Tensor> {
        if self.ndim() == 0 {
            return Err(Error::shape("glu", "glu does not support scalars because halving size must be even"));
        }
        let d = crate::shape::wrap_dim("glu", dim, self.ndim())?;
        let n = self.shape()[d];
        if !n.is_multiple_of(2) {
            return Err(Error::shape("glu", format!("Halving dimension must be even, but dimension {d} is size {n}")));
        }
        let h = (n / 2) as i64;
        let a = self.narrow(d as i64, 0, h)?;
        // the second half of an empty tensor would be a view past its (empty) storage; the
        // first half has the same (empty) shape
        let b = if self.numel() == 0 { a.clone() } else { self.narrow(d as i64, h, h)? };
        a.mul(&b.sigmoid()?)
    }
    /// `F.prelu(x, weight)`: `x` where positive, else `weight * x`; `weight` has one element or
    /// one per channel (dim 1).
    pub fn prelu(&self, weight: &Tensor) -> Result<Tensor> {
        let _prof = crate::profiler::op("prelu", &[self, weight]);
        if let Some(c) = crate::amp::tensors("prelu", &[self, weight])? {
            return c.args[0].prelu(&c.args[1]);
        }
        if weight.ndim() > 1 {
            return Err(Error::shape("prelu", format!("prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {}", weight.ndim())));
        }
        let wn = weight.numel();
        let w = if wn == 1 {
            weight.reshape(&[])?
        } else {
            if self.ndim() == 0 {
                return Err(Error::shape("prelu", "Not allow zero-dim input tensor."));
            }
            let c = if self.ndim() >= 2 { self.shape()[1] } else { 1 };
            if wn != c {
                return Err(Error::shape(
                    "prelu",
                    format!("Mismatch of parameter numbers and input channel size. Found parameter numbers = {wn} and channel size = {c}."),
                ));
            }
            let mut shape = vec![1i64; self.ndim()];
            shape[1] = c as i64;
            weight.reshape(&shape)?
        };
        let pos = self.gt_scalar(0.0)?;
        pos.where_(self, &w.mul(self)?)
    }
    /// `F.rrelu(x, lower, upper, training)`: leaky ReLU whose negative slope is the mean of the
    /// bounds in evaluation, and drawn uniformly from `[lower, upper]` per element in training.
    pub fn rrelu(&self, lower: f64, upper: f64, training: bool) -> Result<Tensor> {
        if lower > upper {
            return Err(Error::value("rrelu", "Lower bound should be less than or equal to the upper bound"));
        }
        if !training {
            return self.leaky_relu((lower + upper) / 2.0);
        }
        if self.device().is_cuda() && self.dtype().is_float() {
            // slopes from the device generator; 1 where x >= 0 (NaN takes a slope, as below)
            let u = self.zeros_like()?.uniform_(lower, upper)?;
            let slope = self.ge_scalar(0.0)?.where_(&u.ones_like()?, &u)?;
            return self.mul(&slope);
        }
        let xs: Vec<f64> = crate::backend::cpu::to_vec(self)?;
        let mut rng = SplitMix::new();
        let noise: Vec<f64> = xs.iter().map(|&v| if v >= 0.0 { 1.0 } else { lower + (upper - lower) * rng.next_f64() }).collect();
        let noise = Tensor::from_vec(noise, self.shape())?.to_dtype(self.dtype())?;
        self.mul(&noise)
    }
}

/// `log(1 + exp(x))` with PyTorch's default threshold of 20, as a CUDA expression of `x`.
const MISH_SP: &str = "(x > (C)20 ? x : m_log1p(m_exp(x)))";

/// `log(1 + exp(x))` with PyTorch's default threshold of 20.
fn softplus1(v: f64) -> f64 {
    if v > 20.0 {
        v
    } else {
        v.exp().ln_1p()
    }
}

/// A small SplitMix64 generator for `rrelu`'s slopes, seeded per call from a global counter
/// and the clock (the random-number module owns seeded generators).
struct SplitMix(u64);

impl SplitMix {
    fn new() -> SplitMix {
        use std::sync::atomic::{AtomicU64, Ordering};
        static CALLS: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        SplitMix(CALLS.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) ^ t)
    }
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}
