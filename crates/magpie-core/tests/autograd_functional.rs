//! Higher-order autograd: `autograd::functional` (jacobian, hessian, vjp, jvp, hvp, vhp) and the
//! gradient-penalty (WGAN-GP) pattern, checked against exact values and finite differences.

use magpie_core::autograd::{self, functional};
use magpie_core::{Result, Tensor};

fn t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}
fn vals(x: &Tensor) -> Vec<f64> {
    x.to_vec::<f64>().unwrap()
}
fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-9 + 1e-9 * y.abs(), "{a:?} vs {b:?}");
    }
}

/// `A x` for an `[n, n]` matrix without matmul: broadcast multiply, sum over columns.
fn matvec(a: &Tensor, x: &Tensor) -> Result<Tensor> {
    let n = x.numel() as i64;
    a.mul(&x.reshape(&[1, n])?)?.sum_dims(Some(&[1]), false, None)
}

/// f(x) = 0.5 x^T A x + b^T x
fn quadratic(a: Tensor, b: Tensor) -> impl Fn(&[Tensor]) -> Result<Vec<Tensor>> {
    move |x: &[Tensor]| {
        let x = &x[0];
        Ok(vec![x.mul(&matvec(&a, x)?)?.sum()?.mul_scalar(0.5)?.add(&b.mul(x)?.sum()?)?])
    }
}

const A: [f64; 9] = [4., 1., -2., 1., 3., 0.5, -2., 0.5, 5.];

#[test]
fn hvp_of_quadratic_is_a_v() -> Result<()> {
    let a = t(&A, &[3, 3]); // symmetric: the Hessian is A
    let b = t(&[1., -1., 2.], &[3]);
    let x = t(&[0.3, -0.7, 1.1], &[3]);
    let v = t(&[1., 2., -1.], &[3]);
    let av: Vec<f64> = (0..3).map(|i| (0..3).map(|j| A[i * 3 + j] * vals(&v)[j]).sum()).collect();
    let f = quadratic(a, b);
    let (y, hv) = functional::hvp(&f, &[x.clone()], &[v.clone()], false)?;
    close(&vals(&hv[0]), &av);
    assert!(!hv[0].requires_grad());
    let xv = vals(&x);
    let ax: Vec<f64> = (0..3).map(|i| (0..3).map(|j| A[i * 3 + j] * xv[j]).sum()).collect();
    let exact = 0.5 * (0..3).map(|i| xv[i] * ax[i]).sum::<f64>() + (xv[0] - xv[1] + 2. * xv[2]);
    close(&vals(&y), &[exact]);
    let (_, vh) = functional::vhp(&f, &[x.clone()], &[v], false)?;
    close(&vals(&vh[0]), &av);
    let h = functional::hessian(&f, &[x], false)?;
    assert_eq!(h[0][0].shape(), &[3, 3]);
    close(&vals(&h[0][0]), &A);
    Ok(())
}

#[test]
fn hvp_of_non_symmetric_quadratic() -> Result<()> {
    // H = (A + A^T) / 2 for a non-symmetric A
    let m = [1., 2., 0., -1., 3., 4., 2., 0., 1.];
    let f = quadratic(t(&m, &[3, 3]), t(&[0., 0., 0.], &[3]));
    let v = [0.5, -1., 2.];
    let (_, hv) = functional::hvp(&f, &[t(&[1., 2., 3.], &[3])], &[t(&v, &[3])], false)?;
    let want: Vec<f64> = (0..3).map(|i| (0..3).map(|j| 0.5 * (m[i * 3 + j] + m[j * 3 + i]) * v[j]).sum()).collect();
    close(&vals(&hv[0]), &want);
    Ok(())
}

fn two_outputs(i: &[Tensor]) -> Result<Vec<Tensor>> {
    // (x * y, exp(x).sum())
    Ok(vec![i[0].mul(&i[1])?, i[0].exp()?.sum()?])
}

