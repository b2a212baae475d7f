//! In-place writes into views under autograd (PyTorch's CopySlices), views picking up their
//! base's new history, custom functions with `mark_dirty`, and the errors PyTorch raises; every
//! gradient is compared with PyTorch's (fixtures/make_autograd_views.py writes the JSON).

use magpie_core::autograd::{self, Function, FunctionCtx};
use magpie_core::ops::indexing::TensorIndex;
use magpie_core::{DType, Device, Result, Tensor};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::OnceLock;

fn fixture() -> &'static Value {
    static F: OnceLock<Value> = OnceLock::new();
    F.get_or_init(|| serde_json::from_str(include_str!("fixtures/autograd_views.json")).expect("fixture parses"))
}

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap() as usize).collect();
    let data: Vec<f64> = v["data"].as_array().unwrap().iter().map(|s| s.as_f64().unwrap()).collect();
    Tensor::from_vec(data, &shape).unwrap()
}

fn assert_close(what: &str, got: &Tensor, want: &Value) {
    let w = tensor(want);
    assert_eq!(got.shape(), w.shape(), "{what}: shape");
    let (g, w) = (got.to_vec::<f64>().unwrap(), w.to_vec::<f64>().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= 1e-10 + 1e-9 * b.abs(), "{what}: element {i} is {a}, PyTorch gives {b}\n got  {g:?}\n want {w:?}");
    }
}

type Inputs = HashMap<String, Tensor>;

/// Runs scenario `name` of the fixture: leaves from its inputs, `f` builds the loss, and the
/// gradients of the loss must match PyTorch's.
fn check(name: &str, f: impl Fn(&Inputs) -> Result<Tensor>) {
    let s = &fixture()["scenarios"][name];
    assert!(s.is_object(), "no scenario {name} in the fixture");
    let inputs: Inputs =
        s["inputs"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), tensor(v).requires_grad_(true).unwrap())).collect();
    let loss = f(&inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
    let want_loss = s["loss"].as_f64().unwrap();
    let l = loss.to_vec::<f64>().unwrap()[0];
    assert!((l - want_loss).abs() <= 1e-9 * (1.0 + want_loss.abs()), "{name}: loss {l}, PyTorch gives {want_loss}");
    let grads = s["grads"].as_object().unwrap();
    let wrt: Vec<Tensor> = grads.keys().map(|k| inputs[k].clone()).collect();
    let got = autograd::grad(&[loss], &wrt, &[], false, false, true).unwrap_or_else(|e| panic!("{name}: {e}"));
    for ((k, want), g) in grads.iter().zip(got) {
        match (g, want.is_null()) {
            (Some(g), false) => assert_close(&format!("{name}: grad of {k}"), &g, want),
            (None, true) => {}
            (g, _) => panic!("{name}: grad of {k} is {g:?}, PyTorch gives {want}"),
        }
    }
}

fn sq(x: &Tensor) -> Result<Tensor> {
    x.mul(x)?.sum()
}
fn ix(v: &[i64]) -> TensorIndex {
    TensorIndex::Tensor(Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap())
}

#[test]
fn select_mul_scalar() {
    check("select_mul_scalar", |t| {
        let x = t["a"].copy()?;
        x.select(0, 1)?.mul_scalar_(2.0)?;
        assert_eq!(x.grad_fn().unwrap().name(), "CopySlices");
        sq(&x)
    });
}

#[test]
fn narrow_add_tensor() {
    check("narrow_add_tensor", |t| {
        let x = t["a"].copy()?;
        x.narrow(0, 1, 2)?.add_(&t["z"])?;
        x.exp()?.mul_scalar(0.5)?.sum()
    });
}

#[test]
fn view_mul_tensor() {
    check("view_mul_tensor", |t| {
        let x = t["a"].copy()?;
        x.view(&[2, 3])?.mul_(&t["z"])?;
        sq(&x)
    });
}

#[test]
fn transpose_div_tensor() {
    check("transpose_div_tensor", |t| {
        let x = t["a"].mul_scalar(1.5)?;
        x.t()?.div_(&t["z"])?;
        sq(&x)
    });
}

#[test]
fn diagonal_exp_() {
    check("diagonal_exp_", |t| {
        let x = t["a"].copy()?;
        x.diagonal(0, 0, 1)?.exp_()?;
        sq(&x)
    });
}

#[test]
fn slice_step_sigmoid_() {
    check("slice_step_sigmoid_", |t| {
        let x = t["a"].copy()?;
        x.slice(0, Some(1), None, 3)?.sigmoid_()?;
        sq(&x)
    });
}

#[test]
fn chain_of_views() {
    check("chain_of_views", |t| {
        let x = t["a"].copy()?;
        let v = x.narrow(0, 1, 2)?;
        let u = v.narrow(1, 1, 2)?;
        u.mul_scalar_(3.0)?;
        sq(&v)?.add(&x.mul_scalar(0.5)?.sum()?)
    });
}

