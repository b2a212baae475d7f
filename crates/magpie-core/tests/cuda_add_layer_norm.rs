//! `add_layer_norm` (`layer_norm(x + bias + residual)`): the CUDA kernels against the composite
//! on random inputs at several sizes (odd widths, rows past the one-launch column sums, widths
//! past one block, widths of 4-element loads up to 8192 and past it, operands off 4-element
//! alignment), float32, bfloat16 and float16, under autocast (a bf16 projection, a float32
//! residual, as BERT hands them over) and without; values and the gradients of all five inputs,
//! also with `create_graph`. The CPU tests check the composite against a float64 loop and the
//! argument errors. CUDA tests are skipped where CUDA is not available, unless
//! MAGPIE_REQUIRE_CUDA=1.

mod cuda_util;

use cuda_util::{assert_close, gpu, rand, Rng};
use magpie_core::ops::nn::add_layer_norm::{add_layer_norm, add_layer_norm_composite};
use magpie_core::{amp, DType, Device, Tensor};

fn leaf(t: &Tensor) -> Tensor {
    t.detach().with_requires_grad().unwrap()
}

/// Asserts `got` is within `rt` relative of `want`, plus `at` of want's largest magnitude.
fn near(what: &str, got: &Tensor, want: &Tensor, rt: f64, at: f64) {
    let w = want.to_f64_vec().unwrap();
    let scale = w.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-6);
    assert_close(what, got, want, rt, at * scale);
}

/// One dtype mix: x, residual, bias, LayerNorm parameters, autocast dtype.
struct Mix {
    x: DType,
    r: DType,
    b: DType,
    p: DType,
    autocast: Option<DType>,
}

const MIXES: &[Mix] = &[
    Mix { x: DType::F32, r: DType::F32, b: DType::F32, p: DType::F32, autocast: None },
    Mix { x: DType::BF16, r: DType::F32, b: DType::F32, p: DType::F32, autocast: Some(DType::BF16) },
    Mix { x: DType::BF16, r: DType::BF16, b: DType::BF16, p: DType::F32, autocast: Some(DType::BF16) },
    Mix { x: DType::BF16, r: DType::BF16, b: DType::BF16, p: DType::BF16, autocast: None },
    Mix { x: DType::F16, r: DType::F32, b: DType::F16, p: DType::F32, autocast: None },
];

struct Run {
    y: Tensor,
    grads: Vec<Option<Tensor>>,
    name: String,
}

#[allow(clippy::too_many_arguments)]
fn run(fused: bool, x: &Tensor, r: &Tensor, b: Option<&Tensor>, w: Option<&Tensor>, l: Option<&Tensor>, ns: &[i64], gy: &Tensor, autocast: Option<DType>, create_graph: bool) -> Run {
    let ins: Vec<Option<Tensor>> = [Some(x), Some(r), b, w, l].into_iter().map(|t| t.map(leaf)).collect();
    let y = {
        let _ac = autocast.map(|dt| amp::autocast(x.device(), Some(dt), true).unwrap());
        let f = if fused { add_layer_norm } else { add_layer_norm_composite };
        f(ins[0].as_ref().unwrap(), ins[1].as_ref().unwrap(), ins[2].as_ref(), ns, ins[3].as_ref(), ins[4].as_ref(), 1e-5).unwrap()
    };
    let name = y.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
    y.backward_with(Some(&gy.to_dtype(y.dtype()).unwrap()), false, create_graph).unwrap();
    Run { y: y.detach(), grads: ins.iter().map(|t| t.as_ref().and_then(|t| t.grad()).map(|g| g.detach())).collect(), name }
}

