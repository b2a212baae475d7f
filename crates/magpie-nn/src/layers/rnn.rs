//! Recurrent layers: `RNN` (tanh/relu), `LSTM` (optional projection), `GRU` — multi-layer,
//! bidirectional, with PyTorch's flat parameter names (`weight_ih_l0`, `bias_hh_l1_reverse`,
//! `weight_hr_l0`) — and the single-step `RNNCell`, `LSTMCell`, `GRUCell`.
//!
//! Everything is written with tensor ops, so autograd works through time. Each layer's input
//! projection for all time steps is one matmul; only the recurrent product runs per step.

use crate::init;
use crate::module::{present, present_mut, Module};
use magpie_core::ops::nn::{dropout, linear};
use magpie_core::ops::shape_ops::{cat, stack};
use magpie_core::{default_dtype, Device, Error, Result, Tensor};
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// The recurrence a layer computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RnnMode {
    /// `h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`.
    RnnTanh,
    /// `h' = relu(W_ih x + b_ih + W_hh h + b_hh)`.
    RnnRelu,
    /// Gates i, f, g, o (PyTorch's row order in the weights).
    Lstm,
    /// Gates r, z, n (PyTorch's row order in the weights).
    Gru,
}

impl RnnMode {
    fn gates(self) -> usize {
        match self {
            RnnMode::RnnTanh | RnnMode::RnnRelu => 1,
            RnnMode::Lstm => 4,
            RnnMode::Gru => 3,
        }
    }
    fn type_name(self) -> &'static str {
        match self {
            RnnMode::RnnTanh | RnnMode::RnnRelu => "RNN",
            RnnMode::Lstm => "LSTM",
            RnnMode::Gru => "GRU",
        }
    }
}

/// The constructor options of `nn.RNN`/`nn.LSTM`/`nn.GRU` beyond the two sizes (PyTorch's
/// defaults via `Default`).
#[derive(Debug, Clone, PartialEq)]
pub struct RnnOptions {
    pub num_layers: usize,
    pub bias: bool,
    /// Inputs and outputs are `[batch, seq, feature]` (the states stay `[layers, batch, hidden]`).
    pub batch_first: bool,
    /// Dropout on the outputs of every layer but the last (training only).
    pub dropout: f64,
    pub bidirectional: bool,
    /// LSTM only: project the hidden state to this size (0 = no projection).
    pub proj_size: usize,
    /// RNN only: `relu` instead of `tanh`.
    pub relu: bool,
}

impl Default for RnnOptions {
    fn default() -> Self {
        RnnOptions { num_layers: 1, bias: true, batch_first: false, dropout: 0.0, bidirectional: false, proj_size: 0, relu: false }
    }
}

/// Interns parameter names (`weight_ih_l3_reverse`): the `Module` trait names parameters with
/// `&'static str`, and the set of distinct names is small, so each is leaked once.
fn intern(s: String) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut set = NAMES.get_or_init(|| Mutex::new(HashSet::new())).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&n) = set.get(s.as_str()) {
        return n;
    }
    let n: &'static str = Box::leak(s.into_boxed_str());
    set.insert(n);
    n
}

