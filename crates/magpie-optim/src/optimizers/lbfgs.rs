//! `torch.optim.LBFGS`: limited-memory BFGS with an optional strong-Wolfe line search,
//! following `torch/optim/lbfgs.py` step by step (on the flattened parameters, in f64).

use super::check;
use crate::core::{Hyper, OptimizerState};
use crate::Optimizer;
use magpie_core::{Error, Result, Tensor};

/// LBFGS's keyword arguments and defaults.
#[derive(Clone, Debug)]
pub struct LbfgsConfig {
    pub lr: f64,
    pub max_iter: usize,
    /// Defaults to `max_iter * 5 / 4`.
    pub max_eval: Option<usize>,
    pub tolerance_grad: f64,
    pub tolerance_change: f64,
    pub history_size: usize,
    /// Use the strong-Wolfe line search (PyTorch's `line_search_fn="strong_wolfe"`).
    pub strong_wolfe: bool,
}

impl Default for LbfgsConfig {
    fn default() -> Self {
        LbfgsConfig { lr: 1.0, max_iter: 20, max_eval: None, tolerance_grad: 1e-7, tolerance_change: 1e-9, history_size: 100, strong_wolfe: false }
    }
}

/// L-BFGS (`torch.optim.LBFGS`). Needs a closure that recomputes the loss and its gradients:
/// call [`Lbfgs::step_with`]; plain `step()` is an error, as in PyTorch.
pub struct Lbfgs {
    st: OptimizerState,
    cfg: LbfgsConfig,
    mem: Memory,
}

#[derive(Default)]
struct Memory {
    n_iter: usize,
    func_evals: usize,
    d: Vec<f64>,
    t: f64,
    old_dirs: Vec<Vec<f64>>,
    old_stps: Vec<Vec<f64>>,
    ro: Vec<f64>,
    h_diag: f64,
    prev_flat_grad: Option<Vec<f64>>,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

impl Lbfgs {
    /// A new LBFGS over `params` (one group, as in PyTorch).
    pub fn new(params: Vec<Tensor>, cfg: LbfgsConfig) -> Result<Self> {
        check(cfg.lr >= 0.0, "LBFGS", format!("Invalid learning rate: {}", cfg.lr))?;
        let hyper: Hyper = [("lr".to_string(), cfg.lr)].into_iter().collect();
        Ok(Lbfgs { st: OptimizerState::new("LBFGS", params, hyper)?, cfg, mem: Memory::default() })
    }

    fn params(&self) -> Vec<Tensor> {
        self.st.groups[0].params.clone()
    }

    fn flat_grad(&self) -> Result<Vec<f64>> {
        let mut v = Vec::new();
        for p in self.params() {
            match p.grad() {
                Some(g) => v.extend(g.to_vec::<f64>()?),
                None => v.extend(std::iter::repeat_n(0.0, p.numel())),
            }
        }
        Ok(v)
    }

    fn flat_params(&self) -> Result<Vec<f64>> {
        let mut v = Vec::new();
        for p in self.params() {
            v.extend(p.to_vec::<f64>()?);
        }
        Ok(v)
    }

    fn set_params(&self, x: &[f64]) -> Result<()> {
        let _ng = magpie_core::autograd::no_grad();
        let mut k = 0;
        for p in self.params() {
            let n = p.numel();
            let t = Tensor::from_vec(x[k..k + n].to_vec(), p.shape())?.to_dtype(p.dtype())?;
            if p.device().is_cuda() {
                // a host round trip: LBFGS keeps its flat vectors on the host
                p.copy_(&t)?;
            } else {
                magpie_core::backend::cpu::scatter_into(&p, &t.to_vec::<f64>()?)?;
            }
            k += n;
        }
        Ok(())
    }

    /// `x + t * d` as the parameters, then the closure: (loss, flat gradient).
    fn directional(&self, closure: &mut dyn FnMut() -> Result<f64>, x: &[f64], t: f64, d: &[f64]) -> Result<(f64, Vec<f64>)> {
        let moved: Vec<f64> = x.iter().zip(d).map(|(a, b)| a + t * b).collect();
        self.set_params(&moved)?;
        let loss = closure()?;
        let g = self.flat_grad()?;
        self.set_params(x)?;
        Ok((loss, g))
    }

