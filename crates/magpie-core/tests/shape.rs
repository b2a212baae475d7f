//! Tests of the shape, index, indexing and pad ops: values against PyTorch's (written out by hand
//! from torch 2.x sessions) or naive loops, gradients against finite differences.

use magpie_core::autograd;
use magpie_core::ops::index::FillValue;
use magpie_core::ops::indexing::{index_put, TensorIndex as I};
use magpie_core::ops::pad::PadMode;
use magpie_core::ops::shape_ops::{self as so, Sections};
use magpie_core::registry::{call, Value};
use magpie_core::{Result, Scalar, Tensor};

fn ar(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n as i64).collect::<Vec<_>>(), shape).unwrap()
}
fn arf(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|i| (i as f64 * 0.37).sin() + 0.1 * i as f64).collect::<Vec<f64>>(), shape).unwrap()
}
fn long(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}
fn vi(t: &Tensor) -> Vec<i64> {
    t.to_vec::<i64>().unwrap()
}
fn vf(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

/// Checks the gradient of `sum(f(x) * w)` against central differences, and returns the analytic one.
fn gradcheck(x: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> Vec<f64> {
    let xg = x.detach().requires_grad_(true).unwrap();
    let y = f(&xg).unwrap();
    let w = arf(y.shape()).add_scalar(0.5).unwrap();
    let loss = y.mul(&w).unwrap().sum().unwrap();
    let g = autograd::grad(&[loss], &[xg.clone()], &[], false, false, true).unwrap();
    let g = g[0].as_ref().map(vf).unwrap_or_else(|| vec![0.0; x.numel()]);
    let base = vf(x);
    let eps = 1e-6;
    let _ng = autograd::no_grad();
    for i in 0..base.len() {
        let mut p = base.clone();
        p[i] += eps;
        let lp = vf(&f(&Tensor::from_vec(p.clone(), x.shape()).unwrap()).unwrap().mul(&w).unwrap().sum().unwrap())[0];
        p[i] -= 2.0 * eps;
        let lm = vf(&f(&Tensor::from_vec(p, x.shape()).unwrap()).unwrap().mul(&w).unwrap().sum().unwrap())[0];
        let num = (lp - lm) / (2.0 * eps);
        assert!((num - g[i]).abs() < 1e-5 * (1.0 + num.abs()), "grad[{i}]: analytic {} numeric {num}", g[i]);
    }
    g
}

#[test]
fn getitem_basic_and_advanced() {
    let x = ar(&[2, 3, 4]);
    // x[1, :, ::2]
    let y = x.index(&[I::Int(1), I::Slice(None, None, None), I::Slice(None, None, Some(2))]).unwrap();
    assert_eq!(y.shape(), &[3, 2]);
    assert_eq!(vi(&y), vec![12, 14, 16, 18, 20, 22]);
    // x[None, ..., -1]
    let y = x.index(&[I::None, I::Ellipsis, I::Int(-1)]).unwrap();
    assert_eq!(y.shape(), &[1, 2, 3]);
    assert_eq!(vi(&y), vec![3, 7, 11, 15, 19, 23]);
    // adjacent advanced indices keep their place: x[:, [0, 2], [1, 3]] -> [2, 2]
    let y = x.index(&[I::Slice(None, None, None), I::Tensor(long(&[0, 2], &[2])), I::Tensor(long(&[1, 3], &[2]))]).unwrap();
    assert_eq!(y.shape(), &[2, 2]);
    assert_eq!(vi(&y), vec![1, 11, 13, 23]);
    // separated advanced indices go first: x[[0, 1], :, [1, 2]] -> [2, 3]
    let y = x.index(&[I::Tensor(long(&[0, 1], &[2])), I::Slice(None, None, None), I::Tensor(long(&[1, 2], &[2]))]).unwrap();
    assert_eq!(y.shape(), &[2, 3]);
    assert_eq!(vi(&y), vec![1, 5, 9, 14, 18, 22]);
    // broadcasting index tensors: x[[[0], [1]], 0, [0, 3]] -> [2, 2]
    let y = x.index(&[I::Tensor(long(&[0, 1], &[2, 1])), I::Int(0), I::Tensor(long(&[0, 3], &[2]))]).unwrap();
    assert_eq!(vi(&y), vec![0, 3, 12, 15]);
    // bool mask over two dims
    let m = Tensor::from_vec(vec![true, false, true, false, false, true], &[2, 3]).unwrap();
    let y = x.index(&[I::Tensor(m)]).unwrap();
    assert_eq!(y.shape(), &[3, 4]);
    assert_eq!(vi(&y)[..4], [0, 1, 2, 3]);
    assert_eq!(vi(&y)[8..], [20, 21, 22, 23]);
    // x[True] adds a dim, x[False] an empty one
    assert_eq!(x.index(&[I::Bool(true)]).unwrap().shape(), &[1, 2, 3, 4]);
    assert_eq!(x.index(&[I::Bool(false)]).unwrap().shape(), &[0, 2, 3, 4]);
}

#[test]
fn getitem_errors_do_not_panic() {
    let x = ar(&[3]);
    let e = x.index(&[I::Int(5)]).unwrap_err().to_string();
    assert!(e.contains("index 5 is out of bounds for dimension 0 with size 3"), "{e}");
    let e = x.index(&[I::Tensor(long(&[0, -4], &[2]))]).unwrap_err().to_string();
    assert!(e.contains("index -4 is out of bounds for dimension 0 with size 3"), "{e}");
    assert!(x.index(&[I::Int(0), I::Int(0)]).is_err());
    assert!(x.index(&[I::Slice(None, None, Some(0))]).is_err());
    assert!(x.index(&[I::Tensor(Tensor::from_vec(vec![1.0f32], &[1]).unwrap())]).is_err());
    assert!(x.index(&[I::Tensor(Tensor::from_vec(vec![true, false], &[2]).unwrap())]).is_err());
    assert!(x.gather(0, &long(&[3], &[1])).is_err());
    assert!(x.index_select(0, &long(&[7], &[1])).is_err());
    // negative positions are out of range for index_select (PyTorch's IndexError), unlike x[-1]
    let e = x.index_select(0, &long(&[-1], &[1])).unwrap_err().to_string();
    assert!(e.contains("index out of range in self"), "{e}");
    assert!(x.take(&long(&[-9], &[1])).is_err());
}

#[test]
fn index_put_accumulates_duplicates() {
    let x = Tensor::from_vec(vec![0f32; 5], &[5]).unwrap();
    let v = Tensor::from_vec(vec![1f32, 2., 3.], &[3]).unwrap();
    let y = index_put(&x, &[Some(long(&[1, 1, 4], &[3]))], &v, true).unwrap();
    assert_eq!(vf(&y), vec![0., 3., 0., 0., 3.]);
    // in place through basic + advanced indexing
    let z = Tensor::from_vec(vec![0i64; 6], &[2, 3]).unwrap();
    z.index_put_(&[I::Int(1), I::Tensor(long(&[0, 2], &[2]))], &long(&[7], &[])).unwrap();
    assert_eq!(vi(&z), vec![0, 0, 0, 7, 0, 7]);
    z.index_put_(&[I::Slice(None, None, None), I::Int(1)], &long(&[5, 6], &[2])).unwrap();
    assert_eq!(vi(&z), vec![0, 5, 0, 7, 6, 7]);
}

#[test]
fn index_put_in_place_under_autograd() {
    let a = arf(&[3, 2]).requires_grad_(true).unwrap();
    let v = Tensor::from_vec(vec![1.5f64, -2.0], &[2]).unwrap().requires_grad_(true).unwrap();
    // (a copy, not `a * 2`: binary ops re-read their output in backward, which an in-place write invalidates)
    let b = a.copy().unwrap();
    b.index_put_(&[I::Int(0)], &v).unwrap();
    b.index_put_acc_(&[I::Tensor(long(&[2, 2], &[2])), I::Int(1)], &Tensor::scalar(1.0f64), true).unwrap();
    assert_eq!(vf(&b)[..2], [1.5, -2.0]);
    assert!((vf(&b)[5] - (vf(&a)[5] + 2.0)).abs() < 1e-12);
    b.mul(&b).unwrap().sum().unwrap().backward().unwrap();
    let ga = vf(&a.grad().unwrap());
    let bv = vf(&b);
    assert_eq!(ga[..2], [0.0, 0.0]);
    for i in 2..6 {
        assert!((ga[i] - 2.0 * bv[i]).abs() < 1e-12);
    }
    assert_eq!(vf(&v.grad().unwrap()), vec![3.0, -4.0]);
    // a leaf that requires grad cannot be written in place
    assert!(a.index_put_(&[I::Int(0)], &v).is_err());
}

#[test]
fn gather_scatter_values_and_grads() {
    let x = arf(&[3, 4]);
    let idx = long(&[0, 2, 1, 1, 2, 0, 0, 1], &[2, 4]);
    let y = x.gather(0, &idx).unwrap();
    let xv = vf(&x);
    let iv = vi(&idx);
    for k in 0..8 {
        assert_eq!(vf(&y)[k], xv[iv[k] as usize * 4 + k % 4]);
    }
    gradcheck(&x, |t| t.gather(0, &idx));
    gradcheck(&x, |t| t.gather(1, &long(&[3, 3, 0, 1, 2, 2], &[3, 2])));
    let src = arf(&[2, 4]).mul_scalar(2.0).unwrap();
    let s = x.scatter_add(0, &idx, &src).unwrap();
    let mut naive = xv.clone();
    for k in 0..8 {
        naive[iv[k] as usize * 4 + k % 4] += vf(&src)[k];
    }
    assert_eq!(vf(&s), naive);
    gradcheck(&src, |t| x.scatter_add(0, &idx, t));
    gradcheck(&x, |t| t.scatter(0, &long(&[0, 2, 1, 1], &[1, 4]), &src));
    // second order: the gradient of gather (a scatter_add) is itself differentiable
    let xg = x.detach().requires_grad_(true).unwrap();
    let y = xg.gather(0, &idx).unwrap().pow_scalar(2.0).unwrap().sum().unwrap();
    let g = autograd::grad(&[y], &[xg.clone()], &[], true, true, false).unwrap()[0].clone().unwrap();
    let gg = autograd::grad(&[g.sum().unwrap()], &[xg], &[], false, false, false).unwrap()[0].clone().unwrap();
    // d/dx sum(2 * count * x) = 2 * count
    let mut count = vec![0.0; 12];
    for k in 0..8 {
        count[iv[k] as usize * 4 + k % 4] += 2.0;
    }
    assert_eq!(vf(&gg), count);
}

#[test]
fn scatter_reduce_matches_naive_and_grads() {
    let x = arf(&[4, 3]);
    let idx = long(&[0, 1, 3, 0, 1, 3, 2, 2, 2], &[3, 3]);
    let src = arf(&[3, 3]).mul_scalar(-1.5).unwrap();
    for (red, f) in [("sum", 0), ("prod", 1), ("amax", 2), ("amin", 3), ("mean", 4)] {
        for include_self in [true, false] {
            let y = x.scatter_reduce(0, &idx, &src, red, include_self).unwrap();
            let (xv, sv, iv) = (vf(&x), vf(&src), vi(&idx));
            let mut acc: Vec<Vec<f64>> = (0..12).map(|i| if include_self { vec![xv[i]] } else { vec![] }).collect();
            for k in 0..9 {
                acc[iv[k] as usize * 3 + k % 3].push(sv[k]);
            }
            let want: Vec<f64> = acc
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    if a.is_empty() {
                        return xv[i];
                    }
                    match f {
                        0 => a.iter().sum(),
                        1 => a.iter().product(),
                        2 => a.iter().cloned().fold(f64::MIN, f64::max),
                        3 => a.iter().cloned().fold(f64::MAX, f64::min),
                        _ => a.iter().sum::<f64>() / a.len() as f64,
                    }
                })
                .collect();
            let got = vf(&y);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-12, "{red} include_self={include_self}: {got:?} vs {want:?}");
            }
            gradcheck(&x, |t| t.scatter_reduce(0, &idx, &src, red, include_self));
            gradcheck(&src, |t| x.scatter_reduce(0, &idx, t, red, include_self));
        }
    }
}