#[test]
fn jacobian_vjp_jvp_agree() -> Result<()> {
    let x = t(&[0.1, 0.2], &[2]);
    let y = t(&[3., -4.], &[2]);
    let j = functional::jacobian(two_outputs, &[x.clone(), y.clone()], false)?;
    assert_eq!(j[0][0].shape(), &[2, 2]);
    close(&vals(&j[0][0]), &[3., 0., 0., -4.]); // diag(y)
    close(&vals(&j[0][1]), &[0.1, 0., 0., 0.2]); // diag(x)
    assert_eq!(j[1][0].shape(), &[2]);
    close(&vals(&j[1][0]), &[0.1f64.exp(), 0.2f64.exp()]);
    close(&vals(&j[1][1]), &[0., 0.]);
    // vjp: u^T J
    let u = [t(&[1., 2.], &[2]), Tensor::scalar(3f64)];
    let (outs, g) = functional::vjp(two_outputs, &[x.clone(), y.clone()], &u, false)?;
    close(&vals(&outs[0]), &[0.3, -0.8]);
    close(&vals(&g[0]), &[3. + 3. * 0.1f64.exp(), -8. + 3. * 0.2f64.exp()]);
    close(&vals(&g[1]), &[0.1, 0.4]);
    // jvp: J v, by the double-vjp trick
    let v = [t(&[1., -1.], &[2]), t(&[0.5, 2.], &[2])];
    let (_, jv) = functional::jvp(two_outputs, &[x, y], &v, false)?;
    close(&vals(&jv[0]), &[3. + 0.05, 4. + 0.4]);
    close(&vals(&jv[1]), &[0.1f64.exp() - 0.2f64.exp()]);
    Ok(())
}

#[test]
fn functional_create_graph_is_differentiable() -> Result<()> {
    // d/dx of (H v) for f = sum x^4: H v = 12 x^2 v, its x-gradient (summed) is 24 x v
    let x = t(&[1., 2.], &[2]).requires_grad_(true)?;
    let v = t(&[1., 0.5], &[2]);
    let f = |i: &[Tensor]| Ok(vec![i[0].mul(&i[0])?.mul(&i[0])?.mul(&i[0])?.sum()?]);
    let (_, hv) = functional::hvp(f, &[x.clone()], &[v], true)?;
    close(&vals(&hv[0]), &[12., 24.]);
    hv[0].sum()?.backward()?;
    close(&vals(&x.grad().unwrap()), &[24., 24.]);
    Ok(())
}

/// A small critic without matmul: D(x)_b = sum_j w2_j * softplus(w1_j * x_bj).
fn critic(x: &Tensor, w1: &Tensor, w2: &Tensor) -> Result<Tensor> {
    let h = x.mul(w1)?.exp()?.add_scalar(1.0)?.log()?;
    h.mul(w2)?.sum_dims(Some(&[1]), false, None)
}

/// WGAN-GP: mean over the batch of (||grad_x D(x)|| - 1)^2, differentiable in the weights.
fn gradient_penalty(x: &Tensor, w1: &Tensor, w2: &Tensor) -> Result<Tensor> {
    let xi = x.detach().requires_grad_(true)?;
    let d = critic(&xi, w1, w2)?;
    let g = autograd::grad(&[d.sum()?], &[xi], &[], true, true, false)?.remove(0).unwrap();
    let norm = g.mul(&g)?.sum_dims(Some(&[1]), false, None)?.sqrt()?;
    let dev = norm.sub_scalar(1.0)?;
    dev.mul(&dev)?.mean()
}

#[test]
fn wgan_gp_gradient_penalty() -> Result<()> {
    let x = t(&[0.5, -1.0, 0.2, 1.5, 0.3, -0.4], &[2, 3]);
    let w1 = t(&[0.7, -1.2, 0.4], &[3]).requires_grad_(true)?;
    let w2 = t(&[1.5, 0.3, -0.8], &[3]).requires_grad_(true)?;
    let gp = gradient_penalty(&x, &w1, &w2)?;
    gp.backward()?;
    let (g1, g2) = (w1.grad().unwrap(), w2.grad().unwrap());
    assert!(vals(&g1).iter().any(|v| v.abs() > 1e-3));
    // the same gradients against central finite differences
    let rep = autograd::gradcheck(|w| Ok(vec![gradient_penalty(&x, &w[0], &w[1])?]), &[w1.detach().requires_grad_(true)?, w2.detach().requires_grad_(true)?], &Default::default())?;
    assert!(rep.entries == 6, "{rep}");
    // and .grad matches autograd.grad of the same graph
    let gs = autograd::grad(&[gradient_penalty(&x, &w1, &w2)?], &[w1.clone(), w2.clone()], &[], false, false, false)?;
    close(&vals(gs[0].as_ref().unwrap()), &vals(&g1));
    close(&vals(gs[1].as_ref().unwrap()), &vals(&g2));
    Ok(())
}

#[test]
fn gradgradcheck_of_composites() -> Result<()> {
    let x = t(&[0.3, 1.2, 2.0], &[3]).requires_grad_(true)?;
    let y = t(&[-0.5, 0.25, 1.5], &[3]).requires_grad_(true)?;
    let f = |i: &[Tensor]| Ok(vec![i[0].mul(&i[1])?.exp()?.div(&i[0].add_scalar(1.0)?)?.log()?]);
    autograd::gradcheck(f, &[x.clone(), y.clone()], &Default::default())?;
    autograd::gradgradcheck(f, &[x, y], None, &Default::default())?;
    Ok(())
}
