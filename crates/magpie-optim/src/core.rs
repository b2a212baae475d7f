//! What every optimizer shares: parameter groups with named hyperparameters, per-parameter
//! state, the `Optimizer` trait (step, zero_grad, lr access for schedulers, state dicts), and
//! the driver that runs a per-element update over each parameter's data.
//!
//! CUDA parameters: optimizers with a fused kernel (SGD, Adam, AdamW) pass a device update to
//! [`for_each_param`] and keep their state on the GPU ([`Buf::Dev`]); every other optimizer
//! runs its CPU rule on a host copy of the parameter, gradient and state and copies the
//! parameter back (counted by [`host_round_trips`]), so each one works on CUDA parameters.

use magpie_core::{DType, Element, Error, Result, Tensor};
use num_traits::Float;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

static ROUND_TRIPS: AtomicU64 = AtomicU64::new(0);

/// How many parameter updates of CUDA parameters ran on the host (download of parameter,
/// gradient and state, CPU update, upload of the parameter) because their optimizer has no
/// fused CUDA kernel, since the process started.
pub fn host_round_trips() -> u64 {
    ROUND_TRIPS.load(Ordering::Relaxed)
}

/// Hyperparameters of a group by PyTorch's names (`lr`, `momentum`, `beta1`, ...); flags are 0 or 1.
pub type Hyper = BTreeMap<String, f64>;

/// A parameter group: its tensors and hyperparameters (`optimizer.param_groups[i]`).
#[derive(Clone, Debug)]
pub struct ParamGroup {
    pub params: Vec<Tensor>,
    pub hyper: Hyper,
}

impl ParamGroup {
    /// A hyperparameter's value (0 when absent).
    pub fn get(&self, k: &str) -> f64 {
        self.hyper.get(k).copied().unwrap_or(0.0)
    }
    /// A flag hyperparameter.
    pub fn flag(&self, k: &str) -> bool {
        self.get(k) != 0.0
    }
}

/// Per-parameter state: the step count, named scalars and named buffers (shaped like the parameter).
#[derive(Clone, Debug, Default)]
pub struct ParamState {
    pub step: f64,
    pub scalars: BTreeMap<String, f64>,
    pub bufs: BTreeMap<String, Buf>,
}

/// A state buffer, in the parameter's compute precision: on the host, or (for optimizers with a
/// fused CUDA kernel) a contiguous tensor on the parameter's GPU, updated in place.
#[derive(Clone, Debug)]
pub enum Buf {
    F32(Vec<f32>),
    F64(Vec<f64>),
    Dev(Tensor),
}

impl Buf {
    /// The buffer as a CPU tensor of `shape` (what state dicts store).
    pub fn to_cpu_tensor(&self, shape: &[usize]) -> Result<Tensor> {
        match self {
            Buf::F32(v) => Tensor::from_vec(v.clone(), shape),
            Buf::F64(v) => Tensor::from_vec(v.clone(), shape),
            Buf::Dev(t) => t.to_device(magpie_core::Device::Cpu)?.reshape_to(shape),
        }
    }
}

/// The element types optimizers compute in (a parameter's own type; f32 for f16/bf16 would go here).
pub trait OptFloat: Float + Element + std::fmt::Debug {
    fn buf(b: &mut Buf) -> Option<&mut Vec<Self>>;
    fn wrap(v: Vec<Self>) -> Buf;
    fn c(x: f64) -> Self {
        <Self as num_traits::NumCast>::from(x).unwrap_or_else(Self::nan)
    }
}
impl OptFloat for f32 {
    fn buf(b: &mut Buf) -> Option<&mut Vec<f32>> {
        if let Buf::F32(v) = b { Some(v) } else { None }
    }
    fn wrap(v: Vec<f32>) -> Buf {
        Buf::F32(v)
    }
}
impl OptFloat for f64 {
    fn buf(b: &mut Buf) -> Option<&mut Vec<f64>> {
        if let Buf::F64(v) = b { Some(v) } else { None }
    }
    fn wrap(v: Vec<f64>) -> Buf {
        Buf::F64(v)
    }
}

