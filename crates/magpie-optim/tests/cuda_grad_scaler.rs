//! `GradScaler` with CUDA parameters: the same sequence of gradients (clean, overflowing with inf,
//! NaN, clean again) through a CUDA scaler and AdamW and through a CPU scaler and AdamW gives the
//! same skipped steps, scales and parameters; the scale and the inf flags stay on the GPU.
//! Skipped where CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1 (then it fails).

use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Tensor};
use magpie_optim::{AdamConfig, AdamW, GradScaler, GradScalerConfig, Optimizer};

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

fn vals(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

struct Run {
    params: Vec<Tensor>,
    opt: AdamW,
    scaler: GradScaler,
}

impl Run {
    fn new(dev: Device) -> Run {
        let params: Vec<Tensor> = [(vec![37usize, 5], 1u64), (vec![5], 2), (vec![1000], 3)]
            .iter()
            .map(|(shape, seed)| {
                let n: usize = shape.iter().product();
                Tensor::from_vec(vals(n, *seed), shape).unwrap().to_device(dev).unwrap().with_requires_grad().unwrap()
            })
            .collect();
        let opt = AdamW::new(params.clone(), AdamConfig { lr: 0.01, ..Default::default() }).unwrap();
        let cfg = GradScalerConfig { init_scale: 1024.0, growth_interval: 2, ..Default::default() };
        Run { params, opt, scaler: GradScaler::new(dev, cfg).unwrap() }
    }
    /// One iteration with the loss `sum(p * c)` (gradient c * scale), poisoned at one element.
    fn step(&mut self, t: usize, poison: Option<f32>) -> bool {
        self.opt.zero_grad();
        let mut loss: Option<Tensor> = None;
        for (i, p) in self.params.iter().enumerate() {
            let mut c = vals(p.numel(), 100 + (t * 7 + i) as u64);
            if let (Some(v), 2) = (poison, i) {
                c[500] = v;
            }
            let c = Tensor::from_vec(c, p.shape()).unwrap().to_device(p.device()).unwrap();
            let term = p.mul(&c).unwrap().sum().unwrap();
            loss = Some(match loss {
                None => term,
                Some(l) => l.add(&term).unwrap(),
            });
        }
        self.scaler.scale(&loss.unwrap()).unwrap().backward().unwrap();
        let stepped = self.scaler.step(&mut self.opt).unwrap();
        self.scaler.update(None).unwrap();
        stepped
    }
}

#[test]
fn cuda_scaler_matches_cpu() {
    if !have_cuda() {
        return;
    }
    let (mut g, mut c) = (Run::new(Device::Cuda(0)), Run::new(Device::Cpu));
    let poisons = [None, None, Some(f32::INFINITY), None, Some(f32::NAN), None, None, None, None];
    for (t, p) in poisons.iter().enumerate() {
        let (sg, sc) = (g.step(t, *p), c.step(t, *p));
        assert_eq!(sg, sc, "step {t}: skipped on one device only");
        assert_eq!(sg, p.is_none(), "step {t}");
        assert_eq!(g.scaler.get_scale().unwrap(), c.scaler.get_scale().unwrap(), "step {t}: scale");
        for (i, (a, b)) in g.params.iter().zip(&c.params).enumerate() {
            let (a, b) = (a.to_device(Device::Cpu).unwrap().to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
            for (j, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "step {t}: param {i}[{j}]: cuda {x}, cpu {y}");
            }
        }
    }
    assert_eq!(g.scaler.get_scale().unwrap(), 1024.0 * 2.0 * 0.5 * 0.5 * 2.0 * 2.0);
    // bfloat16 gradients of CUDA parameters are unscaled on the device too
    let b = Tensor::from_vec(vals(300, 9), &[300]).unwrap().to_dtype(DType::BF16).unwrap().to_device(Device::Cuda(0)).unwrap();
    let b = b.with_requires_grad().unwrap();
    let mut opt = magpie_optim::Sgd::new(vec![b.clone()], magpie_optim::SgdConfig { lr: 0.0, ..Default::default() }).unwrap();
    let mut s = GradScaler::new(Device::Cuda(0), GradScalerConfig::default()).unwrap();
    s.scale(&b.to_dtype(DType::F32).unwrap().sum().unwrap()).unwrap().backward().unwrap();
    s.unscale_(&mut opt).unwrap();
    let gv = b.grad().unwrap().to_dtype(DType::F32).unwrap().to_device(Device::Cpu).unwrap().to_vec::<f32>().unwrap();
    assert!(gv.iter().all(|&v| v == 1.0), "unscaled bfloat16 gradients of ones");
}
