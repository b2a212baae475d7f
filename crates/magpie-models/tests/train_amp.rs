//! Mixed-precision training (`TrainConfig::dtype` bfloat16 / float16): the parameters stay float32,
//! the forward runs under autocast, float16 goes through a GradScaler (its initial scale of 2^16
//! makes the first steps overflow and skip, as in PyTorch), and the losses follow a float32 run.

use magpie_models::data::Dataset;
use magpie_models::gpt::GptConfig;
use magpie_models::tokenizer::CharTokenizer;
use magpie_models::trainer::{corpus_id, TrainConfig, Trainer};
use magpie_nn::ModuleExt;

static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

const TEXT: &str = "fn main() { let x = 1 + 2; println!(\"{x}\"); }\n// the quick brown fox jumps over the lazy dog\n";

fn losses(dtype: &str, steps: usize) -> (Vec<f32>, Trainer) {
    let _l = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let text = TEXT.repeat(20);
    let tok = CharTokenizer::fit(&text).unwrap();
    let ids = tok.encode(&text).unwrap();
    let data = Dataset::new(ids, 0.1, 16).unwrap();
    let mcfg = GptConfig { vocab_size: tok.vocab_size(), block_size: 16, n_layer: 2, n_head: 2, n_embd: 32, dropout: 0.0 };
    let tcfg = TrainConfig { steps, batch_size: 8, warmup_steps: 2, eval_iters: 2, seed: 11, lr: 1e-2, dtype: dtype.into(), ..Default::default() };
    let mut t = Trainer::new(mcfg, tcfg, tok, corpus_id(&data.train)).unwrap();
    let l = (0..steps).map(|_| t.train_step(&data).unwrap()).collect();
    let v = t.evaluate(&data, magpie_models::data::Split::Val).unwrap();
    assert!(v.is_finite(), "{dtype}: validation loss {v}");
    (l, t)
}

#[test]
fn autocast_training_follows_float32() {
    let steps = 40;
    let (f32_losses, _) = losses("float32", steps);
    for dtype in ["bfloat16", "float16"] {
        let (l, t) = losses(dtype, steps);
        for (n, p) in t.model.state_dict() {
            assert_eq!(p.dtype(), magpie_core::DType::F32, "{dtype}: parameter {n} stays float32");
        }
        assert!(l.iter().all(|v| v.is_finite()), "{dtype}: losses {l:?}");
        // the same start; then both learn (float16's first steps may be skipped while the scale backs off)
        assert!((l[0] - f32_losses[0]).abs() < 0.05 * f32_losses[0], "{dtype}: first loss {} vs float32 {}", l[0], f32_losses[0]);
        let (a, b) = (l[steps - 5..].iter().sum::<f32>() / 5.0, f32_losses[steps - 5..].iter().sum::<f32>() / 5.0);
        assert!(a < 0.8 * l[0], "{dtype}: did not learn: {l:?}");
        assert!((a - b).abs() < 0.15 * b, "{dtype}: final losses {a} vs float32 {b}");
    }
    assert!(TrainConfig { dtype: "int8".into(), ..Default::default() }.validate().is_err());
}
