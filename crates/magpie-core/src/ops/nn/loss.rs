//! Loss functions as composites of existing ops (log_softmax, where, mul, sum, ...), so their
//! gradients come from autograd. Each takes a [`Reduction`].

use crate::tensor::Tensor;
use crate::{Error, Result};

/// How a loss reduces its elementwise values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reduction {
    None,
    Mean,
    Sum,
}

impl Reduction {
    /// Parses `"none" | "mean" | "sum"`.
    pub fn parse(op: &str, s: &str) -> Result<Reduction> {
        match s {
            "none" => Ok(Reduction::None),
            "mean" => Ok(Reduction::Mean),
            "sum" => Ok(Reduction::Sum),
            _ => Err(Error::value(op, format!("{s} is not a valid value for reduction"))),
        }
    }
    /// PyTorch's legacy `size_average` / `reduce` arguments, when either is given.
    pub fn legacy(size_average: Option<bool>, reduce: Option<bool>) -> Reduction {
        if reduce == Some(false) {
            Reduction::None
        } else if size_average == Some(false) {
            Reduction::Sum
        } else {
            Reduction::Mean
        }
    }
    /// Applies the reduction.
    pub fn apply(self, l: Tensor) -> Result<Tensor> {
        match self {
            Reduction::None => Ok(l),
            Reduction::Mean => l.mean(),
            Reduction::Sum => l.sum(),
        }
    }
}

fn same_shape(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    crate::shape::broadcast_shapes(op, a.shape(), b.shape()).map(|_| ())
}

/// `mse_loss(input, target, reduction)`.
pub fn mse_loss(x: &Tensor, y: &Tensor, r: Reduction) -> Result<Tensor> {
    let _prof = crate::profiler::op("mse_loss", &[x, y]);
    if let Some(c) = crate::amp::tensors("mse_loss", &[x, y])? {
        return mse_loss(&c.args[0], &c.args[1], r);
    }
    same_shape("mse_loss", x, y)?;
    let d = x.sub(y)?;
    r.apply(d.mul(&d)?)
}

/// `l1_loss(input, target, reduction)`.
pub fn l1_loss(x: &Tensor, y: &Tensor, r: Reduction) -> Result<Tensor> {
    let _prof = crate::profiler::op("l1_loss", &[x, y]);
    if let Some(c) = crate::amp::tensors("l1_loss", &[x, y])? {
        return l1_loss(&c.args[0], &c.args[1], r);
    }
    same_shape("l1_loss", x, y)?;
    r.apply(x.sub(y)?.nn_abs()?)
}

/// `smooth_l1_loss(input, target, reduction, beta)`.
pub fn smooth_l1_loss(x: &Tensor, y: &Tensor, r: Reduction, beta: f64) -> Result<Tensor> {
    let _prof = crate::profiler::op("smooth_l1_loss", &[x, y]);
    if let Some(c) = crate::amp::tensors("smooth_l1_loss", &[x, y])? {
        return smooth_l1_loss(&c.args[0], &c.args[1], r, beta);
    }
    // half tensors: in float32, rounded once (PyTorch's acc_type)
    if let Some(h) = crate::ops::acc::half_acc(&[x, y]) {
        use crate::ops::acc::{down, up};
        return down(smooth_l1_loss(&up(x)?, &up(y)?, r, beta)?, h);
    }
    if beta < 0.0 {
        return Err(Error::value("smooth_l1_loss", "smooth_l1_loss does not support negative values for beta."));
    }
    same_shape("smooth_l1_loss", x, y)?;
    let d = x.sub(y)?.nn_abs()?;
    if beta == 0.0 {
        return r.apply(d);
    }
    let quad = d.mul(&d)?.mul_scalar(0.5 / beta)?;
    let lin = d.sub_scalar(0.5 * beta)?;
    r.apply(d.lt_scalar(beta)?.where_(&quad, &lin)?)
}

