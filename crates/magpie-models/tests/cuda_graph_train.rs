//! CUDA-graph training steps (`Trainer::use_cuda_graph`, `magpie train --cuda-graph`): N eager
//! steps and N steps of which all but the warm-up are replays of one captured step, from the same
//! initial weights and batches, give the same losses and parameters bit for bit (GPT and BERT,
//! float32 and bfloat16 autocast). Also the capture API's errors and memory pools. Skipped where
//! CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1 (then they fail).

mod common;

use common::{have_cuda, lock, TEXT};

use magpie_core::backend::cuda;
use magpie_core::cuda_graph::{graph_pool_handle, make_graphed_callable, CUDAGraph};
use magpie_core::{DType, Device, Tensor};
use magpie_models::bert_mlm::bert_config;
use magpie_models::data::Dataset;
use magpie_models::gpt::GptConfig;
use magpie_models::mlm_vocab::MlmTokenizer;
use magpie_models::tokenizer::CharTokenizer;
use magpie_models::train_model::TrainModel;
use magpie_models::trainer::{corpus_id, BertTrainer, TrainConfig, Trainer};
use magpie_nn::ModuleExt;
use magpie_optim::{Optimizer, Sgd, SgdConfig};

/// Losses and every parameter's bits after `steps` steps, eager or graphed (3 warm-up steps).
fn finish<M: TrainModel>(mut t: Trainer<M>, data: &Dataset, steps: usize, graphed: bool) -> (Vec<u32>, Vec<Vec<u32>>) {
    if graphed {
        t.use_cuda_graph(3).unwrap();
    }
    let losses: Vec<u32> = (0..steps).map(|_| t.train_step(data).unwrap().to_bits()).collect();
    assert_eq!(t.is_graph_captured(), graphed);
    let params = t.model.parameters().iter().map(|p| p.to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).collect()).collect();
    (losses, params)
}

fn gpt_run(dtype: &str, steps: usize, graphed: bool) -> (Vec<u32>, Vec<Vec<u32>>) {
    let text = TEXT.repeat(40);
    let tok = CharTokenizer::fit(&text).unwrap();
    let ids = tok.encode(&text).unwrap();
    let mcfg = GptConfig { vocab_size: tok.vocab_size(), block_size: 32, n_layer: 2, n_head: 4, n_embd: 64, dropout: 0.0 };
    // lr 3e-3 with clipping at 0.05: the clip is active, so the norm's bits matter
    let tcfg = TrainConfig { steps: 40, batch_size: 8, warmup_steps: 3, grad_clip: 0.05, seed: 11, device: "cuda".into(), dtype: dtype.into(), ..Default::default() };
    let data = Dataset::new(ids.clone(), 0.1, 32).unwrap();
    let t = Trainer::new(mcfg, tcfg, tok, corpus_id(&ids)).unwrap();
    finish(t, &data, steps, graphed)
}

fn bert_run(dtype: &str, steps: usize, graphed: bool) -> (Vec<u32>, Vec<Vec<u32>>) {
    let text = TEXT.repeat(40);
    let tok = MlmTokenizer::fit_chars(&text).unwrap();
    let ids = tok.encode(&text).unwrap();
    let mcfg = bert_config(tok.vocab_size(), 32, 2, 4, 64, 0.0).unwrap();
    let tcfg = TrainConfig { steps: 40, batch_size: 8, lr: 1e-3, warmup_steps: 3, seed: 11, device: "cuda".into(), dtype: dtype.into(), ..Default::default() };
    let data = Dataset::new(ids.clone(), 0.1, 30).unwrap();
    let t = BertTrainer::start(mcfg, tcfg, tok, corpus_id(&ids)).unwrap();
    finish(t, &data, steps, graphed)
}

fn assert_same(what: &str, eager: &(Vec<u32>, Vec<Vec<u32>>), graphed: &(Vec<u32>, Vec<Vec<u32>>)) {
    let f = |v: &[u32]| v.iter().map(|b| f32::from_bits(*b)).collect::<Vec<_>>();
    assert_eq!(eager.0, graphed.0, "{what}: losses differ\neager   {:?}\ngraphed {:?}", f(&eager.0), f(&graphed.0));
    assert_eq!(eager.1.len(), graphed.1.len());
    for (i, (a, b)) in eager.1.iter().zip(&graphed.1).enumerate() {
        let diff = a.iter().zip(b).filter(|(x, y)| x != y).count();
        assert_eq!(diff, 0, "{what}: parameter {i} differs in {diff} of {} elements", a.len());
    }
    // the steps moved the weights: the comparison is not of two untouched models
    let l = f(&eager.0);
    assert!(l.iter().all(|x| x.is_finite()) && l[l.len() - 1] < l[0], "{what}: the loss should fall: {l:?}");
}

