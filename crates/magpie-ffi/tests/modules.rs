//! nn layers by name from C: construction errors, forward shapes, parameters shared with an
//! optimizer that trains them, dropout only in training mode.

mod common;
use common::{ok, tensor, values};
use magpie_ffi::autograd::magpie_backward;
use magpie_ffi::call::magpie_call;
use magpie_ffi::module::*;
use magpie_ffi::optim::*;
use magpie_ffi::tensor::*;
use magpie_ffi::*;
use std::ffi::CString;

fn module(name: &str, args: &str) -> (i32, i64) {
    let (n, a) = (CString::new(name).unwrap(), CString::new(args).unwrap());
    let mut h = 0;
    let rc = unsafe { magpie_module_new(n.as_ptr(), a.as_ptr(), &mut h) };
    (rc, h)
}

fn forward(m: i64, x: i64) -> i64 {
    let mut y = 0;
    ok(unsafe { magpie_module_forward(m, x, &mut y) });
    y
}

#[test]
fn layers_by_name_train_with_an_optimizer() {
    assert_eq!(module("linear", r#"{"in_features": 3}"#).0, MAGPIE_ERR_ARG, "out_features is required");
    assert_eq!(module("linear", r#"{"in_features": 3, "out_features": 2, "bogus": 1}"#).0, MAGPIE_ERR_ARG);
    assert_eq!(module("transformer_xl", "{}").0, MAGPIE_ERR_ARG);
    let (rc, l1) = module("linear", r#"{"in_features": 3, "out_features": 8}"#);
    ok(rc);
    let (_, act) = module("gelu", r#"{"approximate": "tanh"}"#);
    let (_, l2) = module("linear", r#"{"in_features": 8, "out_features": 1, "bias": false}"#);
    let mut params = [0i64; 8];
    let (mut n1, mut n2) = (0, 0);
    ok(unsafe { magpie_module_parameters(l1, params.as_mut_ptr(), 8, &mut n1) });
    ok(unsafe { magpie_module_parameters(l2, params[n1..].as_mut_ptr(), 8 - n1, &mut n2) });
    assert_eq!((n1, n2), (2, 1));
    let x = tensor(&[0., 1., 2., 1., 0., -1., 2., 2., 0., -1., 1., 1.], &[4, 3]);
    let target = tensor(&[1., -1., 0.5, 0.], &[4, 1]);
    let (adam, hyper) = (CString::new("adam").unwrap(), CString::new(r#"{"lr": 0.05}"#).unwrap());
    let mut opt = 0;
    ok(unsafe { magpie_optimizer_new(adam.as_ptr(), params.as_ptr(), n1 + n2, hyper.as_ptr(), &mut opt) });
    let mse = CString::new("nn.functional.mse_loss").unwrap();
    let args = CString::new(r#"{"args": [{"tensor": 0}, {"tensor": 1}]}"#).unwrap();
    let mut losses = Vec::new();
    for _ in 0..60 {
        let y = forward(l2, forward(act, forward(l1, x)));
        assert_eq!(values(y).len(), 4);
        let (mut loss, mut n) = (0, 0);
        ok(unsafe { magpie_call(mse.as_ptr(), args.as_ptr(), [y, target].as_ptr(), 2, &mut loss, 1, &mut n, std::ptr::null_mut(), 0, std::ptr::null_mut()) });
        ok(magpie_optimizer_zero_grad(opt));
        ok(magpie_backward(loss));
        ok(magpie_optimizer_step(opt));
        losses.push(values(loss)[0]);
    }
    assert!(losses[59] < 0.1 * losses[0], "loss {} -> {}", losses[0], losses[59]);
    // dropout: random in training mode, the identity in eval mode
    let (_, drop) = module("dropout", r#"{"p": 0.5}"#);
    let ones = tensor(&[1.0; 64], &[64]);
    let a = values(forward(drop, ones));
    assert!(a.iter().any(|&v| v == 0.0) && a.iter().any(|&v| v == 2.0));
    ok(magpie_module_train(drop, 0));
    assert_eq!(values(forward(drop, ones)), vec![1.0; 64]);
    // a conv layer's shapes
    let (rc, conv) = module("conv2d", r#"{"in_channels": 2, "out_channels": 4, "kernel_size": 3, "padding": 1}"#);
    ok(rc);
    let img = tensor(&[0.5; 2 * 5 * 5], &[1, 2, 5, 5]);
    let mut shape = [0i64; 4];
    ok(unsafe { magpie_tensor_shape(forward(conv, img), shape.as_mut_ptr(), 4) });
    assert_eq!(shape, [1, 4, 5, 5]);
    // a tensor is not a module
    let mut y = 0;
    assert_eq!(unsafe { magpie_module_forward(x, x, &mut y) }, MAGPIE_ERR_ARG);
}