/// `huber_loss(input, target, reduction, delta)`.
pub fn huber_loss(x: &Tensor, y: &Tensor, r: Reduction, delta: f64) -> Result<Tensor> {
    let _prof = crate::profiler::op("huber_loss", &[x, y]);
    if let Some(c) = crate::amp::tensors("huber_loss", &[x, y])? {
        return huber_loss(&c.args[0], &c.args[1], r, delta);
    }
    // half tensors: in float32, rounded once (PyTorch's acc_type)
    if let Some(h) = crate::ops::acc::half_acc(&[x, y]) {
        use crate::ops::acc::{down, up};
        return down(huber_loss(&up(x)?, &up(y)?, r, delta)?, h);
    }
    if delta <= 0.0 {
        return Err(Error::value("huber_loss", "huber_loss does not support non-positive values for delta."));
    }
    same_shape("huber_loss", x, y)?;
    let d = x.sub(y)?.nn_abs()?;
    let quad = d.mul(&d)?.mul_scalar(0.5)?;
    let lin = d.sub_scalar(0.5 * delta)?.mul_scalar(delta)?;
    r.apply(d.lt_scalar(delta)?.where_(&quad, &lin)?)
}

/// `binary_cross_entropy(input, target, weight, reduction)`; log terms clamped at -100 like PyTorch.
pub fn binary_cross_entropy(x: &Tensor, y: &Tensor, w: Option<&Tensor>, r: Reduction) -> Result<Tensor> {
    let _prof = crate::profiler::op_opt("binary_cross_entropy", &[Some(x), Some(y), w]);
    if let Some(c) = crate::amp::optional("binary_cross_entropy", &[Some(x), Some(y), w])? {
        return binary_cross_entropy(c.req(0)?, c.req(1)?, c.opt(2), r);
    }
    if let Some(h) = crate::ops::acc::half_acc_opt(x, &[Some(y), w]) {
        use crate::ops::acc::{down, up, up_opt};
        return down(binary_cross_entropy(&up(x)?, &up(y)?, up_opt(w)?.as_ref(), r)?, h);
    }
    let op = "binary_cross_entropy";
    if x.shape() != y.shape() {
        return Err(Error::value(op, format!("Using a target size ({:?}) that is different to the input size ({:?}) is deprecated. Please ensure they have the same size.", y.shape(), x.shape())));
    }
    let bad: Vec<f64> = x.to_vec()?;
    if bad.iter().any(|&v| !(0.0..=1.0).contains(&v)) {
        return Err(Error::value(op, "all elements of input should be between 0 and 1"));
    }
    let lx = x.log()?.nn_clamp_min(-100.0)?;
    let l1x = x.neg()?.add_scalar(1.0)?.log()?.nn_clamp_min(-100.0)?;
    let one_m_y = y.neg()?.add_scalar(1.0)?;
    let mut l = y.mul(&lx)?.add(&one_m_y.mul(&l1x)?)?.neg()?;
    if let Some(w) = w {
        l = l.mul(w)?;
    }
    r.apply(l)
}

/// `binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight)`.
pub fn binary_cross_entropy_with_logits(x: &Tensor, y: &Tensor, w: Option<&Tensor>, pos_weight: Option<&Tensor>, r: Reduction) -> Result<Tensor> {
    let _prof = crate::profiler::op_opt("binary_cross_entropy_with_logits", &[Some(x), Some(y), w, pos_weight]);
    if let Some(c) = crate::amp::optional("binary_cross_entropy_with_logits", &[Some(x), Some(y), w, pos_weight])? {
        return binary_cross_entropy_with_logits(c.req(0)?, c.req(1)?, c.opt(2), c.opt(3), r);
    }
    if let Some(h) = crate::ops::acc::half_acc_opt(x, &[Some(y), w, pos_weight]) {
        use crate::ops::acc::{down, up, up_opt};
        return down(binary_cross_entropy_with_logits(&up(x)?, &up(y)?, up_opt(w)?.as_ref(), up_opt(pos_weight)?.as_ref(), r)?, h);
    }
    let op = "binary_cross_entropy_with_logits";
    if x.shape() != y.shape() {
        return Err(Error::value(op, format!("Target size ({:?}) must be the same as input size ({:?})", y.shape(), x.shape())));
    }
    // softplus(-x) = log(1 + exp(-x))
    let sp = x.neg()?.nn_softplus()?;
    let one_m_y = y.neg()?.add_scalar(1.0)?;
    let mut l = match pos_weight {
        Some(pw) => {
            let coef = pw.sub_scalar(1.0)?.mul(y)?.add_scalar(1.0)?;
            one_m_y.mul(x)?.add(&coef.mul(&sp)?)?
        }
        None => one_m_y.mul(x)?.add(&sp)?,
    };
    if let Some(w) = w {
        l = l.mul(w)?;
    }
    r.apply(l)
}

