//! The C ABI called from Rust: the generic call's argument and result forms, handles used from
//! several threads at once, and handle counts back to zero once everything is released. One test
//! function, because the live-handle count is process-wide.

mod common;
use common::{ok, tensor, values};
use magpie_ffi::autograd::*;
use magpie_ffi::call::magpie_call;
use magpie_ffi::optim::*;
use magpie_ffi::tensor::*;
use magpie_ffi::*;
use std::ffi::{CStr, CString};

/// `magpie_call(op, json, tensors)`: the result's JSON and its tensor handles.
fn call(op: &str, json: &str, ts: &[i64]) -> (String, Vec<i64>) {
    let (op, js) = (CString::new(op).unwrap(), CString::new(json).unwrap());
    let mut outs = [0i64; 8];
    let (mut n, mut len) = (0usize, 0usize);
    let mut buf = vec![0u8; 256];
    ok(unsafe { magpie_call(op.as_ptr(), js.as_ptr(), ts.as_ptr(), ts.len(), outs.as_mut_ptr(), 8, &mut n, buf.as_mut_ptr().cast(), buf.len(), &mut len) });
    (String::from_utf8(buf[..len].to_vec()).unwrap(), outs[..n].to_vec())
}

#[test]
fn generic_calls_threads_and_handle_counts() {
    let mut base = 0;
    ok(unsafe { magpie_live_handles(&mut base) });
    let x = tensor(&[1., 2., 3., 4., 5., 6.], &[2, 3]);

    // a list result: split gives two tensors
    let (js, hs) = call("split", r#"{"args": [{"tensor": 0}, 2], "kwargs": {"dim": 1}}"#, &[x]);
    assert_eq!(js, r#"[{"tensor":0},{"tensor":1}]"#);
    assert_eq!(values(hs[0]), vec![1., 2., 4., 5.]);
    assert_eq!(values(hs[1]), vec![3., 6.]);
    // keyword arguments and lists
    let (_, s) = call("sum", r#"{"args": [{"tensor": 0}], "kwargs": {"dim": [1], "keepdim": true}}"#, &[x]);
    assert_eq!(values(s[0]), vec![6., 15.]);
    let mut nd = 0;
    ok(unsafe { magpie_tensor_ndim(s[0], &mut nd) });
    assert_eq!(nd, 2);
    // a dtype argument
    let (_, z) = call("zeros", r#"{"args": [[2, 2]], "kwargs": {"dtype": {"dtype": "float64"}}}"#, &[]);
    let mut code = 0;
    ok(unsafe { magpie_tensor_dtype(z[0], &mut code) });
    assert_eq!(code, 9);
    // a non-tensor result, and a float scalar argument
    let (js, none) = call("equal", r#"{"args": [{"tensor": 0}, {"tensor": 0}]}"#, &[x]);
    assert_eq!((js.as_str(), none.len()), ("true", 0));
    let (_, y) = call("mul", r#"{"args": [{"tensor": 0}, 0.5]}"#, &[x]);
    assert_eq!(values(y[0]), vec![0.5, 1., 1.5, 2., 2.5, 3.]);

    // many threads making, combining and releasing handles at once
    let workers: Vec<_> = (0..4)
        .map(|k| {
            std::thread::spawn(move || {
                for i in 0..200 {
                    let a = tensor(&[k as f32, i as f32], &[2]);
                    let mut b = 0;
                    // [2] + [2, 3] does not broadcast: an error, per thread, with its own message
                    assert_eq!(unsafe { magpie_add(a, x, &mut b) }, MAGPIE_ERR_OP);
                    let msg = unsafe { CStr::from_ptr(magpie_last_error()) }.to_string_lossy().into_owned();
                    assert!(msg.starts_with("magpie_add: "), "{msg}");
                    let mut c = 0;
                    ok(unsafe { magpie_mul(a, a, &mut c) });
                    assert_eq!(values(c), vec![(k * k) as f32, (i * i) as f32]);
                    ok(magpie_release(a));
                    ok(magpie_release(c));
                    assert_eq!(magpie_release(a), MAGPIE_ERR_ARG);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    // an optimizer with a scheduler, its state saved and loaded
    let w = tensor(&[1., -1.], &[2]);
    ok(magpie_set_requires_grad(w, 1));
    let mut opt = 0;
    let (adam, hyper) = (CString::new("adam").unwrap(), CString::new(r#"{"lr": 0.1}"#).unwrap());
    ok(unsafe { magpie_optimizer_new(adam.as_ptr(), &w, 1, hyper.as_ptr(), &mut opt) });
    let mut sched = 0;
    let (step_lr, sh) = (CString::new("step_lr").unwrap(), CString::new(r#"{"step_size": 2, "gamma": 0.5}"#).unwrap());
    ok(unsafe { magpie_scheduler_new(step_lr.as_ptr(), opt, sh.as_ptr(), &mut sched) });
    let mut lrs = Vec::new();
    for _ in 0..4 {
        let (mut sq, mut loss) = (0, 0);
        ok(unsafe { magpie_mul(w, w, &mut sq) });
        ok(unsafe { magpie_sum(sq, &mut loss) });
        ok(magpie_optimizer_zero_grad(opt));
        ok(magpie_backward(loss));
        ok(magpie_optimizer_step(opt));
        ok(magpie_scheduler_step(sched, opt));
        let mut lr = 0.0;
        ok(unsafe { magpie_optimizer_get_lr(opt, &mut lr) });
        lrs.push(lr);
        ok(magpie_release(sq));
        ok(magpie_release(loss));
    }
    assert_eq!(lrs, vec![0.1, 0.05, 0.05, 0.025]);
    assert_eq!(magpie_scheduler_step(sched, sched), MAGPIE_ERR_ARG);
    let dir = tempfile::tempdir().unwrap();
    let path = CString::new(dir.path().join("opt.safetensors").to_str().unwrap()).unwrap();
    ok(unsafe { magpie_optimizer_save(opt, path.as_ptr()) });
    let mut opt2 = 0;
    ok(unsafe { magpie_optimizer_new(adam.as_ptr(), &w, 1, hyper.as_ptr(), &mut opt2) });
    ok(unsafe { magpie_optimizer_load(opt2, path.as_ptr()) });
    let mut lr2 = 0.0;
    ok(unsafe { magpie_optimizer_get_lr(opt2, &mut lr2) });
    assert_eq!(lr2, 0.025, "the loaded state carries the scheduled learning rate");
    // a state for other parameters does not load
    let mut opt3 = 0;
    ok(unsafe { magpie_optimizer_new(adam.as_ptr(), [w, x].as_ptr(), 2, hyper.as_ptr(), &mut opt3) });
    assert_ne!(unsafe { magpie_optimizer_load(opt3, path.as_ptr()) }, MAGPIE_OK);

    // every optimizer by name lowers sum(v^2) over a few steps
    for (name, hyper) in [("sgd", r#"{"lr": 0.1, "momentum": 0.9}"#), ("adamax", r#"{"lr": 0.1}"#), ("nadam", r#"{"lr": 0.1}"#), ("radam", r#"{"lr": 0.1}"#), ("adagrad", r#"{"lr": 0.1}"#), ("adadelta", r#"{"lr": 1.0}"#), ("rmsprop", r#"{"lr": 0.01, "centered": true}"#), ("rprop", r#"{"etas": [0.5, 1.2]}"#), ("asgd", r#"{"lr": 0.1}"#)] {
        let v = tensor(&[1., -2.], &[2]);
        ok(magpie_set_requires_grad(v, 1));
        let (cn, ch) = (CString::new(name).unwrap(), CString::new(hyper).unwrap());
        let mut o = 0;
        ok(unsafe { magpie_optimizer_new(cn.as_ptr(), &v, 1, ch.as_ptr(), &mut o) });
        let norm = || values(v).iter().map(|a| a * a).sum::<f32>();
        let before = norm();
        for _ in 0..5 {
            let (mut sq, mut loss) = (0, 0);
            ok(unsafe { magpie_mul(v, v, &mut sq) });
            ok(unsafe { magpie_sum(sq, &mut loss) });
            ok(magpie_optimizer_zero_grad(o));
            ok(magpie_backward(loss));
            ok(magpie_optimizer_step(o));
            ok(magpie_release(sq));
            ok(magpie_release(loss));
        }
        assert!(norm() < before, "{name}: {before} -> {}", norm());
        ok(magpie_release(o));
        ok(magpie_release(v));
    }

    for h in [x, hs[0], hs[1], s[0], z[0], y[0], w, opt, opt2, opt3, sched] {
        ok(magpie_release(h));
    }
    let mut live = 0;
    ok(unsafe { magpie_live_handles(&mut live) });
    assert_eq!(live, base, "every handle made here was released");
}
