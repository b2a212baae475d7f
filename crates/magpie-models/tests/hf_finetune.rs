//! The pretrained models are trainable modules: dropout only in training mode (they load in eval
//! mode, as in transformers), autograd gradients that agree with finite differences (float64), and
//! a few AdamW steps on a batch lowering its language-model loss.

use magpie_core::autograd::no_grad;
use magpie_core::ops::nn::loss::cross_entropy;
use magpie_core::ops::nn::loss::Reduction;
use magpie_core::{DType, Tensor};
use magpie_models::auto::AutoModel;
use magpie_models::hub::LoadOptions;
use magpie_nn::ModuleExt;
use magpie_optim::{AdamConfig, AdamW, Optimizer};
use std::path::PathBuf;

fn load(name: &str) -> AutoModel {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf").join(name);
    AutoModel::from_pretrained(dir, &LoadOptions::default()).unwrap()
}

fn ids() -> Tensor {
    Tensor::from_vec(vec![5i64, 17, 3, 99, 42, 7, 8, 1, 64, 33, 2, 90], &[2, 6]).unwrap()
}

/// Next-token cross-entropy of a decoder on `ids`.
fn lm_loss(m: &AutoModel, ids: &Tensor) -> Tensor {
    let logits = m.forward(ids, None, None, false).unwrap().logits.unwrap();
    let (b, t, v) = (logits.shape()[0] as i64, logits.shape()[1] as i64, logits.shape()[2] as i64);
    let pred = logits.narrow(1, 0, t - 1).unwrap().reshape(&[b * (t - 1), v]).unwrap();
    let target = ids.narrow(1, 1, t - 1).unwrap().reshape(&[b * (t - 1)]).unwrap();
    cross_entropy(&pred, &target, None, -100, Reduction::Mean, 0.0).unwrap()
}

fn value(t: &Tensor) -> f64 {
    t.to_dtype(DType::F64).unwrap().item().unwrap().to_f64()
}

#[test]
fn dropout_only_in_training_mode() {
    for name in ["tiny-bert", "tiny-gpt2"] {
        let mut m = load(name);
        assert!(!m.module().is_training(), "{name}: models load in eval mode");
        let x = ids();
        let run = |m: &AutoModel| {
            let _g = no_grad();
            m.forward(&x, None, None, false).unwrap().last_hidden_state.to_vec::<f32>().unwrap()
        };
        let eval = run(&m);
        assert_eq!(eval, run(&m), "{name}: eval mode is deterministic");
        m.module_mut().train(true);
        let (a, b) = (run(&m), run(&m));
        assert_ne!(a, b, "{name}: training mode applies dropout");
        assert_ne!(a, eval);
        m.module_mut().eval();
        assert_eq!(run(&m), eval, "{name}: back in eval mode");
    }
}

/// d loss / d w for a few weight entries, autograd against central differences, in float64.
#[test]
fn gradients_match_finite_differences() {
    for (name, weights) in [
        ("tiny-gpt2", vec!["transformer.h.0.attn.c_attn.weight", "transformer.wpe.weight", "transformer.h.2.mlp.c_fc.bias"]),
        ("tiny-llama", vec!["model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight", "model.layers.2.mlp.gate_proj.weight", "model.norm.weight"]),
        ("tiny-qwen2", vec!["model.layers.0.self_attn.k_proj.bias", "model.embed_tokens.weight"]),
    ] {
        let mut m = load(name);
        m.module_mut().to_dtype(DType::F64).unwrap();
        let x = ids();
        let loss = lm_loss(&m, &x);
        loss.backward().unwrap();
        let params = m.module().named_parameters();
        for wname in weights {
            let w = &params.iter().find(|(n, _)| n == wname).unwrap_or_else(|| panic!("{name}: no {wname}")).1;
            let g = w.grad().unwrap_or_else(|| panic!("{name}: {wname} has no gradient")).contiguous().unwrap().to_vec::<f64>().unwrap();
            let n = g.len();
            for &i in &[0, n / 3, n - 1] {
                let flat = w.view(&[-1]).unwrap();
                let orig = flat.select(0, i as i64).unwrap().item().unwrap().to_f64();
                let eps = 1e-5;
                let at = |v: f64| {
                    let _g = no_grad();
                    flat.select(0, i as i64).unwrap().fill_(v).unwrap();
                    value(&lm_loss(&m, &x))
                };
                let (hi, lo) = (at(orig + eps), at(orig - eps));
                at(orig);
                let fd = (hi - lo) / (2.0 * eps);
                assert!((fd - g[i]).abs() <= 1e-6 + 1e-4 * fd.abs(), "{name} {wname}[{i}]: autograd {} vs finite differences {fd}", g[i]);
            }
        }
    }
}

#[test]
fn adamw_steps_lower_the_loss() {
    for name in ["tiny-gpt2", "tiny-llama"] {
        let mut m = load(name);
        let x = ids();
        let before = {
            let _g = no_grad();
            value(&lm_loss(&m, &x))
        };
        m.module_mut().train(true);
        let mut opt = AdamW::new(m.module().parameters(), AdamConfig { lr: 3e-3, ..AdamConfig::adamw() }).unwrap();
        for _ in 0..15 {
            opt.zero_grad();
            lm_loss(&m, &x).backward().unwrap();
            opt.step().unwrap();
        }
        m.module_mut().eval();
        let after = {
            let _g = no_grad();
            value(&lm_loss(&m, &x))
        };
        assert!(after < 0.7 * before, "{name}: loss {before} -> {after}");
    }
}
