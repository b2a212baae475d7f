//! CUDA composites: ops built from other ops (convolution with bias, losses with class masks,
//! cross, tril/triu, pooling, grid_sample, ...) and view gradients (the strided scatter of
//! narrow / select / diagonal / as_strided / expand), each run through the registry on CUDA
//! tensors and compared with the CPU run: values and gradients. Also PyTorch's rule that a 0-d
//! CPU tensor joins CUDA operands as a scalar, and `out=` aliasing through the CPU fallback.
//! Skips without CUDA unless `MAGPIE_REQUIRE_CUDA=1`.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::registry::{call, Value};
use magpie_core::{DType, Device, Tensor};
use util::{assert_close, gpu, rand, Rng};

/// An argument of a case: a float tensor that gets a gradient, a constant tensor, or a plain value.
#[derive(Clone)]
enum A {
    Grad(Tensor),
    Const(Tensor),
    V(Value),
}

fn val(a: &A, dev: Device) -> (Value, Option<Tensor>) {
    match a {
        A::Grad(t) => {
            let l = t.to_device(dev).unwrap().detach().requires_grad_(true).unwrap();
            (Value::Tensor(l.clone()), Some(l))
        }
        A::Const(t) => (Value::Tensor(t.to_device(dev).unwrap()), None),
        A::V(v) => (v.clone(), None),
    }
}

fn first_tensor(v: Value) -> Tensor {
    match v {
        Value::Tensor(t) => t,
        Value::List(l) => l.into_iter().map(first_tensor).next().expect("a tensor result"),
        o => panic!("expected a tensor, got {}", o.kind()),
    }
}

/// Runs `op(args, kwargs)` on the CPU and on `dev`; compares the result, then the gradients of
/// `sum(result * w)` (w fixed random weights) for every `A::Grad` argument.
fn check(dev: Device, op: &str, args: &[A], kwargs: &[(&str, A)]) {
    let run = |d: Device| -> (Tensor, Vec<Tensor>) {
        let mut leaves = Vec::new();
        let mut pos = Vec::new();
        for a in args {
            let (v, l) = val(a, d);
            pos.push(v);
            leaves.extend(l);
        }
        let mut kw = Vec::new();
        for (k, a) in kwargs {
            let (v, l) = val(a, d);
            kw.push((k.to_string(), v));
            leaves.extend(l);
        }
        let out = first_tensor(call(op, pos, kw).unwrap_or_else(|e| panic!("{op} on {d}: {e}")));
        assert_eq!(out.device(), d, "{op}: result device");
        let mut grads = Vec::new();
        if !leaves.is_empty() && out.dtype().is_float() && out.requires_grad() {
            let mut rng = Rng::new(7);
            let w = rand(&mut rng, out.shape(), out.dtype(), -1.0, 1.0).to_device(d).unwrap();
            out.mul(&w).unwrap().sum().unwrap().backward().unwrap_or_else(|e| panic!("{op} backward on {d}: {e}"));
            for l in &leaves {
                let g = l.grad().unwrap_or_else(|| l.zeros_like().unwrap());
                assert_eq!(g.device(), d, "{op}: gradient device");
                grads.push(g.to_device(Device::Cpu).unwrap());
            }
        }
        (out.detach().to_device(Device::Cpu).unwrap(), grads)
    };
    let (want, wg) = run(Device::Cpu);
    let (got, gg) = run(dev);
    assert_close(&format!("{op} value"), &got, &want, 1e-4, 1e-5);
    assert_eq!(gg.len(), wg.len(), "{op}: gradient count");
    for (i, (g, w)) in gg.iter().zip(&wg).enumerate() {
        assert_close(&format!("{op} grad {i}"), g, w, 1e-4, 1e-5);
    }
}

fn f32s(rng: &mut Rng, shape: &[usize]) -> Tensor {
    rand(rng, shape, DType::F32, -2.0, 2.0)
}

fn ints(v: &[i64]) -> Value {
    Value::List(v.iter().map(|&i| Value::Int(i)).collect())
}

#[test]
fn view_gradients_scatter_on_the_device() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(1);
    let x = || A::Grad(f32s(&mut Rng::new(3), &[4, 5, 6]));
    check(dev, "narrow", &[x(), A::V(Value::Int(1)), A::V(Value::Int(1)), A::V(Value::Int(3))], &[]);
    check(dev, "select", &[x(), A::V(Value::Int(2)), A::V(Value::Int(-1))], &[]);
    check(dev, "diagonal", &[x(), A::V(Value::Int(1)), A::V(Value::Int(0)), A::V(Value::Int(2))], &[]);
    check(dev, "chunk", &[x(), A::V(Value::Int(2)), A::V(Value::Int(2))], &[]);
    check(dev, "unfold", &[x(), A::V(Value::Int(2)), A::V(Value::Int(3)), A::V(Value::Int(2))], &[]);
    check(dev, "trace", &[A::Grad(f32s(&mut rng, &[5, 5]))], &[]);
    // as_strided with overlapping windows: positions visited twice accumulate (atomic adds)
    check(dev, "as_strided", &[A::Grad(f32s(&mut rng, &[10])), A::V(ints(&[4, 3])), A::V(ints(&[2, 1]))], &[]);
    // expand: every gradient element adds into one position
    check(dev, "expand", &[A::Grad(f32s(&mut rng, &[3, 1])), A::V(ints(&[3, 7]))], &[]);
    // f64 and f16 through the same scatter
    for d in [DType::F64, DType::F16] {
        let t = rand(&mut rng, &[6, 4], d, -1.0, 1.0);
        check(dev, "select", &[A::Grad(t.clone()), A::V(Value::Int(1)), A::V(Value::Int(2))], &[]);
        check(dev, "as_strided", &[A::Grad(t), A::V(ints(&[3, 3])), A::V(ints(&[1, 1]))], &[]);
    }
}

