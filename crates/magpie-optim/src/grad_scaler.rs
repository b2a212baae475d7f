//! `GradScaler` (PyTorch's `torch.amp.GradScaler`): dynamic loss scaling for float16 training.
//! The loss is multiplied by a scale before backward so that small gradients do not flush to zero
//! in float16; `step` unscales the gradients, skips the optimizer step when any of them is inf or
//! NaN, and `update` backs the scale off after an overflow or grows it after `growth_interval`
//! clean steps. The scale, the growth tracker and the inf flag live on the device; the only host
//! read per step is the flag, in `step` (as in PyTorch).

use crate::core::Optimizer;
use magpie_core::amp::{non_finite_check_and_unscale_, update_scale_};
use magpie_core::{DType, Device, Error, Result, Tensor};
use std::collections::HashMap;

/// `torch.amp.GradScaler`'s keyword arguments and defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradScalerConfig {
    pub init_scale: f64,
    pub growth_factor: f64,
    pub backoff_factor: f64,
    pub growth_interval: i64,
    pub enabled: bool,
}

impl Default for GradScalerConfig {
    fn default() -> Self {
        GradScalerConfig { init_scale: 65536.0, growth_factor: 2.0, backoff_factor: 0.5, growth_interval: 2000, enabled: true }
    }
}

/// What `GradScaler::state_dict` holds (PyTorch's dict keys: `scale`, `growth_factor`,
/// `backoff_factor`, `growth_interval`, `_growth_tracker`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradScalerState {
    pub scale: f64,
    pub growth_factor: f64,
    pub backoff_factor: f64,
    pub growth_interval: i64,
    pub growth_tracker: i64,
}

/// Where an optimizer is in the iteration (no entry: ready, nothing done since the last update).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Unscaled,
    Stepped,
}

/// One optimizer's progress through the iteration (PyTorch's `_per_optimizer_states`).
struct PerOptimizer {
    stage: Stage,
    /// The inf flag of each device the optimizer's gradients live on.
    found_inf: Vec<(Device, Tensor)>,
}

/// Dynamic loss scaling (`torch.amp.GradScaler(device, init_scale, growth_factor,
/// backoff_factor, growth_interval, enabled)`).
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_optim::{GradScaler, GradScalerConfig, Optimizer, Sgd, SgdConfig};
/// let w = Tensor::from_vec(vec![1f32, 2.], &[2])?.with_requires_grad()?;
/// let mut opt = Sgd::new(vec![w.clone()], SgdConfig { lr: 0.1, ..Default::default() })?;
/// let mut scaler = GradScaler::new(magpie_core::Device::Cpu, GradScalerConfig::default())?;
/// let loss = w.mul(&w)?.sum()?;
/// scaler.scale(&loss)?.backward()?;   // gradients are 65536 * 2w
/// assert!(scaler.step(&mut opt)?);    // unscaled to 2w, finite: the step runs
/// scaler.update(None)?;
/// assert_eq!(w.to_vec::<f32>()?, vec![0.8, 1.6]);
/// assert_eq!(scaler.get_scale()?, 65536.0);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub struct GradScaler {
    device: Device,
    cfg: GradScalerConfig,
    scale: Option<Tensor>,
    growth_tracker: Option<Tensor>,
    /// What a lazily created tracker starts from (set by `load_state_dict`).
    init_growth_tracker: i64,
    /// Keyed by the ids of the optimizer's parameters (its identity for this scaler).
    per_optimizer: HashMap<Vec<usize>, PerOptimizer>,
}

const OP: &str = "GradScaler";

fn key(opt: &dyn Optimizer) -> Vec<usize> {
    opt.params().iter().map(|p| p.id()).collect()
}

impl GradScaler {
    /// A scaler for gradients on `device`'s kind. As in PyTorch, a CUDA scaler where CUDA is not
    /// available is disabled (every call passes through); `growth_factor` must be above 1 and
    /// `backoff_factor` below 1.
    pub fn new(device: Device, cfg: GradScalerConfig) -> Result<GradScaler> {
        let mut cfg = cfg;
        if cfg.enabled && device.is_cuda() && !magpie_core::backend::cuda::is_available() {
            cfg.enabled = false;
        }
        if cfg.enabled {
            if cfg.growth_factor <= 1.0 {
                return Err(Error::value(OP, "The growth factor must be > 1.0."));
            }
            if cfg.backoff_factor >= 1.0 {
                return Err(Error::value(OP, "The backoff factor must be < 1.0."));
            }
            if cfg.growth_interval <= 0 {
                return Err(Error::value(OP, format!("growth_interval must be a positive integer, got {}", cfg.growth_interval)));
            }
        }
        Ok(GradScaler { device, cfg, scale: None, growth_tracker: None, init_growth_tracker: 0, per_optimizer: HashMap::new() })
    }

