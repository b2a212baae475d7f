//! Every optimizer steps CUDA parameters: SGD, Adam and AdamW through their fused kernels (no
//! host round trip, state on the device), the others through the counted host round trip; all
//! match the same optimizer on CPU copies. State dicts taken from CUDA optimizers hold CPU
//! tensors and load back into a CUDA optimizer. Skipped where CUDA is not available, unless
//! MAGPIE_REQUIRE_CUDA=1 (then they fail).

use magpie_core::backend::cuda;
use magpie_core::{Device, Tensor};
use magpie_optim::*;

fn have_cuda() -> bool {
    if cuda::is_available() {
        return true;
    }
    if std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("MAGPIE_REQUIRE_CUDA=1 but CUDA is not available");
    }
    eprintln!("skipped: CUDA is not available");
    false
}

const GPU: Device = Device::Cuda(0);

fn vals(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale
        })
        .collect()
}

type Make = fn(Vec<Tensor>) -> Box<dyn Optimizer>;

fn makers() -> Vec<(&'static str, bool, Make)> {
    vec![
        ("SGD", true, |p| Box::new(Sgd::new(p, SgdConfig { lr: 0.1, ..Default::default() }).unwrap())),
        ("SGD momentum wd", true, |p| Box::new(Sgd::new(p, SgdConfig { lr: 0.1, momentum: 0.9, dampening: 0.1, weight_decay: 0.01, ..Default::default() }).unwrap())),
        ("SGD nesterov maximize", true, |p| {
            Box::new(Sgd::new(p, SgdConfig { lr: 0.05, momentum: 0.8, nesterov: true, maximize: true, ..Default::default() }).unwrap())
        }),
        ("Adam", true, |p| Box::new(Adam::new(p, AdamConfig { lr: 1e-2, weight_decay: 0.01, ..Default::default() }).unwrap())),
        ("Adam amsgrad", true, |p| Box::new(Adam::new(p, AdamConfig { lr: 1e-2, amsgrad: true, ..Default::default() }).unwrap())),
        ("AdamW", true, |p| Box::new(AdamW::new(p, AdamConfig { lr: 1e-2, betas: (0.9, 0.95), ..AdamConfig::adamw() }).unwrap())),
        ("Adagrad", false, |p| Box::new(Adagrad::new(p, AdagradConfig::default()).unwrap())),
        ("Adadelta", false, |p| Box::new(Adadelta::new(p, AdadeltaConfig::default()).unwrap())),
        ("Adamax", false, |p| Box::new(Adamax::new(p, AdamaxConfig::default()).unwrap())),
        ("ASGD", false, |p| Box::new(Asgd::new(p, AsgdConfig::default()).unwrap())),
        ("NAdam", false, |p| Box::new(NAdam::new(p, NAdamConfig::default()).unwrap())),
        ("RAdam", false, |p| Box::new(RAdam::new(p, RAdamConfig::default()).unwrap())),
        ("RMSprop", false, |p| Box::new(RmsProp::new(p, RmsPropConfig::default()).unwrap())),
        ("Rprop", false, |p| Box::new(Rprop::new(p, RpropConfig::default()).unwrap())),
    ]
}

fn params(dev: Device) -> Vec<Tensor> {
    [(vec![5usize, 7], 1u64), (vec![1001], 2), (vec![3], 3)]
        .iter()
        .map(|(s, seed)| Tensor::from_vec(vals(s.iter().product(), *seed, 2.0), s).unwrap().to_device(dev).unwrap().with_requires_grad().unwrap())
        .collect()
}

fn set_grads(ps: &[Tensor], step: u64) {
    for (i, p) in ps.iter().enumerate() {
        let g = Tensor::from_vec(vals(p.numel(), 100 + step * 10 + i as u64, 1.0), p.shape()).unwrap().to_device(p.device()).unwrap();
        p.set_grad(Some(g));
    }
}

#[test]
fn every_optimizer_steps_cuda_parameters_like_cpu() {
    if !have_cuda() {
        return;
    }
    for (name, fused, make) in makers() {
        let (pc, pg) = (params(Device::Cpu), params(GPU));
        let (mut oc, mut og) = (make(pc.clone()), make(pg.clone()));
        let trips = host_round_trips();
        for step in 0..4 {
            set_grads(&pc, step);
            set_grads(&pg, step);
            oc.step().unwrap();
            og.step().unwrap();
        }
        let used = host_round_trips() - trips;
        if fused {
            assert_eq!(used, 0, "{name}: fused path took host round trips");
        } else {
            assert_eq!(used, 4 * 3, "{name}: one counted round trip per parameter and step");
        }
        for (a, b) in pc.iter().zip(&pg) {
            assert!(b.device().is_cuda());
            let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() <= 1e-5 * x.abs().max(1.0), "{name}: cpu {x} vs cuda {y}");
            }
        }
        // state dict from the CUDA optimizer: CPU tensors equal to the CPU optimizer's
        let (tc, jc) = oc.state_dict().unwrap();
        let (tg, jg) = og.state_dict().unwrap();
        assert_eq!(tc.len(), tg.len(), "{name}");
        for ((n1, a), (n2, b)) in tc.iter().zip(&tg) {
            assert_eq!(n1, n2);
            assert_eq!(b.device(), Device::Cpu, "{name} {n2}");
            let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() <= 1e-5 * x.abs().max(1.0), "{name} {n1}: cpu {x} vs cuda {y}");
            }
        }
        // load into a fresh CUDA optimizer (from the CPU one's dict) and step both once more
        let pg2: Vec<Tensor> = pc.iter().map(|p| p.detach().to_device(GPU).unwrap().with_requires_grad().unwrap()).collect();
        let mut og2 = make(pg2.clone());
        og2.load_state_dict(&tc, &jc).unwrap();
        let _ = jg;
        set_grads(&pc, 9);
        set_grads(&pg2, 9);
        oc.step().unwrap();
        og2.step().unwrap();
        for (a, b) in pc.iter().zip(&pg2) {
            let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() <= 1e-5 * x.abs().max(1.0), "{name} after load: cpu {x} vs cuda {y}");
            }
        }
    }
}

