//! The sequence modules against PyTorch: `tests/fixtures/seq_fixtures.safetensors` (written by
//! `make_seq_fixtures.py`) holds, per case, PyTorch's state dict, inputs, outputs and the
//! gradients of a random linear loss for every input and parameter. Each test builds our
//! module, loads PyTorch's weights strictly (which checks every parameter name and shape), runs
//! forward and backward and compares everything (f32: rtol 1e-4, atol 1e-5).

use magpie_core::ops::nn::scaled_dot_product_attention;
use magpie_core::{Result, Tensor};
use magpie_io::safetensors::{load, Loaded};
use magpie_nn::*;
use std::sync::OnceLock;

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

fn fixtures() -> &'static Loaded {
    static FX: OnceLock<Loaded> = OnceLock::new();
    FX.get_or_init(|| load(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/seq_fixtures.safetensors")).expect("fixture file"))
}

/// One fixture case: its inputs (float ones as fresh leaves that require grad).
struct Case {
    name: &'static str,
    inputs: Vec<(String, Tensor)>,
}

impl Case {
    fn new(name: &'static str) -> Case {
        let pre = format!("{name}.in.");
        let inputs = fixtures()
            .tensors
            .iter()
            .filter_map(|(k, t)| k.strip_prefix(&pre).map(|n| (n.to_string(), t.clone())))
            .map(|(n, t)| {
                let t = if t.dtype().is_float() && !n.ends_with("mask") { t.detach().copy().unwrap().with_requires_grad().unwrap() } else { t };
                (n, t)
            })
            .collect();
        Case { name, inputs }
    }
    fn get(&self, n: &str) -> &Tensor {
        &self.inputs.iter().find(|(k, _)| k == n).unwrap_or_else(|| panic!("{}: no input {n}", self.name)).1
    }
    fn expected(&self, key: &str) -> &Tensor {
        fixtures().get(&format!("{}.{key}", self.name)).unwrap_or_else(|| panic!("fixture lacks {}.{key}", self.name))
    }
    /// Loads PyTorch's state dict into `m`, strictly.
    fn load(&self, m: &(dyn Module + 'static)) {
        let pre = format!("{}.sd.", self.name);
        let sd: Vec<(String, Tensor)> = fixtures().tensors.iter().filter_map(|(k, t)| k.strip_prefix(&pre).map(|n| (n.to_string(), t.clone()))).collect();
        assert!(!sd.is_empty(), "{}: empty state dict", self.name);
        m.load_state_dict(&sd, true).unwrap_or_else(|e| panic!("{}: {e}", self.name));
    }
    /// Compares the outputs, then backpropagates the fixture's loss and compares the gradients
    /// of the inputs and of `m`'s parameters.
    fn check(&self, m: Option<&(dyn Module + 'static)>, outs: &[Tensor]) {
        let mut loss: Option<Tensor> = None;
        for (i, o) in outs.iter().enumerate() {
            close(&format!("{}.out.{i}", self.name), o, self.expected(&format!("out.{i}")));
            let term = o.mul(self.expected(&format!("w.{i}"))).unwrap().sum_dims(None, false, None).unwrap();
            loss = Some(match loss {
                Some(l) => l.add(&term).unwrap(),
                None => term,
            });
        }
        loss.expect("outputs").backward().unwrap();
        for (n, t) in &self.inputs {
            if t.requires_grad() {
                let g = t.grad().unwrap_or_else(|| panic!("{}: no grad for input {n}", self.name));
                close(&format!("{}.gin.{n}", self.name), &g, self.expected(&format!("gin.{n}")));
            }
        }
        if let Some(m) = m {
            let params = m.named_parameters();
            assert!(!params.is_empty());
            for (n, p) in params {
                let g = p.grad().unwrap_or_else(|| panic!("{}: no grad for {n}", self.name));
                close(&format!("{}.grad.{n}", self.name), &g, self.expected(&format!("grad.{n}")));
            }
        }
    }
}

fn close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    let mut worst = 0f64;
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let (a, b) = (a as f64, b as f64);
        let bad = if b.is_nan() { !a.is_nan() } else { !((a - b).abs() <= ATOL + RTOL * b.abs()) };
        assert!(!bad, "{what}[{i}]: got {a}, PyTorch {b}");
        if !b.is_nan() {
            worst = worst.max((a - b).abs());
        }
    }
    if std::env::var("SEQ_FIXTURE_VERBOSE").is_ok() {
        eprintln!("{what}: max abs diff {worst:.2e}");
    }
}

fn mask(c: &Case, n: &str) -> Option<Tensor> {
    Some(c.get(n).clone())
}

#[test]
fn sdpa_matches_pytorch() -> Result<()> {
    for (name, causal, scale, gqa) in [("sdpa_float", false, None, false), ("sdpa_causal", true, None, false), ("sdpa_bool", false, None, false), ("sdpa_gqa", false, Some(0.3), true)] {
        let c = Case::new(name);
        let m = c.inputs.iter().find(|(k, _)| k == "attn_mask").map(|(_, t)| t.clone());
        let o = scaled_dot_product_attention(c.get("q"), c.get("k"), c.get("v"), m.as_ref(), 0.0, causal, scale, gqa)?;
        c.check(None, &[o]);
    }
    Ok(())
}

#[test]
fn multihead_attention_matches_pytorch() -> Result<()> {
    let c = Case::new("mha_self");
    let m = MultiheadAttention::new(16, 4)?;
    c.load(&m);
    let x = c.get("x");
    let (kpm, am) = (mask(&c, "key_padding_mask"), mask(&c, "attn_mask"));
    let (o, w) = m.forward(x, x, x, &MhaArgs { key_padding_mask: kpm.as_ref(), attn_mask: am.as_ref(), ..Default::default() })?;
    c.check(Some(&m), &[o, w.unwrap()]);

    let c = Case::new("mha_kv");
    let opts = MhaOptions { kdim: Some(12), vdim: Some(10), batch_first: true, add_bias_kv: true, add_zero_attn: true, ..Default::default() };
    let m = MultiheadAttention::with_options(16, 2, &opts)?;
    c.load(&m);
    let (kpm, am) = (mask(&c, "key_padding_mask"), mask(&c, "attn_mask"));
    let args = MhaArgs { key_padding_mask: kpm.as_ref(), attn_mask: am.as_ref(), need_weights: false, ..Default::default() };
    let (o, w) = m.forward(c.get("query"), c.get("key"), c.get("value"), &args)?;
    assert!(w.is_none());
    c.check(Some(&m), &[o]);

    let c = Case::new("mha_heads");
    let m = MultiheadAttention::with_options(12, 3, &MhaOptions { bias: false, ..Default::default() })?;
    c.load(&m);
    let am = mask(&c, "attn_mask");
    let args = MhaArgs { attn_mask: am.as_ref(), average_attn_weights: false, ..Default::default() };
    let (o, w) = m.forward(c.get("query"), c.get("key"), c.get("value"), &args)?;
    c.check(Some(&m), &[o, w.unwrap()]);

    let c = Case::new("mha_unbatched");
    let m = MultiheadAttention::new(8, 2)?;
    c.load(&m);
    let outs = m.forward_many(&[c.get("query"), c.get("key"), c.get("value")])?;
    c.check(Some(&m), &outs);
    Ok(())
}

fn topts(dff: usize, batch_first: bool, gelu: bool, norm_first: bool) -> TransformerOptions {
    let activation = if gelu { TransformerActivation::Gelu } else { TransformerActivation::Relu };
    TransformerOptions { dim_feedforward: dff, dropout: 0.0, activation, batch_first, norm_first, ..Default::default() }
}

#[test]
fn transformer_layers_match_pytorch() -> Result<()> {
    let c = Case::new("enc_layer");
    let m = TransformerEncoderLayer::new(16, 4, &topts(32, true, false, false))?;
    c.load(&m);
    let (am, kpm) = (mask(&c, "src_mask"), mask(&c, "src_key_padding_mask"));
    let o = m.forward_with(c.get("src"), am.as_ref(), kpm.as_ref(), false)?;
    c.check(Some(&m), &[o]);

    let c = Case::new("enc_layer_gelu");
    let m = TransformerEncoderLayer::new(16, 2, &topts(24, false, true, true))?;
    c.load(&m);
    let o = m.forward(c.get("src"))?;
    c.check(Some(&m), &[o]);

    let c = Case::new("encoder");
    let m = TransformerEncoder::new(&TransformerEncoderLayer::new(16, 4, &topts(32, false, false, false))?, 2, Some(LayerNorm::new(&[16], 1e-5, true, true)?))?;
    c.load(&m);
    let am = mask(&c, "mask");
    let o = m.forward_with(c.get("src"), am.as_ref(), None, true)?;
    c.check(Some(&m), &[o]);

    let c = Case::new("decoder");
    let m = TransformerDecoder::new(&TransformerDecoderLayer::new(16, 4, &topts(32, true, false, false))?, 2, Some(LayerNorm::new(&[16], 1e-5, true, true)?))?;
    c.load(&m);
    let (tm, mkpm) = (mask(&c, "tgt_mask"), mask(&c, "memory_key_padding_mask"));
    let masks = DecoderMasks { tgt_mask: tm.as_ref(), memory_key_padding_mask: mkpm.as_ref(), tgt_is_causal: true, ..Default::default() };
    let o = m.forward(c.get("tgt"), c.get("memory"), &masks)?;
    c.check(Some(&m), &[o]);

    let c = Case::new("dec_layer_gelu");
    let m = TransformerDecoderLayer::new(16, 2, &topts(24, false, true, true))?;
    c.load(&m);
    let o = m.forward(c.get("tgt"), c.get("memory"), &DecoderMasks::default())?;
    c.check(Some(&m), &[o]);

    let c = Case::new("transformer");
    let m = Transformer::new(16, 2, 1, 1, &topts(24, true, false, false))?;
    c.load(&m);
    let tm = mask(&c, "tgt_mask");
    let o = m.forward(c.get("src"), c.get("tgt"), &TransformerMasks { tgt_mask: tm.as_ref(), ..Default::default() })?;
    c.check(Some(&m), &[o]);
    Ok(())
}

#[test]
fn recurrent_layers_match_pytorch() -> Result<()> {
    let c = Case::new("rnn");
    let m = RNN::new(5, 7, &RnnOptions { num_layers: 2, bidirectional: true, ..Default::default() })?;
    c.load(&m);
    let (o, h) = m.forward(c.get("x"), Some(c.get("h0")))?;
    c.check(Some(&m), &[o, h]);

    let c = Case::new("rnn_relu");
    let m = RNN::new(5, 6, &RnnOptions { relu: true, bias: false, batch_first: true, ..Default::default() })?;
    c.load(&m);
    let (o, h) = m.forward(c.get("x"), None)?;
    c.check(Some(&m), &[o, h]);

    let c = Case::new("lstm_proj");
    let m = LSTM::new(5, 8, &RnnOptions { num_layers: 2, bidirectional: true, proj_size: 4, ..Default::default() })?;
    c.load(&m);
    let (o, (h, cc)) = m.forward(c.get("x"), Some((c.get("h0"), c.get("c0"))))?;
    c.check(Some(&m), &[o, h, cc]);

    let c = Case::new("lstm_unbatched");
    let m = LSTM::new(4, 6, &RnnOptions { batch_first: true, ..Default::default() })?;
    c.load(&m);
    let outs = m.forward_many(&[c.get("x")])?;
    c.check(Some(&m), &outs);

    let c = Case::new("gru");
    let m = GRU::new(5, 7, &RnnOptions { num_layers: 2, bidirectional: true, batch_first: true, ..Default::default() })?;
    c.load(&m);
    let (o, h) = m.forward(c.get("x"), Some(c.get("h0")))?;
    c.check(Some(&m), &[o, h]);
    Ok(())
}

#[test]
fn recurrent_cells_match_pytorch() -> Result<()> {
    let c = Case::new("rnn_cell");
    let m = RNNCell::new(5, 6, true, false)?;
    c.load(&m);
    let h = m.forward(c.get("x"), Some(c.get("h")))?;
    c.check(Some(&m), &[h]);

    let c = Case::new("lstm_cell");
    let m = LSTMCell::new(5, 6, true)?;
    c.load(&m);
    let (h, cc) = m.forward(c.get("x"), Some((c.get("h"), c.get("c"))))?;
    c.check(Some(&m), &[h, cc]);

    let c = Case::new("gru_cell");
    let m = GRUCell::new(5, 6, false)?;
    c.load(&m);
    let h = Module::forward(&m, c.get("x"))?;
    c.check(Some(&m), &[h]);
    Ok(())
}

#[test]
fn names_and_init_follow_pytorch() -> Result<()> {
    let m = LSTM::new(3, 4, &RnnOptions { num_layers: 2, bidirectional: true, proj_size: 2, ..Default::default() })?;
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(&names[..5], ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]);
    assert_eq!(names[5], "weight_ih_l0_reverse");
    assert_eq!(names.len(), 20);
    // U(-1/sqrt(hidden), 1/sqrt(hidden))
    for (_, p) in m.named_parameters() {
        assert!(p.to_vec::<f32>()?.iter().all(|v| v.abs() <= 0.5));
    }
    let e = TransformerEncoder::new(&TransformerEncoderLayer::new(8, 2, &topts(16, false, false, false))?, 2, None)?;
    let names: Vec<String> = e.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "layers.0.self_attn.in_proj_weight");
    assert!(names.contains(&"layers.1.norm2.bias".to_string()));
    // deep copies: the stacked layers start equal, as in PyTorch
    let sd = e.state_dict();
    let get = |n: &str| sd.iter().find(|(k, _)| k == n).unwrap().1.to_vec::<f32>().unwrap();
    assert_eq!(get("layers.0.linear1.weight"), get("layers.1.linear1.weight"));
    let mask = generate_square_subsequent_mask(3)?.to_vec::<f32>()?;
    assert_eq!(mask, [0.0, f32::NEG_INFINITY, f32::NEG_INFINITY, 0.0, 0.0, f32::NEG_INFINITY, 0.0, 0.0, 0.0]);
    Ok(())
}

#[test]
fn bad_inputs_are_errors() -> Result<()> {
    assert!(MultiheadAttention::new(10, 3).is_err());
    let m = MultiheadAttention::new(8, 2)?;
    let x = Tensor::randn(&[3, 2, 8])?;
    assert!(m.forward(&x, &x, &x, &MhaArgs { is_causal: true, ..Default::default() }).is_err());
    let bad = Tensor::randn(&[3, 2, 6])?;
    assert!(m.forward(&x, &bad, &bad, &MhaArgs::default()).is_err());
    let r = GRU::new(4, 5, &RnnOptions::default())?;
    assert!(r.forward(&Tensor::randn(&[3, 2, 5])?, None).is_err());
    assert!(r.forward(&Tensor::randn(&[3, 2, 4])?, Some(&Tensor::randn(&[2, 2, 5])?)).is_err());
    assert!(GRU::new(4, 5, &RnnOptions { proj_size: 2, ..Default::default() }).is_err());
    Ok(())
}