/// The parameters of one layer in one direction.
pub struct RnnWeights {
    /// `[gates·hidden, layer input]`.
    pub weight_ih: Tensor,
    /// `[gates·hidden, hidden or proj_size]`.
    pub weight_hh: Tensor,
    pub bias_ih: Option<Tensor>,
    pub bias_hh: Option<Tensor>,
    /// LSTM projection `[proj_size, hidden]`.
    pub weight_hr: Option<Tensor>,
    names: [&'static str; 5],
}

impl RnnWeights {
    fn new(gate: usize, inp: usize, hid_in: usize, hidden: usize, bias: bool, proj: usize, suffix: &str) -> Result<RnnWeights> {
        // PyTorch: every parameter ~ U(-1/√hidden, 1/√hidden)
        let stdv = if hidden > 0 { 1.0 / (hidden as f64).sqrt() } else { 0.0 };
        let p = |shape: &[usize]| -> Result<Tensor> {
            let t = Tensor::zeros_on(shape, default_dtype(), Device::Cpu)?;
            init::uniform_(&t, -stdv, stdv)?;
            t.with_requires_grad()
        };
        Ok(RnnWeights {
            weight_ih: p(&[gate, inp])?,
            weight_hh: p(&[gate, hid_in])?,
            bias_ih: if bias { Some(p(&[gate])?) } else { None },
            bias_hh: if bias { Some(p(&[gate])?) } else { None },
            weight_hr: if proj > 0 { Some(p(&[proj, hidden])?) } else { None },
            names: ["weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"].map(|n| intern(format!("{n}{suffix}"))),
        })
    }
    fn list(&self) -> Vec<(&'static str, &Tensor)> {
        let n = self.names;
        present([(n[0], Some(&self.weight_ih)), (n[1], Some(&self.weight_hh)), (n[2], self.bias_ih.as_ref()), (n[3], self.bias_hh.as_ref()), (n[4], self.weight_hr.as_ref())])
    }
    fn list_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        let n = self.names;
        present_mut([(n[0], Some(&mut self.weight_ih)), (n[1], Some(&mut self.weight_hh)), (n[2], self.bias_ih.as_mut()), (n[3], self.bias_hh.as_mut()), (n[4], self.weight_hr.as_mut())])
    }
}

/// One recurrence step from the input projection `gi = W_ih x + b_ih` (`[N, G]`):
/// the new hidden state and (LSTM) cell state.
fn step(mode: RnnMode, gi: &Tensor, h: &Tensor, c: Option<&Tensor>, w: &RnnWeights) -> Result<(Tensor, Option<Tensor>)> {
    let gh = linear(h, &w.weight_hh, w.bias_hh.as_ref())?;
    let last = gi.ndim() as i64 - 1;
    let hs = (gi.shape()[gi.ndim() - 1] / mode.gates()) as i64;
    let part = |t: &Tensor, i: i64| t.narrow(last, i * hs, hs);
    match mode {
        RnnMode::RnnTanh => Ok((gi.add(&gh)?.tanh()?, None)),
        RnnMode::RnnRelu => Ok((gi.add(&gh)?.relu()?, None)),
        RnnMode::Lstm => {
            let g = gi.add(&gh)?;
            let i = part(&g, 0)?.sigmoid()?;
            let f = part(&g, 1)?.sigmoid()?;
            let gg = part(&g, 2)?.tanh()?;
            let o = part(&g, 3)?.sigmoid()?;
            let c = c.ok_or_else(|| Error::value("LSTM", "missing cell state"))?;
            let c2 = f.mul(c)?.add(&i.mul(&gg)?)?;
            let mut h2 = o.mul(&c2.tanh()?)?;
            if let Some(wr) = &w.weight_hr {
                h2 = linear(&h2, wr, None)?;
            }
            Ok((h2, Some(c2)))
        }
        RnnMode::Gru => {
            let r = part(gi, 0)?.add(&part(&gh, 0)?)?.sigmoid()?;
            let z = part(gi, 1)?.add(&part(&gh, 1)?)?.sigmoid()?;
            let n = part(gi, 2)?.add(&r.mul(&part(&gh, 2)?)?)?.tanh()?;
            // (1 - z) * n + z * h
            Ok((n.add(&z.mul(&h.sub(&n)?)?)?, None))
        }
    }
}

/// The shared implementation of `RNN`, `LSTM` and `GRU` (PyTorch's `RNNBase`).
pub struct RNNBase {
    pub mode: RnnMode,
    pub input_size: usize,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub bias: bool,
    pub batch_first: bool,
    pub dropout: f64,
    pub bidirectional: bool,
    pub proj_size: usize,
    /// Per layer and direction: index `layer * num_directions + direction`.
    pub weights: Vec<RnnWeights>,
    pub training: bool,
}