/// The class dim of `[N, C, ...]` (1) or of an unbatched `[C]` input (0).
fn class_dim(x: &Tensor) -> usize {
    if x.ndim() == 1 { 0 } else { 1 }
}

/// A per-class `[C]` tensor shaped to broadcast along the class dim of `x`.
fn per_class(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let cd = class_dim(x);
    let mut s = vec![1i64; x.ndim()];
    s[cd] = -1;
    w.reshape(&s)
}

/// `nll_loss(input, target, weight, ignore_index, reduction)` for `[N, C, d...]` or `[C]` input.
pub fn nll_loss(x: &Tensor, t: &Tensor, w: Option<&Tensor>, ignore_index: i64, r: Reduction) -> Result<Tensor> {
    let _prof = crate::profiler::op_opt("nll_loss", &[Some(x), Some(t), w]);
    if let Some(c) = crate::amp::optional("nll_loss", &[Some(x), Some(t), w])? {
        return nll_loss(c.req(0)?, c.req(1)?, c.opt(2), ignore_index, r);
    }
    let op = "nll_loss";
    if x.ndim() == 0 {
        return Err(Error::shape(op, "input tensor should be 1D or more"));
    }
    if t.dtype().is_float() || t.dtype().is_bool() || t.dtype().is_complex() {
        return Err(Error::dtype(op, format!("expected scalar type Long but found {}", t.dtype())));
    }
    let cd = class_dim(x);
    let c = x.shape()[cd];
    let mut expect: Vec<usize> = x.shape().to_vec();
    expect.remove(cd);
    if t.shape() != &expect[..] {
        return Err(Error::shape(op, format!("Expected input batch_size ({}) to match target batch_size ({:?}).", x.shape()[0], t.shape())));
    }
    if let Some(w) = w {
        if w.numel() != c {
            return Err(Error::shape(op, format!("weight tensor should be defined either for all {c} classes or no classes but got weight tensor of shape: {:?}", w.shape())));
        }
    }
    let tv: Vec<i64> = t.to_vec()?;
    for &v in &tv {
        if v != ignore_index && (v < 0 || v >= c as i64) {
            return Err(Error::index(op, format!("Target {v} is out of bounds.")));
        }
    }
    // mask[n, c, ...] = (target == c) and not ignored
    let classes = Tensor::arange(0i64, c as i64, 1i64)?.to_device(x.device())?;
    let classes = per_class(&classes, x)?;
    // ignored targets (ignore_index may be a real class) match no class
    let t_eff = t.ne_scalar(ignore_index)?.where_(t, &t.full_like(-1)?)?;
    let tu = t_eff.unsqueeze(cd as i64)?;
    let mask = tu.eq(&classes)?;
    let zeros = x.zeros_like()?;
    let picked = mask.where_(x, &zeros)?.sum_dims(Some(&[cd as i64]), false, None)?;
    let wt = match w {
        Some(w) => {
            let wb = per_class(&w.to_dtype(x.dtype())?, x)?.broadcast_to(x.shape())?;
            mask.where_(&wb, &zeros)?.sum_dims(Some(&[cd as i64]), false, None)?
        }
        None => mask.to_dtype(x.dtype())?.sum_dims(Some(&[cd as i64]), false, None)?,
    };
    let l = picked.mul(&wt)?.neg()?;
    match r {
        Reduction::None => Ok(l),
        Reduction::Sum => l.sum(),
        Reduction::Mean => l.sum()?.div(&wt.sum()?),
    }
}