    /// `optimizer.step(closure)`: up to `max_iter` L-BFGS iterations; returns the first loss.
    pub fn step_with(&mut self, mut closure: impl FnMut() -> Result<f64>) -> Result<f64> {
        let cfg = self.cfg.clone();
        let lr = self.st.groups[0].get("lr");
        let max_eval = cfg.max_eval.unwrap_or(cfg.max_iter * 5 / 4);
        let orig_loss = closure()?;
        let mut loss = orig_loss;
        let mut current_evals = 1;
        self.mem.func_evals += 1;
        let mut flat_grad = self.flat_grad()?;
        if max_abs(&flat_grad) <= cfg.tolerance_grad {
            return Ok(orig_loss);
        }
        let mut n_iter = 0;
        let mut x = self.flat_params()?;
        while n_iter < cfg.max_iter {
            n_iter += 1;
            self.mem.n_iter += 1;
            if self.mem.n_iter == 1 {
                self.mem.d = flat_grad.iter().map(|g| -g).collect();
                self.mem.old_dirs.clear();
                self.mem.old_stps.clear();
                self.mem.ro.clear();
                self.mem.h_diag = 1.0;
            } else {
                let prev = self.mem.prev_flat_grad.as_ref().ok_or_else(|| Error::value("LBFGS", "missing previous gradient"))?;
                let y: Vec<f64> = flat_grad.iter().zip(prev).map(|(a, b)| a - b).collect();
                let s: Vec<f64> = self.mem.d.iter().map(|v| v * self.mem.t).collect();
                let ys = dot(&y, &s);
                if ys > 1e-10 {
                    if self.mem.old_dirs.len() == cfg.history_size {
                        self.mem.old_dirs.remove(0);
                        self.mem.old_stps.remove(0);
                        self.mem.ro.remove(0);
                    }
                    self.mem.h_diag = ys / dot(&y, &y);
                    self.mem.old_dirs.push(y);
                    self.mem.old_stps.push(s);
                    self.mem.ro.push(1.0 / ys);
                }
                let m = self.mem.old_dirs.len();
                let mut al = vec![0.0; m];
                let mut q: Vec<f64> = flat_grad.iter().map(|g| -g).collect();
                for i in (0..m).rev() {
                    al[i] = dot(&self.mem.old_stps[i], &q) * self.mem.ro[i];
                    for (qv, dv) in q.iter_mut().zip(&self.mem.old_dirs[i]) {
                        *qv -= al[i] * dv;
                    }
                }
                let mut r: Vec<f64> = q.iter().map(|v| v * self.mem.h_diag).collect();
                for i in 0..m {
                    let be = dot(&self.mem.old_dirs[i], &r) * self.mem.ro[i];
                    for (rv, sv) in r.iter_mut().zip(&self.mem.old_stps[i]) {
                        *rv += (al[i] - be) * sv;
                    }
                }
                self.mem.d = r;
            }
            self.mem.prev_flat_grad = Some(flat_grad.clone());
            let prev_loss = loss;
            self.mem.t = if self.mem.n_iter == 1 {
                (1.0f64).min(1.0 / flat_grad.iter().map(|g| g.abs()).sum::<f64>()) * lr
            } else {
                lr
            };
            let d = self.mem.d.clone();
            let gtd = dot(&flat_grad, &d);
            if gtd > -cfg.tolerance_change {
                break;
            }
            let ls_evals;
            if cfg.strong_wolfe {
                let (l, g, t, evals) = strong_wolfe(&mut |xx, tt, dd| self.directional(&mut closure, xx, tt, dd), &x, self.mem.t, &d, loss, &flat_grad, gtd, cfg.tolerance_change)?;
                loss = l;
                flat_grad = g;
                self.mem.t = t;
                ls_evals = evals;
                for (xv, dv) in x.iter_mut().zip(&d) {
                    *xv += t * dv;
                }
                self.set_params(&x)?;
            } else {
                for (xv, dv) in x.iter_mut().zip(&d) {
                    *xv += self.mem.t * dv;
                }
                self.set_params(&x)?;
                if n_iter != cfg.max_iter {
                    loss = closure()?;
                    flat_grad = self.flat_grad()?;
                    ls_evals = 1;
                } else {
                    ls_evals = 0;
                }
            }
            current_evals += ls_evals;
            self.mem.func_evals += ls_evals;
            if n_iter == cfg.max_iter || current_evals >= max_eval || max_abs(&flat_grad) <= cfg.tolerance_grad {
                break;
            }
            if d.iter().map(|v| (v * self.mem.t).abs()).fold(0.0, f64::max) <= cfg.tolerance_change {
                break;
            }
            if (loss - prev_loss).abs() < cfg.tolerance_change {
                break;
            }
        }
        Ok(orig_loss)
    }
}

impl Optimizer for Lbfgs {
    fn state(&self) -> &OptimizerState {
        &self.st
    }
    fn state_mut(&mut self) -> &mut OptimizerState {
        &mut self.st
    }
    fn step(&mut self) -> Result<()> {
        Err(Error::value("LBFGS", "LBFGS requires a closure that reevaluates the model: use step_with(closure)"))
    }
}

/// Minimizer of the cubic interpolating two points with values and derivatives, within bounds.
fn cubic_interpolate(x1: f64, f1: f64, g1: f64, x2: f64, f2: f64, g2: f64, bounds: Option<(f64, f64)>) -> f64 {
    let (xmin, xmax) = bounds.unwrap_or(if x1 <= x2 { (x1, x2) } else { (x2, x1) });
    let d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2);
    let d2_sq = d1 * d1 - g1 * g2;
    if d2_sq >= 0.0 {
        let d2 = d2_sq.sqrt();
        let min_pos = if x1 <= x2 {
            x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2.0 * d2))
        } else {
            x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2.0 * d2))
        };
        min_pos.max(xmin).min(xmax)
    } else {
        (xmin + xmax) / 2.0
    }
}

