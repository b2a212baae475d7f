//! Ops of three operands: `where`, `clamp` (scalar or tensor bounds), `lerp`, `addcmul`,
//! `addcdiv`, `masked_fill`, and their in-place forms. Most are compositions of binary ops, so
//! their gradients come from the binary rules.

use crate::autograd::{self, Saved};
use crate::backend::cpu;
use crate::dtype::{result_type, DType};
use crate::ops::binary::{common_dtype, operand_dtype, scalar_type_name};
use crate::ops::Operand;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.where(condition, input, other)` with broadcasting and type promotion; differentiable in `input` and `other`.
pub fn where_cond(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    where_op(cond, Operand::Tensor(a), Operand::Tensor(b))
}

/// `torch.where(condition, x, y)` where `x` and `y` may be scalars.
pub fn where_op(cond: &Tensor, a: Operand, b: Operand) -> Result<Tensor> {
    if cond.dtype() != DType::Bool {
        return Err(Error::dtype(
            "where",
            format!("where expected condition to be a boolean tensor, but got a tensor with dtype {}", scalar_type_name(cond.dtype())),
        ));
    }
    let dt = common_dtype("where", &a, &b)?;
    // 0-d CPU tensors join CUDA operands as scalars (PyTorch): moved to the GPU
    let ts: Vec<&Tensor> = [Some(cond), op_tensor(&a), op_tensor(&b)].into_iter().flatten().collect();
    let device = crate::ops::common_device("where", &ts)?;
    if ts.iter().any(|t| t.device() != device) {
        let c = crate::ops::scalar_to_device(cond, device)?;
        let mv = |o: &Operand| -> Result<Option<Tensor>> { op_tensor(o).map(|t| crate::ops::scalar_to_device(t, device)).transpose() };
        let (ma, mb) = (mv(&a)?, mv(&b)?);
        let oa = ma.as_ref().map_or(a.clone(), Operand::Tensor);
        let ob = mb.as_ref().map_or(b.clone(), Operand::Tensor);
        return where_op(&c, oa, ob);
    }
    let as_tensor = |o: &Operand| -> Result<Tensor> {
        match o {
            Operand::Tensor(t) => Ok((*t).clone()),
            Operand::Scalar(s) => Tensor::scalar_tensor(*s, dt, device),
        }
    };
    let (a, b) = (as_tensor(&a)?, as_tensor(&b)?);
    crate::ops::same_device("where", &[cond, &a, &b])?;
    let shape = crate::shape::broadcast_all("where", &[cond.shape(), a.shape(), b.shape()])?;
    let native = if device.is_cuda() { crate::backend::cuda::ops::where_(cond, &a, &b, dt, &shape)? } else { None };
    if device.is_cuda() && native.is_none() {
        // no CUDA kernel for this dtype: on the CPU, moved back (differentiable moves)
        let cpu = crate::Device::Cpu;
        return where_cond(&cond.to_device(cpu)?, &a.to_device(cpu)?, &b.to_device(cpu)?)?.to_device(device);
    }
    let out = if let Some(o) = native { o } else { crate::with_dtype!(dt, T, {
        let (ab, bb, c) = {
            let _ng = autograd::no_grad();
            (a.broadcast_to(&shape)?, b.broadcast_to(&shape)?, cond.broadcast_to(&shape)?)
        };
        let cv: Vec<bool> = cpu::to_vec(&c)?;
        let av: Vec<T> = cpu::to_vec(&ab)?;
        let bv: Vec<T> = cpu::to_vec(&bb)?;
        let v: Vec<T> = cv.iter().zip(av.iter().zip(&bv)).map(|(&k, (&x, &y))| if k { x } else { y }).collect();
        Tensor::from_vec(v, &shape)?
    }) };
    let sc = Saved::new("where", cond);
    let (sha, shb) = (a.shape().to_vec(), b.shape().to_vec());
    autograd::record("Where", &[&a, &b], &[out.clone()], move |ctx, g| {
        let c = sc.get()?;
        let z = g[0].zeros_like()?;
        let ga = if ctx.needs_input_grad(0) { Some(c.where_(&g[0], &z)?.sum_to_size(&sha)?) } else { None };
        let gb = if ctx.needs_input_grad(1) { Some(c.where_(&z, &g[0])?.sum_to_size(&shb)?) } else { None };
        Ok(vec![ga, gb])
    });
    Ok(out)
}

/// The tensor of an operand, if it is one.
fn op_tensor<'a>(o: &Operand<'a>) -> Option<&'a Tensor> {
    match o {
        Operand::Tensor(t) => Some(t),
        Operand::Scalar(_) => None,
    }
}

/// A bound of `clamp`: a scalar or a tensor.
fn bound_tensor(o: &Operand, dt: DType, device: crate::Device) -> Result<Tensor> {
    match o {
        Operand::Tensor(t) => Ok((*t).clone()),
        Operand::Scalar(s) => Tensor::scalar_tensor(*s, dt, device),
    }
}

/// `torch.clamp(input, min, max)` with scalar or tensor bounds (at least one given). The result
/// dtype promotes over all three; where `min > max` the result is `max`; NaN propagates.
pub fn clamp_op(x: &Tensor, min: Option<Operand>, max: Option<Operand>) -> Result<Tensor> {
    if min.is_none() && max.is_none() {
        return Err(Error::value("clamp", "torch.clamp: At least one of 'min' or 'max' must not be None"));
    }
    let mut ops = vec![x.promo()];
    for o in min.iter().chain(max.iter()) {
        ops.push(match o {
            Operand::Tensor(t) => t.promo(),
            Operand::Scalar(s) => crate::dtype::Operand::Scalar(s.dtype()),
        });
    }
    let dt = result_type(&ops).map_err(|e| Error::dtype("clamp", e.to_string()))?;
    if dt.is_complex() {
        return Err(Error::dtype("clamp", "clamp is not supported for complex types"));
    }
    if dt.is_bool() {
        return Err(Error::dtype("clamp", "\"clamp_cpu\" not implemented for 'Bool'"));
    }
    let xs = x.to_dtype(dt)?;
    let lo = min.as_ref().map(|o| bound_tensor(o, dt, x.device()).and_then(|t| t.to_dtype(dt))).transpose()?;
    let hi = max.as_ref().map(|o| bound_tensor(o, dt, x.device()).and_then(|t| t.to_dtype(dt))).transpose()?;
    let shape = {
        let mut s: Vec<&[usize]> = vec![x.shape()];
        s.extend(lo.iter().map(|t| t.shape()));
        s.extend(hi.iter().map(|t| t.shape()));
        crate::shape::broadcast_all("clamp", &s)?
    };
    // value: max(x, lo) then min(., hi), both NaN-propagating (a NaN bound gives NaN, like PyTorch)
    let out = {
        let _ng = autograd::no_grad();
        let mut r = xs.broadcast_to(&shape)?;
        if let Some(l) = &lo {
            r = r.maximum(l)?;
        }
        if let Some(h) = &hi {
            r = r.minimum(h)?;
        }
        if r.shares_storage(&xs) { r.copy()? } else { r }
    };
    if dt.is_float() {
        let (sx, slo, shi) = (Saved::new("clamp", &xs), lo.as_ref().map(|t| Saved::new("clamp", t)), hi.as_ref().map(|t| Saved::new("clamp", t)));
        let mut inputs: Vec<&Tensor> = vec![&xs];
        inputs.extend(lo.iter());
        inputs.extend(hi.iter());
        let shapes: Vec<Vec<usize>> = inputs.iter().map(|t| t.shape().to_vec()).collect();
        let (has_lo, has_hi) = (lo.is_some(), hi.is_some());
        autograd::record("Clamp", &inputs, &[out.clone()], move |ctx, g| {
            let g = &g[0];
            let x = sx.get()?;
            let l = slo.as_ref().map(|s| s.get()).transpose()?;
            let h = shi.as_ref().map(|s| s.get()).transpose()?;
            let z = g.zeros_like()?;
            let mut res = Vec::new();
            // self: where(x >= lo && x <= hi, g, 0)
            let mut pass = None::<Tensor>;
            if let Some(l) = &l {
                pass = Some(x.ge(l)?);
            }
            if let Some(h) = &h {
                let p = x.le(h)?;
                pass = Some(match pass {
                    Some(q) => q.logical_and(&p)?,
                    None => p,
                });
            }
            let gx = match pass {
                Some(p) if ctx.needs_input_grad(0) => Some(p.where_(g, &z)?.sum_to_size(&shapes[0])?),
                _ => None,
            };
            res.push(gx);
            let mut k = 1;
            if has_lo {
                let l = l.as_ref().ok_or_else(|| Error::autograd("clamp", "missing saved bound"))?;
                let m = match &h {
                    Some(h) => x.lt(l)?.logical_and(&l.lt(h)?)?,
                    None => x.lt(l)?,
                };
                res.push(if ctx.needs_input_grad(k) { Some(m.where_(g, &z)?.sum_to_size(&shapes[k])?) } else { None });
                k += 1;
            }
            if has_hi {
                let h = h.as_ref().ok_or_else(|| Error::autograd("clamp", "missing saved bound"))?;
                let m = match &l {
                    Some(l) => x.gt(h)?.logical_or(&h.lt(l)?)?,
                    None => x.gt(h)?,
                };
                res.push(if ctx.needs_input_grad(k) { Some(m.where_(g, &z)?.sum_to_size(&shapes[k])?) } else { None });
            }
            Ok(res)
        });
    }
    Ok(out)
}

/// `torch.lerp(start, end, weight)`: `start + weight * (end - start)`, computed as PyTorch does
/// (from `end` when `weight >= 0.5`, for accuracy near 1).
pub fn lerp_op(start: &Tensor, end: &Tensor, weight: Operand) -> Result<Tensor> {
    if start.dtype() != end.dtype() {
        return Err(Error::dtype(
            "lerp",
            format!("expected dtype {} for `end` but got dtype {}", start.dtype().name(), end.dtype().name()),
        ));
    }
    if !(start.dtype().is_float() || start.dtype().is_complex()) {
        return Err(Error::dtype("lerp", format!("\"lerp_kernel_scalar\" not implemented for '{}'", scalar_type_name(start.dtype()))));
    }
    // half tensors: in float32, rounded once (as PyTorch's kernel)
    let wt = match &weight {
        Operand::Tensor(w) => vec![start, end, *w],
        Operand::Scalar(_) => vec![start, end],
    };
    if let Some(h) = crate::ops::acc::half_acc(&wt) {
        use crate::ops::acc::{down, up};
        let w = match &weight {
            Operand::Tensor(w) => Some(up(w)?),
            Operand::Scalar(_) => None,
        };
        let wop = match (&w, &weight) {
            (Some(w), _) => Operand::Tensor(w),
            (None, s) => s.clone(),
        };
        return down(lerp_op(&up(start)?, &up(end)?, wop)?, h);
    }
    let diff = end.sub(start)?;
    match weight {
        Operand::Scalar(w) => {
            if w.to_f64().abs() < 0.5 {
                start.add(&diff.mul_scalar(w)?)
            } else {
                end.sub(&diff.mul_scalar(Scalar::Float(1.0 - w.to_f64()))?)
            }
        }
        Operand::Tensor(w) => {
            if w.dtype() != start.dtype() {
                return Err(Error::dtype(
                    "lerp",
                    format!("expected dtype {} for `weight` but got dtype {}", start.dtype().name(), w.dtype().name()),
                ));
            }
            let near = w.abs_lt_half()?;
            let lo = start.add(&w.mul(&diff)?)?;
            let one_minus = w.neg_raw()?.add_scalar(1)?;
            let hi = end.sub(&diff.mul(&one_minus)?)?;
            near.where_(&lo, &hi)
        }
    }
}

impl Tensor {
    /// `|w| < 0.5` elementwise (which formula `lerp` uses).
    fn abs_lt_half(&self) -> Result<Tensor> {
        let _ng = autograd::no_grad();
        self.lt_scalar(0.5)?.logical_and(&self.gt_scalar(-0.5)?)
    }
}

fn check_value(op: &str, dt: DType, value: Scalar) -> Result<()> {
    if dt.is_integral() && !value.is_integral() {
        return Err(Error::dtype(op, format!("For integral input tensors, argument value must not be a floating point number.")));
    }
    Ok(())
}

/// `torch.addcmul(input, t1, t2, value=v)`: `input + v * t1 * t2`.
pub fn addcmul_op(x: &Tensor, t1: &Tensor, t2: &Tensor, value: Scalar) -> Result<Tensor> {
    let _prof = crate::profiler::op("addcmul", &[x, t1, t2]);
    if let Some(c) = crate::amp::tensors("addcmul", &[x, t1, t2])? {
        return addcmul_op(&c.args[0], &c.args[1], &c.args[2], value);
    }
    let dt = result_type(&[x.promo(), t1.promo(), t2.promo()])?;
    check_value("addcmul", dt, value)?;
    if let Some(h) = crate::ops::acc::half_acc(&[x, t1, t2]) {
        // half tensors: in float32, rounded once (as PyTorch's kernel)
        use crate::ops::acc::{down, up};
        return down(addcmul_op(&up(x)?, &up(t1)?, &up(t2)?, value)?, h);
    }
    let p = if value == Scalar::Int(1) { t1.clone() } else { t1.mul_scalar(value)? };
    x.add(&p.mul(t2)?)
}

/// `torch.addcdiv(input, t1, t2, value=v)`: `input + v * t1 / t2` (integer inputs are rejected).
pub fn addcdiv_op(x: &Tensor, t1: &Tensor, t2: &Tensor, value: Scalar) -> Result<Tensor> {
    let _prof = crate::profiler::op("addcdiv", &[x, t1, t2]);
    if let Some(c) = crate::amp::tensors("addcdiv", &[x, t1, t2])? {
        return addcdiv_op(&c.args[0], &c.args[1], &c.args[2], value);
    }
    if t1.dtype().is_integral() && t2.dtype().is_integral() {
        return Err(Error::dtype(
            "addcdiv",
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a true division of tensor1 and tensor2. Use torch.addcdiv(input, tensor1, torch.true_divide(tensor1, tensor2)) instead.",
        ));
    }
    let dt = result_type(&[x.promo(), t1.promo(), t2.promo()])?;
    check_value("addcdiv", dt, value)?;
    if let Some(h) = crate::ops::acc::half_acc(&[x, t1, t2]) {
        use crate::ops::acc::{down, up};
        return down(addcdiv_op(&up(x)?, &up(t1)?, &up(t2)?, value)?, h);
    }
    let p = if value == Scalar::Int(1) { t1.clone() } else { t1.mul_scalar(value)? };
    x.add(&p.div(t2)?)
}

/// The fill value of `masked_fill`: a scalar or a 0-d tensor, as a 0-d tensor of `x`'s dtype.
fn fill_value(x: &Tensor, value: Operand) -> Result<Tensor> {
    match value {
        Operand::Scalar(s) => Tensor::scalar_tensor(s, x.dtype(), x.device()),
        Operand::Tensor(v) => {
            if v.ndim() != 0 {
                return Err(Error::value(
                    "masked_fill_",
                    format!("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).", v.ndim()),
                ));
            }
            v.to_dtype(x.dtype())
        }
    }
}

fn check_mask(mask: &Tensor) -> Result<()> {
    if mask.dtype() != DType::Bool {
        return Err(Error::dtype(
            "masked_fill_",
            format!("masked_fill_ only supports boolean masks, but got mask with dtype {}", mask.dtype().name()),
        ));
    }
    Ok(())
}

/// `torch.masked_fill(input, mask, value)`: `value` where `mask`, else `input` (broadcasting both).
pub fn masked_fill_op(x: &Tensor, mask: &Tensor, value: Operand) -> Result<Tensor> {
    check_mask(mask)?;
    if x.dtype().is_integral() || x.dtype().is_float() {
        if let Operand::Scalar(Scalar::Complex(_)) = value {
            return Err(Error::dtype("masked_fill", "value cannot be converted to type without overflow"));
        }
    }
    let v = fill_value(x, value)?;
    where_op(mask, Operand::Tensor(&v), Operand::Tensor(x))
}

impl Tensor {
    /// `torch.where(cond, a, b)` as a method of the condition: `cond.where_(a, b)`
    /// picks `a` where true, `b` where false (broadcasting all three).
    pub fn where_(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let _prof = crate::profiler::op("where", &[self, a, b]);
        where_cond(self, a, b)
    }
    /// `torch.clamp(x, min, max)` with scalar bounds (None: unbounded on that side).
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Result<Tensor> {
        clamp_op(self, min.map(|v| Operand::Scalar(Scalar::Float(v))), max.map(|v| Operand::Scalar(Scalar::Float(v))))
    }
    /// `torch.clamp(x, min, max)` with Python-style scalar bounds (an integer bound keeps an
    /// integer tensor's dtype; a float bound promotes it).
    pub fn clamp_scalar(&self, min: Option<Scalar>, max: Option<Scalar>) -> Result<Tensor> {
        clamp_op(self, min.map(Operand::Scalar), max.map(Operand::Scalar))
    }
    /// `torch.clamp(x, min, max)` with tensor bounds.
    pub fn clamp_tensor(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
        clamp_op(self, min.map(Operand::Tensor), max.map(Operand::Tensor))
    }
    /// `torch.clamp_min(x, min)`.
    pub fn clamp_min(&self, min: impl Into<Scalar>) -> Result<Tensor> {
        clamp_op(self, Some(Operand::Scalar(min.into())), None)
    }
    /// `torch.clamp_max(x, max)`.
    pub fn clamp_max(&self, max: impl Into<Scalar>) -> Result<Tensor> {
        clamp_op(self, None, Some(Operand::Scalar(max.into())))
    }
    /// `x.clamp_(min, max)` in place.
    pub fn clamp_(&self, min: Option<f64>, max: Option<f64>) -> Result<Tensor> {
        self.update_("clamp_", &[], |s| s.clamp(min, max))
    }
    /// `torch.lerp(self, end, weight)` with a scalar weight.
    pub fn lerp(&self, end: &Tensor, weight: f64) -> Result<Tensor> {
        lerp_op(self, end, Operand::Scalar(Scalar::Float(weight)))
    }
    /// `torch.lerp(self, end, weight)` with a tensor weight.
    pub fn lerp_tensor(&self, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
        lerp_op(self, end, Operand::Tensor(weight))
    }
    /// `torch.addcmul(self, t1, t2, value=value)`.
    pub fn addcmul(&self, t1: &Tensor, t2: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        addcmul_op(self, t1, t2, value.into())
    }
    /// `torch.addcdiv(self, t1, t2, value=value)`.
    pub fn addcdiv(&self, t1: &Tensor, t2: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        addcdiv_op(self, t1, t2, value.into())
    }
    /// `self.addcmul_(t1, t2, value=value)` in place (an optimizer step's building block).
    pub fn addcmul_(&self, t1: &Tensor, t2: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        self.update_("addcmul_", &[t1, t2], |s| s.addcmul(t1, t2, value))
    }
    /// `self.addcdiv_(t1, t2, value=value)` in place.
    pub fn addcdiv_(&self, t1: &Tensor, t2: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        self.update_("addcdiv_", &[t1, t2], |s| s.addcdiv(t1, t2, value))
    }
    /// `x.masked_fill(mask, value)` with a scalar value.
    pub fn masked_fill(&self, mask: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let _prof = crate::profiler::op("masked_fill", &[self, mask]);
        masked_fill_op(self, mask, Operand::Scalar(value.into()))
    }
    /// `x.masked_fill_(mask, value)` in place; `mask` must broadcast to `x`'s shape.
    pub fn masked_fill_(&self, mask: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        masked_fill_inplace(self, mask, Operand::Scalar(value.into()))
    }
}

/// `x.masked_fill_(mask, value)` with a scalar or 0-d tensor value.
pub fn masked_fill_inplace(x: &Tensor, mask: &Tensor, value: Operand) -> Result<Tensor> {
    check_mask(mask)?;
    let others: Vec<&Tensor> = match &value {
        Operand::Tensor(v) => vec![mask, *v],
        Operand::Scalar(_) => vec![mask],
    };
    x.update_("masked_fill_", &others, |s| masked_fill_op(s, mask, value))
}

/// The dtype an operand contributes (re-exported for the registry's argument checks).
pub fn dtype_of(o: &Operand) -> DType {
    operand_dtype(o)
}
