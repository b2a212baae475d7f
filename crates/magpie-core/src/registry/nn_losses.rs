//! Registry entries for the nn family's loss functions.

use super::super::{Args, Registry, Value};
use crate::ops::nn::loss::{self, Reduction};
use crate::tensor::Tensor;
use crate::Result;

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}

/// Reads `size_average`, `reduce` (legacy) and `reduction` at the given positions.
fn reduction(a: &mut Args, sa: Option<usize>, rd: Option<usize>, r: usize) -> Result<Reduction> {
    let size_average = match sa {
        Some(i) => a.get_some(i, "size_average").map(|v| matches!(v, Value::Bool(true))),
        None => None,
    };
    let reduce = match rd {
        Some(i) => a.get_some(i, "reduce").map(|v| matches!(v, Value::Bool(true))),
        None => None,
    };
    let s = a.opt_str(r, "reduction")?.unwrap_or_else(|| "mean".into());
    let parsed = Reduction::parse(a.op(), &s)?;
    Ok(if size_average.is_some() || reduce.is_some() { Reduction::legacy(size_average, reduce) } else { parsed })
}

/// `f(input, target, size_average, reduce, reduction)`-shaped losses.
fn simple(a: &mut Args, f: fn(&Tensor, &Tensor, Reduction) -> Result<Tensor>) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let y = a.tensor(1, "target")?;
    let r = reduction(a, Some(2), Some(3), 4)?;
    t(f(&x, &y, r)?)
}

/// `f(input1, input2, target, margin=0, size_average, reduce, reduction)`-shaped losses.
fn pair_margin(a: &mut Args, f: fn(&Tensor, &Tensor, &Tensor, f64, Reduction) -> Result<Tensor>) -> Result<Value> {
    let x1 = a.tensor(0, "input1")?;
    let x2 = a.tensor(1, "input2")?;
    let y = a.tensor(2, "target")?;
    let m = a.float_or(3, "margin", 0.0)?;
    let r = reduction(a, Some(4), Some(5), 6)?;
    t(f(&x1, &x2, &y, m, r)?)
}

/// CTC lengths: a list of ints or an integer tensor (0-d or 1-d).
fn lengths(a: &mut Args, i: usize, name: &str) -> Result<Vec<i64>> {
    match a.get_some(i, name) {
        Some(Value::Tensor(t)) => t.reshape(&[-1])?.to_vec::<i64>(),
        Some(v) => v.to_ints("ctc_loss", name),
        None => Err(crate::Error::value("ctc_loss", format!("missing argument {name}"))),
    }
}

