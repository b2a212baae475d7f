//! Every layer and loss against PyTorch: `tests/fixtures/layers.safetensors` (written by
//! `make_layer_fixtures.py`) holds, per case, PyTorch's state dict, inputs, output, output
//! weight, input and parameter gradients and the buffers after the forward. We build the same
//! module, load PyTorch's state dict strictly (so the names match), run forward and
//! `(out * gout).sum()` backward, and compare everything.

use magpie_core::ops::nn::Reduction;
use magpie_core::{DType, Tensor};
use magpie_nn::loss::*;
use magpie_nn::*;

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

/// Our module for a fixture case, configured as the Python script configures PyTorch's.
fn build(name: &str) -> Option<Box<dyn Module>> {
    let o = ConvOptions::default;
    let m: Box<dyn Module> = match name {
        "relu" => Box::new(ReLU),
        "relu6" => Box::new(ReLU6),
        "leaky_relu" => Box::new(LeakyReLU { negative_slope: 0.2 }),
        "elu" => Box::new(ELU { alpha: 0.7 }),
        "selu" => Box::new(SELU),
        "celu" => Box::new(CELU { alpha: 1.3 }),
        "gelu" => Box::new(GELU::default()),
        "gelu_tanh" => Box::new(GELU::new("tanh")),
        "silu" => Box::new(SiLU),
        "mish" => Box::new(Mish),
        "sigmoid" => Box::new(Sigmoid),
        "tanh" => Box::new(Tanh),
        "hardtanh" => Box::new(Hardtanh::new(-0.5, 0.8).ok()?),
        "hardsigmoid" => Box::new(Hardsigmoid),
        "hardswish" => Box::new(Hardswish),
        "softplus" => Box::new(Softplus { beta: 2.0, threshold: 5.0 }),
        "softsign" => Box::new(Softsign),
        "softshrink" => Box::new(Softshrink { lambd: 0.3 }),
        "hardshrink" => Box::new(Hardshrink { lambd: 0.4 }),
        "tanhshrink" => Box::new(Tanhshrink),
        "threshold" => Box::new(Threshold::new(0.1, 20.0)),
        "logsigmoid" => Box::new(LogSigmoid),
        "softmax" => Box::new(Softmax::new(1)),
        "log_softmax" => Box::new(LogSoftmax::new(0)),
        "softmin" => Box::new(Softmin::new(1)),
        "glu" => Box::new(GLU::default()),
        "rrelu_eval" => Box::new(RReLU { lower: 0.1, upper: 0.3, training: true }),
        "softmax2d" => Box::new(Softmax2d),
        "prelu" => Box::new(PReLU::new(1, 0.25).ok()?),
        "prelu_channels" => Box::new(PReLU::new(3, 0.1).ok()?),

        "linear" => Box::new(Linear::new(4, 3, true).ok()?),
        "bilinear" => Box::new(Bilinear::new(3, 4, 2, true).ok()?),
        "embedding" => Box::new(Embedding::new(10, 4, Some(1)).ok()?),
        "embedding_bag_mean" => Box::new(EmbeddingBag::new(10, 4, "mean", None).ok()?),
        "embedding_bag_sum_offsets" => Box::new(EmbeddingBag::new(10, 4, "sum", None).ok()?),
        "embedding_bag_max" => Box::new(EmbeddingBag::new(10, 3, "max", None).ok()?),

        "group_norm" => Box::new(GroupNorm::new(2, 4, 1e-5, true).ok()?),
        "batch_norm1d_train" => Box::new(BatchNorm1d::with_features(3).ok()?),
        "batch_norm1d_3d_train" => Box::new(BatchNorm1d::new(3, 1e-5, None, true, true).ok()?),
        "batch_norm2d_train" => Box::new(BatchNorm2d::new(3, 1e-5, Some(0.3), true, true).ok()?),
        "batch_norm2d_eval" => Box::new(BatchNorm2d::with_features(3).ok()?),
        "batch_norm2d_untracked_eval" => Box::new(BatchNorm2d::new(3, 1e-5, Some(0.1), false, false).ok()?),
        "instance_norm1d" => Box::new(InstanceNorm1d::with_features(3).ok()?),
        "instance_norm2d_tracked_train" | "instance_norm2d_tracked_eval" => Box::new(InstanceNorm2d::new(3, 1e-5, Some(0.1), true, true).ok()?),
        "layer_norm" => Box::new(LayerNorm::new(&[3, 4], 1e-5, true, true).ok()?),

        "dropout1d_p0" => Box::new(Dropout1d::new(0.0).ok()?),
        "dropout2d_p0" => Box::new(Dropout2d::new(0.0).ok()?),
        "dropout3d_eval" => Box::new(Dropout3d::new(0.5).ok()?),
        "alpha_dropout_eval" => Box::new(AlphaDropout::new(0.5).ok()?),

        "conv1d" => Box::new(Conv1d::new(4, 6, &[3], o().stride(&[2]).padding(&[1]).groups(2)).ok()?),
        "conv2d" => Box::new(Conv2d::new(3, 4, &[3, 2], o().padding(&[1]).dilation(&[1, 2])).ok()?),
        "conv2d_same_reflect" => Box::new(Conv2d::new(2, 3, &[3], o().padding_kind(ConvPadding::Same).padding_mode("reflect")).ok()?),
        "conv2d_circular_nobias" => Box::new(Conv2d::new(2, 2, &[3], o().padding(&[1]).padding_mode("circular").bias(false)).ok()?),
        "conv3d" => Box::new(Conv3d::new(2, 3, &[2], o().stride(&[1, 2, 1])).ok()?),
        "conv_transpose1d" => Box::new(ConvTranspose1d::new(4, 2, &[3], o().stride(&[2]).padding(&[1]).output_padding(&[1]).groups(2)).ok()?),
        "conv_transpose2d" => Box::new(ConvTranspose2d::new(3, 2, &[3], o().stride(&[2]).dilation(&[2])).ok()?),

        "max_pool1d" => Box::new(MaxPool1d::new(&[3], Some(&[2]), &[1], &[1], false).ok()?),
        "max_pool2d" => Box::new(MaxPool2d::with_kernel(&[2]).ok()?),
        "max_pool2d_ceil" => Box::new(MaxPool2d::new(&[3], Some(&[2]), &[1], &[1], true).ok()?),
        "avg_pool1d" => Box::new(AvgPool1d::new(&[3], Some(&[2]), &[1], false, true, None).ok()?),
        "avg_pool2d" => Box::new(AvgPool2d::new(&[3], Some(&[2]), &[1], false, false, None).ok()?),
        "adaptive_avg_pool1d" => Box::new(AdaptiveAvgPool1d::new(&[Some(3)]).ok()?),
        "adaptive_avg_pool2d" => Box::new(AdaptiveAvgPool2d::new(&[Some(3), None]).ok()?),
        "adaptive_max_pool2d" => Box::new(AdaptiveMaxPool2d::new(&[Some(2)]).ok()?),
        "upsample_nearest" => Box::new(Upsample::by_scale(&[2.0], "nearest", None)),
        "upsample_bilinear" => Box::new(Upsample::to_size(&[5, 7], "bilinear", Some(false))),
        "upsample_linear_ac" => Box::new(Upsample::by_scale(&[2.0], "linear", Some(true))),
        "flatten" => Box::new(Flatten::default()),
        "unflatten" => Box::new(Unflatten::new(1, &[2, 3])),

        "cross_entropy" => Box::new(CrossEntropyLoss::default()),
        "cross_entropy_weight_ignore_smooth" => Box::new(CrossEntropyLoss { weight: Some(Tensor::zeros(&[5]).ok()?), ignore_index: 2, label_smoothing: 0.1, ..Default::default() }),
        "cross_entropy_probs" => Box::new(CrossEntropyLoss { label_smoothing: 0.2, ..Default::default() }),
        "cross_entropy_nd_none" => Box::new(CrossEntropyLoss { reduction: Reduction::None, ..Default::default() }),
        "cross_entropy_sum" => Box::new(CrossEntropyLoss { reduction: Reduction::Sum, weight: Some(Tensor::zeros(&[4]).ok()?), ..Default::default() }),
        "nll" => Box::new(NLLLoss { weight: Some(Tensor::zeros(&[5]).ok()?), ..Default::default() }),
        "mse" => Box::new(MSELoss::default()),
        "mse_none" => Box::new(MSELoss { reduction: Reduction::None }),
        "l1_sum" => Box::new(L1Loss { reduction: Reduction::Sum }),
        "smooth_l1" => Box::new(SmoothL1Loss { beta: 0.5, ..Default::default() }),
        "huber_none" => Box::new(HuberLoss { reduction: Reduction::None, delta: 0.7 }),
        "bce" => Box::new(BCELoss { weight: Some(Tensor::zeros(&[4]).ok()?), ..Default::default() }),
        "bce_with_logits" => Box::new(BCEWithLogitsLoss { pos_weight: Some(Tensor::zeros(&[5]).ok()?), ..Default::default() }),
        "bce_with_logits_weight_none" => Box::new(BCEWithLogitsLoss { weight: Some(Tensor::zeros(&[5]).ok()?), reduction: Reduction::None, ..Default::default() }),
        "kl_div_batchmean" => Box::new(KLDivLoss { reduction: "batchmean".into(), log_target: false }),
        "kl_div_log_target" => Box::new(KLDivLoss { reduction: "sum".into(), log_target: true }),
        "cosine_embedding" => Box::new(CosineEmbeddingLoss { margin: 0.2, ..Default::default() }),
        "margin_ranking" => Box::new(MarginRankingLoss { margin: 0.1, ..Default::default() }),
        "triplet_margin" => Box::new(TripletMarginLoss::default()),
        "triplet_margin_swap_p1" => Box::new(TripletMarginLoss { margin: 2.0, p: 1.0, swap: true, reduction: Reduction::None, ..Default::default() }),
        "hinge_embedding" => Box::new(HingeEmbeddingLoss { margin: 0.5, ..Default::default() }),
        "soft_margin" => Box::new(SoftMarginLoss::default()),
        "multi_margin" => Box::new(MultiMarginLoss { p: 2, margin: 0.5, weight: Some(Tensor::zeros(&[5]).ok()?), ..Default::default() }),
        "multilabel_margin" => Box::new(MultiLabelMarginLoss::default()),
        "multilabel_soft_margin" => Box::new(MultiLabelSoftMarginLoss { weight: Some(Tensor::zeros(&[4]).ok()?), ..Default::default() }),
        "gaussian_nll" => Box::new(GaussianNLLLoss { full: true, ..Default::default() }),
        "poisson_nll" => Box::new(PoissonNLLLoss::default()),
        "ctc_mean" => Box::new(CTCLoss::default()),
        "ctc_sum_zero_inf" => Box::new(CTCLoss { blank: 4, reduction: Reduction::Sum, zero_infinity: true }),
        "ctc_concat_none" => Box::new(CTCLoss { reduction: Reduction::None, ..Default::default() }),
        _ => return None,
    };
    Some(m)
}

