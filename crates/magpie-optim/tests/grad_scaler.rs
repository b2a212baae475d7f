//! `GradScaler` against PyTorch (fixtures/make_grad_scaler.py writes grad_scaler.json): a small
//! model trained with SGD under CPU autocast, float16 (the backward overflows until the scale has
//! backed off, then the scale grows every 3 clean steps and overflows again) and bfloat16 (an inf
//! in the input skips a step; `update(new_scale)`); the skipped steps and the scales must be
//! PyTorch's exactly, losses and parameters within the 16-bit formats' noise. Then the call-order
//! errors, float16 gradients, disabled scalers and the state dict.

use magpie_core::amp;
use magpie_core::ops::nn::loss::{cross_entropy, Reduction};
use magpie_core::ops::nn::linear;
use magpie_core::{DType, Device, Tensor};
use magpie_optim::{GradScaler, GradScalerConfig, GradScalerState, Optimizer, Sgd, SgdConfig};
use serde_json::Value;

fn fixture() -> Value {
    serde_json::from_str(include_str!("fixtures/grad_scaler.json")).expect("fixture parses")
}

/// A number of the fixture ("inf", "-inf" and "nan" are written as strings).
fn num(x: &Value) -> f64 {
    match x.as_str() {
        Some(s) => s.parse::<f64>().unwrap(),
        None => x.as_f64().unwrap(),
    }
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| num(x) as f32).collect()
}

fn run(name: &str) {
    let fx = fixture();
    let r = &fx["runs"][name];
    let dtype = DType::parse(r["dtype"].as_str().unwrap()).unwrap();
    let params: Vec<Tensor> = r["init"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let shape: Vec<usize> = p["shape"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap() as usize).collect();
            Tensor::from_vec(floats(&p["data"]), &shape).unwrap().with_requires_grad().unwrap()
        })
        .collect();
    let mut opt = Sgd::new(params.clone(), SgdConfig { lr: 0.1, ..Default::default() }).unwrap();
    let cfg = GradScalerConfig {
        init_scale: r["init_scale"].as_f64().unwrap(),
        growth_interval: r["growth_interval"].as_i64().unwrap(),
        ..Default::default()
    };
    let mut scaler = GradScaler::new(Device::Cpu, cfg).unwrap();
    let new_scale_step = r["new_scale_step"].as_i64();
    let (mut skipped, mut grown, mut backed_off) = (0, 0, 0);
    let mut prev_scale = cfg.init_scale;
    for (t, s) in r["steps"].as_array().unwrap().iter().enumerate() {
        let x = Tensor::from_vec(floats(&s["x"]), &[6, 4]).unwrap();
        let y = Tensor::from_vec(s["y"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect::<Vec<_>>(), &[6]).unwrap();
        opt.zero_grad();
        let loss = {
            let _ac = amp::autocast(Device::Cpu, Some(dtype), true).unwrap();
            let h = linear(&x, &params[0], Some(&params[1])).unwrap().relu().unwrap();
            let logits = linear(&h, &params[2], Some(&params[3])).unwrap();
            assert_eq!(logits.dtype(), dtype, "step {t}: logits in the autocast dtype");
            cross_entropy(&logits, &y, None, -100, Reduction::Mean, 0.0).unwrap()
        };
        scaler.scale(&loss).unwrap().backward().unwrap();
        let stepped = scaler.step(&mut opt).unwrap();
        let want_inf = s["found_inf"].as_f64().unwrap() != 0.0;
        assert_eq!(!stepped, want_inf, "{name} step {t}: skipped (inf/NaN gradients) must be PyTorch's");
        if new_scale_step == Some(t as i64) {
            scaler.update(r["new_scale"].as_f64()).unwrap();
        } else {
            scaler.update(None).unwrap();
        }
        let scale = scaler.get_scale().unwrap();
        assert_eq!(scale, s["scale"].as_f64().unwrap(), "{name} step {t}: scale after update");
        skipped += want_inf as usize;
        grown += (scale > prev_scale) as usize;
        backed_off += (scale < prev_scale && want_inf) as usize;
        prev_scale = scale;
        let l = loss.to_dtype(DType::F64).unwrap().item().unwrap().to_f64();
        let wl = num(&s["loss"]);
        if wl.is_finite() {
            assert!((l - wl).abs() <= 2e-2 * wl.abs().max(1.0), "{name} step {t}: loss {l} vs PyTorch's {wl}");
        } else {
            assert!(!l.is_finite(), "{name} step {t}: loss {l} where PyTorch's is {wl}");
        }
        for (i, (p, want)) in params.iter().zip(s["params"].as_array().unwrap()).enumerate() {
            let (got, want) = (p.to_vec::<f32>().unwrap(), floats(want));
            for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!((a - b).abs() <= 1e-2 * b.abs().max(0.1), "{name} step {t}: param {i}[{j}] {a} vs PyTorch's {b}");
            }
        }
    }
    // the run exercised what it is for
    assert!(skipped >= 1 && grown >= 1 && backed_off >= 1, "{name}: {skipped} skipped, {grown} growths, {backed_off} backoffs");
    let sd = scaler.state_dict().unwrap().unwrap();
    let want = &r["state_dict"];
    assert_eq!(sd.scale, want["scale"].as_f64().unwrap());
    assert_eq!(sd.growth_tracker, want["_growth_tracker"].as_i64().unwrap());
    assert_eq!(sd.growth_interval, want["growth_interval"].as_i64().unwrap());
}