#[test]
fn graphed_gpt_steps_equal_eager_steps_bit_for_bit() {
    if !have_cuda() {
        return;
    }
    let _l = lock();
    for dtype in ["float32", "bfloat16"] {
        let eager = gpt_run(dtype, 12, false);
        let again = gpt_run(dtype, 12, false);
        assert_same(&format!("GPT {dtype}, two eager runs"), &eager, &again);
        let graphed = gpt_run(dtype, 12, true);
        assert_same(&format!("GPT {dtype}, eager vs graphed"), &eager, &graphed);
    }
    // every product padded, so that the head and loss take the fused lm_head_cross_entropy (the
    // character vocabulary, 46, is not a multiple of 8) inside the captured step as well
    let old = cuda::blas::pad_min_macs();
    cuda::blas::set_pad_min_macs(0);
    let eager = gpt_run("bfloat16", 12, false);
    let graphed = gpt_run("bfloat16", 12, true);
    cuda::blas::set_pad_min_macs(old);
    assert_same("GPT bfloat16 with padded products, eager vs graphed", &eager, &graphed);
}

#[test]
fn graphed_bert_steps_equal_eager_steps_bit_for_bit() {
    if !have_cuda() {
        return;
    }
    let _l = lock();
    for dtype in ["float32", "bfloat16"] {
        let eager = bert_run(dtype, 12, false);
        let graphed = bert_run(dtype, 12, true);
        assert_same(&format!("BERT {dtype}, eager vs graphed"), &eager, &graphed);
    }
}

#[test]
fn graph_training_refuses_float16_scaling_and_the_cpu() {
    let text = TEXT.repeat(4);
    let tok = CharTokenizer::fit(&text).unwrap();
    let ids = tok.encode(&text).unwrap();
    let mcfg = GptConfig { vocab_size: tok.vocab_size(), block_size: 8, n_layer: 1, n_head: 2, n_embd: 16, dropout: 0.0 };
    let _l = lock();
    let tcfg = TrainConfig { steps: 4, batch_size: 2, seed: 1, ..Default::default() };
    let mut t = Trainer::new(mcfg.clone(), tcfg, tok.clone(), corpus_id(&ids)).unwrap();
    let e = t.use_cuda_graph(1).unwrap_err().to_string();
    assert!(e.contains("cuda_graph") && e.contains("CUDA device"), "{e}");
    if !have_cuda() {
        return;
    }
    let tcfg = TrainConfig { steps: 4, batch_size: 2, seed: 1, device: "cuda".into(), dtype: "float16".into(), ..Default::default() };
    let mut t = Trainer::new(mcfg, tcfg, tok, corpus_id(&ids)).unwrap();
    let e = t.use_cuda_graph(1).unwrap_err().to_string();
    assert!(e.contains("GradScaler"), "{e}");
}

#[test]
fn capture_replays_with_new_static_inputs_and_names_forbidden_ops() {
    if !have_cuda() {
        return;
    }
    let _l = lock();
    let dev = Device::Cuda(0);
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap().to_device(dev).unwrap();
    let f = |x: &Tensor| x.mul_scalar(3.0).unwrap().exp().unwrap().sum().unwrap();
    let _ = f(&x); // warm-up: kernels compiled outside the capture
    let mut g = CUDAGraph::new();
    let mut y = None;
    g.capture(dev, None, || {
        y = Some(f(&x));
        Ok(())
    })
    .unwrap();
    let y = y.unwrap();
    for vals in [[0.5f32, -1.0, 0.25], [0.0, 0.1, -0.2]] {
        let host = Tensor::from_vec(vals.to_vec(), &[3]).unwrap();
        x.copy_(&host).unwrap();
        g.replay().unwrap();
        let want = f(&host.to_device(dev).unwrap()).item().unwrap().to_f64();
        assert_eq!(y.item().unwrap().to_f64().to_bits(), want.to_bits(), "replay of {vals:?}");
    }

    // a host read inside the capture: an error naming it, and the stream is usable afterwards
    let mut g2 = CUDAGraph::new();
    let e = g2.capture(dev, None, || x.sum()?.item().map(|_| ())).unwrap_err().to_string();
    assert!(e.contains("[item]") && e.contains("CUDA graph"), "{e}");
    assert!(!g2.is_captured());
    let e = g2.capture(dev, None, || x.to_vec::<f32>().map(|_| ())).unwrap_err().to_string();
    assert!(e.contains("[to_vec]"), "{e}");
    // a random draw would repeat the same numbers on every replay
    let e = g2.capture(dev, None, || Tensor::rand_on(&[4], DType::F32, dev).map(|_| ())).unwrap_err().to_string();
    assert!(e.contains("random draw"), "{e}");
    // an op without a CUDA kernel (the registry would run it on the CPU) is refused
    use magpie_core::registry::{call, Value};
    let m = Tensor::from_vec(vec![2.0f32, 1.0, 0.5, 3.0], &[2, 2]).unwrap().to_device(dev).unwrap();
    let cm = || call("mvlgamma", vec![Value::Tensor(m.clone()), Value::Int(1)], vec![]);
    cm().unwrap();
    assert!(cuda::fallback_counts().iter().any(|(op, _, cpu)| op == "mvlgamma" && *cpu > 0), "mvlgamma should fall back to the CPU");
    let e = g2.capture(dev, None, || cm().map(|_| ())).unwrap_err().to_string();
    eprintln!("{e}");
    assert!(e.contains("cannot be captured into a CUDA graph"), "{e}");
    // the stream is usable after the failed captures
    assert_eq!(x.sum().unwrap().item().unwrap().to_f64().to_bits(), x.to_device(Device::Cpu).unwrap().sum().unwrap().item().unwrap().to_f64().to_bits());
}