/// `cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)`; the target is
/// class indices (integer) or class probabilities (float, same shape as input).
pub fn cross_entropy(x: &Tensor, t: &Tensor, w: Option<&Tensor>, ignore_index: i64, r: Reduction, label_smoothing: f64) -> Result<Tensor> {
    let _prof = crate::profiler::op_opt("cross_entropy_loss", &[Some(x), Some(t), w]);
    // autocast runs this loss in float32: 16-bit CUDA logits go to kernels that read them as
    // they are instead of through a float32 copy (the same values up to float32 rounding)
    #[cfg(feature = "cuda")]
    if w.is_none() && label_smoothing == 0.0 && x.device().is_cuda() && crate::amp::is_autocast_enabled(x.device()) && crate::amp::policy("cross_entropy_loss", crate::amp::DeviceKind::Cuda) == Some(crate::amp::Policy::Fp32) {
        let _off = crate::amp::suspend_all();
        if let Some(l) = super::cross_entropy::cross_entropy_autocast_f32(x, t, ignore_index, r)? {
            return Ok(l);
        }
    }
    if let Some(c) = crate::amp::optional("cross_entropy_loss", &[Some(x), Some(t), w])? {
        return cross_entropy(c.req(0)?, c.req(1)?, c.opt(2), ignore_index, r, label_smoothing);
    }
    let op = "cross_entropy";
    if x.ndim() == 0 {
        return Err(Error::shape(op, "input tensor should be 1D or more"));
    }
    if !(0.0..=1.0).contains(&label_smoothing) {
        return Err(Error::value(op, format!("label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")));
    }
    if w.is_none() && label_smoothing == 0.0 && !t.dtype().is_float() {
        if let Some(l) = super::cross_entropy::cross_entropy_fused(x, t, ignore_index, r)? {
            return Ok(l);
        }
    }
    let cd = class_dim(x);
    let c = x.shape()[cd];
    let logp = x.nn_log_softmax(cd as i64)?;
    if t.dtype().is_float() {
        if t.shape() != x.shape() {
            return Err(Error::shape(op, format!("Expected target size {:?}, got {:?}", x.shape(), t.shape())));
        }
        let t = if label_smoothing > 0.0 { t.mul_scalar(1.0 - label_smoothing)?.add_scalar(label_smoothing / c as f64)? } else { t.clone() };
        let mut l = logp.mul(&t)?;
        if let Some(w) = w {
            l = l.mul(&per_class(w, x)?)?;
        }
        let l = l.neg()?;
        return match r {
            Reduction::None => l.sum_dims(Some(&[cd as i64]), false, None),
            Reduction::Sum => l.sum(),
            Reduction::Mean => l.sum()?.div_scalar((x.numel() / c.max(1)) as f64),
        };
    }
    let nll = nll_loss(&logp, t, w, ignore_index, r)?;
    if label_smoothing <= 0.0 {
        return Ok(nll);
    }
    let keep = t.ne_scalar(ignore_index)?;
    let mut s = logp.clone();
    if let Some(w) = w {
        s = s.mul(&per_class(w, x)?)?;
    }
    let smooth = s.sum_dims(Some(&[cd as i64]), false, None)?.neg()?;
    let smooth = keep.where_(&smooth, &smooth.zeros_like()?)?;
    let ret = match r {
        Reduction::None => smooth,
        Reduction::Sum => smooth.sum()?,
        Reduction::Mean => match w {
            Some(w) => {
                let classes = per_class(&Tensor::arange(0i64, c as i64, 1i64)?.to_device(x.device())?, x)?;
                let mask = t.unsqueeze(cd as i64)?.eq(&classes)?;
                let wb = per_class(w, x)?.broadcast_to(x.shape())?;
                // the weights of the targets that are not ignored (ignore_index may be a real class)
                let wt = mask.where_(&wb, &wb.zeros_like()?)?.sum_dims(Some(&[cd as i64]), false, None)?;
                let wsum = keep.where_(&wt, &wt.zeros_like()?)?.sum()?;
                smooth.sum()?.div(&wsum)?
            }
            None => smooth.sum()?.div(&keep.to_dtype(x.dtype())?.sum()?)?,
        },
    };
    nll.mul_scalar(1.0 - label_smoothing)?.add(&ret.mul_scalar(label_smoothing / c as f64)?)
}

