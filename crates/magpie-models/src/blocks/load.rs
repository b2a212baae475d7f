//! Layers built from a [`WeightSource`] by checkpoint name: the one place that knows which tensors
//! (and shapes, and initialisations for random weights) each kind of layer takes.

use crate::hub::{Init, WeightSource};
use magpie_core::Result;
use magpie_nn::{AnyLinear, Embedding, LayerNorm, Linear, QuantLinear, RMSNorm};

/// `nn.Linear`: `{name}.weight [out, in]` and, with `bias`, `{name}.bias [out]`.
pub fn linear(w: &mut dyn WeightSource, name: &str, out_f: usize, in_f: usize, bias: bool) -> Result<Linear> {
    let weight = w.take(&format!("{name}.weight"), &[out_f, in_f], Init::Normal)?;
    let bias = if bias { Some(w.take(&format!("{name}.bias"), &[out_f], Init::Zeros)?) } else { None };
    Linear::from_weights(weight, bias)
}

/// A linear layer whose weight the source may give quantized ([`WeightSource::take_quant`]):
/// a [`QuantLinear`] then, a dense [`Linear`] otherwise.
pub fn any_linear(w: &mut dyn WeightSource, name: &str, out_f: usize, in_f: usize, bias: bool) -> Result<AnyLinear> {
    match w.take_quant(&format!("{name}.weight"), &[out_f, in_f])? {
        Some(q) => {
            let bias = if bias { Some(w.take(&format!("{name}.bias"), &[out_f], Init::Zeros)?) } else { None };
            Ok(AnyLinear::Quant(QuantLinear::new(q, bias)?))
        }
        None => Ok(AnyLinear::Dense(linear(w, name, out_f, in_f, bias)?)),
    }
}

/// `nn.LayerNorm(n, eps)` with weight and bias.
pub fn layer_norm(w: &mut dyn WeightSource, name: &str, n: usize, eps: f64) -> Result<LayerNorm> {
    let mut ln = LayerNorm::new(&[n], eps, true, true)?;
    ln.weight = Some(w.take(&format!("{name}.weight"), &[n], Init::Ones)?);
    ln.bias = Some(w.take(&format!("{name}.bias"), &[n], Init::Zeros)?);
    Ok(ln)
}

/// `RMSNorm(n, eps)` with a weight.
pub fn rms_norm(w: &mut dyn WeightSource, name: &str, n: usize, eps: f64) -> Result<RMSNorm> {
    let mut r = RMSNorm::new(&[n], Some(eps), true)?;
    r.weight = Some(w.take(&format!("{name}.weight"), &[n], Init::Ones)?);
    Ok(r)
}

/// `nn.Embedding(n, d)`.
pub fn embedding(w: &mut dyn WeightSource, name: &str, n: usize, d: usize) -> Result<Embedding> {
    Embedding::from_weight(w.take(&format!("{name}.weight"), &[n, d], Init::Normal)?, None)
}