/// The groups and state every optimizer keeps; optimizers differ only in their update rule.
#[derive(Clone, Debug, Default)]
pub struct OptimizerState {
    pub groups: Vec<ParamGroup>,
    /// Keyed by the parameter's tensor id.
    pub state: HashMap<usize, ParamState>,
    /// Defaults for groups added later.
    pub defaults: Hyper,
    /// Per group: the device tensor a fused multi-tensor step reads its per-step scalars from
    /// (Adam/AdamW: step size, bias correction, decay), so that a CUDA graph that captured the
    /// step can be replayed with the host writing each step's values ([`Optimizer::prepare_graphed_step`]).
    pub group_scalars: Vec<Option<Tensor>>,
}

impl OptimizerState {
    /// One group of `params` with `defaults`; checks that every parameter is a floating leaf.
    pub fn new(name: &str, params: Vec<Tensor>, defaults: Hyper) -> Result<Self> {
        let mut s = OptimizerState { groups: Vec::new(), state: HashMap::new(), defaults, group_scalars: Vec::new() };
        s.add_group(name, params, Hyper::new())?;
        Ok(s)
    }
    /// `optimizer.add_param_group`: `overrides` replace the defaults for this group.
    pub fn add_group(&mut self, name: &str, params: Vec<Tensor>, overrides: Hyper) -> Result<()> {
        for p in &params {
            if !p.dtype().is_float() {
                return Err(Error::dtype(name, format!("can only optimize floating point Tensors, got {}", p.dtype())));
            }
            if !p.is_leaf() {
                return Err(Error::value(name, "can't optimize a non-leaf Tensor"));
            }
            if self.groups.iter().any(|g| g.params.iter().any(|q| q.is_same(p))) {
                return Err(Error::value(name, "some parameters appear in more than one parameter group"));
            }
        }
        let mut hyper = self.defaults.clone();
        hyper.extend(overrides);
        if hyper.get("lr").is_some_and(|&lr| lr < 0.0) {
            return Err(Error::value(name, format!("Invalid learning rate: {}", hyper["lr"])));
        }
        self.groups.push(ParamGroup { params, hyper });
        Ok(())
    }
}

/// The optimizer interface (`torch.optim.Optimizer`).
pub trait Optimizer {
    /// The groups and state.
    fn state(&self) -> &OptimizerState;
    /// Mutable groups and state.
    fn state_mut(&mut self) -> &mut OptimizerState;
    /// One update of every parameter that has a gradient.
    fn step(&mut self) -> Result<()>;

    /// Before each replay of a CUDA graph that captured [`Optimizer::step`] (after eager
    /// warm-up steps): advances every stepped parameter's step count and writes that step's
    /// scalars (learning rate, bias corrections) into the device memory the captured kernels
    /// read, as PyTorch's `capturable=True` keeps them on the GPU. A captured step does not
    /// advance the host state itself (nothing runs during a capture). Only Adam and AdamW on
    /// CUDA parameters support this; other optimizers return an error.
    fn prepare_graphed_step(&mut self) -> Result<()> {
        crate::optimizers::adam::prepare_graphed(self.state_mut())
    }