#[test]
fn other_view_after_inplace() {
    check("other_view_after_inplace", |t| {
        let x = t["a"].copy()?;
        let v1 = x.select(0, 0)?;
        let v2 = x.select(1, 1)?;
        v1.mul_scalar_(3.0)?;
        // v2 was made before the write: it regenerates its history from the base
        assert_eq!(v2.grad_fn().unwrap().name(), "AsStridedBackward0");
        sq(&v2)
    });
}

#[test]
fn view_sees_base_inplace() {
    check("view_sees_base_inplace", |t| {
        let x = t["a"].copy()?;
        let v = x.slice(0, Some(1), None, 1)?;
        x.mul_scalar_(2.0)?;
        x.add_scalar_(1.0)?;
        sq(&v)
    });
}

#[test]
fn two_inplace_on_same_view() {
    check("two_inplace_on_same_view", |t| {
        let x = t["a"].copy()?;
        let v = x.select(0, 1)?;
        v.mul_(&t["z"])?;
        v.add_(&t["z"])?;
        sq(&x)
    });
}

#[test]
fn index_put_into_slice() {
    check("index_put_into_slice", |t| {
        let x = t["a"].copy()?;
        let s = x.slice(0, Some(1), Some(3), 1)?;
        s.index_put_(&[ix(&[0, 1]), ix(&[2, 0])], &t["v"])?;
        sq(&x)?.add(&x.select(0, 2)?.select(0, 0)?)
    });
}

#[test]
fn masked_fill_into_slice() {
    check("masked_fill_into_slice", |t| {
        let x = t["a"].copy()?;
        let mask = Tensor::from_vec(vec![true, false, true, false, false, false, true, true], &[2, 4])?;
        x.slice(0, Some(1), None, 1)?.masked_fill_(&mask, 0.5)?;
        sq(&x)
    });
}

#[test]
fn copy_into_row() {
    check("copy_into_row", |t| {
        let x = t["a"].copy()?;
        x.select(0, 2)?.copy_(&t["z"])?;
        sq(&x)
    });
}

#[test]
fn copy_into_constant_base() {
    check("copy_into_constant_base", |t| {
        let x = Tensor::zeros_on(&[3, 4], DType::F64, Device::Cpu)?;
        let v = x.select(0, 0)?;
        assert!(!v.requires_grad());
        x.select(0, 1)?.copy_(&t["z"])?;
        x.select(0, 2)?.slice(0, Some(1), Some(3), 1)?.copy_(&t["z"].slice(0, None, Some(2), 1)?.mul_scalar(3.0)?)?;
        assert!(x.requires_grad() && v.requires_grad(), "the base and its old view pick up the new history");
        sq(&x)?.add(&v.sum()?)
    });
}

#[test]
fn fill_column() {
    check("fill_column", |t| {
        let x = t["a"].copy()?;
        x.select(1, 1)?.fill_(0.25)?;
        x.select(1, 2)?.zero_()?;
        sq(&x)
    });
}

#[test]
fn unsqueeze_expand_read() {
    check("unsqueeze_expand_read", |t| {
        let x = t["a"].copy()?;
        x.unsqueeze(0)?.slice(1, Some(1), None, 1)?.add_(&t["z"].expand(&[1, 2])?)?;
        sq(&x)
    });
}

#[test]
fn mul_by_view_of_other() {
    check("mul_by_view_of_other", |t| {
        let a = &t["a"];
        let x = a.mul(a)?;
        x.slice(0, Some(1), None, 1)?.mul_(&a.slice(0, None, Some(2), 1)?)?;
        sq(&x)
    });
}

/// x *= 2 in place, marked dirty.
struct DoubleInPlace;
impl Function for DoubleInPlace {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let x = &inputs[0];
        x.mul_scalar_(2.0)?;
        ctx.mark_dirty(&[x.clone()]);
        Ok(vec![x.clone()])
    }
    fn backward(&self, _ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g[0].mul_scalar(2.0)?)])
    }
}

/// x = x^2 in place, marked dirty, the output saved.
struct SquareInPlace;
impl Function for SquareInPlace {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let x = &inputs[0];
        x.mul_(x)?;
        ctx.mark_dirty(&[x.clone()]);
        ctx.save_for_backward(&[x.clone()]);
        Ok(vec![x.clone()])
    }
    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let y = &ctx.saved_tensors()[0];
        Ok(vec![Some(g[0].mul(&y.sqrt()?)?.mul_scalar(2.0)?)])
    }
}