/// `kl_div(input, target, reduction, log_target)`; `reduction` may also be `"batchmean"`.
pub fn kl_div(x: &Tensor, y: &Tensor, reduction: &str, log_target: bool) -> Result<Tensor> {
    let _prof = crate::profiler::op("kl_div", &[x, y]);
    if let Some(c) = crate::amp::tensors("kl_div", &[x, y])? {
        return kl_div(&c.args[0], &c.args[1], reduction, log_target);
    }
    let l = if log_target {
        y.exp()?.mul(&y.sub(x)?)?
    } else {
        // xlogy(y, y) - y * x, with 0 log 0 = 0
        let z = y.eq_scalar(0)?;
        let safe = z.where_(&y.ones_like()?, y)?;
        let ylogy = y.mul(&safe.log()?)?;
        ylogy.sub(&y.mul(x)?)?
    };
    match reduction {
        "batchmean" => {
            let n = if x.ndim() == 0 { 1 } else { x.shape()[0] };
            l.sum()?.div_scalar(n as f64)
        }
        r => Reduction::parse("kl_div", r)?.apply(l),
    }
}

/// `soft_margin_loss(input, target, reduction)`: `log(1 + exp(-y x))`.
pub fn soft_margin_loss(x: &Tensor, y: &Tensor, r: Reduction) -> Result<Tensor> {
    let _prof = crate::profiler::op("soft_margin_loss", &[x, y]);
    if let Some(c) = crate::amp::tensors("soft_margin_loss", &[x, y])? {
        return soft_margin_loss(&c.args[0], &c.args[1], r);
    }
    same_shape("soft_margin_loss", x, y)?;
    r.apply(y.neg()?.mul(x)?.nn_softplus()?)
}

/// `margin_ranking_loss(input1, input2, target, margin, reduction)`.
pub fn margin_ranking_loss(x1: &Tensor, x2: &Tensor, y: &Tensor, margin: f64, r: Reduction) -> Result<Tensor> {
    let _prof = crate::profiler::op("margin_ranking_loss", &[x1, x2, y]);
    if let Some(c) = crate::amp::tensors("margin_ranking_loss", &[x1, x2, y])? {
        return margin_ranking_loss(&c.args[0], &c.args[1], &c.args[2], margin, r);
    }
    if x1.ndim() != x2.ndim() || x1.ndim() != y.ndim() {
        return Err(Error::shape("margin_ranking_loss", format!("margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: {:?}, input2: {:?}, target: {:?}", x1.shape(), x2.shape(), y.shape())));
    }
    r.apply(y.neg()?.mul(&x1.sub(x2)?)?.add_scalar(margin)?.nn_clamp_min(0.0)?)
}

/// `hinge_embedding_loss(input, target, margin, reduction)`.
pub fn hinge_embedding_loss(x: &Tensor, y: &Tensor, margin: f64, r: Reduction) -> Result<Tensor> {
    let _prof = crate::profiler::op("hinge_embedding_loss", &[x, y]);
    if let Some(c) = crate::amp::tensors("hinge_embedding_loss", &[x, y])? {
        return hinge_embedding_loss(&c.args[0], &c.args[1], margin, r);
    }
    let z = x.zeros_like()?;
    let mc = x.neg()?.add_scalar(margin)?.nn_clamp_min(0.0)?;
    let om = y.ne_scalar(1)?.where_(&mc, &z)?;
    let os = y.ne_scalar(-1)?.where_(x, &z)?;
    r.apply(om.add(&os)?)
}