#[test]
fn graph_pools_keep_their_blocks_until_the_graph_and_its_tensors_are_gone() {
    if !have_cuda() {
        return;
    }
    let _l = lock();
    let dev = Device::Cuda(0);
    // sizes no other test uses, so the cache holds no block of their classes
    let (n1, n2) = (777_001usize, 555_001usize);
    let _ = Tensor::zeros_on(&[8], DType::F32, dev).unwrap();
    let stats = || cuda::memory_stats(0);
    let mut g = CUDAGraph::new();
    let before = stats();
    g.capture(dev, None, || {
        // freed during the capture: reusable within it
        let a = Tensor::zeros_on(&[n1], DType::F32, dev)?;
        drop(a);
        let b = Tensor::zeros_on(&[n1], DType::F32, dev)?;
        drop(b);
        Ok(())
    })
    .unwrap();
    let during = stats();
    assert_eq!(during.driver_allocs - before.driver_allocs, 1, "the second block of the capture reuses the first");
    // the pool's free block is not handed to eager work while the graph lives
    let c = Tensor::zeros_on(&[n1], DType::F32, dev).unwrap();
    assert_eq!(stats().driver_allocs - during.driver_allocs, 1, "eager work got a block of the graph's pool");
    drop(c);
    // a second graph in the same pool may reuse it
    let pool = g.pool().unwrap();
    let mut g2 = CUDAGraph::new();
    let s = stats();
    g2.capture(dev, Some(&pool), || Tensor::zeros_on(&[n1], DType::F32, dev).map(|_| ())).unwrap();
    assert_eq!(stats().driver_allocs, s.driver_allocs, "a graph sharing the pool reuses its blocks");
    g2.replay().unwrap();
    // with every graph of the pool gone, its block serves everyone again: one for c (cached
    // already) and the pool's one
    drop(pool);
    g.reset();
    drop(g2);
    let s = stats();
    let x = Tensor::zeros_on(&[n1], DType::F32, dev).unwrap();
    let y = Tensor::zeros_on(&[n1], DType::F32, dev).unwrap();
    assert_eq!(stats().driver_allocs, s.driver_allocs, "the dropped pool's block did not return to the cache");
    drop((x, y));
    // a private pool made by graph_pool_handle works the same way
    let h = graph_pool_handle(dev).unwrap();
    let mut g3 = CUDAGraph::new();
    g3.capture(dev, Some(&h), || Tensor::zeros_on(&[n2], DType::F32, dev).map(|_| ())).unwrap();
    g3.replay().unwrap();
    cuda::synchronize(Some(dev)).unwrap();
}

#[test]
fn graphed_callable_and_optimizer_without_captured_scalars() {
    if !have_cuda() {
        return;
    }
    let _l = lock();
    let dev = Device::Cuda(0);
    let w = Tensor::from_vec((0..12).map(|i| i as f32 * 0.1).collect(), &[4, 3]).unwrap().to_device(dev).unwrap();
    let sample = Tensor::from_vec(vec![1.0f32; 8], &[2, 4]).unwrap().to_device(dev).unwrap();
    let gc = make_graphed_callable(&[sample], 2, |i| Ok(vec![i[0].matmul(&w)?.relu()?])).unwrap();
    let x = Tensor::from_vec((0..8).map(|i| i as f32 - 3.5).collect(), &[2, 4]).unwrap().to_device(dev).unwrap();
    let out = gc.call(&[x.clone()]).unwrap();
    let want: Vec<f32> = x.matmul(&w).unwrap().relu().unwrap().to_vec().unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
    let e = gc.call(&[Tensor::zeros_on(&[3, 4], DType::F32, dev).unwrap()]).unwrap_err().to_string();
    assert!(e.contains("make_graphed_callables"), "{e}");
    // SGD keeps its scalars in kernel arguments: it cannot be prepared for replays
    let p = Tensor::zeros_on(&[3], DType::F32, dev).unwrap().requires_grad_(true).unwrap();
    let mut sgd = Sgd::new(vec![p], SgdConfig { lr: 0.1, ..Default::default() }).unwrap();
    let e = sgd.prepare_graphed_step().unwrap_err().to_string();
    assert!(e.contains("prepare_graphed_step"), "{e}");
}
