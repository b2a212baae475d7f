//! Schedulers by name from C follow PyTorch's formulas: one-cycle, cosine with warm restarts,
//! cyclic (triangular).

mod common;
use common::ok;
use magpie_ffi::optim::*;
use magpie_ffi::tensor::magpie_tensor_from_data;
use std::ffi::CString;

/// The learning rates a scheduler gives over `steps` steps of an SGD (momentum 0.9) optimizer.
fn lrs(name: &str, hyper: &str, steps: usize) -> Vec<f64> {
    let v = [1f32, 2.];
    let mut w = 0;
    ok(unsafe { magpie_tensor_from_data(v.as_ptr().cast(), 8, 8, [2i64].as_ptr(), 1, -1, &mut w) });
    let (sgd, sh) = (CString::new("sgd").unwrap(), CString::new(r#"{"lr": 0.1, "momentum": 0.9}"#).unwrap());
    let mut opt = 0;
    ok(unsafe { magpie_optimizer_new(sgd.as_ptr(), &w, 1, sh.as_ptr(), &mut opt) });
    let (n, h) = (CString::new(name).unwrap(), CString::new(hyper).unwrap());
    let mut s = 0;
    ok(unsafe { magpie_scheduler_new(n.as_ptr(), opt, h.as_ptr(), &mut s) });
    let mut out = Vec::new();
    for i in 0..=steps {
        if i > 0 {
            ok(magpie_scheduler_step(s, opt));
        }
        let mut lr = 0.0;
        ok(unsafe { magpie_optimizer_get_lr(opt, &mut lr) });
        out.push(lr);
    }
    out
}

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
}

#[test]
fn schedulers_follow_pytorch() {
    // OneCycleLR(max_lr=1, total_steps=10): starts at max_lr / 25, peaks at step pct_start * 10 - 1 = 2
    let l = lrs("one_cycle_lr", r#"{"max_lr": 1.0, "total_steps": 10}"#, 2);
    assert!(close(&l[..1], &[0.04]) && (l[2] - 1.0).abs() < 1e-9, "{l:?}");
    // CosineAnnealingWarmRestarts(T_0=2): 0.1, 0.05, back to 0.1
    let l = lrs("cosine_annealing_warm_restarts", r#"{"T_0": 2}"#, 3);
    assert!(close(&l, &[0.1, 0.05, 0.1, 0.05]), "{l:?}");
    // CyclicLR(base 0.1, max 1.0, step_size_up 2), triangular
    let l = lrs("cyclic_lr", r#"{"base_lr": 0.1, "max_lr": 1.0, "step_size_up": 2}"#, 4);
    assert!(close(&l, &[0.1, 0.55, 1.0, 0.55, 0.1]), "{l:?}");
    let l = lrs("step_lr", r#"{"step_size": 1, "gamma": 0.5}"#, 2);
    assert!(close(&l, &[0.1, 0.05, 0.025]), "{l:?}");
}