    /// `scaler.is_enabled()`.
    pub fn is_enabled(&self) -> bool {
        self.cfg.enabled
    }

    fn lazy_init(&mut self, device: Device) -> Result<()> {
        if self.scale.is_none() {
            self.scale = Some(Tensor::scalar_tensor(self.cfg.init_scale, DType::F32, device)?);
            self.growth_tracker = Some(Tensor::scalar_tensor(self.init_growth_tracker, DType::I32, device)?);
        }
        Ok(())
    }

    fn scale_tensor(&self, funcname: &str) -> Result<&Tensor> {
        self.scale.as_ref().ok_or_else(|| {
            Error::value(
                OP,
                format!("Attempted {funcname} but _scale is None.  This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."),
            )
        })
    }

    /// `scaler.scale(outputs)`: `outputs * scale` (the scale created on the outputs' device at the
    /// first call); the outputs unchanged when disabled.
    pub fn scale(&mut self, outputs: &Tensor) -> Result<Tensor> {
        if !self.cfg.enabled {
            return Ok(outputs.clone());
        }
        self.lazy_init(outputs.device())?;
        let s = self.scale_tensor("scale")?.to_device(outputs.device())?;
        outputs.mul(&s)
    }

    /// `scaler.unscale_(optimizer)`: divides the optimizer's gradients by the scale in place and
    /// records on the device whether any is inf or NaN. At most once per optimizer between two
    /// `update` calls, and before `step`. float16 gradients are refused, as in PyTorch.
    pub fn unscale_(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        if !self.cfg.enabled {
            return Ok(());
        }
        let scale = self.scale_tensor("unscale_")?.clone();
        let k = key(opt);
        match self.per_optimizer.get(&k).map(|s| s.stage) {
            Some(Stage::Unscaled) => {
                return Err(Error::value(OP, "unscale_() has already been called on this optimizer since the last update()."));
            }
            Some(Stage::Stepped) => return Err(Error::value(OP, "unscale_() is being called after step().")),
            _ => {}
        }
        // 1 / scale in float64, rounded to float32 (PyTorch: scale.double().reciprocal().float())
        let inv = scale.to_dtype(DType::F64)?.reciprocal()?.to_dtype(DType::F32)?;
        let mut by_device: Vec<(Device, Vec<Tensor>)> = Vec::new();
        for p in opt.params() {
            let Some(g) = p.grad() else { continue };
            if g.dtype() == DType::F16 {
                return Err(Error::value(OP, "Attempting to unscale FP16 gradients."));
            }
            match by_device.iter_mut().find(|(d, _)| *d == g.device()) {
                Some((_, v)) => v.push(g),
                None => by_device.push((g.device(), vec![g])),
            }
        }
        let mut found = Vec::new();
        for (dev, grads) in by_device {
            let f = Tensor::scalar_tensor(0.0, DType::F32, dev)?;
            let i = inv.to_device(dev)?;
            non_finite_check_and_unscale_(&grads, &f, &i)?;
            found.push((dev, f));
        }
        self.per_optimizer.insert(k, PerOptimizer { stage: Stage::Unscaled, found_inf: found });
        Ok(())
    }