/// The largest violation of `|a - e| <= atol + rtol |e|` (0 when within), or an error on shape.
fn compare(what: &str, got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!("{what}: shape {:?}, PyTorch {:?}", got.shape(), want.shape()));
    }
    let g: Vec<f64> = got.to_vec().map_err(|e| e.to_string())?;
    let w: Vec<f64> = want.to_vec().map_err(|e| e.to_string())?;
    for (i, (a, e)) in g.iter().zip(&w).enumerate() {
        let ok = (a == e) || (a.is_nan() && e.is_nan()) || (a - e).abs() <= atol + rtol * e.abs();
        if !ok {
            return Err(format!("{what}[{i}]: {a} vs PyTorch {e} (|diff| {:.3e})", (a - e).abs()));
        }
    }
    Ok(())
}

fn run_case(name: &str, mode: &str, f: &magpie_io::safetensors::Loaded) -> Result<(), String> {
    let get = |k: &str| f.get(&format!("{name}/{k}")).cloned();
    let mut m = build(name).ok_or_else(|| format!("no builder for case {name}"))?;
    let sd: Vec<(String, Tensor)> = f
        .tensors
        .iter()
        .filter_map(|(k, t)| k.strip_prefix(&format!("{name}/sd/")).map(|n| (n.to_string(), t.clone())))
        .collect();
    m.load_state_dict(&sd, true).map_err(|e| format!("load_state_dict: {e}"))?;
    m.train(mode == "train");
    let mut inputs = Vec::new();
    for i in 0.. {
        let Some(x) = get(&format!("in{i}")) else { break };
        let x = x.detach();
        // a leaf that requires grad where PyTorch recorded an input gradient
        let x = if get(&format!("gin{i}")).is_some() { x.with_requires_grad().map_err(|e| e.to_string())? } else { x };
        inputs.push(x);
    }
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let out = m.forward_many(&refs).map_err(|e| format!("forward: {e}"))?.remove(0);
    let want = get("out").ok_or("fixture has no output")?;
    compare("output", &out, &want, RTOL, ATOL)?;
    if let Some(gout) = get("gout") {
        out.mul(&gout).and_then(|t| t.sum()).and_then(|l| l.backward()).map_err(|e| format!("backward: {e}"))?;
        for (i, x) in inputs.iter().enumerate() {
            if let Some(w) = get(&format!("gin{i}")) {
                let g = x.grad().ok_or_else(|| format!("input {i} got no gradient"))?;
                compare(&format!("grad of input {i}"), &g, &w, RTOL, ATOL)?;
            }
        }
        for (pn, p) in m.named_parameters() {
            match (get(&format!("gp/{pn}")), p.grad()) {
                (Some(w), Some(g)) => compare(&format!("grad of {pn}"), &g, &w, RTOL, ATOL)?,
                (Some(_), None) => return Err(format!("parameter {pn} got no gradient")),
                (None, Some(g)) => {
                    // PyTorch left it None; ours must then be all zero
                    compare(&format!("grad of {pn} (None in PyTorch)"), &g, &g.zeros_like().map_err(|e| e.to_string())?, 0.0, 0.0)?
                }
                (None, None) => {}
            }
        }
    }
    for (bn, b) in m.named_buffers() {
        let w = get(&format!("after/{bn}")).ok_or_else(|| format!("PyTorch has no buffer {bn}"))?;
        if b.dtype() == DType::I64 {
            let (x, y): (Vec<i64>, Vec<i64>) = (b.to_vec().map_err(|e| e.to_string())?, w.to_vec().map_err(|e| e.to_string())?);
            if x != y {
                return Err(format!("buffer {bn}: {x:?} vs PyTorch {y:?}"));
            }
        } else {
            compare(&format!("buffer {bn} after forward"), &b, &w, RTOL, ATOL)?;
        }
    }
    Ok(())
}

#[test]
fn every_layer_and_loss_matches_pytorch() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/layers.safetensors");
    let f = magpie_io::safetensors::load(path).expect("fixture");
    let mut failures = Vec::new();
    let mut n = 0;
    for (name, mode) in &f.metadata {
        n += 1;
        if let Err(e) = run_case(name, mode, &f) {
            failures.push(format!("{name} ({mode}): {e}"));
        }
    }
    assert!(n >= 100, "only {n} cases in the fixture");
    assert!(failures.is_empty(), "{} of {n} cases differ from PyTorch:\n{}", failures.len(), failures.join("\n"));
}
