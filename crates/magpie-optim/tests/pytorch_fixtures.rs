//! Optimizer trajectories and scheduler curves against PyTorch's (tests/fixtures/optim.json,
//! written by make_fixtures.py with the torch version it records).

use magpie_core::Tensor;
use magpie_optim::scheduler::*;
use magpie_optim::*;
use serde_json::Value;

fn fixture() -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/optim.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn params(fx: &Value) -> Vec<Tensor> {
    let shapes: [&[usize]; 2] = [&[3, 4], &[5]];
    fx["init"]
        .as_array()
        .unwrap()
        .iter()
        .zip(shapes)
        .map(|(v, s)| {
            let d: Vec<f32> = v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
            Tensor::from_vec(d, s).unwrap().with_requires_grad().unwrap()
        })
        .collect()
}

/// The synthetic gradient of make_fixtures.py, in float32 like PyTorch computes it.
fn set_grads(ps: &[Tensor], t: usize) {
    let a = (0.3 + 0.05 * t as f64) as f32;
    for p in ps {
        let v: Vec<f32> = p.to_vec().unwrap();
        let g: Vec<f32> = v
            .iter()
            .enumerate()
            .map(|(i, &x)| x * a + (((7 * i + 3 * t) % 11) as f64 - 5.0) as f32 / 10.0)
            .collect();
        p.set_grad(Some(Tensor::from_vec(g, p.shape()).unwrap()));
    }
}

fn make(name: &str, ps: Vec<Tensor>) -> Box<dyn Optimizer> {
    let adam = |lr, b: (f64, f64), wd, ams| AdamConfig { lr, betas: b, weight_decay: wd, amsgrad: ams, ..Default::default() };
    match name {
        "sgd" => Box::new(Sgd::new(ps, SgdConfig { lr: 0.1, ..Default::default() }).unwrap()),
        "sgd_momentum_wd" => Box::new(Sgd::new(ps, SgdConfig { lr: 0.05, momentum: 0.9, dampening: 0.1, weight_decay: 0.01, ..Default::default() }).unwrap()),
        "sgd_nesterov" => Box::new(Sgd::new(ps, SgdConfig { lr: 0.05, momentum: 0.8, nesterov: true, maximize: true, ..Default::default() }).unwrap()),
        "adam" => Box::new(Adam::new(ps, adam(0.01, (0.9, 0.999), 0.0, false)).unwrap()),
        "adam_amsgrad_wd" => Box::new(Adam::new(ps, adam(0.02, (0.8, 0.99), 0.1, true)).unwrap()),
        "adamw" => Box::new(AdamW::new(ps, AdamConfig { lr: 0.01, ..AdamConfig::adamw() }).unwrap()),
        "adamw_amsgrad" => Box::new(AdamW::new(ps, adam(0.01, (0.9, 0.999), 0.05, true)).unwrap()),
        "adamax" => Box::new(Adamax::new(ps, AdamaxConfig { lr: 0.02, weight_decay: 0.01, ..Default::default() }).unwrap()),
        "nadam" => Box::new(NAdam::new(ps, NAdamConfig { lr: 0.01, ..Default::default() }).unwrap()),
        "nadam_decoupled" => Box::new(NAdam::new(ps, NAdamConfig { lr: 0.01, weight_decay: 0.1, decoupled_weight_decay: true, ..Default::default() }).unwrap()),
        "radam" => Box::new(RAdam::new(ps, RAdamConfig { lr: 0.01, ..Default::default() }).unwrap()),
        "radam_wd" => Box::new(RAdam::new(ps, RAdamConfig { lr: 0.01, weight_decay: 0.1, ..Default::default() }).unwrap()),
        "adagrad" => Box::new(Adagrad::new(ps, AdagradConfig { lr: 0.05, lr_decay: 0.01, weight_decay: 0.01, initial_accumulator_value: 0.1, ..Default::default() }).unwrap()),
        "adadelta" => Box::new(Adadelta::new(ps, AdadeltaConfig { lr: 1.0, rho: 0.9, weight_decay: 0.01, ..Default::default() }).unwrap()),
        "rmsprop" => Box::new(RmsProp::new(ps, RmsPropConfig { lr: 0.01, ..Default::default() }).unwrap()),
        "rmsprop_centered_momentum" => Box::new(RmsProp::new(ps, RmsPropConfig { lr: 0.01, momentum: 0.5, centered: true, weight_decay: 0.01, ..Default::default() }).unwrap()),
        "rprop" => Box::new(Rprop::new(ps, RpropConfig { lr: 0.01, ..Default::default() }).unwrap()),
        "asgd" => Box::new(Asgd::new(ps, AsgdConfig { lr: 0.01, t0: 5.0, ..Default::default() }).unwrap()),
        other => panic!("no Rust config for fixture optimizer {other}"),
    }
}