impl RNNBase {
    /// A new stack with PyTorch's initialisation.
    pub fn new(mode: RnnMode, input_size: usize, hidden_size: usize, o: &RnnOptions) -> Result<RNNBase> {
        let op = mode.type_name();
        if !(0.0..=1.0).contains(&o.dropout) {
            return Err(Error::value(op, "dropout should be a number in range [0, 1] representing the probability of an element being zeroed"));
        }
        if hidden_size == 0 {
            return Err(Error::value(op, "hidden_size must be greater than zero"));
        }
        if o.num_layers == 0 {
            return Err(Error::value(op, "num_layers must be greater than zero"));
        }
        if o.proj_size > 0 && mode != RnnMode::Lstm {
            return Err(Error::value(op, "proj_size argument is only supported for LSTM, not RNN or GRU"));
        }
        if o.proj_size >= hidden_size && o.proj_size > 0 {
            return Err(Error::value(op, "proj_size has to be smaller than hidden_size"));
        }
        let mode = if mode == RnnMode::RnnTanh && o.relu { RnnMode::RnnRelu } else { mode };
        if o.relu && !matches!(mode, RnnMode::RnnRelu) {
            return Err(Error::value(op, "a relu nonlinearity is only supported for RNN"));
        }
        let dirs = if o.bidirectional { 2 } else { 1 };
        let real_hidden = if o.proj_size > 0 { o.proj_size } else { hidden_size };
        let gate = mode.gates() * hidden_size;
        let mut weights = Vec::new();
        for layer in 0..o.num_layers {
            let inp = if layer == 0 { input_size } else { real_hidden * dirs };
            for d in 0..dirs {
                let suffix = format!("_l{layer}{}", if d == 1 { "_reverse" } else { "" });
                weights.push(RnnWeights::new(gate, inp, real_hidden, hidden_size, o.bias, o.proj_size, &suffix)?);
            }
        }
        Ok(RNNBase {
            mode,
            input_size,
            hidden_size,
            num_layers: o.num_layers,
            bias: o.bias,
            batch_first: o.batch_first,
            dropout: o.dropout,
            bidirectional: o.bidirectional,
            proj_size: o.proj_size,
            weights,
            training: true,
        })
    }

    fn dirs(&self) -> usize {
        if self.bidirectional {
            2
        } else {
            1
        }
    }

    /// Checks an initial state `[L·D, N, size]` (`[L·D, size]` unbatched) and returns it batched.
    fn state(&self, t: Option<&Tensor>, n: usize, size: usize, batched: bool, x: &Tensor, name: &str) -> Result<Tensor> {
        let ld = self.num_layers * self.dirs();
        match t {
            None => Tensor::zeros_on(&[ld, n, size], x.dtype(), x.device()),
            Some(t) => {
                let t = if batched {
                    if t.ndim() != 3 {
                        return Err(Error::shape(self.mode.type_name(), format!("For batched 3-D input, {name} should also be 3-D but got {}-D tensor", t.ndim())));
                    }
                    t.clone()
                } else {
                    if t.ndim() != 2 {
                        return Err(Error::shape(self.mode.type_name(), format!("For unbatched 2-D input, {name} should also be 2-D but got {}-D tensor", t.ndim())));
                    }
                    t.unsqueeze(1)?
                };
                if t.shape() != [ld, n, size] {
                    return Err(Error::shape(self.mode.type_name(), format!("Expected hidden size {:?}, got {:?}", [ld, n, size], t.shape())));
                }
                if t.dtype() != x.dtype() {
                    return Err(Error::dtype(self.mode.type_name(), format!("Expected {name} to have dtype {} (the input's), got {}", x.dtype(), t.dtype())));
                }
                Ok(t)
            }
        }
    }

