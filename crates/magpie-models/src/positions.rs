//! The inputs of one decoder forward call: token ids, the padding mask over the whole sequence so
//! far, and position ids (kept on the host too, where rotary tables are computed).

use magpie_core::{DType, Device, Error, Result, Tensor};

/// Token ids `[B, T]` after `past` cached positions, with the mask and position ids that go with them.
pub struct StepInputs {
    pub input_ids: Tensor,
    /// `[B, past + T]`, 1 = token, 0 = padding; None when every position is a token.
    pub attention_mask: Option<Tensor>,
    /// `B * T` position ids, row-major.
    pub positions: Vec<i64>,
    pub past: usize,
    pub b: usize,
    pub t: usize,
    /// Compute the logits of the last position only (`logits_to_keep=1`: all generation needs).
    pub last_only: bool,
}

impl StepInputs {
    /// Checks shapes and dtypes; `positions` defaults to `past..past + T` in every row (what
    /// transformers' `forward` uses when given no `position_ids`).
    pub fn new(input_ids: &Tensor, attention_mask: Option<&Tensor>, positions: Option<Vec<i64>>, past: usize) -> Result<StepInputs> {
        let op = "forward";
        let &[b, t] = input_ids.shape() else {
            return Err(Error::shape(op, format!("input_ids must be [batch, seq], got {:?}", input_ids.shape())));
        };
        if b == 0 || t == 0 {
            return Err(Error::shape(op, format!("input_ids must hold at least one token, got shape {:?}", input_ids.shape())));
        }
        if input_ids.dtype() != DType::I64 {
            return Err(Error::dtype(op, format!("input_ids must be int64, got {}", input_ids.dtype())));
        }
        if let Some(m) = attention_mask {
            if m.shape() != [b, past + t] {
                return Err(Error::shape(op, format!("attention_mask must be [{b}, {}] (cached plus new positions), got {:?}", past + t, m.shape())));
            }
        }
        let positions = match positions {
            Some(p) if p.len() != b * t => return Err(Error::shape(op, format!("{} position ids for input_ids of shape [{b}, {t}]", p.len()))),
            Some(p) => p,
            None => (0..b).flat_map(|_| (past..past + t).map(|p| p as i64)).collect(),
        };
        let attention_mask = attention_mask.map(|m| m.to_device(input_ids.device())).transpose()?;
        Ok(StepInputs { input_ids: input_ids.clone(), attention_mask, positions, past, b, t, last_only: false })
    }

    /// Where the ids live.
    pub fn device(&self) -> Device {
        self.input_ids.device()
    }

    /// Errors when a position reaches `max` (models with learned positions) or is negative.
    pub fn check_positions(&self, op: &str, max: Option<usize>) -> Result<()> {
        let hi = self.positions.iter().copied().max().unwrap_or(0);
        if self.positions.iter().any(|&p| p < 0) {
            return Err(Error::value(op, "position ids must be non-negative"));
        }
        if let Some(m) = max {
            if hi as usize >= m {
                return Err(Error::value(op, format!("position {hi} is past the model's {m} positions (sequence too long)")));
            }
        }
        Ok(())
    }

    /// The position ids as an int64 `[B, T]` tensor on the ids' device.
    pub fn position_tensor(&self) -> Result<Tensor> {
        Tensor::from_vec(self.positions.clone(), &[self.b, self.t])?.to_device(self.device())
    }
}

/// `arange(0, T)` as int64 on the model's device, made once and reused (a view of the longest
/// one made so far), as the `position_ids` buffer transformers registers: a training forward then
/// queues no host-to-device copy, which a CUDA graph could not capture. Cloning gives an empty cache.
#[derive(Default)]
pub struct PositionIds(std::sync::Mutex<Option<Tensor>>);

impl Clone for PositionIds {
    fn clone(&self) -> Self {
        PositionIds::default()
    }
}

impl std::fmt::Debug for PositionIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PositionIds")
    }
}

impl PositionIds {
    /// Positions `0..t` (int64, `[t]`) on `device`.
    pub fn get(&self, t: usize, device: Device) -> Result<Tensor> {
        let mut c = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = c.as_ref() {
            if p.device() == device && p.numel() >= t {
                return p.narrow(0, 0, t as i64);
            }
        }
        let p = Tensor::arange(0i64, t as i64, 1i64)?.to_device(device)?;
        *c = Some(p.clone());
        Ok(p)
    }
}
