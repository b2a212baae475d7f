//! `MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril)`.

use std::f64::consts::PI;

use magpie_core::ops::linalg::{cholesky, solve_triangular};
use magpie_core::ops::shape_ops::broadcast_shapes;
use magpie_core::{Error, Result, Tensor};

use crate::constraints::{real_vector, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::util::{expand_to, extended};

/// `torch.distributions.MultivariateNormal`: event shape `[n]`, parameterized by exactly one of
/// a covariance matrix, a precision matrix or a lower-triangular scale factor.
#[derive(Clone)]
pub struct MultivariateNormal {
    /// Mean, expanded to `batch_shape + [n]`.
    pub loc: Tensor,
    /// The Cholesky factor of the covariance, unbroadcast (`_unbroadcasted_scale_tril`).
    pub scale_tril: Tensor,
    given: (&'static str, Tensor),
    batch: Vec<usize>,
    event: Vec<usize>,
    validate: bool,
}

/// `_precision_to_scale_tril(P)`: the lower Cholesky factor of `P⁻¹` without inverting `P`.
fn precision_to_scale_tril(p: &Tensor) -> Result<Tensor> {
    let lf = cholesky(&p.flip(&[-2, -1])?, false)?;
    let l_inv = lf.flip(&[-2, -1])?.transpose(-2, -1)?;
    let n = p.shape()[p.ndim() - 1];
    let eye = Tensor::eye_on(n, n, p.dtype(), p.device())?;
    let eye = expand_to(&eye, l_inv.shape())?.contiguous()?;
    solve_triangular(&l_inv, &eye, false, true, false)
}

/// `_batch_mahalanobis(L, x)`: `|L⁻¹ x|²` with the batch dimensions of both broadcast.
pub(crate) fn batch_mahalanobis(l: &Tensor, x: &Tensor) -> Result<Tensor> {
    let n = x.shape()[x.ndim() - 1];
    let lb = &l.shape()[..l.ndim() - 2];
    let xb = &x.shape()[..x.ndim() - 1];
    let b = broadcast_shapes(&[lb.to_vec(), xb.to_vec()])?;
    let l = expand_to(l, &extended(&[], &b, &[n, n]))?.contiguous()?;
    let x = expand_to(x, &extended(&[], &b, &[n]))?.unsqueeze(-1)?.contiguous()?;
    solve_triangular(&l, &x, false, true, false)?.squeeze_dims(&[-1])?.square()?.sum_dims(Some(&[-1]), false, None)
}

impl MultivariateNormal {
    /// From `loc` and exactly one of the three matrix parameters (PyTorch's errors otherwise).
    pub fn new(loc: &Tensor, covariance_matrix: Option<&Tensor>, precision_matrix: Option<&Tensor>, scale_tril: Option<&Tensor>) -> Result<MultivariateNormal> {
        let op = "MultivariateNormal";
        if loc.ndim() < 1 {
            return Err(Error::value(op, "loc must be at least one-dimensional."));
        }
        let given: Vec<(&'static str, &Tensor)> = [("covariance_matrix", covariance_matrix), ("precision_matrix", precision_matrix), ("scale_tril", scale_tril)]
            .into_iter()
            .filter_map(|(n, t)| t.map(|t| (n, t)))
            .collect();
        if given.len() != 1 {
            return Err(Error::value(op, "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."));
        }
        let (name, m) = given[0];
        if m.ndim() < 2 {
            let what = match name {
                "scale_tril" => "scale_tril matrix",
                "covariance_matrix" => "covariance_matrix",
                _ => "precision_matrix",
            };
            return Err(Error::value(op, format!("{what} must be at least two-dimensional, with optional leading batch dimensions")));
        }
        let n = loc.shape()[loc.ndim() - 1];
        let batch = broadcast_shapes(&[m.shape()[..m.ndim() - 2].to_vec(), loc.shape()[..loc.ndim() - 1].to_vec()])?;
        let m = expand_to(m, &extended(&[], &batch, &[n, n]))?;
        let loc = expand_to(loc, &extended(&[], &batch, &[n]))?;
        let validate = default_validate_args();
        let probe = MultivariateNormal { loc: loc.clone(), scale_tril: m.clone(), given: (name, m.clone()), batch: batch.clone(), event: vec![n], validate };
        let c = if name == "scale_tril" { Constraint::LowerCholesky } else { Constraint::PositiveDefinite };
        check_params(&probe, &[("loc", &loc, real_vector()), (name, &m, c)])?;
        let tril = match name {
            "scale_tril" => given[0].1.clone(),
            "covariance_matrix" => cholesky(given[0].1, false)?,
            _ => precision_to_scale_tril(given[0].1)?,
        };
        Ok(MultivariateNormal { scale_tril: tril, ..probe })
    }
    /// `MultivariateNormal(loc, covariance_matrix=S)`.
    pub fn from_covariance(loc: &Tensor, cov: &Tensor) -> Result<MultivariateNormal> {
        MultivariateNormal::new(loc, Some(cov), None, None)
    }
    /// `MultivariateNormal(loc, precision_matrix=P)`.
    pub fn from_precision(loc: &Tensor, precision: &Tensor) -> Result<MultivariateNormal> {
        MultivariateNormal::new(loc, None, Some(precision), None)
    }
    /// `MultivariateNormal(loc, scale_tril=L)`.
    pub fn from_scale_tril(loc: &Tensor, scale_tril: &Tensor) -> Result<MultivariateNormal> {
        MultivariateNormal::new(loc, None, None, Some(scale_tril))
    }
    /// `covariance_matrix`: `L Lᵀ`, expanded to the batch shape.
    pub fn covariance_matrix(&self) -> Result<Tensor> {
        let c = self.scale_tril.matmul(&self.scale_tril.transpose(-2, -1)?)?;
        expand_to(&c, &extended(&[], &self.batch, &[self.event[0], self.event[0]]))
    }
    fn half_log_det(&self) -> Result<Tensor> {
        self.scale_tril.diagonal(0, -2, -1)?.log()?.sum_dims(Some(&[-1]), false, None)
    }
}

impl Distribution for MultivariateNormal {
    dist_common!("MultivariateNormal");
    fn event_shape(&self) -> &[usize] {
        &self.event
    }
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![("loc", self.loc.clone()), self.given.clone()]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(real_vector())
    }
    fn has_rsample(&self) -> bool {
        true
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let shape = self.extended_shape(sample_shape);
        let eps = Tensor::randn_on(&shape, self.loc.dtype(), self.loc.device())?;
        self.loc.add(&self.scale_tril.matmul(&eps.unsqueeze(-1)?)?.squeeze_dims(&[-1])?)
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let diff = value.sub(&self.loc)?;
        let m = batch_mahalanobis(&self.scale_tril, &diff)?;
        let n = self.event[0] as f64;
        m.add_scalar(n * (2.0 * PI).ln())?.mul_scalar(-0.5)?.sub(&self.half_log_det()?)
    }
    fn entropy(&self) -> Result<Tensor> {
        let n = self.event[0] as f64;
        let h = self.half_log_det()?.add_scalar(0.5 * n * (1.0 + (2.0 * PI).ln()))?;
        expand_to(&h, &self.batch)
    }
    fn mean(&self) -> Result<Tensor> {
        Ok(self.loc.clone())
    }
    fn mode(&self) -> Result<Tensor> {
        Ok(self.loc.clone())
    }
    fn variance(&self) -> Result<Tensor> {
        let v = self.scale_tril.square()?.sum_dims(Some(&[-1]), false, None)?;
        expand_to(&v, &extended(&[], &self.batch, &self.event))
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        let n = self.event[0];
        Ok(Box::new(MultivariateNormal {
            loc: expand_to(&self.loc, &extended(&[], batch_shape, &[n]))?,
            scale_tril: self.scale_tril.clone(),
            given: (self.given.0, expand_to(&self.given.1, &extended(&[], batch_shape, &[n, n]))?),
            batch: batch_shape.to_vec(),
            event: self.event.clone(),
            validate: self.validate,
        }))
    }
}