/// `cosine_embedding_loss(input1, input2, target, margin, reduction)`.
pub fn cosine_embedding_loss(x1: &Tensor, x2: &Tensor, y: &Tensor, margin: f64, r: Reduction) -> Result<Tensor> {
    let _prof = crate::profiler::op("cosine_embedding_loss", &[x1, x2, y]);
    if let Some(c) = crate::amp::tensors("cosine_embedding_loss", &[x1, x2, y])? {
        return cosine_embedding_loss(&c.args[0], &c.args[1], &c.args[2], margin, r);
    }
    let op = "cosine_embedding_loss";
    if x1.ndim() != x2.ndim() || x1.ndim() == 0 || x1.ndim() > 2 || y.ndim() + 1 != x1.ndim() {
        return Err(Error::shape(op, format!("cosine_embedding_loss: inputs {:?}, {:?} and target {:?} have incompatible shapes", x1.shape(), x2.shape(), y.shape())));
    }
    let d = (x1.ndim() - 1) as i64;
    const EPS: f64 = 1e-12;
    let prod = x1.mul(x2)?.sum_dims(Some(&[d]), false, None)?;
    let m1 = x1.mul(x1)?.sum_dims(Some(&[d]), false, None)?.add_scalar(EPS)?;
    let m2 = x2.mul(x2)?.sum_dims(Some(&[d]), false, None)?.add_scalar(EPS)?;
    let cos = prod.div(&m1.mul(&m2)?.sqrt()?)?;
    let z = cos.zeros_like()?;
    let pos = y.eq_scalar(1)?.where_(&cos.neg()?.add_scalar(1.0)?, &z)?;
    let neg = y.eq_scalar(-1)?.where_(&cos.sub_scalar(margin)?.nn_clamp_min(0.0)?, &z)?;
    r.apply(pos.add(&neg)?)
}

/// The (rows, classes) of a multi-margin style input: `[C]` or `[N, C]`, non-empty classes.
fn nc(op: &str, x: &Tensor) -> Result<(usize, usize)> {
    let ok = (x.ndim() == 1 && x.shape()[0] > 0) || (x.ndim() == 2 && x.shape()[1] > 0) || x.ndim() == 0;
    if !ok {
        return Err(Error::shape(op, format!("Expected non-empty vector or matrix with optional 0-dim batch size, but got: {:?}", x.shape())));
    }
    Ok(match x.ndim() {
        0 => (1, 1),
        1 => (1, x.shape()[0]),
        _ => (x.shape()[0], x.shape()[1]),
    })
}

/// `multi_margin_loss(input, target, p, margin, weight, reduction)`.
pub fn multi_margin_loss(x: &Tensor, y: &Tensor, p: i64, margin: f64, w: Option<&Tensor>, r: Reduction) -> Result<Tensor> {
    let op = "multi_margin_loss";
    if p != 1 && p != 2 {
        return Err(Error::value(op, "only p == 1 and p == 2 supported"));
    }
    let (n, c) = nc(op, x)?;
    if y.numel() != n {
        return Err(Error::shape(op, format!("inconsistent target size, expected {n} but got {:?}", y.shape())));
    }
    let yv: Vec<i64> = y.to_vec()?;
    if yv.iter().any(|&v| v < 0 || v >= c as i64) {
        return Err(Error::index(op, "target out of range"));
    }
    let x2 = x.reshape(&[n as i64, c as i64])?;
    let yi = y.reshape(&[n as i64, 1])?;
    let classes = Tensor::arange(0i64, c as i64, 1i64)?.to_device(x.device())?.reshape(&[1, c as i64])?;
    let mask = yi.eq(&classes)?;
    let z = x2.zeros_like()?;
    let xy = mask.where_(&x2, &z)?.sum_dims(Some(&[1]), true, None)?;
    let mut m = x2.sub(&xy)?.add_scalar(margin)?.nn_clamp_min(0.0)?;
    if p == 2 {
        m = m.mul(&m)?;
    }
    if let Some(w) = w {
        let wb = w.reshape(&[1, c as i64])?.broadcast_to(&[n, c])?;
        let wy = mask.where_(&wb, &wb.zeros_like()?)?.sum_dims(Some(&[1]), true, None)?;
        m = m.mul(&wy)?;
    }
    let m = mask.where_(&z, &m)?;
    let l = m.sum_dims(Some(&[1]), false, None)?.div_scalar(c as f64)?;
    let l = if x.ndim() <= 1 { l.reshape(&[])? } else { l };
    r.apply(l)
}