#[test]
fn index_dim_ops() {
    let x = arf(&[4, 3]);
    let idx = long(&[3, 0, 3], &[3]);
    let y = x.index_select(0, &idx).unwrap();
    assert_eq!(vf(&y)[..3], vf(&x)[9..12]);
    gradcheck(&x, |t| t.index_select(0, &idx));
    let src = arf(&[3, 3]);
    let a = x.index_add(0, &idx, &src, Scalar::Float(2.0)).unwrap();
    let (xv, sv) = (vf(&x), vf(&src));
    for c in 0..3 {
        assert!((vf(&a)[9 + c] - (xv[9 + c] + 2.0 * (sv[c] + sv[6 + c]))).abs() < 1e-12);
        assert!((vf(&a)[c] - (xv[c] + 2.0 * sv[3 + c])).abs() < 1e-12);
    }
    gradcheck(&src, |t| x.index_add(0, &idx, t, Scalar::Float(2.0)));
    let f = x.index_fill(1, &long(&[1], &[1]), &FillValue::Scalar(Scalar::Float(-1.0))).unwrap();
    assert_eq!(vf(&f)[1], -1.0);
    assert_eq!(vf(&f)[0], xv[0]);
    let e = x.index_add(0, &idx, &arf(&[2]), Scalar::Int(1)).unwrap_err().to_string();
    assert!(e.contains("source tensor shape must match self tensor shape"), "{e}");
    let c = x.index_copy(0, &long(&[2], &[1]), &arf(&[1, 3])).unwrap();
    assert_eq!(vf(&c)[6..9], vf(&arf(&[3]))[..]);
}

