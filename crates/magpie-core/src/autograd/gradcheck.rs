//! `gradcheck` / `gradgradcheck`: analytical gradients (from backward) against central finite
//! differences, in f64, element by element of the Jacobian (PyTorch's slow mode).
//!
//! ```
//! use magpie_core::{autograd, Tensor};
//! let x = Tensor::from_vec(vec![0.5f64, -1.0, 2.0], &[3])?.with_requires_grad()?;
//! let f = |t: &[Tensor]| Ok(vec![t[0].exp()?.mul(&t[0])?]);
//! let report = autograd::gradcheck(f, &[x.clone()], &Default::default())?;
//! assert!(report.max_abs_err < 1e-6);
//! autograd::gradgradcheck(f, &[x], None, &Default::default())?;
//! # Ok::<(), magpie_core::Error>(())
//! ```

use super::{enable_grad, grad};
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Tolerances of [`gradcheck`]; the defaults are PyTorch's.
#[derive(Clone, Copy, Debug)]
pub struct GradcheckOptions {
    /// Finite-difference step.
    pub eps: f64,
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance (relative to the numerical value).
    pub rtol: f64,
}

impl Default for GradcheckOptions {
    fn default() -> Self {
        GradcheckOptions { eps: 1e-6, atol: 1e-5, rtol: 1e-3 }
    }
}

/// What [`gradcheck`] compared, and where analytical and numerical values differed most.
#[derive(Clone, Debug, Default)]
pub struct GradcheckReport {
    /// Number of Jacobian entries compared.
    pub entries: usize,
    /// Largest |analytical - numerical|.
    pub max_abs_err: f64,
    /// (output, input, output element, input element) of that entry (flat, row-major indices).
    pub worst: Option<(usize, usize, usize, usize)>,
    /// Analytical and numerical values there.
    pub analytical: f64,
    pub numerical: f64,
    /// Largest value of |a - n| / (atol + rtol |n|): at most 1 when the check passes.
    pub max_ratio: f64,
}

impl std::fmt::Display for GradcheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.worst {
            Some((o, i, k, e)) => write!(
                f,
                "{} entries; worst: output {o} element {k} w.r.t. input {i} element {e}: analytical {:.8e}, numerical {:.8e}, |diff| {:.3e}",
                self.entries, self.analytical, self.numerical, self.max_abs_err
            ),
            None => write!(f, "{} entries", self.entries),
        }
    }
}

fn f64_values(op: &str, t: &Tensor) -> Result<Vec<f64>> {
    if t.dtype().is_complex() {
        return Err(Error::unsupported(op, "complex outputs"));
    }
    t.to_vec::<f64>()
}

/// `torch.autograd.gradcheck(f, inputs)`: compares, for every input that requires grad and
/// every floating output, the Jacobian from backward with central differences
/// `(f(x + eps) - f(x - eps)) / 2 eps`; an entry passes when `|a - n| <= atol + rtol |n|`.
/// Inputs that require grad must be float64. The error on a mismatch names the worst entry.
pub fn gradcheck(f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>, inputs: &[Tensor], opts: &GradcheckOptions) -> Result<GradcheckReport> {
    const OP: &str = "gradcheck";
    let _g = enable_grad();
    let diff: Vec<usize> = (0..inputs.len()).filter(|&j| inputs[j].requires_grad()).collect();
    if diff.is_empty() {
        return Err(Error::value(OP, "gradcheck expects at least one input tensor to require gradient"));
    }
    for &j in &diff {
        if inputs[j].dtype() != DType::F64 {
            return Err(Error::dtype(OP, format!("input {j} requires grad but is {}; gradcheck needs float64 inputs", inputs[j].dtype())));
        }
    }
    let outs = f(inputs)?;
    let float_outs: Vec<usize> = (0..outs.len()).filter(|&i| outs[i].dtype().is_float() || outs[i].dtype().is_complex()).collect();
    let xs: Vec<Tensor> = diff.iter().map(|&j| inputs[j].clone()).collect();
    // analytical[i][j]: row-major [numel(out_i), numel(x_j)]
    let mut analytical: Vec<Vec<Vec<f64>>> = Vec::new();
    for &i in &float_outs {
        let o = &outs[i];
        let mut per: Vec<Vec<f64>> = xs.iter().map(|x| vec![0.0; o.numel() * x.numel()]).collect();
        if o.requires_grad() {
            for k in 0..o.numel() {
                let mut e = vec![0f64; o.numel()];
                e[k] = 1.0;
                let v = Tensor::from_vec(e, o.shape())?.to_dtype(o.dtype())?;
                let gs = grad(&[o.clone()], &xs, &[v], true, false, true)?;
                for (j, g) in gs.into_iter().enumerate() {
                    let Some(g) = g else { continue };
                    let vals = f64_values(OP, &g)?;
                    let n = xs[j].numel();
                    per[j][k * n..(k + 1) * n].copy_from_slice(&vals);
                }
            }
        }
        analytical.push(per);
    }
    // numerical, column by column
    let eval = |j: usize, vals: Vec<f64>| -> Result<Vec<Vec<f64>>> {
        let x = Tensor::from_vec(vals, inputs[j].shape())?.requires_grad_(true)?;
        let mut args = inputs.to_vec();
        args[j] = x;
        let o = f(&args)?;
        float_outs.iter().map(|&i| o.get(i).ok_or_else(|| Error::value(OP, "the function returned fewer outputs on a perturbed input")).and_then(|t| f64_values(OP, t))).collect()
    };
    let mut rep = GradcheckReport::default();
    let mut fail: Option<String> = None;
    for (jj, &j) in diff.iter().enumerate() {
        let base = inputs[j].detach().to_vec::<f64>()?;
        let n = base.len();
        for e in 0..n {
            let mut plus = base.clone();
            plus[e] += opts.eps;
            let mut minus = base.clone();
            minus[e] -= opts.eps;
            let (fp, fm) = (eval(j, plus)?, eval(j, minus)?);
            for (ii, &i) in float_outs.iter().enumerate() {
                let m = outs[i].numel();
                if fp[ii].len() != m || fm[ii].len() != m {
                    return Err(Error::shape(OP, format!("output {i} changed size under a perturbation of input {j}")));
                }
                for k in 0..m {
                    let num = (fp[ii][k] - fm[ii][k]) / (2.0 * opts.eps);
                    let ana = analytical[ii][jj][k * n + e];
                    let err = (ana - num).abs();
                    let tol = opts.atol + opts.rtol * num.abs();
                    let ratio = if err.is_nan() || (ana.is_nan() != num.is_nan()) { f64::INFINITY } else { err / tol };
                    rep.entries += 1;
                    if ratio > rep.max_ratio || rep.worst.is_none() || ratio.is_nan() {
                        rep.max_ratio = ratio;
                        rep.max_abs_err = err;
                        rep.worst = Some((i, j, k, e));
                        rep.analytical = ana;
                        rep.numerical = num;
                    }
                    if !(ratio <= 1.0) && !(ana == num) && fail.is_none() {
                        fail = Some(format!(
                            "Jacobian mismatch for output {i} with respect to input {j}: at output element {k}, input element {e}: analytical {ana:.8e}, numerical {num:.8e} (|diff| {err:.3e} > atol {} + rtol {} * |numerical|)",
                            opts.atol, opts.rtol
                        ));
                    }
                }
            }
        }
    }
    match fail {
        Some(msg) => Err(Error::autograd(OP, format!("{msg}; {rep}"))),
        None => Ok(rep),
    }
}

