//! BERT masked-language-model training on CUDA: a few float32 steps follow the CPU run with the
//! same seed, and bfloat16 autocast steps stay finite and learn. Skipped where CUDA is not
//! available, unless MAGPIE_REQUIRE_CUDA=1 (then they fail).

mod common;

use common::{have_cuda, lock, TEXT};

use magpie_models::bert_mlm::bert_config;
use magpie_models::data::{Dataset, Split};
use magpie_models::mlm_vocab::MlmTokenizer;
use magpie_models::trainer::{corpus_id, BertTrainer, TrainConfig};

/// Training losses of `steps` steps and the final validation loss and accuracy.
fn run(device: &str, dtype: &str, steps: usize) -> (Vec<f32>, f64, f64) {
    let text = TEXT.repeat(40);
    let tok = MlmTokenizer::fit_chars(&text).unwrap();
    let ids = tok.encode(&text).unwrap();
    let mcfg = bert_config(tok.vocab_size(), 32, 2, 4, 64, 0.0).unwrap();
    let tcfg = TrainConfig { steps, batch_size: 8, lr: 1e-3, warmup_steps: 3, eval_iters: 2, seed: 11, device: device.into(), dtype: dtype.into(), ..Default::default() };
    let data = Dataset::new(ids.clone(), 0.1, 30).unwrap();
    let mut t = BertTrainer::start(mcfg, tcfg, tok, corpus_id(&ids)).unwrap();
    let losses: Vec<f32> = (0..steps).map(|_| t.train_step(&data).unwrap()).collect();
    let e = t.evaluate_full(&data, Split::Val).unwrap();
    (losses, e.loss, e.accuracy.unwrap())
}

#[test]
fn cuda_bert_float32_matches_cpu_and_bfloat16_learns() {
    if !have_cuda() {
        return;
    }
    let _l = lock();
    let steps = 20;
    let (cpu, cpu_val, _) = run("cpu", "float32", steps);
    let (gpu, gpu_val, _) = run("cuda", "float32", steps);
    eprintln!("cpu  losses: {cpu:?}\ncuda losses: {gpu:?}\nval cpu {cpu_val} cuda {gpu_val}");
    for (i, (a, b)) in cpu.iter().zip(&gpu).enumerate() {
        // f32 with different summation orders: differences grow slowly over the steps
        let tol = 2e-4 + 1e-4 * i as f32;
        assert!((a - b).abs() <= tol * a.abs().max(1.0), "step {i}: cpu {a} vs cuda {b}\ncpu {cpu:?}\ncuda {gpu:?}");
    }
    assert!((cpu_val - gpu_val).abs() <= 1e-2 * cpu_val.abs(), "val loss cpu {cpu_val} vs cuda {gpu_val}");
    let (bf, bf_val, bf_acc) = run("cuda", "bfloat16", steps);
    eprintln!("bf16 losses: {bf:?}\nval {bf_val}, accuracy {bf_acc}");
    assert!(bf.iter().all(|l| l.is_finite()), "{bf:?}");
    for (i, (a, b)) in cpu.iter().zip(&bf).enumerate() {
        // bfloat16 keeps 8 bits of mantissa: the curves agree to a few percent
        assert!((a - b).abs() <= 0.05 * a.abs(), "step {i}: float32 {a} vs bfloat16 {b}");
    }
    assert!(bf[steps - 1] < bf[0], "the bfloat16 loss should fall: {bf:?}");
}
