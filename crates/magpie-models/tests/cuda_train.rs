//! Training the GPT on CUDA: the loss curve matches the CPU run with the same seed (f32, no
//! TF32), the optimizer state stays on the device and checkpoints written from CUDA training
//! hold its values and resume on CUDA. Skipped where CUDA is not available, unless
//! MAGPIE_REQUIRE_CUDA=1 (then they fail).

mod common;

use common::{have_cuda, lock, TEXT};

use magpie_core::backend::cuda;
use magpie_core::Device;
use magpie_models::data::{Dataset, Split};
use magpie_models::gpt::GptConfig;
use magpie_models::tokenizer::CharTokenizer;
use magpie_models::trainer::{corpus_id, TrainConfig, Trainer};
use magpie_nn::ModuleExt;
use magpie_optim::Optimizer;

fn setup(device: &str) -> (Dataset, CharTokenizer, GptConfig, TrainConfig) {
    let text = TEXT.repeat(40);
    let tok = CharTokenizer::fit(&text).unwrap();
    let ids = tok.encode(&text).unwrap();
    let mcfg = GptConfig { vocab_size: tok.vocab_size(), block_size: 32, n_layer: 2, n_head: 4, n_embd: 64, dropout: 0.0 };
    let tcfg = TrainConfig { steps: 30, batch_size: 8, warmup_steps: 3, eval_iters: 2, seed: 11, device: device.into(), ..Default::default() };
    (Dataset::new(ids, 0.1, 32).unwrap(), tok, mcfg, tcfg)
}

fn run(device: &str, steps: usize) -> (Vec<f32>, f64, Trainer) {
    let (data, tok, mcfg, tcfg) = setup(device);
    let mut t = Trainer::new(mcfg, tcfg, tok, corpus_id(&data.train)).unwrap();
    let losses: Vec<f32> = (0..steps).map(|_| t.train_step(&data).unwrap()).collect();
    let val = t.evaluate(&data, Split::Val).unwrap();
    (losses, val, t)
}

#[test]
fn cuda_loss_curve_matches_cpu() {
    if !have_cuda() {
        return;
    }
    let _l = lock();
    let (cpu, cpu_val, _) = run("cpu", 30);
    cuda::reset_fallback_counts();
    let trips = magpie_optim::host_round_trips();
    let (gpu, gpu_val, t) = run("cuda", 30);
    let fb: Vec<_> = cuda::fallback_counts().into_iter().filter(|c| c.2 > 0).collect();
    eprintln!("cpu  losses: {cpu:?}\ncuda losses: {gpu:?}\nval cpu {cpu_val} cuda {gpu_val}\nregistry fallbacks: {fb:?}");
    assert!(t.model.wte.weight.device().is_cuda());
    assert_eq!(magpie_optim::host_round_trips(), trips, "AdamW stepped CUDA parameters on the host");
    for (i, (a, b)) in cpu.iter().zip(&gpu).enumerate() {
        // f32 with different summation orders: differences grow slowly over the steps
        let tol = 2e-4 + 1e-4 * i as f32;
        assert!((a - b).abs() <= tol * a.abs().max(1.0), "step {i}: cpu {a} vs cuda {b}\ncpu {cpu:?}\ncuda {gpu:?}");
    }
    assert!((cpu_val - gpu_val).abs() <= 1e-2 * cpu_val.abs(), "val loss cpu {cpu_val} vs cuda {gpu_val}");
    assert!(gpu[29] < gpu[0] - 0.5, "the loss should fall: {gpu:?}");
}

#[test]
fn cuda_checkpoint_holds_device_state_and_resumes() {
    if !have_cuda() {
        return;
    }
    let _l = lock();
    let (data, tok, mcfg, tcfg) = setup("cuda");
    let id = corpus_id(&data.train);
    let mut a = Trainer::new(mcfg.clone(), tcfg.clone(), tok.clone(), id).unwrap();
    let mut losses_a: Vec<f32> = (0..8).map(|_| a.train_step(&data).unwrap()).collect();

    let mut b = Trainer::new(mcfg, tcfg, tok, id).unwrap();
    let mut losses_b: Vec<f32> = (0..4).map(|_| b.train_step(&data).unwrap()).collect();
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    b.save(&ck).unwrap();
    // the saved optimizer state is the device state: compare exp_avg_sq of every parameter
    let (tensors, _) = b.opt.state_dict().unwrap();
    assert!(!tensors.is_empty());
    let params = b.opt.params();
    for (name, t) in &tensors {
        assert_eq!(t.device(), Device::Cpu, "{name}: state dicts hold CPU tensors");
        let idx: usize = name.split('.').nth(1).unwrap().parse().unwrap();
        let live = b.opt.state().state[&params[idx].id()].bufs[name.rsplit('.').next().unwrap()].to_cpu_tensor(params[idx].shape()).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), live.to_vec::<f32>().unwrap(), "{name}");
    }
    let nonzero = tensors.iter().filter(|(n, _)| n.ends_with("exp_avg_sq")).all(|(_, t)| t.to_vec::<f32>().unwrap().iter().any(|&v| v > 0.0));
    assert!(nonzero, "the second moments were updated on the device");
    drop(b);
    let mut c = Trainer::load(&ck, Some(id)).unwrap();
    assert!(c.model.wte.weight.device().is_cuda());
    assert_eq!(c.step, 4);
    losses_b.extend((0..4).map(|_| c.train_step(&data).unwrap()));
    // the embedding gradient adds with atomics: equal up to rounding, not bit for bit
    for (x, y) in losses_a.iter().zip(&losses_b) {
        assert!((x - y).abs() <= 1e-4 * x.abs().max(1.0), "resumed {losses_b:?} vs straight {losses_a:?}");
    }
    let pa = a.model.state_dict();
    let pc = c.model.state_dict();
    for ((n, x), (_, y)) in pa.iter().zip(&pc) {
        let (x, y) = (x.to_vec::<f32>().unwrap(), y.to_vec::<f32>().unwrap());
        let d = x.iter().zip(&y).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
        assert!(d <= 1e-4, "{n}: resumed parameters differ by {d}");
    }
    losses_a.clear();
}
