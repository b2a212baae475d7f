//! `torch.nn.init`: in-place initialisers, run without recording autograd history.
//! Values come from the default generator (`magpie_core::ops::random::manual_seed`).

use magpie_core::autograd::no_grad;
use magpie_core::{Error, Result, Tensor};

/// Which fan `kaiming_*` scales by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FanMode {
    FanIn,
    FanOut,
}

/// The nonlinearity `calculate_gain` is asked about.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Nonlinearity {
    Linear,
    Conv,
    Sigmoid,
    Tanh,
    Relu,
    /// `leaky_relu` with the slope passed as `param`.
    LeakyRelu,
    Selu,
}

/// `nn.init.calculate_gain(nonlinearity, param)`.
pub fn calculate_gain(nl: Nonlinearity, param: Option<f64>) -> f64 {
    match nl {
        Nonlinearity::Linear | Nonlinearity::Conv | Nonlinearity::Sigmoid => 1.0,
        Nonlinearity::Tanh => 5.0 / 3.0,
        Nonlinearity::Relu => 2f64.sqrt(),
        Nonlinearity::LeakyRelu => {
            let slope = param.unwrap_or(0.01);
            (2.0 / (1.0 + slope * slope)).sqrt()
        }
        Nonlinearity::Selu => 0.75,
    }
}

/// `_calculate_fan_in_and_fan_out`: for a weight `[out, in, *kernel]`, (in·k, out·k).
pub fn fan_in_and_fan_out(t: &Tensor) -> Result<(usize, usize)> {
    if t.ndim() < 2 {
        return Err(Error::value("init", "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"));
    }
    let rf: usize = t.shape()[2..].iter().product();
    Ok((t.shape()[1] * rf, t.shape()[0] * rf))
}

/// `uniform_(t, a, b)`.
pub fn uniform_(t: &Tensor, a: f64, b: f64) -> Result<()> {
    let _g = no_grad();
    t.uniform_(a, b)?;
    Ok(())
}

/// `normal_(t, mean, std)`.
pub fn normal_(t: &Tensor, mean: f64, std: f64) -> Result<()> {
    let _g = no_grad();
    t.normal_(mean, std)?;
    Ok(())
}

/// `constant_(t, value)`.
pub fn constant_(t: &Tensor, value: f64) -> Result<()> {
    let _g = no_grad();
    t.fill_(value)?;
    Ok(())
}

/// `zeros_(t)`.
pub fn zeros_(t: &Tensor) -> Result<()> {
    constant_(t, 0.0)
}

/// `ones_(t)`.
pub fn ones_(t: &Tensor) -> Result<()> {
    constant_(t, 1.0)
}

/// `xavier_uniform_(t, gain)`: U(±gain·√(6/(fan_in+fan_out))).
pub fn xavier_uniform_(t: &Tensor, gain: f64) -> Result<()> {
    let (fi, fo) = fan_in_and_fan_out(t)?;
    let a = gain * (6.0 / (fi + fo) as f64).sqrt();
    uniform_(t, -a, a)
}

/// `xavier_normal_(t, gain)`: N(0, gain·√(2/(fan_in+fan_out))).
pub fn xavier_normal_(t: &Tensor, gain: f64) -> Result<()> {
    let (fi, fo) = fan_in_and_fan_out(t)?;
    normal_(t, 0.0, gain * (2.0 / (fi + fo) as f64).sqrt())
}

fn kaiming_std(t: &Tensor, a: f64, mode: FanMode, nl: Nonlinearity) -> Result<f64> {
    let (fi, fo) = fan_in_and_fan_out(t)?;
    let fan = if mode == FanMode::FanIn { fi } else { fo };
    if fan == 0 {
        // PyTorch warns and leaves the (empty) tensor alone
        return Ok(0.0);
    }
    Ok(calculate_gain(nl, Some(a)) / (fan as f64).sqrt())
}

/// `kaiming_uniform_(t, a, mode, nonlinearity)`: U(±√3·gain/√fan).
pub fn kaiming_uniform_(t: &Tensor, a: f64, mode: FanMode, nl: Nonlinearity) -> Result<()> {
    if t.numel() == 0 {
        return Ok(());
    }
    let bound = 3f64.sqrt() * kaiming_std(t, a, mode, nl)?;
    uniform_(t, -bound, bound)
}

/// `kaiming_normal_(t, a, mode, nonlinearity)`: N(0, gain/√fan).
pub fn kaiming_normal_(t: &Tensor, a: f64, mode: FanMode, nl: Nonlinearity) -> Result<()> {
    if t.numel() == 0 {
        return Ok(());
    }
    let std = kaiming_std(t, a, mode, nl)?;
    normal_(t, 0.0, std)
}

/// `eye_(t)`: the identity in a 2-D tensor.
pub fn eye_(t: &Tensor) -> Result<()> {
    if t.ndim() != 2 {
        return Err(Error::value("eye_", "Only tensors with 2 dimensions are supported"));
    }
    let _g = no_grad();
    t.zero_()?;
    for i in 0..t.shape()[0].min(t.shape()[1]) {
        t.select(0, i as i64)?.select(0, i as i64)?.fill_(1.0)?;
    }
    Ok(())
}

/// `trunc_normal_(t, mean, std, a, b)`: N(mean, std²) truncated to `[a, b]`, drawn by PyTorch's
/// inverse-CDF method (uniform between the CDF values of `a` and `b`, then `erfinv`), so no
/// value is rejected and redrawn.
pub fn trunc_normal_(t: &Tensor, mean: f64, std: f64, a: f64, b: f64) -> Result<()> {
    if a > b {
        return Err(Error::value("trunc_normal_", format!("the lower bound a={a} must not exceed the upper bound b={b}")));
    }
    let norm_cdf = |x: f64| (1.0 + magpie_core::ops::special::erf::erf(x / std::f64::consts::SQRT_2)) / 2.0;
    let l = norm_cdf((a - mean) / std);
    let u = norm_cdf((b - mean) / std);
    let _g = no_grad();
    t.uniform_(2.0 * l - 1.0, 2.0 * u - 1.0)?;
    let v = t.erfinv()?.mul_scalar(std * std::f64::consts::SQRT_2)?.add_scalar(mean)?.clamp(Some(a), Some(b))?;
    t.copy_(&v)?;
    Ok(())
}

/// `orthogonal_(t, gain)`: a (semi-)orthogonal matrix from the QR decomposition of a standard
/// normal matrix, with Q's columns sign-corrected by `sign(diag(R))` so the result is uniformly
/// distributed, as PyTorch does; tensors of more than 2 dims are flattened to `[rows, rest]`.
pub fn orthogonal_(t: &Tensor, gain: f64) -> Result<()> {
    if t.ndim() < 2 {
        return Err(Error::value("orthogonal_", "Only tensors with 2 or more dimensions are supported"));
    }
    if t.numel() == 0 {
        return Ok(());
    }
    let rows = t.shape()[0];
    let cols = t.numel() / rows;
    let _g = no_grad();
    let flat = Tensor::zeros_on(&[rows, cols], t.dtype(), t.device())?;
    flat.normal_(0.0, 1.0)?;
    let flat = if rows < cols { flat.t()?.contiguous()? } else { flat };
    let (q, r) = magpie_core::ops::linalg::qr(&flat, "reduced")?;
    let ph = r.diag(0)?.sign()?;
    let mut q = q.mul(&ph.unsqueeze(0)?)?;
    if rows < cols {
        q = q.t()?;
    }
    t.copy_(&q.mul_scalar(gain)?.reshape_to(t.shape())?)?;
    Ok(())
}