    /// The whole forward pass: `(output, h_n, c_n)` (`c_n` for LSTM only).
    pub fn run(&self, input: &Tensor, h0: Option<&Tensor>, c0: Option<&Tensor>) -> Result<(Tensor, Tensor, Option<Tensor>)> {
        let op = self.mode.type_name();
        let batched = input.ndim() == 3;
        if !(batched || input.ndim() == 2) {
            return Err(Error::shape(op, format!("{op}: Expected input to be 2D or 3D, got {}D tensor instead", input.ndim())));
        }
        if input.shape()[input.ndim() - 1] != self.input_size {
            return Err(Error::shape(op, format!("input.size(-1) must be equal to input_size. Expected {}, got {}", self.input_size, input.shape()[input.ndim() - 1])));
        }
        if !input.dtype().is_float() || input.dtype() != self.weights[0].weight_ih.dtype() {
            return Err(Error::dtype(op, format!("input must have the type of the weights ({}), got {}", self.weights[0].weight_ih.dtype(), input.dtype())));
        }
        let mut x = if !batched {
            input.unsqueeze(1)?
        } else if self.batch_first {
            input.transpose(0, 1)?
        } else {
            input.clone()
        };
        let (t_len, n) = (x.shape()[0], x.shape()[1]);
        if t_len == 0 {
            return Err(Error::value(op, "Expected sequence length to be larger than 0 in RNN"));
        }
        let lstm = self.mode == RnnMode::Lstm;
        let h_out = if self.proj_size > 0 { self.proj_size } else { self.hidden_size };
        let h0 = self.state(h0, n, h_out, batched, &x, "hx")?;
        let c0 = if lstm { Some(self.state(c0, n, self.hidden_size, batched, &x, "cx")?) } else { None };
        let dirs = self.dirs();
        let (mut hn, mut cn) = (Vec::new(), Vec::new());
        for layer in 0..self.num_layers {
            let mut outs = Vec::with_capacity(dirs);
            for d in 0..dirs {
                let idx = (layer * dirs + d) as i64;
                let w = &self.weights[layer * dirs + d];
                // one matmul for the input projection of every step
                let xp = linear(&x, &w.weight_ih, w.bias_ih.as_ref())?;
                let mut h = h0.select(0, idx)?;
                let mut c = c0.as_ref().map(|c| c.select(0, idx)).transpose()?;
                let mut ys: Vec<Option<Tensor>> = vec![None; t_len];
                for s in 0..t_len {
                    let t = if d == 0 { s } else { t_len - 1 - s };
                    let (h2, c2) = step(self.mode, &xp.select(0, t as i64)?, &h, c.as_ref(), w)?;
                    h = h2;
                    c = c2;
                    ys[t] = Some(h.clone());
                }
                let ys: Vec<Tensor> = ys.into_iter().flatten().collect();
                outs.push(stack(&ys, 0)?);
                hn.push(h);
                cn.extend(c);
            }
            x = if outs.len() == 1 { outs.remove(0) } else { cat(&outs, -1)? };
            if self.training && self.dropout > 0.0 && layer + 1 < self.num_layers {
                x = dropout(&x, self.dropout, true, false)?;
            }
        }
        let out = if !batched {
            x.squeeze_dims(&[1])?
        } else if self.batch_first {
            x.transpose(0, 1)?
        } else {
            x
        };
        let fix = |v: Vec<Tensor>| -> Result<Tensor> {
            let s = stack(&v, 0)?;
            if batched {
                Ok(s)
            } else {
                s.squeeze_dims(&[1])
            }
        };
        let c_n = if lstm { Some(fix(cn)?) } else { None };
        Ok((out, fix(hn)?, c_n))
    }

    /// [`RNNBase::run`] for the layers without a cell state: `(output, h_n)`.
    fn run_hidden(&self, input: &Tensor, hx: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let (o, h, _) = self.run(input, hx, None)?;
        Ok((o, h))
    }

    fn params(&self) -> Vec<(&'static str, &Tensor)> {
        self.weights.iter().flat_map(|w| w.list()).collect()
    }
    fn params_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        self.weights.iter_mut().flat_map(|w| w.list_mut()).collect()
    }
}

/// Defines a recurrent layer `$t` over [`RNNBase`] in mode `$mode`: the struct, `new`, `Deref`
/// to the base and `Module` (its typed `forward` is written per layer).
macro_rules! rnn_module {
    ($(#[$doc:meta])* $t:ident, $name:literal, $mode:expr) => {
        $(#[$doc])*
        pub struct $t {
            pub base: RNNBase,
        }

        impl $t {
            /// A new layer with PyTorch's initialisation.
            pub fn new(input_size: usize, hidden_size: usize, o: &RnnOptions) -> Result<$t> {
                Ok($t { base: RNNBase::new($mode, input_size, hidden_size, o)? })
            }
        }

        impl std::ops::Deref for $t {
            type Target = RNNBase;
            fn deref(&self) -> &RNNBase {
                &self.base
            }
        }
        impl std::ops::DerefMut for $t {
            fn deref_mut(&mut self) -> &mut RNNBase {
                &mut self.base
            }
        }
        impl Module for $t {
            fn type_name(&self) -> &'static str {
                $name
            }
            /// `[input]`, `[input, h0]` (or `[input, h0, c0]` for LSTM): `[output, h_n(, c_n)]`.
            fn forward_many(&self, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
                let lstm = self.base.mode == RnnMode::Lstm;
                let (x, h, c) = match xs {
                    [x] => (*x, None, None),
                    [x, h] if !lstm => (*x, Some(*h), None),
                    [x, h, c] if lstm => (*x, Some(*h), Some(*c)),
                    _ => return Err(Error::value($name, format!("forward got {} inputs", xs.len()))),
                };
                let (o, h, c) = self.base.run(x, h, c)?;
                Ok([o, h].into_iter().chain(c).collect())
            }
            fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
                self.base.params()
            }
            fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
                self.base.params_mut()
            }
            fn set_training(&mut self, training: bool) {
                self.base.training = training;
            }
            fn is_training(&self) -> bool {
                self.base.training
            }
        }
    };
}