#[test]
fn mark_dirty() {
    check("mark_dirty", |t| {
        let x = t["a"].copy()?;
        let y = DoubleInPlace.apply(&[x.clone()])?.remove(0);
        assert!(y.is_same(&x), "the dirty input itself is returned");
        assert_eq!(x.grad_fn().unwrap().name(), "DoubleInPlaceBackward");
        sq(&y)?.add(&x.sum()?)
    });
}

#[test]
fn mark_dirty_view() {
    check("mark_dirty_view", |t| {
        let x = t["a"].copy()?;
        DoubleInPlace.apply(&[x.select(0, 1)?])?;
        assert_eq!(x.grad_fn().unwrap().name(), "CopySlices");
        sq(&x)
    });
}

#[test]
fn mark_dirty_saved_output() {
    check("mark_dirty_saved_output", |t| {
        let x = t["a"].abs()?.add_scalar(0.5)?;
        let y = SquareInPlace.apply(&[x])?.remove(0);
        y.mul_scalar(1.5)?.sum()
    });
}

#[test]
fn double_backward_through_copy_slices() -> Result<()> {
    let f = &fixture()["double_backward"];
    let a = tensor(&f["inputs"]["a"]).requires_grad_(true)?;
    let z = tensor(&f["inputs"]["z"]).requires_grad_(true)?;
    let x = a.mul(&a)?;
    x.slice(0, Some(1), None, 1)?.mul_(&z)?;
    x.slice(0, Some(0), Some(2), 1)?.mul_(&a.slice(0, Some(1), None, 1)?)?;
    let loss = x.mul(&x)?.mul(&x)?.sum()?;
    let g = autograd::grad(&[loss], &[a.clone(), z.clone()], &[], true, true, false)?;
    let (ga, gz) = (g[0].clone().unwrap(), g[1].clone().unwrap());
    assert_close("grad a", &ga, &f["grads"]["a"]);
    assert_close("grad z", &gz, &f["grads"]["z"]);
    let second = ga.mul(&ga)?.sum()?.add(&gz.mul(&ga.slice(0, None, Some(2), 1)?)?.sum()?)?;
    let gg = autograd::grad(&[second], &[a, z], &[], false, false, false)?;
    assert_close("grad grad a", gg[0].as_ref().unwrap(), &f["grad_grads"]["a"]);
    assert_close("grad grad z", gg[1].as_ref().unwrap(), &f["grad_grads"]["z"]);
    Ok(())
}

/// The error must contain PyTorch's message (its first line, up to the tensor's description,
/// which names PyTorch's tensor types).
fn expect_err(name: &str, r: Result<()>) {
    let want = fixture()["errors"][name].as_str().unwrap_or_else(|| panic!("no error {name} in the fixture"));
    match r {
        Ok(()) => panic!("{name}: no error, PyTorch raises: {want}"),
        Err(e) => {
            assert!(!e.is_unsupported(), "{name}: {e}");
            let msg = e.to_string();
            assert!(msg.contains(want.split(": [").next().unwrap()), "{name}: got {msg}\nPyTorch: {want}");
        }
    }
}

fn leaf3() -> Tensor {
    Tensor::from_vec(vec![0.5f64, -1.0, 2.0], &[3]).unwrap().requires_grad_(true).unwrap()
}

#[test]
fn errors_like_pytorch() {
    expect_err("leaf_view", leaf3().select(0, 0).and_then(|v| v.mul_scalar_(2.0)).map(|_| ()));
    expect_err("leaf", leaf3().mul_scalar_(2.0).map(|_| ()));
    expect_err(
        "saved_modified_through_view",
        (|| {
            let x = leaf3().copy()?;
            let y = x.sin()?;
            x.select(0, 0)?.mul_scalar_(2.0)?;
            y.sum()?.backward()
        })(),
    );
    expect_err("expanded", leaf3().copy().and_then(|x| x.expand(&[2, 3])?.add_scalar_(1.0)).map(|_| ()));
    expect_err(
        "no_grad_view",
        (|| {
            let x = leaf3().copy()?;
            let v = {
                let _ng = autograd::no_grad();
                x.slice(0, None, Some(2), 1)?
            };
            v.mul_scalar_(2.0).map(|_| ())
        })(),
    );
    struct NotReturned;
    impl Function for NotReturned {
        fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
            inputs[0].mul_scalar_(2.0)?;
            ctx.mark_dirty(&[inputs[0].clone()]);
            Ok(vec![inputs[0].mul_scalar(1.0)?])
        }
        fn backward(&self, _ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
            Ok(vec![Some(g[0].clone())])
        }
    }
    expect_err("dirty_not_returned", leaf3().copy().and_then(|x| NotReturned.apply(&[x])).map(|_| ()));
    expect_err("dirty_leaf", DoubleInPlace.apply(&[leaf3()]).map(|_| ()));
}

