//! `Laplace(loc, scale)`.

use magpie_core::{Result, Tensor};

use crate::constraints::{positive, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::util::{broadcast_all, eps, expand_to};

/// `torch.distributions.Laplace(loc, scale)`.
#[derive(Clone)]
pub struct Laplace {
    /// Location.
    pub loc: Tensor,
    /// Scale.
    pub scale: Tensor,
    batch: Vec<usize>,
    validate: bool,
}

impl Laplace {
    /// A Laplace distribution; parameters broadcast to the batch shape.
    pub fn new(loc: &Tensor, scale: &Tensor) -> Result<Laplace> {
        let p = broadcast_all("Laplace", &[loc, scale])?;
        let d = Laplace { batch: p[0].shape().to_vec(), loc: p[0].clone(), scale: p[1].clone(), validate: default_validate_args() };
        check_params(&d, &[("loc", &d.loc, Constraint::Real), ("scale", &d.scale, positive())])?;
        Ok(d)
    }
}

impl Distribution for Laplace {
    dist_common!("Laplace");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![("loc", self.loc.clone()), ("scale", self.scale.clone())]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(Constraint::Real)
    }
    fn has_rsample(&self) -> bool {
        true
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let shape = self.extended_shape(sample_shape);
        // u uniform on [eps - 1, 1), so log1p(-|u|) stays finite
        let e = eps(self.loc.dtype());
        let u = Tensor::rand_on(&shape, self.loc.dtype(), self.loc.device())?.mul_scalar(2.0 - e)?.add_scalar(e - 1.0)?;
        self.loc.sub(&self.scale.mul(&u.sign()?.mul(&u.abs()?.neg()?.log1p()?)?)?)
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        self.scale.mul_scalar(2.0)?.log()?.neg()?.sub(&value.sub(&self.loc)?.abs()?.div(&self.scale)?)
    }
    fn cdf(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let d = value.sub(&self.loc)?;
        let t = d.sign()?.mul(&d.abs()?.neg()?.div(&self.scale)?.expm1()?)?;
        t.mul_scalar(-0.5)?.add_scalar(0.5)
    }
    fn icdf(&self, value: &Tensor) -> Result<Tensor> {
        let term = value.sub_scalar(0.5)?;
        self.loc.sub(&self.scale.mul(&term.sign()?)?.mul(&term.abs()?.mul_scalar(-2.0)?.log1p()?)?)
    }
    fn entropy(&self) -> Result<Tensor> {
        self.scale.mul_scalar(2.0)?.log()?.add_scalar(1.0)
    }
    fn mean(&self) -> Result<Tensor> {
        Ok(self.loc.clone())
    }
    fn mode(&self) -> Result<Tensor> {
        Ok(self.loc.clone())
    }
    fn variance(&self) -> Result<Tensor> {
        self.scale.square()?.mul_scalar(2.0)
    }
    fn stddev(&self) -> Result<Tensor> {
        self.scale.mul_scalar(std::f64::consts::SQRT_2)
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(Laplace { loc: expand_to(&self.loc, batch_shape)?, scale: expand_to(&self.scale, batch_shape)?, batch: batch_shape.to_vec(), validate: self.validate }))
    }
}
