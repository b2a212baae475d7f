//! The distributions, one file each.

pub mod bernoulli;
pub mod beta;
pub mod binomial;
pub mod categorical;
pub mod dirichlet;
pub mod exponential;
pub mod gamma;
pub mod independent;
pub mod laplace;
pub mod mixture;
pub mod mvn;
pub mod normal;
pub mod poisson;
pub mod probs;
pub mod studentt;
pub mod transformed;
pub mod uniform;

pub use bernoulli::Bernoulli;
pub use beta::Beta;
pub use binomial::Binomial;
pub use categorical::{Categorical, OneHotCategorical};
pub use dirichlet::Dirichlet;
pub use exponential::Exponential;
pub use gamma::Gamma;
pub use independent::Independent;
pub use laplace::Laplace;
pub use mixture::MixtureSameFamily;
pub use mvn::MultivariateNormal;
pub use normal::Normal;
pub use poisson::Poisson;
pub use studentt::StudentT;
pub use transformed::{LogNormal, TransformedDistribution};
pub use uniform::Uniform;
