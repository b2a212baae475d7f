//! Training checkpoints: resuming gives bit-identical parameters and losses to not stopping, and
//! damaged checkpoints are clear errors.

use magpie_models::data::Dataset;
use magpie_models::gpt::{Gpt, GptConfig};
use magpie_models::tokenizer::CharTokenizer;
use magpie_models::trainer::{corpus_id, load_for_inference, TrainConfig, Trainer};
use magpie_nn::ModuleExt;

/// The default generator is process-wide: tests that draw from it take turns.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

const TEXT: &str = "fn main() { let x = 1 + 2; println!(\"{x}\"); }\n// the quick brown fox jumps over the lazy dog\n";

fn setup() -> (Dataset, CharTokenizer, GptConfig, TrainConfig) {
    let text = TEXT.repeat(20);
    let tok = CharTokenizer::fit(&text).unwrap();
    let ids = tok.encode(&text).unwrap();
    // dropout > 0 so the default generator's state matters for the resume
    let mcfg = GptConfig { vocab_size: tok.vocab_size(), block_size: 16, n_layer: 2, n_head: 2, n_embd: 16, dropout: 0.1 };
    let tcfg = TrainConfig { steps: 8, batch_size: 4, warmup_steps: 2, eval_iters: 2, seed: 7, ..Default::default() };
    (Dataset::new(ids, 0.1, 16).unwrap(), tok, mcfg, tcfg)
}

fn params(t: &Trainer) -> Vec<(String, Vec<f32>)> {
    t.model.state_dict().into_iter().map(|(n, p)| (n, p.to_vec::<f32>().unwrap())).collect()
}

#[test]
fn resume_is_bit_identical() {
    let _l = lock();
    let (data, tok, mcfg, tcfg) = setup();
    let id = corpus_id(&data.train);
    // straight through
    let mut a = Trainer::new(mcfg.clone(), tcfg.clone(), tok.clone(), id).unwrap();
    let losses_a: Vec<f32> = (0..8).map(|_| a.train_step(&data).unwrap()).collect();
    let val_a = a.evaluate(&data, magpie_models::data::Split::Val).unwrap();

    // half, save, then disturb every piece of global state before resuming in a fresh trainer
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let mut b = Trainer::new(mcfg.clone(), tcfg.clone(), tok.clone(), id).unwrap();
    let mut losses_b: Vec<f32> = (0..4).map(|_| b.train_step(&data).unwrap()).collect();
    b.save(&ck).unwrap();
    drop(b);
    magpie_core::ops::random::manual_seed(999);
    let _ = magpie_core::Tensor::randn(&[100]).unwrap();
    let mut c = Trainer::load(&ck, Some(id)).unwrap();
    assert_eq!(c.step, 4);
    losses_b.extend((0..4).map(|_| c.train_step(&data).unwrap()));
    let val_c = c.evaluate(&data, magpie_models::data::Split::Val).unwrap();

    assert_eq!(losses_a, losses_b, "losses differ after resume");
    assert_eq!(params(&a), params(&c), "parameters differ after resume");
    assert_eq!(val_a, val_c);
    assert_eq!(a.lr(), c.lr());
    assert!(losses_a[7] < losses_a[0], "loss should fall: {losses_a:?}");

    // the inference loader reads the same weights
    let (m, t2) = load_for_inference(&ck).unwrap();
    assert_eq!(t2, tok);
    assert_eq!(m.state_dict().len(), c.model.state_dict().len());
}

#[test]
fn resume_checks_the_corpus_and_damage() {
    let _l = lock();
    let (data, tok, mcfg, tcfg) = setup();
    let id = corpus_id(&data.train);
    let mut t = Trainer::new(mcfg, tcfg, tok, id).unwrap();
    t.train_step(&data).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    t.save(&ck).unwrap();
    let e = Trainer::load(&ck, Some((1, 2))).err().unwrap().to_string();
    assert!(e.contains("corpus differs"), "{e}");
    // truncate the model file
    let p = ck.join("model.safetensors");
    let b = std::fs::read(&p).unwrap();
    std::fs::write(&p, &b[..b.len() / 2]).unwrap();
    let e = Trainer::load(&ck, Some(id)).err().unwrap().to_string();
    assert!(e.contains("model.safetensors") && e.contains("truncated"), "{e}");
    let e = load_for_inference(&ck).err().unwrap().to_string();
    assert!(e.contains("truncated"), "{e}");
}

#[test]
fn config_errors_are_clear() {
    let _l = lock();
    let bad = GptConfig { vocab_size: 10, block_size: 8, n_layer: 1, n_head: 3, n_embd: 8, dropout: 0.0 };
    let e = Gpt::new(bad).err().unwrap().to_string();
    assert!(e.contains("n_embd (8) must be divisible by n_head (3)"), "{e}");
    let e = TrainConfig { steps: 0, ..Default::default() }.validate().unwrap_err().to_string();
    assert!(e.contains("steps must be at least 1"), "{e}");
    let e = Dataset::new(vec![1, 2, 3], 0.1, 8).err().unwrap().to_string();
    assert!(e.contains("corpus is too short"), "{e}");
}

#[test]
fn logits_shape_and_names() {
    let _l = lock();
    let cfg = GptConfig { vocab_size: 11, block_size: 8, n_layer: 2, n_head: 2, n_embd: 8, dropout: 0.0 };
    let m = Gpt::new(cfg).unwrap();
    let x = magpie_core::Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    assert_eq!(m.logits(&x).unwrap().shape(), &[2, 3, 11]);
    let names: Vec<String> = m.state_dict().into_iter().map(|(n, _)| n).collect();
    assert!(names.contains(&"h.1.attn.c_attn.weight".to_string()));
    assert!(names.contains(&"h.0.mlp.c_proj.bias".to_string()));
    assert!(names.contains(&"ln_f.weight".to_string()));
    // causal: changing a later token does not change earlier logits
    let x2 = magpie_core::Tensor::from_vec(vec![1i64, 2, 9, 4, 5, 6], &[2, 3]).unwrap();
    let a = m.logits(&x).unwrap().narrow(1, 0, 2).unwrap().to_vec::<f32>().unwrap();
    let b = m.logits(&x2).unwrap().narrow(1, 0, 2).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(a, b);
}