#[test]
fn no_grad_writes_to_views_of_leaves_are_allowed() -> Result<()> {
    // the optimizer pattern: no history, the leaf keeps being a leaf
    let a = leaf3();
    {
        let _ng = autograd::no_grad();
        a.select(0, 1)?.mul_scalar_(2.0)?;
    }
    assert!(a.is_leaf() && a.requires_grad());
    assert_eq!(a.to_vec::<f64>()?, vec![0.5, -2.0, 2.0]);
    a.mul(&a)?.sum()?.backward()?;
    assert_eq!(a.grad().unwrap().to_vec::<f64>()?, vec![1.0, -4.0, 4.0]);
    Ok(())
}

#[test]
fn fill_on_non_leaf_gives_zero_gradient() -> Result<()> {
    // PyTorch: x = a.clone(); x.fill_(1); x.sum().backward() -> a.grad = 0 (not None)
    let a = leaf3();
    let x = a.copy()?;
    x.fill_(1.0)?;
    assert!(x.requires_grad() && !x.is_leaf());
    x.sum()?.backward()?;
    assert_eq!(a.grad().unwrap().to_vec::<f64>()?, vec![0.0; 3]);
    // copy_ from a constant cuts the old history the same way
    let b = leaf3();
    let y = b.copy()?;
    y.copy_(&Tensor::from_vec(vec![1f64, 2., 3.], &[3])?)?;
    y.mul(&y)?.sum()?.backward()?;
    assert_eq!(b.grad().unwrap().to_vec::<f64>()?, vec![0.0; 3]);
    Ok(())
}

#[test]
fn in_place_on_non_grad_tensor_saves_original() -> Result<()> {
    // x.mul_(w) with only w requiring grad: d/dw needs x's value before the write
    let w = leaf3();
    let x = Tensor::from_vec(vec![2f64, 3., 4.], &[3])?;
    x.mul_(&w)?;
    x.sum()?.backward()?;
    assert_eq!(w.grad().unwrap().to_vec::<f64>()?, vec![2., 3., 4.]);
    Ok(())
}

#[test]
fn saved_tensor_hooks_pack_unpack_and_double_backward() -> Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let (packs, unpacks) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (p, u) = (packs.clone(), unpacks.clone());
    let xs = [0.5f64, -1.0, 2.0];
    let x = leaf3();
    let y = {
        // saved tensors kept as host vectors only (as an offloading hook would)
        let _h = autograd::saved_tensors_hooks(
            move |t: &Tensor| {
                p.fetch_add(1, Ordering::Relaxed);
                Ok((t.to_vec::<f64>()?, t.shape().to_vec()))
            },
            move |(v, s): &(Vec<f64>, Vec<usize>)| {
                u.fetch_add(1, Ordering::Relaxed);
                Tensor::from_vec(v.clone(), s)
            },
        );
        x.sin()?.mul(&x)?.sum()? // y = sum x sin x
    };
    assert!(packs.load(Ordering::Relaxed) >= 2);
    let g = autograd::grad(&[y], &[x.clone()], &[], false, true, false)?.remove(0).unwrap();
    assert!(unpacks.load(Ordering::Relaxed) >= 2);
    let want: Vec<f64> = xs.iter().map(|v| v.sin() + v * v.cos()).collect();
    assert_eq!(g.to_vec::<f64>()?.len(), 3);
    for (a, b) in g.to_vec::<f64>()?.iter().zip(&want) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
    // the unpacked tensors keep x's history: the second derivative 2 cos x - x sin x flows
    let gg = autograd::grad(&[g.sum()?], &[x.clone()], &[], false, false, false)?.remove(0).unwrap();
    let want2: Vec<f64> = xs.iter().map(|v| 2.0 * v.cos() - v * v.sin()).collect();
    for (a, b) in gg.to_vec::<f64>()?.iter().zip(&want2) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
    // disabled: nothing is packed
    let before = packs.load(Ordering::Relaxed);
    {
        let _off = autograd::disable_saved_tensors_hooks();
        x.sin()?.sum()?.backward()?;
    }
    assert_eq!(packs.load(Ordering::Relaxed), before);
    Ok(())
}

#[test]
fn as_strided_of_a_non_contiguous_input_gradchecks() -> Result<()> {
    // as_strided reads the storage whatever the input's strides; its gradient goes back the same way
    let x = Tensor::from_vec((0..12).map(|i| 0.1 * i as f64 + 0.3).collect::<Vec<f64>>(), &[3, 4])?.requires_grad_(true)?;
    let f = |t: &[Tensor]| -> Result<Vec<Tensor>> {
        let o = t[0].t()?.as_strided(&[2, 3], &[1, 4], Some(1))?;
        Ok(vec![o.mul(&o)?])
    };
    autograd::gradcheck(f, &[x.clone()], &Default::default())?;
    autograd::gradgradcheck(f, &[x], None, &Default::default())?;
    Ok(())
}
