//! Finite differences: `torch.diff` (n-th forward difference) and `torch.gradient` (central
//! differences with first- or second-order edges), composed from slices and arithmetic.

use crate::shape::wrap_dim as norm_dim;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `x[1:] - x[:-1]` along `dim` (logical xor for bool tensors, as PyTorch does).
fn step(x: &Tensor, dim: usize) -> Result<Tensor> {
    let n = x.shape()[dim] as i64;
    let hi = x.narrow(dim as i64, 1, n - 1)?;
    let lo = x.narrow(dim as i64, 0, n - 1)?;
    if x.dtype().is_bool() {
        hi.ne(&lo)
    } else {
        hi.sub(&lo)
    }
}

/// A prepend/append tensor brought to `x`'s rank: a 0-d tensor becomes a slice of length 1.
fn edge(op: &str, x: &Tensor, t: &Tensor, dim: usize) -> Result<Tensor> {
    if t.ndim() == 0 {
        let mut shape = x.shape().to_vec();
        shape[dim] = 1;
        return t.broadcast_to(&shape);
    }
    if t.ndim() != x.ndim() {
        return Err(Error::shape(op, "diff expects prepend or append to be the same dimension as input"));
    }
    Ok(t.clone())
}

/// `torch.diff(input, n=1, dim=-1, prepend=None, append=None)`: the n-th forward difference.
///
/// ```
/// use magpie_core::{ops::difference::diff, Tensor};
/// let x = Tensor::from_vec(vec![1f32, 4., 9., 16.], &[4])?;
/// assert_eq!(diff(&x, 2, -1, None, None)?.to_vec::<f32>()?, vec![2., 2.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn diff(input: &Tensor, n: i64, dim: i64, prepend: Option<&Tensor>, append: Option<&Tensor>) -> Result<Tensor> {
    const OP: &str = "diff";
    if input.ndim() == 0 {
        return Err(Error::shape(OP, "diff expects input to be at least one-dimensional"));
    }
    if n < 0 {
        return Err(Error::value(OP, format!("order must be non-negative but got {n}")));
    }
    let d = norm_dim(OP, dim, input.ndim())?;
    let mut parts = Vec::new();
    if let Some(p) = prepend {
        parts.push(edge(OP, input, p, d)?);
    }
    parts.push(input.clone());
    if let Some(a) = append {
        parts.push(edge(OP, input, a, d)?);
    }
    let mut x = if parts.len() == 1 { input.clone() } else { crate::ops::shape_ops::cat(&parts, d as i64)? };
    let mut k = n.min(x.shape()[d] as i64);
    while k > 0 && x.shape()[d] > 0 {
        x = step(&x, d)?;
        k -= 1;
    }
    Ok(x)
}

/// The spacing of `torch.gradient` along one dim: a uniform step or sample coordinates.
#[derive(Clone, Debug)]
pub enum Spacing {
    /// Samples `h` apart.
    Step(f64),
    /// The coordinate of each sample (a 1-d tensor as long as the dim).
    Coords(Tensor),
}

/// `torch.gradient(input, *, spacing=1, dim=None, edge_order=1)` along `dims` (all dims when
/// `None`), one spacing per dim: central differences inside, one-sided ones at the edges.
///
/// ```
/// use magpie_core::{ops::difference::{gradient, Spacing}, Tensor};
/// let x = Tensor::from_vec(vec![1f32, 4., 9., 16.], &[4])?;
/// let g = gradient(&x, &[Spacing::Step(1.0)], None, 1)?;
/// assert_eq!(g[0].to_vec::<f32>()?, vec![3., 4., 6., 7.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn gradient(input: &Tensor, spacing: &[Spacing], dims: Option<&[i64]>, edge_order: i64) -> Result<Vec<Tensor>> {
    const OP: &str = "gradient";
    let nd = input.ndim();
    let dims: Vec<usize> = match dims {
        Some(ds) => {
            let mut v = Vec::with_capacity(ds.len());
            for &d in ds {
                let d = norm_dim(OP, d, nd)?;
                if v.contains(&d) {
                    return Err(Error::value(OP, format!("dim {d} appears multiple times in the list of dims")));
                }
                v.push(d);
            }
            v
        }
        None => (0..nd).collect(),
    };
    if edge_order != 1 && edge_order != 2 {
        return Err(Error::value(OP, "torch.gradient only supports edge_order=1 and edge_order=2."));
    }
    let spacing: Vec<Spacing> = match spacing.len() {
        0 => vec![Spacing::Step(1.0); dims.len()],
        1 if matches!(spacing[0], Spacing::Step(_)) => vec![spacing[0].clone(); dims.len()],
        k if k == dims.len() => spacing.to_vec(),
        k => {
            return Err(Error::value(
                OP,
                format!("torch.gradient expected spacing to be unspecified, a scalar, or a list of length equal to 'self.dim() = {}', since dim argument was not given, but got a list of length {k}", dims.len()),
            ))
        }
    };
    for &d in &dims {
        if (input.shape()[d] as i64) < edge_order + 1 {
            return Err(Error::value(OP, "torch.gradient expected each dimension size to be at least edge_order+1"));
        }
    }
    let x = if input.dtype().is_integral() || input.dtype().is_bool() { input.to_dtype(crate::default_dtype())? } else { input.clone() };
    dims.iter().zip(&spacing).map(|(&d, s)| along(&x, d, s, edge_order)).collect()
}