    /// `optimizer.zero_grad()` (set_to_none=True, PyTorch's default).
    fn zero_grad(&mut self) {
        let _scope = magpie_core::profiler::record_function("Optimizer.zero_grad");
        for g in &self.state().groups {
            for p in &g.params {
                p.set_grad(None);
            }
        }
    }
    /// Number of parameter groups.
    fn num_groups(&self) -> usize {
        self.state().groups.len()
    }
    /// The learning rate of group `i`.
    fn lr(&self, i: usize) -> f64 {
        self.state().groups.get(i).map_or(0.0, |g| g.get("lr"))
    }
    /// Sets the learning rate of group `i` (what schedulers do).
    fn set_lr(&mut self, i: usize, lr: f64) {
        self.set_hyper(i, "lr", lr);
    }
    /// Any hyperparameter of group `i`.
    fn hyper(&self, i: usize, k: &str) -> Option<f64> {
        self.state().groups.get(i).and_then(|g| g.hyper.get(k).copied())
    }
    /// Sets a hyperparameter of group `i`.
    fn set_hyper(&mut self, i: usize, k: &str, v: f64) {
        if let Some(g) = self.state_mut().groups.get_mut(i) {
            g.hyper.insert(k.to_string(), v);
        }
    }
    /// Every parameter, in group order.
    fn params(&self) -> Vec<Tensor> {
        self.state().groups.iter().flat_map(|g| g.params.iter().cloned()).collect()
    }
    /// `optimizer.state_dict()` as named tensors plus a JSON string of the groups and scalars,
    /// ready to store in a safetensors file (parameters are referred to by index, as in PyTorch).
    fn state_dict(&self) -> Result<(Vec<(String, Tensor)>, String)> {
        let st = self.state();
        let mut tensors = Vec::new();
        let mut groups = Vec::new();
        let mut scalars = serde_json::Map::new();
        let mut idx = 0usize;
        for g in &st.groups {
            let mut ids = Vec::new();
            for p in &g.params {
                ids.push(idx);
                if let Some(ps) = st.state.get(&p.id()) {
                    let mut sc = ps.scalars.clone();
                    sc.insert("step".into(), ps.step);
                    scalars.insert(idx.to_string(), serde_json::json!(sc));
                    for (k, b) in &ps.bufs {
                        // device state is copied to the host: checkpoints hold CPU tensors
                        tensors.push((format!("state.{idx}.{k}"), b.to_cpu_tensor(p.shape())?));
                    }
                }
                idx += 1;
            }
            groups.push(serde_json::json!({ "hyper": g.hyper, "params": ids }));
        }
        let json = serde_json::json!({ "param_groups": groups, "state": scalars });
        Ok((tensors, json.to_string()))
    }
    /// `optimizer.load_state_dict(...)` from [`Optimizer::state_dict`]'s output. The parameter
    /// layout (groups and shapes) must match this optimizer's.
    fn load_state_dict(&mut self, tensors: &[(String, Tensor)], json: &str) -> Result<()> {
        let bad = |m: &str| Error::value("load_state_dict", format!("malformed optimizer state: {m}"));
        let v: serde_json::Value = serde_json::from_str(json).map_err(|e| bad(&e.to_string()))?;
        let groups = v["param_groups"].as_array().ok_or_else(|| bad("no param_groups"))?;
        let st = self.state_mut();
        if groups.len() != st.groups.len() {
            return Err(Error::value("load_state_dict", format!("loaded state dict has {} parameter groups, optimizer has {}", groups.len(), st.groups.len())));
        }
        let mut idx = 0usize;
        let mut new_state = HashMap::new();
        let mut new_hyper = Vec::new();
        for (g, jg) in st.groups.iter().zip(groups) {
            let hyper: Hyper = serde_json::from_value(jg["hyper"].clone()).map_err(|e| bad(&e.to_string()))?;
            let n = jg["params"].as_array().ok_or_else(|| bad("group without params"))?.len();
            if n != g.params.len() {
                return Err(Error::value("load_state_dict", "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"));
            }
            new_hyper.push(hyper);
            for p in &g.params {
                if let Some(sc) = v["state"].get(idx.to_string()) {
                    let sc: BTreeMap<String, f64> = serde_json::from_value(sc.clone()).map_err(|e| bad(&e.to_string()))?;
                    let mut ps = ParamState { step: sc.get("step").copied().unwrap_or(0.0), ..Default::default() };
                    ps.scalars = sc.into_iter().filter(|(k, _)| k != "step").collect();
                    let prefix = format!("state.{idx}.");
                    for (name, t) in tensors {
                        if let Some(k) = name.strip_prefix(&prefix) {
                            if t.shape() != p.shape() {
                                return Err(Error::shape("load_state_dict", format!("state '{name}' has shape {:?}, parameter has {:?}", t.shape(), p.shape())));
                            }
                            let b = match p.dtype() {
                                DType::F64 => Buf::F64(t.to_vec()?),
                                _ => Buf::F32(t.to_vec()?),
                            };
                            ps.bufs.insert(k.to_string(), b);
                        }
                    }
                    new_state.insert(p.id(), ps);
                }
                idx += 1;
            }
        }
        for (g, h) in st.groups.iter_mut().zip(new_hyper) {
            g.hyper = h;
        }
        st.state = new_state;
        Ok(())
    }
}

/// A fused update of one CUDA parameter: `(group, state, param, grad)`, in place on the device.
pub(crate) type DevUpdate = fn(&ParamGroup, &mut ParamState, &Tensor, &Tensor) -> Result<()>;

/// One CUDA parameter of a group-level fused update: its state (taken out of the optimizer's
/// map for the call and put back after), the parameter and its gradient.
pub(crate) struct DevItem {
    pub ps: ParamState,
    pub p: Tensor,
    pub g: Tensor,
}