#[test]
fn clip_grad_norm_on_cuda_matches_cpu() {
    if !have_cuda() {
        return;
    }
    let (pc, pg) = (params(Device::Cpu), params(GPU));
    set_grads(&pc, 1);
    set_grads(&pg, 1);
    let nc = magpie_nn::utils::clip_grad_norm_(&pc, 1.0, 2.0, false).unwrap();
    let ng = magpie_nn::utils::clip_grad_norm_(&pg, 1.0, 2.0, false).unwrap();
    assert!(ng.device().is_cuda());
    let (a, b) = (nc.item().unwrap().to_f64(), ng.item().unwrap().to_f64());
    assert!((a - b).abs() <= 1e-5 * a, "norm cpu {a} vs cuda {b}");
    for (x, y) in pc.iter().zip(&pg) {
        let (x, y) = (x.grad().unwrap().to_vec::<f32>().unwrap(), y.grad().unwrap().to_vec::<f32>().unwrap());
        for (u, v) in x.iter().zip(&y) {
            assert!((u - v).abs() <= 1e-6, "clipped gradient cpu {u} vs cuda {v}");
        }
    }
}

#[test]
fn multi_tensor_adamw_chunks_and_uneven_steps_match_cpu() {
    if !have_cuda() {
        return;
    }
    // 61 parameters: two multi-tensor launches (48 per launch); on the second step only the even
    // ones get gradients, so on the third the step counts differ and each parameter steps alone
    let mk = |dev: Device| -> Vec<Tensor> {
        (0..61u64).map(|i| Tensor::from_vec(vals(1 + (i as usize * 37) % 300, i + 1, 2.0), &[1 + (i as usize * 37) % 300]).unwrap().to_device(dev).unwrap().with_requires_grad().unwrap()).collect()
    };
    let (pc, pg) = (mk(Device::Cpu), mk(GPU));
    let cfg = AdamConfig { lr: 1e-2, betas: (0.9, 0.95), ..AdamConfig::adamw() };
    let (mut oc, mut og) = (AdamW::new(pc.clone(), cfg.clone()).unwrap(), AdamW::new(pg.clone(), cfg).unwrap());
    for step in 0..3u64 {
        for ps in [&pc, &pg] {
            for (i, p) in ps.iter().enumerate() {
                let g = (step != 1 || i % 2 == 0).then(|| Tensor::from_vec(vals(p.numel(), 500 + step * 100 + i as u64, 1.0), p.shape()).unwrap().to_device(p.device()).unwrap());
                p.set_grad(g);
            }
        }
        oc.step().unwrap();
        og.step().unwrap();
    }
    for (i, (a, b)) in pc.iter().zip(&pg).enumerate() {
        let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-5 * x.abs().max(1.0), "parameter {i}: cpu {x} vs cuda {y}");
        }
    }
}

#[test]
fn clip_grad_norm_on_cuda_small_and_nonfinite_norms() {
    if !have_cuda() {
        return;
    }
    // a norm below max_norm leaves the gradients as they are (coefficient clamped to 1)
    let (pc, pg) = (params(Device::Cpu), params(GPU));
    set_grads(&pc, 2);
    set_grads(&pg, 2);
    let nc = magpie_nn::utils::clip_grad_norm_(&pc, 1e6, 2.0, false).unwrap().item().unwrap().to_f64();
    let ng = magpie_nn::utils::clip_grad_norm_(&pg, 1e6, 2.0, false).unwrap().item().unwrap().to_f64();
    assert!((nc - ng).abs() <= 1e-5 * nc, "norm cpu {nc} vs cuda {ng}");
    for (x, y) in pc.iter().zip(&pg) {
        assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), y.grad().unwrap().to_vec::<f32>().unwrap());
    }
    // a NaN gradient: the norm is NaN and (PyTorch's clamp keeps NaN) every gradient becomes NaN
    let pg = params(GPU);
    set_grads(&pg, 3);
    let mut g0 = pg[0].grad().unwrap().to_vec::<f32>().unwrap();
    g0[3] = f32::NAN;
    pg[0].set_grad(Some(Tensor::from_vec(g0, pg[0].shape()).unwrap().to_device(GPU).unwrap()));
    let n = magpie_nn::utils::clip_grad_norm_(&pg, 1.0, 2.0, false).unwrap().item().unwrap().to_f64();
    assert!(n.is_nan(), "norm {n}");
    assert!(pg[1].grad().unwrap().to_vec::<f32>().unwrap().iter().all(|v| v.is_nan()));
    // error_if_nonfinite reads the norm and refuses
    let e = magpie_nn::utils::clip_grad_norm_(&pg, 1.0, 2.0, true).unwrap_err().to_string();
    assert!(e.contains("non-finite"), "{e}");
}