#[test]
fn float16_overflow_backoff_and_growth_follow_pytorch() {
    run("float16");
}

#[test]
fn bfloat16_skipped_step_and_new_scale_follow_pytorch() {
    run("bfloat16");
}

fn one_param(v: Vec<f32>) -> (Tensor, Sgd) {
    let w = Tensor::from_vec(v.clone(), &[v.len()]).unwrap().with_requires_grad().unwrap();
    let opt = Sgd::new(vec![w.clone()], SgdConfig { lr: 1.0, ..Default::default() }).unwrap();
    (w, opt)
}

#[test]
fn call_order_errors_as_pytorch() {
    let (w, mut opt) = one_param(vec![1.0, 2.0]);
    let mut s = GradScaler::new(Device::Cpu, GradScalerConfig { init_scale: 4.0, ..Default::default() }).unwrap();
    let e = s.step(&mut opt).unwrap_err().to_string();
    assert!(e.contains("_scale is None"), "{e}");
    s.scale(&w.sum().unwrap()).unwrap().backward().unwrap();
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![4., 4.]);
    s.unscale_(&mut opt).unwrap();
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![1., 1.], "unscaled in place");
    let e = s.unscale_(&mut opt).unwrap_err().to_string();
    assert!(e.contains("unscale_() has already been called on this optimizer since the last update()"), "{e}");
    assert!(s.step(&mut opt).unwrap(), "no inf: the step runs without unscaling again");
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![0., 1.]);
    let e = s.step(&mut opt).unwrap_err().to_string();
    assert!(e.contains("step() has already been called since the last update()"), "{e}");
    let e = s.unscale_(&mut opt).unwrap_err().to_string();
    assert!(e.contains("unscale_() is being called after step()"), "{e}");
    s.update(None).unwrap();
    // a new iteration: unscale_ is allowed again
    opt.zero_grad();
    s.scale(&w.sum().unwrap()).unwrap().backward().unwrap();
    s.unscale_(&mut opt).unwrap();
    // update with no recorded inf check
    let mut fresh = GradScaler::new(Device::Cpu, GradScalerConfig::default()).unwrap();
    fresh.scale(&w.sum().unwrap()).unwrap();
    let e = fresh.update(None).unwrap_err().to_string();
    assert!(e.contains("No inf checks were recorded prior to update."), "{e}");
}

#[test]
fn inf_and_nan_gradients_skip_the_step_and_back_off() {
    for bad in [f32::INFINITY, f32::NAN, f32::NEG_INFINITY] {
        let (w, mut opt) = one_param(vec![1.0, 2.0]);
        let mut s = GradScaler::new(Device::Cpu, GradScalerConfig { init_scale: 8.0, growth_interval: 1, ..Default::default() }).unwrap();
        s.scale(&w.sum().unwrap()).unwrap().backward().unwrap();
        w.grad().unwrap().copy_(&Tensor::from_vec(vec![1.0f32, bad], &[2]).unwrap()).unwrap();
        assert!(!s.step(&mut opt).unwrap(), "{bad}: skipped");
        assert_eq!(w.to_vec::<f32>().unwrap(), vec![1., 2.], "{bad}: parameters untouched");
        s.update(None).unwrap();
        assert_eq!(s.get_scale().unwrap(), 4.0);
        // a clean step with growth_interval 1 grows at once
        opt.zero_grad();
        s.scale(&w.sum().unwrap()).unwrap().backward().unwrap();
        assert!(s.step(&mut opt).unwrap());
        s.update(None).unwrap();
        assert_eq!(s.get_scale().unwrap(), 8.0);
        assert_eq!(w.to_vec::<f32>().unwrap(), vec![0., 1.]);
    }
}