type Eval<'a> = dyn FnMut(&[f64], f64, &[f64]) -> Result<(f64, Vec<f64>)> + 'a;

/// PyTorch's `_strong_wolfe` (c1 1e-4, c2 0.9, 25 iterations): returns (loss, grad, step, evals).
#[allow(clippy::too_many_arguments)]
fn strong_wolfe(
    obj: &mut Eval<'_>,
    x: &[f64],
    mut t: f64,
    d: &[f64],
    f: f64,
    g: &[f64],
    gtd: f64,
    tolerance_change: f64,
) -> Result<(f64, Vec<f64>, f64, usize)> {
    let (c1, c2, max_ls) = (1e-4, 0.9, 25);
    let d_norm = max_abs(d);
    let (mut f_new, mut g_new) = obj(x, t, d)?;
    let mut evals = 1;
    let mut gtd_new = dot(&g_new, d);
    let (mut t_prev, mut f_prev, mut g_prev, mut gtd_prev) = (0.0, f, g.to_vec(), gtd);
    let mut done = false;
    let mut ls_iter = 0;
    let mut bracket: Vec<f64>;
    let mut bracket_f: Vec<f64>;
    let mut bracket_g: Vec<Vec<f64>>;
    let mut bracket_gtd: Vec<f64>;
    loop {
        if ls_iter >= max_ls {
            bracket = vec![0.0, t];
            bracket_f = vec![f, f_new];
            bracket_g = vec![g.to_vec(), g_new.clone()];
            bracket_gtd = vec![gtd, gtd_new];
            break;
        }
        if f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= f_prev) {
            bracket = vec![t_prev, t];
            bracket_f = vec![f_prev, f_new];
            bracket_g = vec![g_prev.clone(), g_new.clone()];
            bracket_gtd = vec![gtd_prev, gtd_new];
            break;
        }
        if gtd_new.abs() <= -c2 * gtd {
            bracket = vec![t];
            bracket_f = vec![f_new];
            bracket_g = vec![g_new.clone()];
            bracket_gtd = vec![gtd_new];
            done = true;
            break;
        }
        if gtd_new >= 0.0 {
            bracket = vec![t_prev, t];
            bracket_f = vec![f_prev, f_new];
            bracket_g = vec![g_prev.clone(), g_new.clone()];
            bracket_gtd = vec![gtd_prev, gtd_new];
            break;
        }
        let min_step = t + 0.01 * (t - t_prev);
        let max_step = t * 10.0;
        let tmp = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, Some((min_step, max_step)));
        t_prev = tmp;
        f_prev = f_new;
        g_prev = g_new.clone();
        gtd_prev = gtd_new;
        let r = obj(x, t, d)?;
        f_new = r.0;
        g_new = r.1;
        evals += 1;
        gtd_new = dot(&g_new, d);
        ls_iter += 1;
    }
    // zoom phase
    let mut insuf_progress = false;
    let (mut low, mut high) = if bracket.len() == 2 && bracket_f[0] > bracket_f[1] { (1, 0) } else { (0, 1) };
    while !done && ls_iter < max_ls {
        if bracket.len() < 2 || (bracket[1] - bracket[0]).abs() * d_norm < tolerance_change {
            break;
        }
        t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1], None);
        let (bmax, bmin) = (bracket[0].max(bracket[1]), bracket[0].min(bracket[1]));
        let eps = 0.1 * (bmax - bmin);
        if (bmax - t).min(t - bmin) < eps {
            if insuf_progress || t >= bmax || t <= bmin {
                t = if (t - bmax).abs() < (t - bmin).abs() { bmax - eps } else { bmin + eps };
                insuf_progress = false;
            } else {
                insuf_progress = true;
            }
        } else {
            insuf_progress = false;
        }
        let r = obj(x, t, d)?;
        f_new = r.0;
        g_new = r.1;
        evals += 1;
        gtd_new = dot(&g_new, d);
        ls_iter += 1;
        if f_new > f + c1 * t * gtd || f_new >= bracket_f[low] {
            bracket[high] = t;
            bracket_f[high] = f_new;
            bracket_g[high] = g_new.clone();
            bracket_gtd[high] = gtd_new;
            if bracket_f[0] <= bracket_f[1] {
                low = 0;
                high = 1;
            } else {
                low = 1;
                high = 0;
            }
        } else {
            if gtd_new.abs() <= -c2 * gtd {
                done = true;
            } else if gtd_new * (bracket[high] - bracket[low]) >= 0.0 {
                bracket[high] = bracket[low];
                bracket_f[high] = bracket_f[low];
                bracket_g[high] = bracket_g[low].clone();
                bracket_gtd[high] = bracket_gtd[low];
            }
            bracket[low] = t;
            bracket_f[low] = f_new;
            bracket_g[low] = g_new.clone();
            bracket_gtd[low] = gtd_new;
        }
    }
    let low = low.min(bracket.len() - 1);
    Ok((bracket_f[low], bracket_g[low].clone(), bracket[low], evals))
}