    /// `scaler.step(optimizer)`: unscales the gradients if `unscale_` was not called, then runs
    /// `optimizer.step()` unless a gradient was inf or NaN. Returns whether the step ran (PyTorch
    /// returns the step's return value, None when skipped). Reads the inf flags on the host: the
    /// one synchronization of the iteration. Without scaling, simply steps.
    pub fn step(&mut self, opt: &mut dyn Optimizer) -> Result<bool> {
        if !self.cfg.enabled {
            opt.step()?;
            return Ok(true);
        }
        self.scale_tensor("step")?;
        let k = key(opt);
        match self.per_optimizer.get(&k).map(|s| s.stage) {
            Some(Stage::Stepped) => return Err(Error::value(OP, "step() has already been called since the last update().")),
            Some(Stage::Unscaled) => {}
            _ => self.unscale_(opt)?,
        }
        let st = self.per_optimizer.get_mut(&k).ok_or_else(|| Error::value(OP, "No inf checks were recorded for this optimizer."))?;
        if st.found_inf.is_empty() {
            return Err(Error::value(OP, "No inf checks were recorded for this optimizer."));
        }
        let mut infs = 0.0;
        for (_, f) in &st.found_inf {
            infs += f.item()?.to_f64();
        }
        st.stage = Stage::Stepped;
        if infs == 0.0 {
            opt.step()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// `scaler.update(new_scale=None)`: sets the scale to `new_scale`, or (None) backs it off if
    /// any optimizer stepped over an inf/NaN since the last update and else counts toward growth,
    /// on the device. Starts the next iteration for every optimizer.
    pub fn update(&mut self, new_scale: Option<f64>) -> Result<()> {
        if !self.cfg.enabled {
            return Ok(());
        }
        let scale = self.scale_tensor("update")?.clone();
        match new_scale {
            Some(s) => {
                scale.fill_(s)?;
            }
            None => {
                let mut combined: Option<Tensor> = None;
                for st in self.per_optimizer.values() {
                    for (_, f) in &st.found_inf {
                        let f = f.to_device(scale.device())?;
                        combined = Some(match combined {
                            None => f.copy()?,
                            Some(c) => c.add(&f)?,
                        });
                    }
                }
                let combined = combined.ok_or_else(|| Error::value(OP, "No inf checks were recorded prior to update."))?;
                let tracker = self.growth_tracker.as_ref().ok_or_else(|| Error::value(OP, "the growth tracker is missing"))?;
                update_scale_(&scale, tracker, &combined, self.cfg.growth_factor, self.cfg.backoff_factor, self.cfg.growth_interval)?;
            }
        }
        self.per_optimizer.clear();
        Ok(())
    }

    /// `scaler.get_scale()`: the current scale (a host read), `init_scale` before the first
    /// `scale`, 1 when disabled.
    pub fn get_scale(&self) -> Result<f64> {
        if !self.cfg.enabled {
            return Ok(1.0);
        }
        match &self.scale {
            None => Ok(self.cfg.init_scale),
            Some(s) => Ok(s.item()?.to_f64()),
        }
    }

    /// `scaler.get_growth_factor()`.
    pub fn get_growth_factor(&self) -> f64 {
        self.cfg.growth_factor
    }
    /// `scaler.set_growth_factor(f)`.
    pub fn set_growth_factor(&mut self, f: f64) {
        self.cfg.growth_factor = f;
    }
    /// `scaler.get_backoff_factor()`.
    pub fn get_backoff_factor(&self) -> f64 {
        self.cfg.backoff_factor
    }
    /// `scaler.set_backoff_factor(f)`.
    pub fn set_backoff_factor(&mut self, f: f64) {
        self.cfg.backoff_factor = f;
    }
    /// `scaler.get_growth_interval()`.
    pub fn get_growth_interval(&self) -> i64 {
        self.cfg.growth_interval
    }
    /// `scaler.set_growth_interval(n)`.
    pub fn set_growth_interval(&mut self, n: i64) {
        self.cfg.growth_interval = n;
    }

    fn growth_tracker_value(&self) -> Result<i64> {
        match &self.growth_tracker {
            None => Ok(self.init_growth_tracker),
            Some(t) => Ok(t.item()?.to_i64()),
        }
    }

    /// `scaler.state_dict()`: None for a disabled scaler (PyTorch's empty dict).
    pub fn state_dict(&self) -> Result<Option<GradScalerState>> {
        if !self.cfg.enabled {
            return Ok(None);
        }
        Ok(Some(GradScalerState {
            scale: self.get_scale()?,
            growth_factor: self.cfg.growth_factor,
            backoff_factor: self.cfg.backoff_factor,
            growth_interval: self.cfg.growth_interval,
            growth_tracker: self.growth_tracker_value()?,
        }))
    }

    /// `scaler.load_state_dict(state)`; an empty state (from a disabled scaler) is an error for an
    /// enabled one.
    pub fn load_state_dict(&mut self, state: Option<&GradScalerState>) -> Result<()> {
        if !self.cfg.enabled {
            return Ok(());
        }
        let Some(s) = state else {
            return Err(Error::value(
                OP,
                "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.",
            ));
        };
        self.cfg.init_scale = s.scale;
        if let Some(t) = &self.scale {
            t.fill_(s.scale)?;
        }
        self.cfg.growth_factor = s.growth_factor;
        self.cfg.backoff_factor = s.backoff_factor;
        self.cfg.growth_interval = s.growth_interval;
        self.init_growth_tracker = s.growth_tracker;
        if let Some(t) = &self.growth_tracker {
            t.fill_(s.growth_tracker)?;
        }
        Ok(())
    }

    /// The device kind this scaler was made for.
    pub fn device(&self) -> Device {
        self.device
    }
}
