//! `StudentT(df, loc, scale)`, reparameterized through a Chi2 (Gamma) sample.

use std::f64::consts::PI;

use magpie_core::{Result, Tensor};

use crate::constraints::{positive, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::dists::gamma::standard_gamma;
use crate::util::{broadcast_all, expand_to};

/// `torch.distributions.StudentT(df, loc=0, scale=1)`.
#[derive(Clone)]
pub struct StudentT {
    /// Degrees of freedom.
    pub df: Tensor,
    /// Location.
    pub loc: Tensor,
    /// Scale.
    pub scale: Tensor,
    batch: Vec<usize>,
    validate: bool,
}

impl StudentT {
    /// A Student's t distribution; parameters broadcast to the batch shape.
    pub fn new(df: &Tensor, loc: &Tensor, scale: &Tensor) -> Result<StudentT> {
        let p = broadcast_all("StudentT", &[df, loc, scale])?;
        let d = StudentT { batch: p[0].shape().to_vec(), df: p[0].clone(), loc: p[1].clone(), scale: p[2].clone(), validate: default_validate_args() };
        check_params(&d, &[("df", &d.df, positive()), ("loc", &d.loc, Constraint::Real), ("scale", &d.scale, positive())])?;
        Ok(d)
    }
}

impl Distribution for StudentT {
    dist_common!("StudentT");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![("df", self.df.clone()), ("loc", self.loc.clone()), ("scale", self.scale.clone())]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(Constraint::Real)
    }
    fn has_rsample(&self) -> bool {
        true
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        // X ~ N(0, 1), Z ~ Chi2(df) = Gamma(df / 2, 1 / 2); Y = X / sqrt(Z / df)
        let shape = self.extended_shape(sample_shape);
        let x = Tensor::randn_on(&shape, self.df.dtype(), self.df.device())?;
        let z = standard_gamma(&expand_to(&self.df.mul_scalar(0.5)?, &shape)?)?.mul_scalar(2.0)?;
        let y = x.mul(&z.div(&self.df)?.rsqrt()?)?;
        self.loc.add(&self.scale.mul(&y)?)
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let y = value.sub(&self.loc)?.div(&self.scale)?;
        let half_df = self.df.mul_scalar(0.5)?;
        let z = self.scale.log()?.add(&self.df.log()?.mul_scalar(0.5)?)?.add_scalar(0.5 * PI.ln())?;
        let z = z.add(&half_df.lgamma()?)?.sub(&half_df.add_scalar(0.5)?.lgamma()?)?;
        self.df.add_scalar(1.0)?.mul_scalar(-0.5)?.mul(&y.square()?.div(&self.df)?.log1p()?)?.sub(&z)
    }
    fn entropy(&self) -> Result<Tensor> {
        let half = self.df.mul_scalar(0.5)?;
        let half1 = self.df.add_scalar(1.0)?.mul_scalar(0.5)?;
        let lbeta = half.lgamma()?.add_scalar(0.5 * PI.ln())?.sub(&half1.lgamma()?)?;
        let t = half1.mul(&half1.digamma()?.sub(&half.digamma()?)?)?;
        self.scale.log()?.add(&t)?.add(&self.df.log()?.mul_scalar(0.5)?)?.add(&lbeta)
    }
    fn mean(&self) -> Result<Tensor> {
        let nan = self.loc.full_like(f64::NAN)?;
        self.df.gt_scalar(1.0)?.where_(&self.loc, &nan)
    }
    fn mode(&self) -> Result<Tensor> {
        Ok(self.loc.clone())
    }
    fn variance(&self) -> Result<Tensor> {
        let finite = self.scale.square()?.mul(&self.df)?.div(&self.df.sub_scalar(2.0)?)?;
        let inf = self.df.full_like(f64::INFINITY)?;
        let nan = self.df.full_like(f64::NAN)?;
        let v = self.df.gt_scalar(2.0)?.where_(&finite, &inf)?;
        self.df.le_scalar(1.0)?.where_(&nan, &v)
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(StudentT {
            df: expand_to(&self.df, batch_shape)?,
            loc: expand_to(&self.loc, batch_shape)?,
            scale: expand_to(&self.scale, batch_shape)?,
            batch: batch_shape.to_vec(),
            validate: self.validate,
        }))
    }
}
