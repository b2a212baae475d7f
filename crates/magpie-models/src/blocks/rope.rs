//! Rotary position embeddings as transformers computes them (`rotate_half` convention), with the
//! `default`, `linear` and `llama3` frequency rules. The frequencies are computed once on the host;
//! each step's `cos`/`sin` tables come from its position ids.

use crate::config::Fields;
use magpie_core::ops::shape_ops::cat;
use magpie_core::{DType, Device, Error, Result, Tensor};
use serde_json::Value;

/// How the rotary frequencies are rescaled (`rope_type`).
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    /// Plain RoPE.
    Default,
    /// Positions divided by `factor`.
    Linear { factor: f64 },
    /// Llama 3.1's rule: low frequencies divided by `factor`, high ones kept, a smooth blend between.
    Llama3 { factor: f64, low_freq_factor: f64, high_freq_factor: f64, original_max_position_embeddings: f64 },
}

impl RopeScaling {
    /// `(rope_theta, scaling)` from `rope_parameters` (transformers 5) or `rope_theta` +
    /// `rope_scaling` (transformers 4).
    pub(crate) fn from_config(f: &Fields) -> Result<(f64, RopeScaling)> {
        let params = f.raw("rope_parameters").or_else(|| f.raw("rope_scaling"));
        let num = |o: &serde_json::Map<String, Value>, k: &str| -> Result<f64> {
            o.get(k)
                .and_then(|v| v.as_f64())
                .filter(|x| x.is_finite() && *x > 0.0)
                .ok_or_else(|| Error::value("config", format!("config.json: rope parameter '{k}' is missing or not a positive number")))
        };
        let mut theta = f.f64_or("rope_theta", Some(10000.0))?;
        let Some(p) = params else {
            return Ok((theta, RopeScaling::Default));
        };
        let o = p.as_object().ok_or_else(|| Error::value("config", "config.json: rope_parameters / rope_scaling must be an object"))?;
        if o.contains_key("rope_theta") {
            theta = num(o, "rope_theta")?;
        }
        let kind = o.get("rope_type").or_else(|| o.get("type")).and_then(|v| v.as_str()).unwrap_or("default");
        let scaling = match kind {
            "default" => RopeScaling::Default,
            "linear" => RopeScaling::Linear { factor: num(o, "factor")? },
            "llama3" => RopeScaling::Llama3 {
                factor: num(o, "factor")?,
                low_freq_factor: num(o, "low_freq_factor")?,
                high_freq_factor: num(o, "high_freq_factor")?,
                original_max_position_embeddings: num(o, "original_max_position_embeddings")?,
            },
            other => return Err(Error::unsupported("config", format!("config.json: rope_type '{other}' is not supported (default, linear, llama3)"))),
        };
        if let RopeScaling::Llama3 { low_freq_factor, high_freq_factor, .. } = scaling {
            if high_freq_factor <= low_freq_factor {
                return Err(Error::value("config", "config.json: llama3 rope scaling needs high_freq_factor > low_freq_factor"));
            }
        }
        Ok((theta, scaling))
    }
}

/// The inverse frequencies of one head (`head_dim / 2` of them), in float32 as transformers keeps them.
#[derive(Clone, Debug)]
pub struct Rope {
    inv_freq: Vec<f32>,
    head_dim: usize,
}

impl Rope {
    /// Frequencies for `head_dim` (even) with base `theta`, rescaled by `scaling`.
    pub fn new(head_dim: usize, theta: f64, scaling: &RopeScaling) -> Rope {
        let base: Vec<f32> = (0..head_dim / 2).map(|i| (1.0 / theta.powf((2 * i) as f64 / head_dim as f64)) as f32).collect();
        let inv_freq = match *scaling {
            RopeScaling::Default => base,
            RopeScaling::Linear { factor } => base.iter().map(|&f| (f as f64 / factor) as f32).collect(),
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings: old } => {
                let low_wavelen = old / low_freq_factor;
                let high_wavelen = old / high_freq_factor;
                base.iter()
                    .map(|&f| {
                        let f = f as f64;
                        let wavelen = 2.0 * std::f64::consts::PI / f;
                        let g = if wavelen > low_wavelen { f / factor } else { f };
                        let medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
                        if medium {
                            let smooth = (old / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                            ((1.0 - smooth) * g / factor + smooth * g) as f32
                        } else {
                            g as f32
                        }
                    })
                    .collect()
            }
        };
        Rope { inv_freq, head_dim }
    }