/// Registers the losses.
pub(crate) fn register(r: &mut super::super::Registry) {
    let r: &mut Registry = r;
    r.add("nn.functional.mse_loss", |a| simple(a, loss::mse_loss));
    r.add("nn.functional.l1_loss", |a| simple(a, loss::l1_loss));
    r.add("nn.functional.soft_margin_loss", |a| simple(a, loss::soft_margin_loss));
    r.add("nn.functional.multilabel_margin_loss", |a| simple(a, loss::multilabel_margin_loss));
    r.add("nn.functional.smooth_l1_loss", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let r = reduction(a, Some(2), Some(3), 4)?;
        let beta = a.float_or(5, "beta", 1.0)?;
        t(loss::smooth_l1_loss(&x, &y, r, beta)?)
    });
    r.add("nn.functional.huber_loss", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let r = reduction(a, None, None, 2)?;
        let delta = a.float_or(3, "delta", 1.0)?;
        let _w = a.opt_tensor(4, "weight")?.map(|_| ()).map_or(Ok(()), |_| Err(crate::Error::unsupported("huber_loss", "weight")))?;
        t(loss::huber_loss(&x, &y, r, delta)?)
    });
    r.add("nn.functional.binary_cross_entropy", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let w = a.opt_tensor(2, "weight")?;
        let r = reduction(a, Some(3), Some(4), 5)?;
        t(loss::binary_cross_entropy(&x, &y, w.as_ref(), r)?)
    });
    r.add("nn.functional.binary_cross_entropy_with_logits", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let w = a.opt_tensor(2, "weight")?;
        let r = reduction(a, Some(3), Some(4), 5)?;
        let pw = a.opt_tensor(6, "pos_weight")?;
        t(loss::binary_cross_entropy_with_logits(&x, &y, w.as_ref(), pw.as_ref(), r)?)
    });
    r.add("nn.functional.ctc_loss", |a| {
        let x = a.tensor(0, "log_probs")?;
        let y = a.tensor(1, "targets")?;
        let il = lengths(a, 2, "input_lengths")?;
        let tl = lengths(a, 3, "target_lengths")?;
        let blank = a.int_or(4, "blank", 0)?;
        let r = reduction(a, None, None, 5)?;
        let zi = a.bool_or(6, "zero_infinity", false)?;
        t(crate::ops::nn::ctc_loss(&x, &y, &il, &tl, blank, r, zi)?)
    });
    r.add("nn.functional.nll_loss", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let w = a.opt_tensor(2, "weight")?;
        let ii = a.int_or(4, "ignore_index", -100)?;
        let r = reduction(a, Some(3), Some(5), 6)?;
        t(loss::nll_loss(&x, &y, w.as_ref(), ii, r)?)
    });
    r.add("nn.functional.cross_entropy", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let w = a.opt_tensor(2, "weight")?;
        let sa = a.get_some(3, "size_average").map(|v| matches!(v, Value::Bool(true)));
        let ii = a.int_or(4, "ignore_index", -100)?;
        let rd = a.get_some(5, "reduce").map(|v| matches!(v, Value::Bool(true)));
        let s = a.opt_str(6, "reduction")?.unwrap_or_else(|| "mean".into());
        let ls = a.float_or(7, "label_smoothing", 0.0)?;
        let mut r = Reduction::parse(a.op(), &s)?;
        if sa.is_some() || rd.is_some() {
            r = Reduction::legacy(sa, rd);
        }
        t(loss::cross_entropy(&x, &y, w.as_ref(), ii, r, ls)?)
    });
    r.add("nn.functional.linear_cross_entropy", |a| {
        let x = a.tensor(0, "input")?;
        let w = a.tensor(1, "linear_weight")?;
        let y = a.tensor(2, "target")?;
        let r = reduction(a, None, None, 3)?;
        t(loss::linear_cross_entropy(&x, &w, &y, r)?)
    });
    r.add("nn.functional.kl_div", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let sa = a.get_some(2, "size_average").map(|v| matches!(v, Value::Bool(true)));
        let rd = a.get_some(3, "reduce").map(|v| matches!(v, Value::Bool(true)));
        let mut s = a.opt_str(4, "reduction")?.unwrap_or_else(|| "mean".into());
        if sa.is_some() || rd.is_some() {
            s = match Reduction::legacy(sa, rd) {
                Reduction::None => "none",
                Reduction::Sum => "sum",
                Reduction::Mean => "mean",
            }
            .into();
        }
        let lt = a.bool_or(5, "log_target", false)?;
        t(loss::kl_div(&x, &y, &s, lt)?)
    });
    r.add("nn.functional.margin_ranking_loss", |a| pair_margin(a, loss::margin_ranking_loss));
    r.add("nn.functional.hinge_embedding_loss", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let m = a.float_or(2, "margin", 1.0)?;
        let r = reduction(a, Some(3), Some(4), 5)?;
        t(loss::hinge_embedding_loss(&x, &y, m, r)?)
    });
    r.add("nn.functional.cosine_embedding_loss", |a| pair_margin(a, loss::cosine_embedding_loss));
    r.add("nn.functional.multi_margin_loss", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let p = a.int_or(2, "p", 1)?;
        let m = a.float_or(3, "margin", 1.0)?;
        let w = a.opt_tensor(4, "weight")?;
        let r = reduction(a, Some(5), Some(6), 7)?;
        t(loss::multi_margin_loss(&x, &y, p, m, w.as_ref(), r)?)
    });
    r.add("nn.functional.multilabel_soft_margin_loss", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let w = a.opt_tensor(2, "weight")?;
        let r = reduction(a, Some(3), Some(4), 5)?;
        t(loss::multilabel_soft_margin_loss(&x, &y, w.as_ref(), r)?)
    });
    r.add("nn.functional.triplet_margin_loss", |a| {
        let an = a.tensor(0, "anchor")?;
        let p = a.tensor(1, "positive")?;
        let n = a.tensor(2, "negative")?;
        let m = a.float_or(3, "margin", 1.0)?;
        let pn = a.float_or(4, "p", 2.0)?;
        let eps = a.float_or(5, "eps", 1e-6)?;
        let sw = a.bool_or(6, "swap", false)?;
        let r = reduction(a, Some(7), Some(8), 9)?;
        t(loss::triplet_margin_loss(&an, &p, &n, m, pn, eps, sw, r)?)
    });
    r.add("nn.functional.triplet_margin_with_distance_loss", |a| {
        let an = a.tensor(0, "anchor")?;
        let p = a.tensor(1, "positive")?;
        let n = a.tensor(2, "negative")?;
        if a.get_some(3, "distance_function").is_some() {
            return Err(crate::Error::unsupported(a.op(), "a custom distance_function"));
        }
        let m = a.float_or(4, "margin", 1.0)?;
        let sw = a.bool_or(5, "swap", false)?;
        let r = reduction(a, None, None, 6)?;
        t(loss::triplet_margin_loss(&an, &p, &n, m, 2.0, 1e-6, sw, r)?)
    });
    r.add("nn.functional.gaussian_nll_loss", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let v = a.tensor(2, "var")?;
        let full = a.bool_or(3, "full", false)?;
        let eps = a.float_or(4, "eps", 1e-6)?;
        let r = reduction(a, None, None, 5)?;
        t(loss::gaussian_nll_loss(&x, &y, &v, full, eps, r)?)
    });
    r.add("nn.functional.poisson_nll_loss", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "target")?;
        let li = a.bool_or(2, "log_input", true)?;
        let full = a.bool_or(3, "full", false)?;
        let r = reduction(a, Some(4), Some(6), 7)?;
        let eps = a.float_or(5, "eps", 1e-8)?;
        t(loss::poisson_nll_loss(&x, &y, li, full, eps, r)?)
    });
}
