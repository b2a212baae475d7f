//! The Module tree API: names, state dicts (strict and not), train/eval, dtype moves, tying.

use magpie_core::{DType, Tensor};
use magpie_nn::{Dropout, Embedding, LayerNorm, Linear, Module, ModuleExt, ModuleList, Sequential};

struct Block {
    fc: Linear,
    ln: LayerNorm,
    drop: Dropout,
}

impl Module for Block {
    fn type_name(&self) -> &'static str {
        "Block"
    }
    fn forward(&self, x: &Tensor) -> magpie_core::Result<Tensor> {
        self.drop.forward(&self.ln.forward(&self.fc.forward(x)?)?)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("fc".into(), &self.fc), ("ln".into(), &self.ln), ("drop".into(), &self.drop)]
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        vec![("fc".into(), &mut self.fc), ("ln".into(), &mut self.ln), ("drop".into(), &mut self.drop)]
    }
}

fn block() -> Block {
    Block { fc: Linear::new(4, 3, true).unwrap(), ln: LayerNorm::new(&[3], 1e-5, true, true).unwrap(), drop: Dropout::new(0.5).unwrap() }
}

#[test]
fn names_follow_pytorch() {
    let mut layers = ModuleList::new();
    layers.push(Box::new(block()) as Box<dyn Module>);
    layers.push(Box::new(block()));
    let names: Vec<String> = layers.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["0.fc.weight", "0.fc.bias", "0.ln.weight", "0.ln.bias", "1.fc.weight", "1.fc.bias", "1.ln.weight", "1.ln.bias"]);
    assert_eq!(layers.num_parameters(), 2 * (12 + 3 + 3 + 3));
}

#[test]
fn state_dict_round_trip_and_strictness() {
    let a = block();
    let b = block();
    let x = Tensor::randn(&[2, 4]).unwrap();
    let mut a_eval = a;
    a_eval.eval();
    let mut b = b;
    b.eval();
    let sd = a_eval.state_dict();
    // a copy, not a handle: later changes to `a` must not leak into a loaded `b`
    let rep = b.load_state_dict(&sd, true).unwrap();
    assert!(rep.missing_keys.is_empty() && rep.unexpected_keys.is_empty());
    assert_eq!(a_eval.forward(&x).unwrap().to_vec::<f32>().unwrap(), b.forward(&x).unwrap().to_vec::<f32>().unwrap());

    let mut partial = sd.clone();
    partial.retain(|(n, _)| n != "ln.bias");
    partial.push(("extra".into(), Tensor::zeros(&[1]).unwrap()));
    let err = b.load_state_dict(&partial, true).unwrap_err().to_string();
    assert!(err.contains("ln.bias") && err.contains("extra"), "{err}");
    let rep = b.load_state_dict(&partial, false).unwrap();
    assert_eq!(rep.missing_keys, ["ln.bias"]);
    assert_eq!(rep.unexpected_keys, ["extra"]);

    let mut wrong = sd;
    wrong[0].1 = Tensor::zeros(&[2, 2]).unwrap();
    let err = b.load_state_dict(&wrong, false).unwrap_err().to_string();
    assert!(err.contains("size mismatch for fc.weight"), "{err}");
}

#[test]
fn train_eval_reaches_descendants() {
    let mut s = Sequential::new().add(block()).add(Dropout::new(0.1).unwrap());
    s.eval();
    assert!(s.named_modules().iter().filter(|(n, _)| n.ends_with("drop") || n == "1").all(|(_, m)| !m.is_training()));
    s.train(true);
    assert!(s.named_modules().iter().filter(|(n, _)| n == "1").all(|(_, m)| m.is_training()));
    // eval dropout is the identity
    s.eval();
    let x = Tensor::randn(&[5, 4]).unwrap();
    let y1 = s.forward(&x).unwrap().to_vec::<f32>().unwrap();
    let y2 = s.forward(&x).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(y1, y2);
}

#[test]
fn to_dtype_keeps_leaves_and_ties() {
    struct Tied {
        emb: Embedding,
        head: Linear,
    }
    impl Module for Tied {
        fn type_name(&self) -> &'static str {
            "Tied"
        }
        fn children(&self) -> Vec<(String, &dyn Module)> {
            vec![("emb".into(), &self.emb), ("head".into(), &self.head)]
        }
        fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
            vec![("emb".into(), &mut self.emb), ("head".into(), &mut self.head)]
        }
    }
    let emb = Embedding::new(10, 4, None).unwrap();
    let head = Linear::from_weights(emb.weight.clone(), None).unwrap();
    let mut m = Tied { emb, head };
    assert_eq!(m.parameters().len(), 1, "a tied weight is one parameter");
    assert_eq!(m.state_dict().len(), 2, "but appears under both names in the state dict");
    m.to_dtype(DType::F64).unwrap();
    assert!(m.emb.weight.is_same(&m.head.weight), "tying survives to()");
    assert_eq!(m.emb.weight.dtype(), DType::F64);
    assert!(m.emb.weight.is_leaf() && m.emb.weight.requires_grad());
    assert!(m.to_dtype(DType::I64).is_err());
}

#[test]
fn zero_grad_and_clipping() {
    let fc = Linear::new(3, 2, true).unwrap();
    let y = fc.forward(&Tensor::ones(&[4, 3]).unwrap()).unwrap().mul_scalar(100.0).unwrap().sum().unwrap();
    y.backward().unwrap();
    let before = magpie_nn::utils::clip_grad_norm_(&fc.parameters(), 1.0, 2.0, false).unwrap().item().unwrap().to_f64();
    // weight grads are 400 each (6 of them), bias grads 400 each (2): norm = 400·√8
    assert!((before - 400.0 * 8f64.sqrt()).abs() < 1e-2, "{before}");
    let after: f64 = fc.parameters().iter().map(|p| p.grad().unwrap().to_vec::<f32>().unwrap().iter().map(|v| (*v as f64).powi(2)).sum::<f64>()).sum::<f64>().sqrt();
    assert!((after - 1.0).abs() < 1e-4, "{after}");
    fc.zero_grad();
    assert!(fc.parameters().iter().all(|p| p.grad().is_none()));
}

#[test]
fn linear_init_bounds_like_pytorch() {
    let fc = Linear::new(64, 32, true).unwrap();
    let w = fc.weight.to_vec::<f32>().unwrap();
    let bound = 1.0f32 / 8.0;
    assert!(w.iter().all(|v| v.abs() <= bound));
    // U(-b, b) has variance b²/3; with 2048 samples the estimate is within 15%
    let var = w.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / w.len() as f64;
    assert!((var / (bound as f64 * bound as f64 / 3.0) - 1.0).abs() < 0.15, "{var}");
}