#[test]
fn masked_and_nonzero() {
    let x = ar(&[2, 3]);
    let m = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
    assert_eq!(vi(&x.masked_select(&m).unwrap()), vec![0, 2, 3, 5]);
    let s = x.masked_scatter(&m, &long(&[10, 20, 30, 40, 50], &[5])).unwrap();
    assert_eq!(vi(&s), vec![10, 1, 20, 30, 4, 40]);
    let nz = Tensor::from_vec(vec![0f32, 1., 0., 2.], &[2, 2]).unwrap().nonzero().unwrap();
    assert_eq!(nz.shape(), &[2, 2]);
    assert_eq!(vi(&nz), vec![0, 1, 1, 1]);
    let st = Tensor::from_vec(vec![0f32, 1., 0., 2.], &[4]).unwrap().nonzero_static(3, -1).unwrap();
    assert_eq!(vi(&st), vec![1, 3, -1]);
    let xf = arf(&[2, 3]);
    gradcheck(&xf, |t| t.masked_select(&m));
    assert_eq!(vi(&x.take(&long(&[5, 0, -1], &[3])).unwrap()), vec![5, 0, 5]);
    let p = x.put(&long(&[0, 0], &[2]), &long(&[1, 2], &[2]), true).unwrap();
    assert_eq!(vi(&p)[0], 3);
    let t = x.take_along_dim(&long(&[2, 0], &[1, 2]), Some(1)).unwrap();
    assert_eq!(vi(&t), vec![2, 0, 5, 3]);
}