rnn_module!(
    /// `nn.RNN(input_size, hidden_size, ...)` (tanh, or relu with `RnnOptions::relu`).
    RNN,
    "RNN",
    RnnMode::RnnTanh
);

impl RNN {
    /// `forward(input, hx)`: `(output, h_n)`.
    pub fn forward(&self, input: &Tensor, hx: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        self.base.run_hidden(input, hx)
    }
}

rnn_module!(
    /// `nn.LSTM(input_size, hidden_size, ...)`, with `proj_size` (LSTMP) support.
    LSTM,
    "LSTM",
    RnnMode::Lstm
);

impl LSTM {
    /// `forward(input, (h0, c0))`: `(output, (h_n, c_n))`.
    pub fn forward(&self, input: &Tensor, hx: Option<(&Tensor, &Tensor)>) -> Result<(Tensor, (Tensor, Tensor))> {
        let (o, h, c) = self.base.run(input, hx.map(|p| p.0), hx.map(|p| p.1))?;
        let c = c.ok_or_else(|| Error::value("LSTM", "missing cell state"))?;
        Ok((o, (h, c)))
    }
}

rnn_module!(
    /// `nn.GRU(input_size, hidden_size, ...)`.
    GRU,
    "GRU",
    RnnMode::Gru
);

impl GRU {
    /// `forward(input, hx)`: `(output, h_n)`.
    pub fn forward(&self, input: &Tensor, hx: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        self.base.run_hidden(input, hx)
    }
}

/// The single-step cells: `weight_ih`, `weight_hh`, `bias_ih`, `bias_hh`, PyTorch's init.
pub struct RnnCellBase {
    pub mode: RnnMode,
    pub input_size: usize,
    pub hidden_size: usize,
    pub w: RnnWeights,
}

impl RnnCellBase {
    fn new(mode: RnnMode, input_size: usize, hidden_size: usize, bias: bool) -> Result<RnnCellBase> {
        let w = RnnWeights::new(mode.gates() * hidden_size, input_size, hidden_size, hidden_size, bias, 0, "")?;
        Ok(RnnCellBase { mode, input_size, hidden_size, w })
    }
    /// One step on `[N, input]` (or `[input]`) from `(h, c)` (zeros when absent).
    fn run(&self, x: &Tensor, h: Option<&Tensor>, c: Option<&Tensor>) -> Result<(Tensor, Option<Tensor>)> {
        let op = match self.mode {
            RnnMode::RnnTanh | RnnMode::RnnRelu => "RNNCell",
            RnnMode::Lstm => "LSTMCell",
            RnnMode::Gru => "GRUCell",
        };
        if !(x.ndim() == 1 || x.ndim() == 2) {
            return Err(Error::shape(op, format!("{op}: Expected input to be 1D or 2D, got {}D instead", x.ndim())));
        }
        let batched = x.ndim() == 2;
        let xb = if batched { x.clone() } else { x.unsqueeze(0)? };
        if xb.shape()[1] != self.input_size {
            return Err(Error::shape(op, format!("input has inconsistent input_size: got {} expected {}", xb.shape()[1], self.input_size)));
        }
        let n = xb.shape()[0];
        let st = |t: Option<&Tensor>, name: &str| -> Result<Tensor> {
            match t {
                None => Tensor::zeros_on(&[n, self.hidden_size], xb.dtype(), xb.device()),
                Some(t) => {
                    let t = if batched { t.clone() } else { t.unsqueeze(0)? };
                    if t.shape() != [n, self.hidden_size] {
                        return Err(Error::shape(op, format!("{name} has shape {:?}, expected {:?}", t.shape(), [n, self.hidden_size])));
                    }
                    Ok(t)
                }
            }
        };
        let h = st(h, "hx")?;
        let c = if self.mode == RnnMode::Lstm { Some(st(c, "cx")?) } else { None };
        let gi = linear(&xb, &self.w.weight_ih, self.w.bias_ih.as_ref())?;
        let (h, c) = step(self.mode, &gi, &h, c.as_ref(), &self.w)?;
        if batched {
            Ok((h, c))
        } else {
            Ok((h.squeeze_dims(&[0])?, c.map(|c| c.squeeze_dims(&[0])).transpose()?))
        }
    }
}