/// The gradient of `x` along `dim`.
fn along(x: &Tensor, dim: usize, s: &Spacing, edge_order: i64) -> Result<Tensor> {
    let n = x.shape()[dim] as i64;
    let d = dim as i64;
    let sl = |a: i64, len: i64| x.narrow(d, a, len);
    match s {
        Spacing::Step(h) => {
            let h = *h;
            let inner = sl(2, n - 2)?.sub(&sl(0, n - 2)?)?.div_scalar(2.0 * h)?;
            let (first, last) = if edge_order == 1 {
                (sl(1, 1)?.sub(&sl(0, 1)?)?.div_scalar(h)?, sl(n - 1, 1)?.sub(&sl(n - 2, 1)?)?.div_scalar(h)?)
            } else {
                let f = sl(0, 1)?.mul_scalar(-1.5)?.add(&sl(1, 1)?.mul_scalar(2.0)?)?.sub(&sl(2, 1)?.mul_scalar(0.5)?)?.div_scalar(h)?;
                let l = sl(n - 3, 1)?.mul_scalar(0.5)?.sub(&sl(n - 2, 1)?.mul_scalar(2.0)?)?.add(&sl(n - 1, 1)?.mul_scalar(1.5)?)?.div_scalar(h)?;
                (f, l)
            };
            crate::ops::shape_ops::cat(&[first, inner, last], d)
        }
        Spacing::Coords(c) => {
            if c.ndim() != 1 || c.numel() as i64 != n {
                return Err(Error::value("gradient", "torch.gradient expected each tensor to be on the same device and of the same length as the dimension it spaces"));
            }
            // coordinates broadcast along `dim`
            let mut shape = vec![1i64; x.ndim()];
            shape[dim] = n;
            let c = c.to_dtype(x.dtype())?.reshape(&shape)?;
            let cs = |a: i64, len: i64| c.narrow(d, a, len);
            let dx = cs(1, n - 1)?.sub(&cs(0, n - 1)?)?;
            let a = dx.narrow(d, 0, n - 2)?; // h_{i-1}
            let b = dx.narrow(d, 1, n - 2)?; // h_i
            let ab = a.add(&b)?;
            // f'(x_i) ~ (-b/(a(a+b))) f_{i-1} + ((b-a)/(ab)) f_i + (a/(b(a+b))) f_{i+1}
            let c0 = b.neg()?.div(&a.mul(&ab)?)?;
            let c1 = b.sub(&a)?.div(&a.mul(&b)?)?;
            let c2 = a.div(&b.mul(&ab)?)?;
            let inner = sl(0, n - 2)?.mul(&c0)?.add(&sl(1, n - 2)?.mul(&c1)?)?.add(&sl(2, n - 2)?.mul(&c2)?)?;
            let (first, last) = if edge_order == 1 {
                (
                    sl(1, 1)?.sub(&sl(0, 1)?)?.div(&dx.narrow(d, 0, 1)?)?,
                    sl(n - 1, 1)?.sub(&sl(n - 2, 1)?)?.div(&dx.narrow(d, n - 2, 1)?)?,
                )
            } else {
                let (h1, h2) = (dx.narrow(d, 0, 1)?, dx.narrow(d, 1, 1)?);
                let h12 = h1.add(&h2)?;
                let f = sl(0, 1)?
                    .mul(&h1.mul_scalar(2.0)?.add(&h2)?.neg()?.div(&h1.mul(&h12)?)?)?
                    .add(&sl(1, 1)?.mul(&h12.div(&h1.mul(&h2)?)?)?)?
                    .sub(&sl(2, 1)?.mul(&h1.div(&h2.mul(&h12)?)?)?)?;
                let (g1, g2) = (dx.narrow(d, n - 3, 1)?, dx.narrow(d, n - 2, 1)?);
                let g12 = g1.add(&g2)?;
                let l = sl(n - 3, 1)?
                    .mul(&g2.div(&g1.mul(&g12)?)?)?
                    .sub(&sl(n - 2, 1)?.mul(&g12.div(&g1.mul(&g2)?)?)?)?
                    .add(&sl(n - 1, 1)?.mul(&g2.add(&g12)?.div(&g2.mul(&g12)?)?)?)?;
                (f, l)
            };
            crate::ops::shape_ops::cat(&[first, inner, last], d)
        }
    }
}