#[test]
fn cat_stack_split() {
    let a = ar(&[2, 2]);
    let b = ar(&[2, 1]).add_scalar(10i64).unwrap();
    let c = so::cat(&[a.clone(), b.clone()], 1).unwrap();
    assert_eq!(vi(&c), vec![0, 1, 10, 2, 3, 11]);
    // legacy: 1-d empty tensors are skipped; promotion int64 + float32 -> float32
    let e = Tensor::from_vec(Vec::<f32>::new(), &[0]).unwrap();
    let c2 = so::cat(&[a.clone(), e], 0).unwrap();
    assert_eq!(c2.dtype(), magpie_core::DType::F32);
    assert_eq!(c2.shape(), &[2, 2]);
    let err = so::cat(&[a.clone(), ar(&[3, 3])], 0).unwrap_err().to_string();
    assert!(err.contains("Sizes of tensors must match except in dimension 0"), "{err}");
    assert!(so::cat(&[], 0).is_err());
    let s = so::stack(&[a.clone(), a.clone()], -1).unwrap();
    assert_eq!(s.shape(), &[2, 2, 2]);
    assert_eq!(vi(&s), vec![0, 0, 1, 1, 2, 2, 3, 3]);
    let x = arf(&[5, 2]);
    let parts = x.split(2, 0).unwrap();
    assert_eq!(parts.iter().map(|p| p.shape()[0]).collect::<Vec<_>>(), vec![2, 2, 1]);
    let back = so::cat(&parts, 0).unwrap();
    assert_eq!(vf(&back), vf(&x));
    gradcheck(&x, |t| {
        let p = t.split_with_sizes(&[1, 3, 1], 0)?;
        so::cat(&[p[2].clone(), p[0].clone(), p[1].mul_scalar(3.0)?], 0)
    });
    let ts = x.tensor_split(&Sections::Count(3), 0).unwrap();
    assert_eq!(ts.iter().map(|p| p.shape()[0]).collect::<Vec<_>>(), vec![2, 2, 1]);
    let ts = x.tensor_split(&Sections::Indices(vec![1, 4, 9]), 0).unwrap();
    assert_eq!(ts.iter().map(|p| p.shape()[0]).collect::<Vec<_>>(), vec![1, 3, 1, 0]);
    assert_eq!(x.chunk(3, 0).unwrap().len(), 3);
    assert_eq!(x.unbind(1).unwrap()[1].shape(), &[5]);
    assert!(x.hsplit(&Sections::Count(3)).is_err());
    let h = so::hstack(&[ar(&[2]), ar(&[3])]).unwrap();
    assert_eq!(vi(&h), vec![0, 1, 0, 1, 2]);
    assert_eq!(so::dstack(&[ar(&[2]), ar(&[2])]).unwrap().shape(), &[1, 2, 2]);
    assert_eq!(so::column_stack(&[ar(&[2]), ar(&[2, 2])]).unwrap().shape(), &[2, 3]);
}