#[test]
fn composites_make_their_helpers_on_the_device() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(2);
    let g = |rng: &mut Rng, s: &[usize]| A::Grad(f32s(rng, s));
    // convolutions with a bias
    check(dev, "nn.functional.conv2d", &[g(&mut rng, &[2, 3, 6, 5]), g(&mut rng, &[4, 3, 3, 2]), g(&mut rng, &[4])], &[]);
    check(dev, "nn.functional.conv_transpose1d", &[g(&mut rng, &[2, 3, 5]), g(&mut rng, &[3, 2, 3]), g(&mut rng, &[2])], &[]);
    // cross, tril / triu, vander
    check(dev, "cross", &[g(&mut rng, &[4, 3]), g(&mut rng, &[4, 3])], &[("dim", A::V(Value::Int(1)))]);
    check(dev, "tril", &[g(&mut rng, &[2, 4, 5]), A::V(Value::Int(1))], &[]);
    check(dev, "triu", &[g(&mut rng, &[4, 5]), A::V(Value::Int(-1))], &[]);
    check(dev, "linalg.vander", &[g(&mut rng, &[5])], &[]);
    // losses with class masks
    let target = Tensor::from_vec(vec![0i64, 2, 1, 2], &[4]).unwrap();
    check(dev, "nn.functional.nll_loss", &[g(&mut rng, &[4, 3]), A::Const(target.clone())], &[]);
    check(dev, "nn.functional.cross_entropy", &[g(&mut rng, &[4, 3]), A::Const(target.clone())], &[]);
    check(dev, "nn.functional.multi_margin_loss", &[g(&mut rng, &[4, 3]), A::Const(target)], &[]);
    let ml = Tensor::from_vec(vec![2i64, 0, -1, 1, -1, 0], &[2, 3]).unwrap();
    check(dev, "nn.functional.multilabel_margin_loss", &[g(&mut rng, &[2, 3]), A::Const(ml)], &[]);
    // pooling / resampling / window ops
    check(dev, "nn.functional.local_response_norm", &[g(&mut rng, &[2, 5, 4]), A::V(Value::Int(3))], &[]);
    check(dev, "nn.functional.avg_pool3d", &[g(&mut rng, &[1, 2, 4, 4, 4]), A::V(Value::Int(2))], &[]);
    check(dev, "nn.functional.avg_pool2d", &[g(&mut rng, &[2, 3, 5, 5]), A::V(Value::Int(2))], &[]);
    check(dev, "nn.functional.pdist", &[g(&mut rng, &[5, 3])], &[]);
    check(dev, "nn.functional.glu", &[g(&mut rng, &[3, 4])], &[]);
    let grid = rand(&mut rng, &[1, 3, 4, 2], DType::F32, -1.1, 1.1);
    check(dev, "nn.functional.grid_sample", &[g(&mut rng, &[1, 2, 4, 5]), A::Grad(grid)], &[("align_corners", A::V(Value::Bool(false)))]);
    // prod's gradient with and without zeros
    check(dev, "prod", &[g(&mut rng, &[3, 4])], &[]);
    let z = Tensor::from_vec(vec![1f32, 0., 2., 3., 0., 0.], &[2, 3]).unwrap();
    check(dev, "prod", &[A::Grad(z), A::V(Value::Int(1))], &[]);
    // integer inputs of window ops
    let xi = rand(&mut rng, &[1, 2, 4, 4], DType::I64, -5.0, 5.0);
    check(dev, "nn.functional.avg_pool2d", &[A::Const(xi), A::V(Value::Int(2))], &[]);
}