macro_rules! cell_module {
    // a cell whose state is the hidden state alone: its typed `forward(input, hx)` too
    ($t:ident, $name:literal, hidden) => {
        impl $t {
            /// `forward(input, hx)`: the next hidden state.
            pub fn forward(&self, input: &Tensor, hx: Option<&Tensor>) -> Result<Tensor> {
                Ok(self.base.run(input, hx, None)?.0)
            }
        }
        cell_module!($t, $name, fn forward(&self, x: &Tensor) -> Result<Tensor> {
            $t::forward(self, x, None)
        });
    };
    ($t:ident, $name:literal, $($fwd:tt)*) => {
        impl std::ops::Deref for $t {
            type Target = RnnCellBase;
            fn deref(&self) -> &RnnCellBase {
                &self.base
            }
        }
        impl Module for $t {
            fn type_name(&self) -> &'static str {
                $name
            }
            $($fwd)*
            fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
                self.base.w.list()
            }
            fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
                self.base.w.list_mut()
            }
        }
    };
}

/// `nn.RNNCell(input_size, hidden_size, bias, nonlinearity)`.
pub struct RNNCell {
    pub base: RnnCellBase,
}

impl RNNCell {
    /// `relu` picks the relu nonlinearity instead of tanh.
    pub fn new(input_size: usize, hidden_size: usize, bias: bool, relu: bool) -> Result<RNNCell> {
        let mode = if relu { RnnMode::RnnRelu } else { RnnMode::RnnTanh };
        Ok(RNNCell { base: RnnCellBase::new(mode, input_size, hidden_size, bias)? })
    }
}
cell_module!(RNNCell, "RNNCell", hidden);

/// `nn.GRUCell(input_size, hidden_size, bias)`.
pub struct GRUCell {
    pub base: RnnCellBase,
}

impl GRUCell {
    /// A new cell with PyTorch's initialisation.
    pub fn new(input_size: usize, hidden_size: usize, bias: bool) -> Result<GRUCell> {
        Ok(GRUCell { base: RnnCellBase::new(RnnMode::Gru, input_size, hidden_size, bias)? })
    }
}
cell_module!(GRUCell, "GRUCell", hidden);

/// `nn.LSTMCell(input_size, hidden_size, bias)`.
pub struct LSTMCell {
    pub base: RnnCellBase,
}

impl LSTMCell {
    /// A new cell with PyTorch's initialisation.
    pub fn new(input_size: usize, hidden_size: usize, bias: bool) -> Result<LSTMCell> {
        Ok(LSTMCell { base: RnnCellBase::new(RnnMode::Lstm, input_size, hidden_size, bias)? })
    }
    /// `forward(input, (h, c))`: the next `(h, c)`.
    pub fn forward(&self, input: &Tensor, hx: Option<(&Tensor, &Tensor)>) -> Result<(Tensor, Tensor)> {
        let (h, c) = self.base.run(input, hx.map(|p| p.0), hx.map(|p| p.1))?;
        Ok((h, c.ok_or_else(|| Error::value("LSTMCell", "missing cell state"))?))
    }
}
cell_module!(LSTMCell, "LSTMCell", fn forward_many(&self, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
    let (h, c) = match xs {
        [x] => LSTMCell::forward(self, *x, None)?,
        [x, h, c] => LSTMCell::forward(self, *x, Some((*h, *c)))?,
        _ => return Err(Error::value("LSTMCell", format!("forward takes input or (input, h, c), got {} inputs", xs.len()))),
    };
    Ok(vec![h, c])
});