#[test]
fn reorder_ops() {
    let x = ar(&[2, 3]);
    assert_eq!(vi(&x.flip(&[1]).unwrap()), vec![2, 1, 0, 5, 4, 3]);
    assert_eq!(vi(&x.flip(&[0, 1]).unwrap()), vec![5, 4, 3, 2, 1, 0]);
    // flip of a transposed (strided) view
    assert_eq!(vi(&x.t().unwrap().flip(&[0]).unwrap()), vec![2, 5, 1, 4, 0, 3]);
    assert_eq!(vi(&x.roll(&[1], &[1]).unwrap()), vec![2, 0, 1, 5, 3, 4]);
    assert_eq!(vi(&x.roll(&[-1], &[]).unwrap()), vec![1, 2, 3, 4, 5, 0]);
    // torch.rot90(arange(6).view(2,3)) = [[2,5],[1,4],[0,3]]
    assert_eq!(vi(&x.rot90(1, &[0, 1]).unwrap()), vec![2, 5, 1, 4, 0, 3]);
    assert_eq!(vi(&x.rot90(-1, &[0, 1]).unwrap()), vec![3, 0, 4, 1, 5, 2]);
    let r = ar(&[2]).repeat(&[2, 2]).unwrap();
    assert_eq!(r.shape(), &[2, 4]);
    assert_eq!(vi(&r), vec![0, 1, 0, 1, 0, 1, 0, 1]);
    assert_eq!(vi(&ar(&[2]).repeat_interleave(2, None).unwrap()), vec![0, 0, 1, 1]);
    assert_eq!(vi(&ar(&[3]).repeat_interleave_tensor(&long(&[1, 0, 2], &[3]), Some(0)).unwrap()), vec![0, 2, 2]);
    assert_eq!(ar(&[2, 2]).tile(&[2]).unwrap().shape(), &[2, 4]);
    let m = ar(&[3, 3]);
    assert_eq!(vi(&m.tril(0).unwrap()), vec![0, 0, 0, 3, 4, 0, 6, 7, 8]);
    assert_eq!(vi(&m.triu(1).unwrap()), vec![0, 1, 2, 0, 0, 5, 0, 0, 0]);
    assert_eq!(vi(&ar(&[2]).diag(1).unwrap()), vec![0, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(vi(&m.diag(-1).unwrap()), vec![3, 7]);
    assert_eq!(ar(&[2, 3]).diag_embed(1, -2, -1).unwrap().shape(), &[2, 4, 4]);
    let xf = arf(&[3, 4]);
    gradcheck(&xf, |t| t.flip(&[0, 1]));
    gradcheck(&xf, |t| t.roll(&[2, -1], &[1, 0]));
    gradcheck(&xf, |t| t.rot90(3, &[1, 0]));
    gradcheck(&xf, |t| t.repeat(&[2, 1, 2]));
    gradcheck(&xf, |t| t.triu(-1));
    gradcheck(&xf, |t| t.diag_embed(-1, 0, 2));
    gradcheck(&xf, |t| t.select_scatter(&arf(&[4]), 0, 1));
    gradcheck(&arf(&[4]), |t| xf.slice_scatter(&t.reshape(&[1, 4])?, 0, Some(1), Some(3), 2));
    gradcheck(&arf(&[3]), |t| xf.diagonal_scatter(t, 1, 0, 1));
    let c = magpie_core::ops::shape_ops::cartesian_prod(&[ar(&[2]), ar(&[3])]).unwrap();
    assert_eq!(c.shape(), &[6, 2]);
    assert_eq!(vi(&c), vec![0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2]);
    assert_eq!(vi(&ar(&[4]).combinations(2, false).unwrap()), vec![0, 1, 0, 2, 0, 3, 1, 2, 1, 3, 2, 3]);
    assert_eq!(ar(&[3]).combinations(2, true).unwrap().shape(), &[6, 2]);
    let g = so::meshgrid(&[ar(&[2]), ar(&[3])], "xy").unwrap();
    assert_eq!(g[0].shape(), &[3, 2]);
    assert_eq!(vi(&g[0]), vec![0, 1, 0, 1, 0, 1]);
    let bd = so::block_diag(&[ar(&[1, 2]), ar(&[2, 1])]).unwrap();
    assert_eq!(vi(&bd), vec![0, 1, 0, 0, 0, 0, 0, 0, 1]);
}

#[test]
fn pad_modes() {
    let x = Tensor::from_vec(vec![1f32, 2., 3.], &[1, 3]).unwrap();
    let p = |m| vf(&x.pad(&[2, 1], m, None).unwrap());
    assert_eq!(p(PadMode::Reflect), vec![3., 2., 1., 2., 3., 2.]);
    assert_eq!(p(PadMode::Replicate), vec![1., 1., 1., 2., 3., 3.]);
    assert_eq!(p(PadMode::Circular), vec![2., 3., 1., 2., 3., 1.]);
    assert_eq!(vf(&x.pad(&[1, -1], PadMode::Constant, Some(9.0)).unwrap()), vec![9., 1., 2.]);
    assert_eq!(vf(&x.pad(&[-1, 2], PadMode::Replicate, None).unwrap()), vec![2., 3., 3., 3.]);
    assert!(x.pad(&[3, 0], PadMode::Reflect, None).is_err());
    assert!(x.constant_pad_nd(&[1], Scalar::Int(0)).is_err());
    let xf = arf(&[2, 3, 4]);
    gradcheck(&xf, |t| t.pad(&[1, 2, 2, -1], PadMode::Reflect, None));
    gradcheck(&xf, |t| t.pad(&[2, 1], PadMode::Circular, None));
    gradcheck(&xf, |t| t.constant_pad_nd(&[1, -2, 0, 1], Scalar::Float(0.5)));
    // pixel shuffle then unshuffle is the identity
    let y = arf(&[1, 8, 2, 3]);
    let z = y.pixel_shuffle(2).unwrap();
    assert_eq!(z.shape(), &[1, 2, 4, 6]);
    assert_eq!(vf(&z.pixel_unshuffle(2).unwrap()), vf(&y));
    // channel_shuffle([0..6], 2) on channels = [0, 3, 1, 4, 2, 5]
    let cs = ar(&[1, 6, 1]).channel_shuffle(2).unwrap();
    assert_eq!(vi(&cs), vec![0, 3, 1, 4, 2, 5]);
}

#[test]
fn registry_calls() {
    let x = Value::Tensor(ar(&[5, 5, 5]));
    let out = call("__getitem__", vec![x.clone(), Value::List(vec![Value::Int(1), Value::Int(2)])], vec![]).unwrap();
    assert_eq!(out.into_tensor().unwrap().shape(), &[2, 5, 5]);
    let out = call("__getitem__", vec![x.clone(), Value::List(vec![Value::Slice(Some(0), Some(3), None), Value::Int(1)])], vec![]).unwrap();
    assert_eq!(out.into_tensor().unwrap().shape(), &[3, 5]);
    let out = call("broadcast_shapes", vec![Value::List(vec![Value::Int(5), Value::Int(1)]), Value::List(vec![Value::Int(5)])], vec![]).unwrap();
    assert!(matches!(out, Value::List(ref l) if l.len() == 2));
    let fl = call("fill", vec![Value::Tensor(arf(&[3])), Value::Tensor(Tensor::scalar(2.5f64))], vec![]).unwrap();
    assert_eq!(vf(&fl.into_tensor().unwrap()), vec![2.5; 3]);
    assert!(call("hsplit", vec![x, Value::Str("abc".into())], vec![]).is_err());
}