    /// Frequencies `theta^(-2i/d) / divisors[i]`: llama.cpp's `rope_freqs` tensor, which GGUF files
    /// carry instead of the `llama3` scaling parameters.
    pub fn with_divisors(head_dim: usize, theta: f64, divisors: &[f32]) -> Result<Rope> {
        if divisors.len() != head_dim / 2 {
            return Err(Error::shape("rope", format!("{} frequency divisors for head_dim {head_dim} (needs {})", divisors.len(), head_dim / 2)));
        }
        let base = Rope::new(head_dim, theta, &RopeScaling::Default);
        let inv_freq = base.inv_freq.iter().zip(divisors).map(|(&f, &d)| f / d).collect();
        Ok(Rope { inv_freq, head_dim })
    }

    /// The angle tables `cos`, `sin` `[positions, head_dim / 2]` in f32 for positions `0..n`, with
    /// the rounding of [`Rope::tables`] (an f32 product, then cos/sin): what fused kernels read.
    pub fn half_tables(&self, n: usize) -> (Vec<f32>, Vec<f32>) {
        let half = self.inv_freq.len();
        let (mut cos, mut sin) = (Vec::with_capacity(n * half), Vec::with_capacity(n * half));
        for p in 0..n {
            self.push_angles(p as i64, &mut cos, &mut sin);
        }
        (cos, sin)
    }

    /// Appends `cos` and `sin` of position `p`'s angles (one per frequency): an f32 product as in
    /// transformers' `inv_freq @ position_ids`, then cos/sin.
    fn push_angles(&self, p: i64, cos: &mut Vec<f32>, sin: &mut Vec<f32>) {
        for &f in &self.inv_freq {
            let a = (f * p as f32) as f64;
            cos.push(a.cos() as f32);
            sin.push(a.sin() as f32);
        }
    }

    /// `cos` and `sin` tables `[B, 1, T, head_dim]` for position ids `positions` (`B * T` of them,
    /// row-major), in `dtype` on `device`.
    pub fn tables(&self, positions: &[i64], b: usize, t: usize, dtype: DType, device: Device) -> Result<(Tensor, Tensor)> {
        if positions.len() != b * t {
            return Err(Error::shape("rope", format!("{} position ids for a [{b}, {t}] input", positions.len())));
        }
        let d = self.head_dim;
        let half = d / 2;
        let mut cos = Vec::with_capacity(b * t * d);
        let mut sin = Vec::with_capacity(b * t * d);
        for &p in positions {
            let start = cos.len();
            self.push_angles(p, &mut cos, &mut sin);
            // `cat(freqs, freqs)`: the second half repeats the first
            cos.extend_from_within(start..start + half);
            sin.extend_from_within(start..start + half);
        }
        let mk = |v: Vec<f32>| Tensor::from_vec(v, &[b, 1, t, d])?.to_dtype(dtype)?.to_device(device);
        Ok((mk(cos)?, mk(sin)?))
    }
}

/// `x * cos + rotate_half(x) * sin` for `x [B, H, T, D]` and tables `[B, 1, T, D]`.
pub fn apply(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let d = x.shape().last().copied().unwrap_or(0) as i64;
    let nd = x.ndim() as i64 - 1;
    let (x1, x2) = (x.narrow(nd, 0, d / 2)?, x.narrow(nd, d / 2, d - d / 2)?);
    let rotated = cat(&[x2.neg()?, x1], nd)?;
    x.mul(cos)?.add(&rotated.mul(sin)?)
}