/// `multilabel_margin_loss(input, target, reduction)`: targets listed until the first -1.
pub fn multilabel_margin_loss(x: &Tensor, y: &Tensor, r: Reduction) -> Result<Tensor> {
    let op = "multilabel_margin_loss";
    let (n, c) = nc(op, x)?;
    if y.shape() != x.shape() {
        return Err(Error::shape(op, format!("inconsistent target size: {:?} for input of size: {:?}", y.shape(), x.shape())));
    }
    let yv: Vec<i64> = y.to_vec()?;
    // count[j]: how often class j is listed (repeats count); is_t: listed at all
    let mut count = vec![0f64; n * c];
    for i in 0..n {
        for j in 0..c {
            let v = yv[i * c + j];
            if v < 0 {
                break;
            }
            if v >= c as i64 {
                return Err(Error::index(op, format!("target {v} out of range for {c} classes")));
            }
            count[i * c + v as usize] += 1.0;
        }
    }
    let not_t: Vec<f64> = count.iter().map(|&k| if k > 0.0 { 0.0 } else { 1.0 }).collect();
    let cnt = Tensor::from_vec(count, &[n, c])?.to_device(x.device())?.to_dtype(x.dtype())?;
    let nt = Tensor::from_vec(not_t, &[n, c])?.to_device(x.device())?.to_dtype(x.dtype())?;
    let x2 = x.reshape(&[n as i64, c as i64])?;
    // pairs (listed j, unlisted i): max(0, 1 - x[j] + x[i]) weighted by how often j is listed
    let pw = cnt.unsqueeze(2)?.mul(&nt.unsqueeze(1)?)?;
    let m = x2.unsqueeze(1)?.sub(&x2.unsqueeze(2)?)?.add_scalar(1.0)?.nn_clamp_min(0.0)?;
    let m = m.mul(&pw)?;
    let l = m.sum_dims(Some(&[1, 2]), false, None)?.div_scalar(c as f64)?;
    let l = if x.ndim() <= 1 { l.reshape(&[])? } else { l };
    r.apply(l)
}

/// `multilabel_soft_margin_loss(input, target, weight, reduction)`.
pub fn multilabel_soft_margin_loss(x: &Tensor, y: &Tensor, w: Option<&Tensor>, r: Reduction) -> Result<Tensor> {
    // -(y log sigmoid(x) + (1 - y) log sigmoid(-x)) = y softplus(-x) + (1 - y) softplus(x)
    let a = y.mul(&x.neg()?.nn_softplus()?)?;
    let b = y.neg()?.add_scalar(1.0)?.mul(&x.nn_softplus()?)?;
    let mut l = a.add(&b)?;
    if let Some(w) = w {
        l = l.mul(w)?;
    }
    let c = if x.ndim() == 0 { 1 } else { x.shape()[x.ndim() - 1] };
    let l = l.sum_dims(Some(&[-1]), false, None)?.div_scalar(c as f64)?;
    r.apply(l)
}

/// `triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction)`.
#[allow(clippy::too_many_arguments)]
pub fn triplet_margin_loss(a: &Tensor, p: &Tensor, n: &Tensor, margin: f64, pn: f64, eps: f64, swap: bool, r: Reduction) -> Result<Tensor> {
    let op = "triplet_margin_loss";
    if margin <= 0.0 {
        return Err(Error::value(op, format!("margin must be greater than 0, got {margin}")));
    }
    if a.ndim() != p.ndim() || a.ndim() != n.ndim() {
        return Err(Error::shape(op, format!("The anchor, positive, and negative tensors are expected to have the same number of dimensions, but got: anchor {}D, positive {}D, and negative {}D inputs", a.ndim(), p.ndim(), n.ndim())));
    }
    let dp = super::norm::pairwise_distance(a, p, pn, eps, false)?;
    let mut dn = super::norm::pairwise_distance(a, n, pn, eps, false)?;
    if swap {
        let ds = super::norm::pairwise_distance(p, n, pn, eps, false)?;
        dn = dn.nn_minimum(&ds)?;
    }
    r.apply(dp.sub(&dn)?.add_scalar(margin)?.nn_clamp_min(0.0)?)
}