#[test]
fn cpu_scalar_tensors_join_cuda_operands() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(4);
    let x = f32s(&mut rng, &[3, 4]);
    let s = Tensor::scalar(2.5f32);
    let xd = x.to_device(dev).unwrap().requires_grad_(true).unwrap();
    let sc = s.requires_grad_(true).unwrap();
    let y = xd.mul(&sc).unwrap().add(&Tensor::scalar(1i64)).unwrap();
    assert_eq!(y.device(), dev);
    assert_close("x * s + 1", &y.to_device(Device::Cpu).unwrap(), &x.mul_scalar(2.5).unwrap().add_scalar(1.0).unwrap(), 1e-6, 1e-6);
    y.sum().unwrap().backward().unwrap();
    assert_eq!(sc.grad().unwrap().device(), Device::Cpu);
    assert_close("d/ds", &sc.grad().unwrap(), &x.sum().unwrap(), 1e-5, 1e-5);
    assert_close("d/dx", &xd.grad().unwrap().to_device(Device::Cpu).unwrap(), &x.full_like(2.5).unwrap(), 0.0, 0.0);
    // where with a CPU 0-d operand
    let c = x.gt_scalar(0.0).unwrap().to_device(dev).unwrap();
    let w = c.where_(&x.to_device(dev).unwrap(), &Tensor::scalar(0f32)).unwrap();
    assert_eq!(w.device(), dev);
    assert_close("where", &w.to_device(Device::Cpu).unwrap(), &x.clamp_min(0.0).unwrap(), 0.0, 0.0);
    // a CPU tensor with dims still does not mix with a CUDA one
    assert!(xd.add(&x).is_err());
    // and a CUDA 0-d tensor does not join CPU tensors
    assert!(x.add(&Tensor::scalar(1f32).to_device(dev).unwrap()).is_err());
}

#[test]
fn fallback_keeps_out_aliasing_and_writes_out() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], &[6]).unwrap().to_device(dev).unwrap();
    let idx = Tensor::from_vec(vec![5i64, 0, 2], &[3]).unwrap().to_device(dev).unwrap();
    // out= aliasing the input is rejected as on the CPU
    let r = call("take", vec![Value::Tensor(x.clone()), Value::Tensor(idx.clone())], vec![("out".into(), Value::Tensor(x.clone()))]);
    let e = r.err().expect("aliasing out= is an error");
    assert!(e.to_string().contains("single memory location"), "{e}");
    // a separate out= is written on the device
    let out = Tensor::zeros_on(&[3], DType::F32, dev).unwrap();
    let r = call("take", vec![Value::Tensor(x), Value::Tensor(idx)], vec![("out".into(), Value::Tensor(out.clone()))]).unwrap();
    assert_eq!(first_tensor(r).device(), dev);
    assert_eq!(out.to_device(Device::Cpu).unwrap().to_vec::<f32>().unwrap(), vec![6., 1., 3.]);
}

/// `relu` and `silu` on CUDA (composites of native kernels until they get their own) against the
/// CPU: values on edge inputs (±inf, NaN, 0, -0) in float32, bfloat16 and float16, and gradients.
#[test]
fn relu_and_silu_composites_match_cpu() {
    let Some(dev) = gpu() else { return };
    let xs = vec![-f32::INFINITY, -3.5, -1e-3, -0.0, 0.0, 1e-3, 2.25, f32::INFINITY, f32::NAN, 40.0, -40.0];
    let n = xs.len();
    for dt in [DType::F32, DType::BF16, DType::F16] {
        let x = Tensor::from_vec(xs.clone(), &[n]).unwrap().to_dtype(dt).unwrap();
        for (name, f) in [("relu", Tensor::relu as fn(&Tensor) -> magpie_core::Result<Tensor>), ("silu", Tensor::silu)] {
            let cpu = f(&x).unwrap().to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
            let gpu_y = f(&x.to_device(dev).unwrap()).unwrap();
            assert_eq!(gpu_y.dtype(), dt);
            let got = gpu_y.to_device(Device::Cpu).unwrap().to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
            for i in 0..n {
                if name == "silu" && xs[i].is_infinite() {
                    continue; // -inf * sigmoid(-inf) is NaN in PyTorch's formula; the CPU kernel's limit is not the point here
                }
                let (a, b) = (cpu[i], got[i]);
                let same = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-2 * a.abs().max(1e-3);
                assert!(same, "{name} {dt} at {}: CPU {a}, CUDA {b}", xs[i]);
            }
        }
    }
    // gradients (finite inputs), float32
    let finite: Vec<f32> = vec![-3.5, -1e-3, 0.0, 1e-3, 2.25, 7.0];
    for (name, f) in [("relu", Tensor::relu as fn(&Tensor) -> magpie_core::Result<Tensor>), ("silu", Tensor::silu)] {
        let grads: Vec<Vec<f32>> = [Device::Cpu, dev]
            .iter()
            .map(|&d| {
                let x = Tensor::from_vec(finite.clone(), &[finite.len()]).unwrap().to_device(d).unwrap().requires_grad_(true).unwrap();
                f(&x).unwrap().sum().unwrap().backward().unwrap();
                x.grad().unwrap().to_device(Device::Cpu).unwrap().to_vec::<f32>().unwrap()
            })
            .collect();
        for (a, b) in grads[0].iter().zip(&grads[1]) {
            assert!((a - b).abs() <= 1e-6, "{name} gradient: CPU {:?}, CUDA {:?}", grads[0], grads[1]);
        }
    }
}
