//! PyTorch's activation modules (`nn.ReLU`, `nn.GELU`, `nn.Softmax`, ...): thin wrappers over the
//! tensor methods of `magpie_core`, holding the constructor arguments as public fields.
//! Only `PReLU` owns a parameter (`weight`); `RReLU` samples slopes in training mode.

use crate::module::Module;
use magpie_core::{default_dtype, Device, Error, Result, Tensor};

/// Defines a unit struct activation whose forward is the given expression.
macro_rules! unit_activation {
    ($($(#[$doc:meta])* $name:ident => |$x:ident| $body:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;
        impl Module for $name {
            fn type_name(&self) -> &'static str {
                stringify!($name)
            }
            fn forward(&self, $x: &Tensor) -> Result<Tensor> {
                $body
            }
        }
    )*};
}

unit_activation! {
    /// `nn.ReLU()`: `max(x, 0)`.
    ReLU => |x| x.relu();
    /// `nn.ReLU6()`: `min(max(x, 0), 6)`.
    ReLU6 => |x| x.relu6();
    /// `nn.SELU()`: scaled ELU with the self-normalising constants.
    SELU => |x| x.selu();
    /// `nn.SiLU()` (swish): `x * sigmoid(x)`.
    SiLU => |x| x.silu();
    /// `nn.Mish()`: `x * tanh(softplus(x))`.
    Mish => |x| x.mish();
    /// `nn.Sigmoid()`.
    Sigmoid => |x| x.sigmoid();
    /// `nn.Tanh()`.
    Tanh => |x| x.tanh();
    /// `nn.Hardsigmoid()`: `relu6(x + 3) / 6`.
    Hardsigmoid => |x| x.hardsigmoid();
    /// `nn.Hardswish()`: `x * relu6(x + 3) / 6`.
    Hardswish => |x| x.hardswish();
    /// `nn.Softsign()`: `x / (1 + |x|)`.
    Softsign => |x| x.softsign();
    /// `nn.Tanhshrink()`: `x - tanh(x)`.
    Tanhshrink => |x| x.tanhshrink();
    /// `nn.LogSigmoid()`: `log(sigmoid(x))`, computed stably.
    LogSigmoid => |x| x.logsigmoid();
    /// `nn.Softmax2d()`: softmax over the channel dim of `[N, C, H, W]` or `[C, H, W]` input.
    Softmax2d => |x| {
        if x.ndim() != 3 && x.ndim() != 4 {
            return Err(Error::shape("Softmax2d", format!("Softmax2d: expected input to be 3D or 4D, got {}D instead", x.ndim())));
        }
        x.softmax(-3, None)
    };
}

/// `nn.LeakyReLU(negative_slope=0.01)`.
#[derive(Debug, Clone, Copy)]
pub struct LeakyReLU {
    pub negative_slope: f64,
}
impl Default for LeakyReLU {
    fn default() -> Self {
        LeakyReLU { negative_slope: 0.01 }
    }
}
impl Module for LeakyReLU {
    fn type_name(&self) -> &'static str {
        "LeakyReLU"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.leaky_relu(self.negative_slope)
    }
}

/// `nn.ELU(alpha=1.0)`.
#[derive(Debug, Clone, Copy)]
pub struct ELU {
    pub alpha: f64,
}
impl Default for ELU {
    fn default() -> Self {
        ELU { alpha: 1.0 }
    }
}
impl Module for ELU {
    fn type_name(&self) -> &'static str {
        "ELU"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.elu(self.alpha)
    }
}

/// `nn.CELU(alpha=1.0)`.
#[derive(Debug, Clone, Copy)]
pub struct CELU {
    pub alpha: f64,
}
impl Default for CELU {
    fn default() -> Self {
        CELU { alpha: 1.0 }
    }
}
impl Module for CELU {
    fn type_name(&self) -> &'static str {
        "CELU"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.celu(self.alpha)
    }
}

/// `nn.GELU(approximate='none')`; `approximate` is `"none"` (erf) or `"tanh"`.
#[derive(Debug, Clone)]
pub struct GELU {
    pub approximate: String,
}
impl Default for GELU {
    fn default() -> Self {
        GELU { approximate: "none".into() }
    }
}
impl GELU {
    /// `GELU(approximate)`, checked when called.
    pub fn new(approximate: &str) -> GELU {
        GELU { approximate: approximate.into() }
    }
}
impl Module for GELU {
    fn type_name(&self) -> &'static str {
        "GELU"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.gelu(&self.approximate)
    }
}

/// `nn.Hardtanh(min_val=-1, max_val=1)`: clamps to `[min_val, max_val]`.
#[derive(Debug, Clone, Copy)]
pub struct Hardtanh {
    pub min_val: f64,
    pub max_val: f64,
}
impl Default for Hardtanh {
    fn default() -> Self {
        Hardtanh { min_val: -1.0, max_val: 1.0 }
    }
}
impl Hardtanh {
    /// `Hardtanh(min_val, max_val)`; `max_val` must be above `min_val`.
    pub fn new(min_val: f64, max_val: f64) -> Result<Hardtanh> {
        if max_val <= min_val {
            return Err(Error::value("Hardtanh", "max_val must be greater than min_val"));
        }
        Ok(Hardtanh { min_val, max_val })
    }
}
impl Module for Hardtanh {
    fn type_name(&self) -> &'static str {
        "Hardtanh"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.hardtanh(self.min_val, self.max_val)
    }
}

