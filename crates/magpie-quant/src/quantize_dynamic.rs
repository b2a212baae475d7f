//! `quantize_dynamic(model, {Linear}, qint8)`: walks a module tree and replaces each `Linear` by a
//! [`DynamicQuantizedLinear`] with the same weight quantized to int8.

use crate::dynamic_linear::DynamicQuantizedLinear;
use crate::qtype::QDType;
use magpie_core::{Error, Result, Tensor};
use magpie_nn::Module;

/// What `quantize_dynamic` applies: PyTorch's `default_dynamic_qconfig` (qint8 weights, one scale
/// per tensor, `MinMaxObserver(per_tensor_symmetric)`) or `per_channel_dynamic_qconfig` (one
/// scale per output feature, `PerChannelMinMaxObserver(per_channel_symmetric)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamicQConfig {
    /// The weight dtype; only `QInt8` (PyTorch also has float16 dynamic quantization, not here).
    pub dtype: QDType,
    /// Per-channel weight scales.
    pub per_channel: bool,
}

impl Default for DynamicQConfig {
    fn default() -> Self {
        DynamicQConfig { dtype: QDType::QInt8, per_channel: false }
    }
}

impl DynamicQConfig {
    /// `per_channel_dynamic_qconfig`.
    pub fn per_channel() -> Self {
        DynamicQConfig { dtype: QDType::QInt8, per_channel: true }
    }
}

/// The modules `quantize_dynamic` changed and those it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuantizeReport {
    /// Dotted names of the `Linear`s now `DynamicQuantizedLinear`.
    pub quantized: Vec<String>,
    /// `Linear`s left in float because their parent holds them in a typed field (only boxed
    /// children, those `Module::child_slots_mut` lists, can change type), or the root itself.
    pub left_float: Vec<String>,
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// A `Linear`'s weight and bias, read through the generic parameter list.
fn linear_params(m: &dyn Module) -> Option<(Tensor, Option<Tensor>)> {
    let params = m.local_parameters();
    let weight = params.iter().find(|(n, _)| *n == "weight")?.1.clone();
    let bias = params.iter().find(|(n, _)| *n == "bias").map(|(_, t)| (*t).clone());
    Some((weight, bias))
}

/// `model.eval()` on a tree borrowed for any lifetime.
fn set_eval(m: &mut dyn Module) {
    m.set_training(false);
    for (_, c) in m.children_mut() {
        set_eval(c);
    }
}

fn convert(m: &mut dyn Module, prefix: &str, config: DynamicQConfig, report: &mut QuantizeReport) -> Result<()> {
    let mut replaced = Vec::new();
    for (name, slot) in m.child_slots_mut() {
        if slot.type_name() == "Linear" {
            let Some((w, b)) = linear_params(slot.as_ref()) else { continue };
            let q = DynamicQuantizedLinear::from_weights(&w, b.as_ref(), config.per_channel)?;
            *slot = Box::new(q);
            report.quantized.push(join(prefix, &name));
            replaced.push(name);
        }
    }
    for (name, child) in m.children_mut() {
        let path = join(prefix, &name);
        if child.type_name() == "Linear" {
            if !replaced.contains(&name) {
                report.left_float.push(path);
            }
        } else {
            convert(child, &path, config, report)?;
        }
    }
    Ok(())
}

/// `torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)`, in place:
/// puts the model in eval mode and replaces every `Linear` held in a `Sequential`, `ModuleList`,
/// `ModuleDict` (or any module listing it in `child_slots_mut`) by a [`DynamicQuantizedLinear`].
/// A `Linear` in a typed field, or a `Linear` passed as the model itself, stays float (PyTorch
/// also leaves a bare `Linear` root alone) and is listed in the report.
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_nn::{Linear, Module, ReLU, Sequential};
/// use magpie_quant::{quantize_dynamic, DynamicQConfig};
/// let mut model = Sequential::new().add(Linear::new(16, 32, true)?).add(ReLU).add(Linear::new(32, 4, true)?);
/// let report = quantize_dynamic(&mut model, DynamicQConfig::default())?;
/// assert_eq!(report.quantized, vec!["0", "2"]);
/// assert_eq!(model.forward(&Tensor::randn(&[5, 16])?)?.shape(), &[5, 4]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn quantize_dynamic(model: &mut dyn Module, config: DynamicQConfig) -> Result<QuantizeReport> {
    if config.dtype != QDType::QInt8 {
        return Err(Error::unsupported("quantize_dynamic", format!("dynamic quantization to {} is not supported; use torch.qint8", config.dtype)));
    }
    set_eval(model);
    let mut report = QuantizeReport::default();
    if model.type_name() == "Linear" {
        report.left_float.push(String::new());
        return Ok(report);
    }
    convert(model, "", config, &mut report)?;
    Ok(report)
}