#[test]
fn optimizers_follow_pytorch_trajectories() {
    let fx = fixture();
    let steps = fx["steps"].as_u64().unwrap() as usize;
    let mut failures = Vec::new();
    for (name, traj) in fx["optimizers"].as_object().unwrap() {
        let ps = params(&fx);
        let mut opt = make(name, ps.clone());
        'steps: for t in 0..steps {
            set_grads(&ps, t);
            opt.step().unwrap();
            for (k, p) in ps.iter().enumerate() {
                let ours: Vec<f32> = p.to_vec().unwrap();
                let theirs: Vec<f64> = traj[t][k].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
                for (i, (&o, &e)) in ours.iter().zip(&theirs).enumerate() {
                    if (o as f64 - e).abs() > 1e-6 + 1e-5 * e.abs() {
                        failures.push(format!("{name}: step {t} param {k}[{i}] = {o}, PyTorch {e}"));
                        break 'steps;
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn sched(name: &str, opt: &mut Sgd) -> Box<dyn LrScheduler> {
    match name {
        "lambda" => Box::new(LambdaLr::new(opt, vec![Box::new(|e| 0.95f64.powi(e as i32))]).unwrap()),
        "multiplicative" => Box::new(MultiplicativeLr::new(opt, vec![Box::new(|_| 0.9)]).unwrap()),
        "step" => Box::new(StepLr::new(opt, 3, 0.5).unwrap()),
        "multistep" => Box::new(MultiStepLr::new(opt, &[2, 5, 5, 9], 0.3).unwrap()),
        "constant" => Box::new(ConstantLr::new(opt, 0.25, 4).unwrap()),
        "linear" => Box::new(LinearLr::new(opt, 0.2, 0.9, 6).unwrap()),
        "exponential" => Box::new(ExponentialLr::new(opt, 0.85).unwrap()),
        "polynomial" => Box::new(PolynomialLr::new(opt, 8, 2.0).unwrap()),
        "cosine" => Box::new(CosineAnnealingLr::new(opt, 6, 0.01).unwrap()),
        "cosine_warm_restarts" => Box::new(CosineAnnealingWarmRestarts::new(opt, 3, 2, 0.001).unwrap()),
        "cyclic_triangular2" => Box::new(CyclicLr::new(opt, 0.01, 0.1, 3, Some(2), CyclicMode::Triangular2, 1.0, true, 0.8, 0.9).unwrap()),
        "cyclic_exp_range" => Box::new(CyclicLr::new(opt, 0.01, 0.1, 4, None, CyclicMode::ExpRange, 0.9, true, 0.8, 0.9).unwrap()),
        "onecycle_cos" => Box::new(OneCycleLr::new(opt, 0.5, 25, 0.3, AnnealStrategy::Cos, true, 0.85, 0.95, 25.0, 1e4, false).unwrap()),
        "onecycle_linear_three_phase" => {
            Box::new(OneCycleLr::new(opt, 0.5, 25, 0.25, AnnealStrategy::Linear, true, 0.85, 0.95, 25.0, 1e4, true).unwrap())
        }
        "sequential" => {
            let a: Box<dyn LrScheduler> = Box::new(LinearLr::new(opt, 0.1, 1.0, 4).unwrap());
            let b: Box<dyn LrScheduler> = Box::new(CosineAnnealingLr::new(opt, 10, 0.0).unwrap());
            Box::new(SequentialLr::new(opt, vec![a, b], &[4]).unwrap())
        }
        "chained" => {
            let a: Box<dyn LrScheduler> = Box::new(ConstantLr::new(opt, 0.5, 3).unwrap());
            let b: Box<dyn LrScheduler> = Box::new(ExponentialLr::new(opt, 0.9).unwrap());
            Box::new(ChainedScheduler::new(opt, vec![a, b]).unwrap())
        }
        other => panic!("no Rust config for fixture scheduler {other}"),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 + 1e-9 * b.abs()
}

#[test]
fn schedulers_follow_pytorch_curves() {
    let fx = fixture();
    let mut failures = Vec::new();
    for (name, curve) in fx["schedulers"].as_object().unwrap() {
        let p = Tensor::zeros(&[2]).unwrap().with_requires_grad().unwrap();
        let mut opt = Sgd::new(vec![p], SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() }).unwrap();
        let mut s = sched(name, &mut opt);
        let lrs: Vec<f64> = curve["lr"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        let moms: Vec<f64> = curve["momentum"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        for t in 0..lrs.len() {
            if t > 0 {
                s.step(&mut opt).unwrap();
            }
            let (lr, m) = (opt.lr(0), opt.hyper(0, "momentum").unwrap());
            if !close(lr, lrs[t]) || !close(m, moms[t]) {
                failures.push(format!("{name}: epoch {t}: lr {lr} momentum {m}, PyTorch {} {}", lrs[t], moms[t]));
                break;
            }
        }
    }
    // ReduceLROnPlateau
    let p = Tensor::zeros(&[2]).unwrap().with_requires_grad().unwrap();
    let mut opt = Sgd::new(vec![p], SgdConfig { lr: 0.1, ..Default::default() }).unwrap();
    let mut s = ReduceLrOnPlateau::with(&opt, PlateauMode::Min, 0.5, 2, 0.01, ThresholdMode::Rel, 1, 0.01, 1e-8);
    let pl = &fx["plateau"];
    for (m, want) in pl["metrics"].as_array().unwrap().iter().zip(pl["lr"].as_array().unwrap()) {
        s.step(&mut opt, m.as_f64().unwrap()).unwrap();
        if !close(opt.lr(0), want.as_f64().unwrap()) {
            failures.push(format!("plateau: lr {} PyTorch {}", opt.lr(0), want));
            break;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn state_dict_round_trip_resumes_identically() {
    let fx = fixture();
    let run = |split: Option<usize>| -> Vec<f32> {
        let ps = params(&fx);
        let mut opt = make("adam_amsgrad_wd", ps.clone());
        for t in 0..10 {
            if Some(t) == split {
                let (tensors, json) = opt.state_dict().unwrap();
                let bytes = magpie_io::safetensors::serialize(&tensors, None).unwrap();
                let back = magpie_io::safetensors::deserialize(&bytes).unwrap();
                let ps2: Vec<Tensor> = ps.iter().map(|p| p.detach().copy().unwrap().with_requires_grad().unwrap()).collect();
                let mut opt2 = make("adam_amsgrad_wd", ps2.clone());
                opt2.load_state_dict(&back.tensors, &json).unwrap();
                for t2 in t..10 {
                    set_grads(&ps2, t2);
                    opt2.step().unwrap();
                }
                return ps2[0].to_vec().unwrap();
            }
            set_grads(&ps, t);
            opt.step().unwrap();
        }
        ps[0].to_vec().unwrap()
    };
    assert_eq!(run(None), run(Some(4)), "resuming from a state dict must be bit-identical");
}

#[test]
fn lbfgs_follows_pytorch_with_and_without_line_search() {
    let fx = fixture();
    for (mode, strong) in [("plain", false), ("strong_wolfe", true)] {
        let x = Tensor::from_vec(vec![-1.2f64, 1.0, 0.5, -0.3], &[4]).unwrap().with_requires_grad().unwrap();
        let c = Tensor::from_vec(vec![1.0f64, -0.5, 0.25, 2.0], &[4]).unwrap();
        let w = Tensor::from_vec(vec![1.0f64, 3.0, 0.5, 2.0], &[4]).unwrap();
        let cfg = LbfgsConfig { lr: 0.8, max_iter: 10, history_size: 5, strong_wolfe: strong, ..Default::default() };
        let mut opt = Lbfgs::new(vec![x.clone()], cfg).unwrap();
        for (k, want) in fx["lbfgs"][mode].as_array().unwrap().iter().enumerate() {
            opt.step_with(|| {
                x.set_grad(None);
                let quad = x.sub(&c)?.pow_scalar(2)?.mul(&w)?.sum()?;
                let loss = quad.add(&x.pow_scalar(4)?.sum()?.mul_scalar(0.1)?)?;
                loss.backward()?;
                Ok(loss.item()?.to_f64())
            })
            .unwrap();
            let got: Vec<f64> = x.to_vec().unwrap();
            for (g, e) in got.iter().zip(want.as_array().unwrap()) {
                let e = e.as_f64().unwrap();
                assert!((g - e).abs() <= 1e-9 + 1e-7 * e.abs(), "{mode} step {k}: {got:?} vs PyTorch {want}");
            }
        }
        assert!(opt.step().is_err(), "LBFGS without a closure is an error");
    }
}