/// Deterministic values in [-1, 1) for `gradgradcheck`'s random grad_outputs.
fn pseudo_random(n: usize, seed: u64) -> Vec<f64> {
    crate::ops::random::Generator::new(seed).uniform(n).into_iter().map(|u| 2.0 * u - 1.0).collect()
}

/// `torch.autograd.gradgradcheck(f, inputs, grad_outputs)`: [`gradcheck`] of the function
/// `(inputs, v) -> grad(f(inputs), inputs, v, create_graph=true)`, i.e. of the backward itself
/// (second derivatives, and the backward's linearity in `v`). `grad_outputs` default to fixed
/// pseudo-random values, one tensor per output of `f` that requires grad.
pub fn gradgradcheck(
    f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    inputs: &[Tensor],
    grad_outputs: Option<&[Tensor]>,
    opts: &GradcheckOptions,
) -> Result<GradcheckReport> {
    const OP: &str = "gradgradcheck";
    let _g = enable_grad();
    let outs = f(inputs)?;
    let diff_out: Vec<usize> = (0..outs.len()).filter(|&i| outs[i].requires_grad()).collect();
    let vs: Vec<Tensor> = match grad_outputs {
        Some(v) => {
            if v.len() != diff_out.len() {
                return Err(Error::value(OP, format!("expected {} grad_outputs (one per differentiable output), got {}", diff_out.len(), v.len())));
            }
            v.to_vec()
        }
        None => diff_out
            .iter()
            .map(|&i| Tensor::from_vec(pseudo_random(outs[i].numel(), i as u64 + 7), outs[i].shape())?.requires_grad_(true))
            .collect::<Result<_>>()?,
    };
    let n = inputs.len();
    let g = |all: &[Tensor]| -> Result<Vec<Tensor>> {
        let (xs, vs) = all.split_at(n);
        let outs = f(xs)?;
        let diff_x: Vec<Tensor> = xs.iter().filter(|x| x.requires_grad()).cloned().collect();
        let (os, gvs): (Vec<Tensor>, Vec<Tensor>) =
            diff_out.iter().zip(vs).filter(|(&i, _)| outs[i].requires_grad()).map(|(&i, v)| (outs[i].clone(), v.clone())).unzip();
        if os.is_empty() {
            return diff_x.iter().map(|x| x.zeros_like()).collect();
        }
        let gs = grad(&os, &diff_x, &gvs, true, true, true)?;
        gs.into_iter().zip(&diff_x).map(|(g, x)| g.map_or_else(|| x.zeros_like(), Ok)).collect()
    };
    let mut all = inputs.to_vec();
    all.extend(vs);
    gradcheck(g, &all, opts)
}