/// A fused update of all the CUDA parameters of one group at once (multi-tensor launches).
pub(crate) type DevGroupUpdate = fn(&ParamGroup, &mut [DevItem], &mut Option<Tensor>) -> Result<()>;

/// Runs `update(hyper, state, param, grad)` for each parameter of each group that has a
/// gradient, on the parameter's data in place, in the parameter's precision. CUDA parameters
/// take `dev` when given, else a host round trip through `update`.
pub(crate) fn for_each_param(
    name: &str,
    st: &mut OptimizerState,
    dev: Option<DevUpdate>,
    dev_group: Option<DevGroupUpdate>,
    mut update: impl FnMut(&ParamGroup, &mut ParamState, Elem<'_>) -> Result<()>,
) -> Result<()> {
    // PyTorch's profiler shows each optimizer step as this scope
    let _scope = magpie_core::profiler::record_function_with(|| format!("Optimizer.step#{name}.step"));
    let _ng = magpie_core::autograd::no_grad();
    for gi in 0..st.groups.len() {
        let group = st.groups[gi].clone();
        if let Some(f) = dev_group {
            if group_on_device(st, gi, &group, f)? {
                continue;
            }
        }
        for p in &group.params {
            let Some(g) = p.grad() else { continue };
            let ps = st.state.entry(p.id()).or_default();
            if p.device().is_cuda() || g.device().is_cuda() {
                if g.device() != p.device() {
                    return Err(Error::device(name, format!("the gradient is on {} but the parameter on {}", g.device(), p.device())));
                }
                match dev {
                    Some(f) if matches!(p.dtype(), DType::F32 | DType::F64) && p.is_contiguous() => f(&group, ps, p, &g)?,
                    _ => host_round_trip(name, &group, ps, p, &g, &mut update)?,
                }
                continue;
            }
            match p.dtype() {
                // the gradient is read in place (no per-step copy) unless it aliases the parameter
                DType::F32 if !g.shares_storage(p) => {
                    magpie_core::backend::cpu::read(&g, |gv: &[f32]| {
                        magpie_core::backend::cpu::write(p, |pv: &mut [f32]| update(&group, ps, Elem::F32(pv, gv)))
                    })???;
                }
                DType::F64 if !g.shares_storage(p) => {
                    magpie_core::backend::cpu::read(&g, |gv: &[f64]| {
                        magpie_core::backend::cpu::write(p, |pv: &mut [f64]| update(&group, ps, Elem::F64(pv, gv)))
                    })???;
                }
                DType::F32 => {
                    let gv: Vec<f32> = g.to_vec()?;
                    magpie_core::backend::cpu::write(p, |pv: &mut [f32]| update(&group, ps, Elem::F32(pv, &gv)))??;
                }
                DType::F64 => {
                    let gv: Vec<f64> = g.to_vec()?;
                    magpie_core::backend::cpu::write(p, |pv: &mut [f64]| update(&group, ps, Elem::F64(pv, &gv)))??;
                }
                d => return Err(Error::unsupported(name, format!("parameters of dtype {d} (f32 and f64 only so far)"))),
            }
        }
    }
    Ok(())
}

/// Runs `f` on every parameter with a gradient of `group` when all of them are contiguous CUDA
/// parameters of one f32/f64 dtype on one device, with their gradients there (else false: the
/// per-parameter path runs). States go back to the map whether `f` succeeds or not.
fn group_on_device(st: &mut OptimizerState, gi: usize, group: &ParamGroup, f: DevGroupUpdate) -> Result<bool> {
    let with_grad: Vec<(&Tensor, Tensor)> = group.params.iter().filter_map(|p| p.grad().map(|g| (p, g))).collect();
    let Some((p0, _)) = with_grad.first() else { return Ok(false) };
    let fits = |p: &Tensor, g: &Tensor| {
        p.device().is_cuda() && g.device() == p.device() && p.device() == p0.device() && p.dtype() == p0.dtype() && matches!(p.dtype(), DType::F32 | DType::F64) && p.is_contiguous()
    };
    if !with_grad.iter().all(|(p, g)| fits(p, g)) {
        return Ok(false);
    }
    // a parameter listed twice in one group would be updated twice by the per-parameter path too;
    // here its state could only be taken once, so leave such groups to that path
    let mut ids: Vec<usize> = with_grad.iter().map(|(p, _)| p.id()).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        return Ok(false);
    }
    let mut items: Vec<DevItem> = with_grad.iter().map(|(p, g)| DevItem { ps: st.state.remove(&p.id()).unwrap_or_default(), p: (*p).clone(), g: g.clone() }).collect();
    if st.group_scalars.len() <= gi {
        st.group_scalars.resize(gi + 1, None);
    }
    let r = f(group, &mut items, &mut st.group_scalars[gi]);
    for it in items {
        st.state.insert(it.p.id(), it.ps);
    }
    r?;
    Ok(true)
}

