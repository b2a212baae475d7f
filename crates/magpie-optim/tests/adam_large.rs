//! Adam/AdamW on a parameter large enough for the parallel update path, against a plain f64
//! loop of PyTorch's update rule.

use magpie_core::Tensor;
use magpie_optim::*;

fn reference(p: &mut [f64], m: &mut [f64], v: &mut [f64], g: &[f64], step: i32, lr: f64, wd: f64, decoupled: bool) {
    let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8);
    let (bc1, bc2) = (1.0 - b1.powi(step), 1.0 - b2.powi(step));
    for i in 0..p.len() {
        let mut d = g[i];
        if decoupled {
            p[i] *= 1.0 - lr * wd;
        } else {
            d += wd * p[i];
        }
        m[i] += (1.0 - b1) * (d - m[i]);
        v[i] = v[i] * b2 + (1.0 - b2) * d * d;
        p[i] -= lr / bc1 * (m[i] / (v[i].sqrt() / bc2.sqrt() + eps));
    }
}

#[test]
fn large_parameter_matches_reference() {
    let n = 100_003;
    for decoupled in [false, true] {
        let p0: Vec<f32> = (0..n).map(|i| ((i * 7919 % 1000) as f32) / 500.0 - 1.0).collect();
        let p = Tensor::from_vec(p0.clone(), &[n]).unwrap().requires_grad_(true).unwrap();
        let cfg = AdamConfig { lr: 0.01, weight_decay: 0.1, ..Default::default() };
        let mut opt: Box<dyn Optimizer> = if decoupled { Box::new(AdamW::new(vec![p.clone()], cfg).unwrap()) } else { Box::new(Adam::new(vec![p.clone()], cfg).unwrap()) };
        let mut rp: Vec<f64> = p0.iter().map(|&x| x as f64).collect();
        let (mut m, mut v) = (vec![0f64; n], vec![0f64; n]);
        for step in 1..=3 {
            let g: Vec<f32> = (0..n).map(|i| (((i + step) * 104_729 % 997) as f32) / 997.0 - 0.5).collect();
            p.set_grad(Some(Tensor::from_vec(g.clone(), &[n]).unwrap()));
            opt.step().unwrap();
            let gd: Vec<f64> = g.iter().map(|&x| x as f64).collect();
            reference(&mut rp, &mut m, &mut v, &gd, step as i32, 0.01, 0.1, decoupled);
        }
        let got: Vec<f32> = p.to_vec().unwrap();
        for (a, b) in got.iter().zip(&rp) {
            assert!((*a as f64 - b).abs() < 1e-5, "{a} vs {b}");
        }
    }
}