#[test]
fn float16_gradients_are_refused_and_bfloat16_ones_unscaled() {
    let w = Tensor::from_vec(vec![1f32, 2.], &[2]).unwrap().to_dtype(DType::F16).unwrap().with_requires_grad().unwrap();
    let mut opt = Sgd::new(vec![w.clone()], SgdConfig { lr: 0.5, ..Default::default() }).unwrap();
    let mut s = GradScaler::new(Device::Cpu, GradScalerConfig::default()).unwrap();
    s.scale(&w.to_dtype(DType::F32).unwrap().sum().unwrap()).unwrap().backward().unwrap();
    let e = s.unscale_(&mut opt).unwrap_err().to_string();
    assert!(e.contains("Attempting to unscale FP16 gradients."), "{e}");

    let b = Tensor::from_vec(vec![1f32, 2.], &[2]).unwrap().to_dtype(DType::BF16).unwrap().with_requires_grad().unwrap();
    let mut opt = Sgd::new(vec![b.clone()], SgdConfig { lr: 0.5, ..Default::default() }).unwrap();
    s.scale(&b.to_dtype(DType::F32).unwrap().mul(&b.to_dtype(DType::F32).unwrap()).unwrap().sum().unwrap())
        .unwrap()
        .backward()
        .unwrap();
    s.unscale_(&mut opt).unwrap();
    assert_eq!(b.grad().unwrap().dtype(), DType::BF16);
    assert_eq!(b.grad().unwrap().to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap(), vec![2., 4.]);
}

#[test]
fn disabled_scaler_passes_through() {
    let (w, mut opt) = one_param(vec![1.0, 2.0]);
    let mut s = GradScaler::new(Device::Cpu, GradScalerConfig { enabled: false, ..Default::default() }).unwrap();
    let l = w.sum().unwrap();
    assert!(s.scale(&l).unwrap().is_same(&l));
    l.backward().unwrap();
    assert!(s.step(&mut opt).unwrap());
    s.update(None).unwrap();
    assert_eq!(s.get_scale().unwrap(), 1.0);
    assert_eq!(s.state_dict().unwrap(), None);
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![0., 1.]);
    // no CUDA here: a CUDA scaler disables itself, as PyTorch's does with a warning
    if !magpie_core::backend::cuda::is_available() {
        assert!(!GradScaler::new(Device::Cuda(0), GradScalerConfig::default()).unwrap().is_enabled());
    }
    assert!(GradScaler::new(Device::Cpu, GradScalerConfig { growth_factor: 1.0, ..Default::default() }).is_err());
    assert!(GradScaler::new(Device::Cpu, GradScalerConfig { backoff_factor: 1.0, ..Default::default() }).is_err());
}

#[test]
fn state_dict_round_trip() {
    let (w, mut opt) = one_param(vec![1.0, 2.0]);
    let mut a = GradScaler::new(Device::Cpu, GradScalerConfig { init_scale: 32.0, growth_interval: 3, ..Default::default() }).unwrap();
    a.scale(&w.sum().unwrap()).unwrap().backward().unwrap();
    a.step(&mut opt).unwrap();
    a.update(None).unwrap();
    let sd = a.state_dict().unwrap().unwrap();
    assert_eq!(sd, GradScalerState { scale: 32.0, growth_factor: 2.0, backoff_factor: 0.5, growth_interval: 3, growth_tracker: 1 });
    let mut b = GradScaler::new(Device::Cpu, GradScalerConfig::default()).unwrap();
    b.load_state_dict(Some(&sd)).unwrap();
    assert_eq!(b.state_dict().unwrap(), Some(sd));
    assert_eq!(b.get_scale().unwrap(), 32.0);
    // two more clean steps on b grow the scale (tracker 1 -> 2 -> 3 = interval)
    for _ in 0..2 {
        opt.zero_grad();
        b.scale(&w.sum().unwrap()).unwrap().backward().unwrap();
        b.step(&mut opt).unwrap();
        b.update(None).unwrap();
    }
    assert_eq!(b.get_scale().unwrap(), 64.0);
    let e = b.load_state_dict(None).unwrap_err().to_string();
    assert!(e.contains("The source state dict is empty"), "{e}");
}
