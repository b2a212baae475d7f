//! `ctc_loss`: Connectionist Temporal Classification, computed per sample in log space with the
//! alpha (forward) recursion over the blank-extended target, in f64. The backward runs the beta
//! recursion and returns PyTorch's gradient, `exp(log_probs) - occupancy / p(target)`, which is
//! the gradient with respect to the logits when `log_probs = log_softmax(logits)` (PyTorch
//! returns the same, so chaining through `log_softmax` gives the exact gradient).

use super::loss::Reduction;
use crate::autograd::{self, Saved};
use crate::tensor::Tensor;
use crate::{Error, Result};
use rayon::prelude::*;

/// `log(exp(a) + exp(b))`, exact at -inf.
fn lse(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let m = a.max(b);
    m + ((a - m).exp() + (b - m).exp()).ln()
}

/// The validated problem: log-probs `[T, N, C]` as f64, one target list and input length per sample.
struct Problem {
    t: usize,
    n: usize,
    c: usize,
    blank: usize,
    lp: Vec<f64>,
    targets: Vec<Vec<usize>>,
    in_lens: Vec<usize>,
}

impl Problem {
    fn at(&self, t: usize, b: usize, c: usize) -> f64 {
        self.lp[(t * self.n + b) * self.c + c]
    }
    /// The blank-extended label of state `s`.
    fn ext(tg: &[usize], blank: usize, s: usize) -> usize {
        if s % 2 == 0 { blank } else { tg[s / 2] }
    }
    /// Whether state `s` may be entered from `s - 2` (a non-blank differing from the previous label).
    fn skip(tg: &[usize], blank: usize, s: usize) -> bool {
        s >= 2 && s % 2 == 1 && Self::ext(tg, blank, s) != Self::ext(tg, blank, s - 2)
    }
    /// log alpha `[Tb, L]` of sample `b`, and its negative log-likelihood.
    fn alpha(&self, b: usize) -> (Vec<f64>, f64) {
        let tg = &self.targets[b];
        let (tb, l) = (self.in_lens[b], 2 * tg.len() + 1);
        if tb == 0 {
            return (Vec::new(), if tg.is_empty() { 0.0 } else { f64::INFINITY });
        }
        let mut a = vec![f64::NEG_INFINITY; tb * l];
        a[0] = self.at(0, b, self.blank);
        if l > 1 {
            a[1] = self.at(0, b, tg[0]);
        }
        for t in 1..tb {
            let (prev, cur) = a.split_at_mut(t * l);
            let prev = &prev[(t - 1) * l..];
            for s in 0..l {
                let mut v = prev[s];
                if s >= 1 {
                    v = lse(v, prev[s - 1]);
                }
                if Self::skip(tg, self.blank, s) {
                    v = lse(v, prev[s - 2]);
                }
                cur[s] = if v == f64::NEG_INFINITY { v } else { v + self.at(t, b, Self::ext(tg, self.blank, s)) };
            }
        }
        let last = &a[(tb - 1) * l..];
        let ll = if l > 1 { lse(last[l - 1], last[l - 2]) } else { last[l - 1] };
        (a, -ll)
    }
    /// PyTorch's gradient of sample `b`'s loss w.r.t. `log_probs[:, b, :]`, as `[T, C]` (zero past
    /// the input length).
    fn grad(&self, b: usize, zero_infinity: bool) -> Vec<f64> {
        let mut g = vec![0.0; self.t * self.c];
        let (a, nll) = self.alpha(b);
        let tg = &self.targets[b];
        let (tb, l) = (self.in_lens[b], 2 * tg.len() + 1);
        if tb == 0 || (zero_infinity && nll.is_infinite()) {
            return g;
        }
        let mut beta = vec![f64::NEG_INFINITY; tb * l];
        beta[(tb - 1) * l + l - 1] = self.at(tb - 1, b, Self::ext(tg, self.blank, l - 1));
        if l > 1 {
            beta[(tb - 1) * l + l - 2] = self.at(tb - 1, b, Self::ext(tg, self.blank, l - 2));
        }
        for t in (0..tb - 1).rev() {
            let (cur, next) = beta.split_at_mut((t + 1) * l);
            let cur = &mut cur[t * l..];
            for s in 0..l {
                let mut v = next[s];
                if s + 1 < l {
                    v = lse(v, next[s + 1]);
                }
                if s + 2 < l && Self::skip(tg, self.blank, s + 2) {
                    v = lse(v, next[s + 2]);
                }
                cur[s] = if v == f64::NEG_INFINITY { v } else { v + self.at(t, b, Self::ext(tg, self.blank, s)) };
            }
        }
        let mut lcab = vec![f64::NEG_INFINITY; self.c];
        for t in 0..tb {
            lcab.iter_mut().for_each(|v| *v = f64::NEG_INFINITY);
            for s in 0..l {
                let c = Self::ext(tg, self.blank, s);
                lcab[c] = lse(lcab[c], a[t * l + s] + beta[t * l + s]);
            }
            for c in 0..self.c {
                let lp = self.at(t, b, c);
                g[t * self.c + c] = lp.exp() - (lcab[c] + nll - lp).exp();
            }
        }
        g
    }
}

fn lengths(op: &str, name: &str, v: &[i64], n: usize) -> Result<Vec<usize>> {
    if v.len() != n {
        return Err(Error::shape(op, format!("Expected tensor to have size at least {n} at dimension 1, but got size {} for argument #2 '{name}'", v.len())));
    }
    v.iter()
        .map(|&x| usize::try_from(x).map_err(|_| Error::value(op, format!("{name} must be non-negative, got {x}"))))
        .collect()
}