/// `nn.Softplus(beta=1, threshold=20)`: `log(1 + exp(beta x)) / beta`, linear above the threshold.
#[derive(Debug, Clone, Copy)]
pub struct Softplus {
    pub beta: f64,
    pub threshold: f64,
}
impl Default for Softplus {
    fn default() -> Self {
        Softplus { beta: 1.0, threshold: 20.0 }
    }
}
impl Module for Softplus {
    fn type_name(&self) -> &'static str {
        "Softplus"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.softplus(self.beta, self.threshold)
    }
}

/// `nn.Softshrink(lambd=0.5)`.
#[derive(Debug, Clone, Copy)]
pub struct Softshrink {
    pub lambd: f64,
}
impl Default for Softshrink {
    fn default() -> Self {
        Softshrink { lambd: 0.5 }
    }
}
impl Module for Softshrink {
    fn type_name(&self) -> &'static str {
        "Softshrink"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.softshrink(self.lambd)
    }
}

/// `nn.Hardshrink(lambd=0.5)`.
#[derive(Debug, Clone, Copy)]
pub struct Hardshrink {
    pub lambd: f64,
}
impl Default for Hardshrink {
    fn default() -> Self {
        Hardshrink { lambd: 0.5 }
    }
}
impl Module for Hardshrink {
    fn type_name(&self) -> &'static str {
        "Hardshrink"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.hardshrink(self.lambd)
    }
}

/// `nn.Threshold(threshold, value)`: `x if x > threshold else value`.
#[derive(Debug, Clone, Copy)]
pub struct Threshold {
    pub threshold: f64,
    pub value: f64,
}
impl Threshold {
    /// `Threshold(threshold, value)`.
    pub fn new(threshold: f64, value: f64) -> Threshold {
        Threshold { threshold, value }
    }
}
impl Module for Threshold {
    fn type_name(&self) -> &'static str {
        "Threshold"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.threshold(self.threshold, self.value)
    }
}

/// Defines an activation over one dim (`dim` field) from a tensor method `(dim, dtype)`.
macro_rules! dim_activation {
    ($($(#[$doc:meta])* $name:ident => $method:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            pub dim: i64,
        }
        impl $name {
            /// Over dim `dim` (negative counts from the end).
            pub fn new(dim: i64) -> $name {
                $name { dim }
            }
        }
        impl Module for $name {
            fn type_name(&self) -> &'static str {
                stringify!($name)
            }
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                x.$method(self.dim, None)
            }
        }
    )*};
}

dim_activation! {
    /// `nn.Softmax(dim)`.
    Softmax => softmax;
    /// `nn.LogSoftmax(dim)`.
    LogSoftmax => log_softmax;
    /// `nn.Softmin(dim)`: `softmax(-x)`.
    Softmin => softmin;
}

/// `nn.GLU(dim=-1)`: splits `dim` in halves `a, b` and returns `a * sigmoid(b)`.
#[derive(Debug, Clone, Copy)]
pub struct GLU {
    pub dim: i64,
}
impl Default for GLU {
    fn default() -> Self {
        GLU { dim: -1 }
    }
}
impl Module for GLU {
    fn type_name(&self) -> &'static str {
        "GLU"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.glu(self.dim)
    }
}

/// `nn.PReLU(num_parameters=1, init=0.25)`: leaky ReLU with learned slopes, one per channel
/// (dim 1) or one shared; the parameter is `weight` `[num_parameters]`.
pub struct PReLU {
    pub weight: Tensor,
    pub num_parameters: usize,
}
impl PReLU {
    /// `PReLU(num_parameters, init)`.
    pub fn new(num_parameters: usize, init: f64) -> Result<PReLU> {
        let weight = Tensor::full_on(&[num_parameters], init, default_dtype(), Device::Cpu)?.with_requires_grad()?;
        Ok(PReLU { weight, num_parameters })
    }
}
impl Module for PReLU {
    fn type_name(&self) -> &'static str {
        "PReLU"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.prelu(&self.weight)
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        vec![("weight", &self.weight)]
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        vec![("weight", &mut self.weight)]
    }
}

/// `nn.RReLU(lower=1/8, upper=1/3)`: random negative slopes in U(lower, upper) in training,
/// the fixed slope `(lower + upper) / 2` in eval.
#[derive(Debug, Clone, Copy)]
pub struct RReLU {
    pub lower: f64,
    pub upper: f64,
    pub training: bool,
}
impl Default for RReLU {
    fn default() -> Self {
        RReLU { lower: 1.0 / 8.0, upper: 1.0 / 3.0, training: true }
    }
}
impl Module for RReLU {
    fn type_name(&self) -> &'static str {
        "RReLU"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.rrelu(self.lower, self.upper, self.training)
    }
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
    fn is_training(&self) -> bool {
        self.training
    }
}