#[test]
fn fused_add_layer_norm_matches_the_composite() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(14);
    let shapes: &[&[usize]] = &[&[1, 7], &[5, 768], &[3, 11, 130], &[100, 768], &[512, 768], &[4100, 33], &[2, 2049], &[3, 4111], &[5, 4], &[3, 132], &[2, 8192], &[2, 8196]];
    for &shape in shapes {
        let n = *shape.last().unwrap();
        let ns = [n as i64];
        for (mi, m) in MIXES.iter().enumerate() {
            for (with_b, with_p) in [(true, true), (false, true), (true, false)] {
                for create_graph in [false, true] {
                    let what = format!("shape {shape:?} mix {mi} bias {with_b} affine {with_p} create_graph {create_graph}");
                    let x = rand(&mut rng, shape, m.x, -2.0, 2.0).to_device(dev).unwrap();
                    let r = rand(&mut rng, shape, m.r, -2.0, 2.0).to_device(dev).unwrap();
                    let b = rand(&mut rng, &[n], m.b, -1.0, 1.0).to_device(dev).unwrap();
                    let w = rand(&mut rng, &[n], m.p, 0.5, 1.5).to_device(dev).unwrap();
                    let l = rand(&mut rng, &[n], m.p, -0.5, 0.5).to_device(dev).unwrap();
                    let gy = rand(&mut rng, shape, DType::F32, -1.0, 1.0).to_device(dev).unwrap();
                    let (b, w, l) = (with_b.then_some(&b), with_p.then_some(&w), with_p.then_some(&l));
                    let a = run(true, &x, &r, b, w, l, &ns, &gy, m.autocast, create_graph);
                    // with create_graph both sides take the composite's tensor-op gradient rule
                    let c = run(false, &x, &r, b, w, l, &ns, &gy, m.autocast, create_graph);
                    assert_eq!(a.name, "AddLayerNormBackward0", "{what}: the fused path ran");
                    assert_ne!(c.name, "AddLayerNormBackward0", "{what}: the composite ran");
                    // by each result's dtype: the kernels round once where the composite may
                    // round twice (a 16-bit gradient summed in 16 bits), one unit apart
                    let tol = |d: DType| match d {
                        DType::F32 => (1e-4, 1e-5),
                        DType::BF16 => (1.0 / 64.0, 1.0 / 128.0),
                        _ => (1.0 / 512.0, 1.0 / 1024.0),
                    };
                    let (rt, at) = tol(c.y.dtype());
                    near(&format!("{what}: output"), &a.y, &c.y, rt, at);
                    for (i, nm) in ["x", "residual", "bias", "weight", "ln_bias"].iter().enumerate() {
                        match (&a.grads[i], &c.grads[i]) {
                            (Some(ga), Some(gc)) => {
                                let (gr, ga_t) = tol(gc.dtype());
                                near(&format!("{what}: grad of {nm}"), ga, gc, gr.max(rt), ga_t.max(at))
                            }
                            (None, None) => {}
                            _ => panic!("{what}: grad of {nm} present on one side only"),
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn fused_add_layer_norm_on_unaligned_operands() {
    // rows of a multiple of 4 elements take 4-element loads only when every operand starts on a
    // multiple of 4 elements: views 1 and 2 elements into their storage take the scalar kernel
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(6);
    let (rows, n) = (33usize, 768usize);
    for skip in [1i64, 2, 4] {
        let x = rand(&mut rng, &[rows * n + 4], DType::BF16, -2.0, 2.0).to_device(dev).unwrap();
        let x = x.narrow(0, skip, (rows * n) as i64).unwrap().view(&[rows as i64, n as i64]).unwrap();
        let r = rand(&mut rng, &[rows, n], DType::F32, -2.0, 2.0).to_device(dev).unwrap();
        let b = rand(&mut rng, &[n + 4], DType::F32, -1.0, 1.0).to_device(dev).unwrap().narrow(0, skip, n as i64).unwrap();
        let w = rand(&mut rng, &[n], DType::F32, 0.5, 1.5).to_device(dev).unwrap();
        let l = rand(&mut rng, &[n], DType::F32, -0.5, 0.5).to_device(dev).unwrap();
        let gy = rand(&mut rng, &[rows, n], DType::F32, -1.0, 1.0).to_device(dev).unwrap();
        let a = run(true, &x, &r, Some(&b), Some(&w), Some(&l), &[n as i64], &gy, Some(DType::BF16), false);
        let c = run(false, &x, &r, Some(&b), Some(&w), Some(&l), &[n as i64], &gy, Some(DType::BF16), false);
        assert_eq!(a.name, "AddLayerNormBackward0", "skip {skip}: the fused path ran");
        near(&format!("skip {skip}: output"), &a.y, &c.y, 1e-4, 1e-5);
        for (i, nm) in ["x", "residual", "bias"].iter().enumerate() {
            let (ga, gc) = (a.grads[i].as_ref().unwrap(), c.grads[i].as_ref().unwrap());
            let (rt, at) = if gc.dtype() == DType::F32 { (1e-4, 1e-5) } else { (1.0 / 64.0, 1.0 / 128.0) };
            near(&format!("skip {skip}: grad of {nm}"), ga, gc, rt, at);
        }
    }
}

#[test]
fn fused_add_layer_norm_keeps_the_composite_values_of_bert_shapes() {
    // the BERT case (bf16 projection, float32 residual, float32 parameters under autocast): the
    // forward equals the composite's to float32 rounding of the statistics
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(5);
    let x = rand(&mut rng, &[4, 128, 768], DType::BF16, -3.0, 3.0).to_device(dev).unwrap();
    let r = rand(&mut rng, &[4, 128, 768], DType::F32, -3.0, 3.0).to_device(dev).unwrap();
    let b = rand(&mut rng, &[768], DType::F32, -1.0, 1.0).to_device(dev).unwrap();
    let w = rand(&mut rng, &[768], DType::F32, 0.5, 1.5).to_device(dev).unwrap();
    let l = rand(&mut rng, &[768], DType::F32, -0.5, 0.5).to_device(dev).unwrap();
    let _ac = amp::autocast(dev, Some(DType::BF16), true).unwrap();
    let a = add_layer_norm(&x, &r, Some(&b), &[768], Some(&w), Some(&l), 1e-12).unwrap();
    let c = add_layer_norm_composite(&x, &r, Some(&b), &[768], Some(&w), Some(&l), 1e-12).unwrap();
    assert_eq!(a.dtype(), DType::F32, "autocast normalizes in float32");
    assert_close("BERT shape", &a, &c, 1e-5, 1e-5);
}

/// `layer_norm(x + b + r)` row by row in float64.
fn reference(x: &[f64], r: &[f64], b: &[f64], w: &[f64], l: &[f64], n: usize, eps: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for (xr, rr) in x.chunks(n).zip(r.chunks(n)) {
        let h: Vec<f64> = (0..n).map(|j| xr[j] + b[j] + rr[j]).collect();
        let mu = h.iter().sum::<f64>() / n as f64;
        let var = h.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / n as f64;
        let rs = 1.0 / (var + eps).sqrt();
        out.extend((0..n).map(|j| (h[j] - mu) * rs * w[j] + l[j]));
    }
    out
}

#[test]
fn add_layer_norm_on_the_cpu_is_layer_norm_of_the_sum() {
    let mut rng = Rng::new(3);
    for (rows, n) in [(1usize, 1usize), (3, 5), (7, 130)] {
        let t = |rng: &mut Rng, s: &[usize]| rand(rng, s, DType::F64, -2.0, 2.0);
        let (x, r, b, w, l) = (t(&mut rng, &[rows, n]), t(&mut rng, &[rows, n]), t(&mut rng, &[n]), t(&mut rng, &[n]), t(&mut rng, &[n]));
        let y = add_layer_norm(&x, &r, Some(&b), &[n as i64], Some(&w), Some(&l), 1e-5).unwrap();
        let v = |t: &Tensor| t.to_f64_vec().unwrap();
        let want = Tensor::from_vec(reference(&v(&x), &v(&r), &v(&b), &v(&w), &v(&l), n, 1e-5), &[rows, n]).unwrap();
        assert_close(&format!("{rows} x {n}"), &y, &want, 1e-10, 1e-12);
    }
}

#[test]
fn add_layer_norm_rejects_mismatched_shapes() {
    let x = Tensor::zeros_on(&[2, 4], DType::F32, Device::Cpu).unwrap();
    let e = add_layer_norm(&x, &Tensor::zeros_on(&[2, 3], DType::F32, Device::Cpu).unwrap(), None, &[4], None, None, 1e-5).unwrap_err();
    assert!(e.to_string().contains("add_layer_norm") && e.to_string().contains("residual"), "{e}");
    let e = add_layer_norm(&x, &x, Some(&Tensor::zeros_on(&[3], DType::F32, Device::Cpu).unwrap()), &[4], None, None, 1e-5).unwrap_err();
    assert!(e.to_string().contains("bias"), "{e}");
    let e = add_layer_norm(&x, &x, None, &[3], None, None, 1e-5).unwrap_err();
    assert!(e.to_string().contains("normalized_shape"), "{e}");
    let i = Tensor::zeros_on(&[2, 4], DType::I64, Device::Cpu).unwrap();
    assert!(add_layer_norm(&i, &i, None, &[4], None, None, 1e-5).is_err(), "integer inputs are refused");
}