/// `ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity)`.
/// `log_probs` is `[T, N, C]` (or unbatched `[T, C]`), `targets` padded `[N, S]` or the
/// concatenation of all targets (1-D); `mean` divides each loss by its target length (at least 1)
/// and averages over the batch. Impossible alignments give `inf` (0 with `zero_infinity`).
#[allow(clippy::too_many_arguments)]
pub fn ctc_loss(log_probs: &Tensor, targets: &Tensor, input_lengths: &[i64], target_lengths: &[i64], blank: i64, r: Reduction, zero_infinity: bool) -> Result<Tensor> {
    let op = "ctc_loss";
    super::util::check_float(op, log_probs)?;
    if targets.dtype().is_float() || targets.dtype().is_complex() || targets.dtype().is_bool() {
        return Err(Error::dtype(op, format!("ctc_loss: targets must be integer, got {}", targets.dtype())));
    }
    let unbatched = log_probs.ndim() == 2;
    let lp3 = match log_probs.ndim() {
        3 => log_probs.clone(),
        2 => log_probs.unsqueeze(1)?,
        d => return Err(Error::shape(op, format!("ctc_loss: log_probs must be 2-D or 3-D, got {d}-D"))),
    };
    let (t, n, c) = (lp3.shape()[0], lp3.shape()[1], lp3.shape()[2]);
    if blank < 0 || blank as usize >= c {
        return Err(Error::index(op, format!("blank must be in label range [0, {c}), got {blank}")));
    }
    let in_lens = lengths(op, "input_lengths", input_lengths, n)?;
    let tg_lens = lengths(op, "target_lengths", target_lengths, n)?;
    for (b, &il) in in_lens.iter().enumerate() {
        if il > t {
            return Err(Error::value(op, format!("Expected input_lengths to have value at most {t}, but got value {il} (while checking arguments for ctc_loss_cpu) at sample {b}")));
        }
    }
    let tv: Vec<i64> = targets.to_vec()?;
    let tgt_rows: Vec<&[i64]> = if targets.ndim() == 2 {
        let s = targets.shape()[1];
        if targets.shape()[0] != n {
            return Err(Error::shape(op, format!("ctc_loss: targets has batch size {} but log_probs has {n}", targets.shape()[0])));
        }
        let mut rows = Vec::with_capacity(n);
        for (b, &tl) in tg_lens.iter().enumerate() {
            if tl > s {
                return Err(Error::value(op, format!("Expected tensor to have size at least {tl} at dimension 1, but got size {s} for argument #2 'targets' (while checking arguments for ctc_loss_cpu)")));
            }
            rows.push(&tv[b * s..b * s + tl]);
        }
        rows
    } else if targets.ndim() == 1 {
        let total: usize = tg_lens.iter().sum();
        if total > tv.len() {
            return Err(Error::value(op, format!("ctc_loss: the target lengths sum to {total} but targets has {} elements", tv.len())));
        }
        let mut rows = Vec::with_capacity(n);
        let mut off = 0;
        for &tl in &tg_lens {
            rows.push(&tv[off..off + tl]);
            off += tl;
        }
        rows
    } else {
        return Err(Error::shape(op, format!("ctc_loss: targets must be 1-D or 2-D, got {:?}", targets.shape())));
    };
    let mut targets_u = Vec::with_capacity(n);
    for row in tgt_rows {
        let mut v = Vec::with_capacity(row.len());
        for &x in row {
            if x < 0 || x as usize >= c {
                return Err(Error::index(op, format!("ctc_loss: target value {x} is out of range for {c} classes")));
            }
            v.push(x as usize);
        }
        targets_u.push(v);
    }
    let lp: Vec<f64> = lp3.contiguous()?.to_vec()?;
    let prob = std::sync::Arc::new(Problem { t, n, c, blank: blank as usize, lp, targets: targets_u, in_lens });
    let nll: Vec<f64> = (0..n)
        .into_par_iter()
        .map(|b| {
            let v = prob.alpha(b).1;
            if zero_infinity && v.is_infinite() { 0.0 } else { v }
        })
        .collect();
    let raw = Tensor::from_vec(nll, &[n])?.to_device(log_probs.device())?.to_dtype(log_probs.dtype())?;
    let saved = Saved::new("ctc_loss", &lp3);
    let p2 = prob.clone();
    autograd::record("CtcLoss", &[&lp3], &[raw.clone()], move |_, g| {
        let lp = saved.get()?;
        let (t, n, c) = (p2.t, p2.n, p2.c);
        let per: Vec<Vec<f64>> = (0..n).into_par_iter().map(|b| p2.grad(b, zero_infinity)).collect();
        let mut full = vec![0.0; t * n * c];
        for (b, gb) in per.iter().enumerate() {
            for tt in 0..t {
                full[(tt * n + b) * c..(tt * n + b + 1) * c].copy_from_slice(&gb[tt * c..(tt + 1) * c]);
            }
        }
        let gl = Tensor::from_vec(full, &[t, n, c])?.to_device(lp.device())?.to_dtype(lp.dtype())?;
        Ok(vec![Some(gl.mul(&g[0].reshape(&[1, n as i64, 1])?)?)])
    });
    let out = match r {
        Reduction::None => raw,
        Reduction::Sum => raw.sum()?,
        Reduction::Mean => {
            let tl: Vec<f64> = tg_lens.iter().map(|&x| x.max(1) as f64).collect();
            let tl = Tensor::from_vec(tl, &[n])?.to_device(log_probs.device())?.to_dtype(log_probs.dtype())?;
            raw.div(&tl)?.mean()?
        }
    };
    if unbatched && r == Reduction::None { out.squeeze_dims(&[0]) } else { Ok(out) }
}