/// `gaussian_nll_loss(input, target, var, full, eps, reduction)`.
pub fn gaussian_nll_loss(x: &Tensor, y: &Tensor, var: &Tensor, full: bool, eps: f64, r: Reduction) -> Result<Tensor> {
    let op = "gaussian_nll_loss";
    let mut var = var.clone();
    if var.shape() != x.shape() {
        let xs = x.shape();
        if xs.len() == var.ndim() + 1 && xs[..xs.len() - 1] == *var.shape() {
            var = var.unsqueeze(-1)?;
        } else if !(xs.len() == var.ndim() && xs[..xs.len() - 1] == var.shape()[..var.ndim() - 1] && var.shape()[var.ndim() - 1] == 1) {
            return Err(Error::value(op, "var is of incorrect size"));
        }
    }
    let vv: Vec<f64> = var.to_vec()?;
    if vv.iter().any(|&v| v < 0.0) {
        return Err(Error::value(op, "var has negative entry/entries"));
    }
    // clamp without cutting the gradient (PyTorch clamps under no_grad)
    let clamped = {
        let _ng = crate::autograd::no_grad();
        var.nn_clamp_min(eps)?.sub(&var)?
    };
    let var = var.add(&clamped)?;
    let d = x.sub(y)?;
    let mut l = var.log()?.add(&d.mul(&d)?.div(&var)?)?.mul_scalar(0.5)?;
    if full {
        l = l.add_scalar(0.5 * (2.0 * std::f64::consts::PI).ln())?;
    }
    r.apply(l)
}

/// `poisson_nll_loss(input, target, log_input, full, eps, reduction)`.
pub fn poisson_nll_loss(x: &Tensor, y: &Tensor, log_input: bool, full: bool, eps: f64, r: Reduction) -> Result<Tensor> {
    let _prof = crate::profiler::op("poisson_nll_loss", &[x, y]);
    if let Some(c) = crate::amp::tensors("poisson_nll_loss", &[x, y])? {
        return poisson_nll_loss(&c.args[0], &c.args[1], log_input, full, eps, r);
    }
    same_shape("poisson_nll_loss", x, y)?;
    let mut l = if log_input { x.exp()?.sub(&y.mul(x)?)? } else { x.sub(&y.mul(&x.add_scalar(eps)?.log()?)?)? };
    if full {
        // Stirling term y log y - y + 0.5 log(2 pi y), where y > 1
        let one = y.gt_scalar(1)?;
        let ys = one.where_(y, &y.ones_like()?)?;
        let st = ys.mul(&ys.log()?)?.sub(&ys)?.add(&ys.mul_scalar(2.0 * std::f64::consts::PI)?.log()?.mul_scalar(0.5)?)?;
        l = l.add(&one.where_(&st, &st.zeros_like()?)?)?;
    }
    r.apply(l)
}

/// `linear_cross_entropy(input, linear_weight, target)`: `cross_entropy(linear(input, weight), target)`
/// with the classes laid out as `weight.shape[:-1]`.
pub fn linear_cross_entropy(x: &Tensor, w: &Tensor, t: &Tensor, r: Reduction) -> Result<Tensor> {
    let op = "linear_cross_entropy";
    if x.ndim() != 1 && x.ndim() != 2 {
        return Err(Error::shape(op, format!("expected input with dimensionality 1 or 2, got {}", x.ndim())));
    }
    if w.ndim() < 2 {
        return Err(Error::shape(op, format!("expected linear_weight with dimensionality at least 2, got {}", w.ndim())));
    }
    let inf = x.shape()[x.ndim() - 1];
    if w.shape()[w.ndim() - 1] != inf {
        return Err(Error::shape(op, format!("expected equal input and linear_weight last dimensions (in_features), got {inf} and {}", w.shape()[w.ndim() - 1])));
    }
    let classes: Vec<i64> = w.shape()[..w.ndim() - 1].iter().map(|&v| v as i64).collect();
    let ncls: i64 = classes.iter().product();
    let logits = super::conv::linear(x, &w.reshape(&[ncls, inf as i64])?, None)?;
    let mut shape: Vec<i64> = x.shape()[..x.ndim() - 1].iter().map(|&v| v as i64).collect();
    shape.extend(&classes);
    cross_entropy(&logits.reshape(&shape)?, t, None, -100, r, 0.0)
}