/// The CPU rule on host copies of a CUDA parameter, its gradient and state; the parameter is
/// copied back (the state stays on the host, where the CPU rule keeps it).
fn host_round_trip(
    name: &str,
    group: &ParamGroup,
    ps: &mut ParamState,
    p: &Tensor,
    g: &Tensor,
    update: &mut impl FnMut(&ParamGroup, &mut ParamState, Elem<'_>) -> Result<()>,
) -> Result<()> {
    ROUND_TRIPS.fetch_add(1, Ordering::Relaxed);
    let host = match p.dtype() {
        DType::F32 => {
            let mut pv: Vec<f32> = p.to_vec()?;
            let gv: Vec<f32> = g.to_vec()?;
            update(group, ps, Elem::F32(&mut pv, &gv))?;
            Tensor::from_vec(pv, p.shape())?
        }
        DType::F64 => {
            let mut pv: Vec<f64> = p.to_vec()?;
            let gv: Vec<f64> = g.to_vec()?;
            update(group, ps, Elem::F64(&mut pv, &gv))?;
            Tensor::from_vec(pv, p.shape())?
        }
        d => return Err(Error::unsupported(name, format!("parameters of dtype {d} (f32 and f64 only so far)"))),
    };
    p.copy_(&host)?;
    Ok(())
}

/// The named state buffer of a CUDA parameter `p` as a device tensor (contiguous, `p`'s dtype
/// and shape), created zero-filled on first use and uploaded once from host state (a loaded
/// state dict, or a step taken while the parameter was on the CPU).
pub(crate) fn dev_buf(ps: &mut ParamState, k: &str, p: &Tensor) -> Result<Tensor> {
    let t = match ps.bufs.remove(k) {
        Some(Buf::Dev(t)) if t.device() == p.device() && t.dtype() == p.dtype() && t.shape() == p.shape() && t.is_contiguous() => t,
        Some(b) => {
            let n = match &b {
                Buf::F32(v) => v.len(),
                Buf::F64(v) => v.len(),
                Buf::Dev(t) => t.numel(),
            };
            if n != p.numel() {
                return Err(Error::shape("optimizer", format!("state '{k}' has {n} elements, parameter has {}", p.numel())));
            }
            b.to_cpu_tensor(p.shape())?.to_dtype(p.dtype())?.to_device(p.device())?.contiguous()?
        }
        None => p.zeros_like()?.contiguous()?,
    };
    ps.bufs.insert(k.to_string(), Buf::Dev(t.clone()));
    Ok(t)
}

/// A parameter's data and its gradient in one precision.
pub(crate) enum Elem<'a> {
    F32(&'a mut [f32], &'a [f32]),
    F64(&'a mut [f64], &'a [f64]),
}

/// Takes the named buffer out of a state (created filled with `init` on first use, length `n`);
/// give it back with [`put`] after the update.
pub(crate) fn take<T: OptFloat>(ps: &mut ParamState, k: &str, n: usize, init: T) -> Result<Vec<T>> {
    let mut b = ps.bufs.remove(k).unwrap_or_else(|| T::wrap(vec![init; n]));
    // state left on a GPU by a fused step: brought to the host for the CPU rule
    if let Buf::Dev(t) = &b {
        b = T::wrap(t.to_vec()?);
    }
    let v = T::buf(&mut b).ok_or_else(|| Error::dtype("optimizer", format!("state '{k}' has another dtype than its parameter")))?;
    if v.len() != n {
        return Err(Error::shape("optimizer", format!("state '{k}' has {} elements, parameter has {n}", v.len())));
    }
    Ok(std::mem::take(v))
}

/// Puts a buffer back into a state.
pub(crate) fn put<T: OptFloat>(ps: &mut ParamState, k: &str, v: Vec<T>) {
    ps.bufs.insert(k.to_string(), T::wrap(v));
}
