//! Convolutions: `Conv1d/2d/3d` and `ConvTranspose1d/2d/3d`, generic over the number of spatial
//! dims, with stride, padding (`zeros`, `reflect`, `replicate`, `circular`; `same`/`valid`),
//! dilation, groups and PyTorch's initialisation.

use crate::init;
use crate::layers::nd::{i64s, per_dim};
use crate::module::{present, present_mut, Module};
use magpie_core::ops::nn::{conv, conv_transpose, Padding};
use magpie_core::ops::pad::PadMode;
use magpie_core::{default_dtype, Device, Error, Result, Tensor};

/// How a convolution pads its input: explicit sizes per spatial dim (or one for all), or
/// PyTorch's `'same'` / `'valid'` strings.
#[derive(Debug, Clone, PartialEq)]
pub enum ConvPadding {
    /// `padding=(p0, p1, ...)` (one value applies to every dim).
    Explicit(Vec<usize>),
    /// `padding='same'` (stride must be 1): output size = input size.
    Same,
    /// `padding='valid'`: no padding.
    Valid,
}

/// The options of `Conv*d` / `ConvTranspose*d` beyond channels and kernel size, with PyTorch's
/// defaults (stride 1, padding 0, dilation 1, groups 1, bias, `padding_mode='zeros'`).
/// Each size is one value for every spatial dim or one per dim.
#[derive(Debug, Clone)]
pub struct ConvOptions {
    pub stride: Vec<usize>,
    pub padding: ConvPadding,
    /// Only for transposed convolutions: extra size added to one side of the output.
    pub output_padding: Vec<usize>,
    pub dilation: Vec<usize>,
    pub groups: usize,
    pub bias: bool,
    /// `"zeros"`, `"reflect"`, `"replicate"` or `"circular"` (transposed convolutions: zeros only).
    pub padding_mode: String,
}

impl Default for ConvOptions {
    fn default() -> Self {
        ConvOptions {
            stride: vec![1],
            padding: ConvPadding::Explicit(vec![0]),
            output_padding: vec![0],
            dilation: vec![1],
            groups: 1,
            bias: true,
            padding_mode: "zeros".into(),
        }
    }
}

impl ConvOptions {
    /// Sets the stride.
    pub fn stride(mut self, s: &[usize]) -> Self {
        self.stride = s.to_vec();
        self
    }
    /// Sets explicit padding.
    pub fn padding(mut self, p: &[usize]) -> Self {
        self.padding = ConvPadding::Explicit(p.to_vec());
        self
    }
    /// Sets `'same'` / `'valid'` / explicit padding.
    pub fn padding_kind(mut self, p: ConvPadding) -> Self {
        self.padding = p;
        self
    }
    /// Sets the output padding (transposed convolutions).
    pub fn output_padding(mut self, p: &[usize]) -> Self {
        self.output_padding = p.to_vec();
        self
    }
    /// Sets the dilation.
    pub fn dilation(mut self, d: &[usize]) -> Self {
        self.dilation = d.to_vec();
        self
    }
    /// Sets the number of groups.
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }
    /// With or without a bias.
    pub fn bias(mut self, b: bool) -> Self {
        self.bias = b;
        self
    }
    /// Sets the padding mode.
    pub fn padding_mode(mut self, m: &str) -> Self {
        self.padding_mode = m.into();
        self
    }
}

/// Kaiming-uniform(a = √5) weight `[channels.0, channels.1, *kernel]` and U(±1/√fan_in) bias,
/// as `_ConvNd.reset_parameters`.
fn init_weight_bias(channels: [usize; 2], kernel: &[usize], bias_len: Option<usize>) -> Result<(Tensor, Option<Tensor>)> {
    let wshape: Vec<usize> = channels.iter().chain(kernel).copied().collect();
    let w = Tensor::zeros_on(&wshape, default_dtype(), Device::Cpu)?;
    init::kaiming_uniform_(&w, 5f64.sqrt(), init::FanMode::FanIn, init::Nonlinearity::LeakyRelu)?;
    let b = match bias_len {
        Some(n) => {
            let b = Tensor::zeros_on(&[n], default_dtype(), Device::Cpu)?;
            let (fan_in, _) = init::fan_in_and_fan_out(&w)?;
            if fan_in != 0 {
                let bound = 1.0 / (fan_in as f64).sqrt();
                init::uniform_(&b, -bound, bound)?;
            }
            Some(b.with_requires_grad()?)
        }
        None => None,
    };
    Ok((w.with_requires_grad()?, b))
}

/// The checks both kinds start with: the spatial rank, then the channels against `groups`.
fn check_new<const N: usize>(op: &str, cin: usize, cout: usize, groups: usize) -> Result<()> {
    if !(1..=3).contains(&N) {
        return Err(Error::value(op, "only 1, 2 or 3 spatial dims are supported"));
    }
    if groups == 0 {
        return Err(Error::value(op, "groups must be a positive integer"));
    }
    if cin % groups != 0 {
        return Err(Error::value(op, "in_channels must be divisible by groups"));
    }
    if cout % groups != 0 {
        return Err(Error::value(op, "out_channels must be divisible by groups"));
    }
    Ok(())
}

/// `(kernel_size, stride, dilation)`, one value per spatial dim.
fn kernel_stride_dilation<const N: usize>(op: &str, kernel_size: &[usize], opts: &ConvOptions) -> Result<[[usize; N]; 3]> {
    Ok([per_dim::<_, N>(op, "kernel_size", kernel_size)?, per_dim::<_, N>(op, "stride", &opts.stride)?, per_dim::<_, N>(op, "dilation", &opts.dilation)?])
}

/// `nn.Conv1d/2d/3d` for `N` = 1, 2, 3: weight `[out, in / groups, *kernel]`, bias `[out]`.
pub struct ConvNd<const N: usize> {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel_size: [usize; N],
    pub stride: [usize; N],
    pub padding: ConvPadding,
    pub dilation: [usize; N],
    pub groups: usize,
    pub padding_mode: PadMode,
}

/// `nn.Conv1d`.
pub type Conv1d = ConvNd<1>;
/// `nn.Conv2d`.
pub type Conv2d = ConvNd<2>;
/// `nn.Conv3d`.
pub type Conv3d = ConvNd<3>;

fn conv_name(n: usize) -> &'static str {
    ["Conv1d", "Conv2d", "Conv3d"][n.clamp(1, 3) - 1]
}

fn parse_mode(op: &str, m: &str) -> Result<PadMode> {
    match m {
        "zeros" => Ok(PadMode::Constant),
        "reflect" => Ok(PadMode::Reflect),
        "replicate" => Ok(PadMode::Replicate),
        "circular" => Ok(PadMode::Circular),
        _ => Err(Error::value(op, format!("padding_mode must be one of ['zeros', 'reflect', 'replicate', 'circular'], but got padding_mode='{m}'"))),
    }
}

impl<const N: usize> ConvNd<N> {
    /// `ConvNd(in_channels, out_channels, kernel_size, **options)` with PyTorch's initialisation.
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: &[usize], opts: ConvOptions) -> Result<Self> {
        let op = conv_name(N);
        check_new::<N>(op, in_channels, out_channels, opts.groups)?;
        let [kernel_size, stride, dilation] = kernel_stride_dilation::<N>(op, kernel_size, &opts)?;
        let padding = match opts.padding {
            ConvPadding::Explicit(p) => ConvPadding::Explicit(per_dim::<_, N>(op, "padding", &p)?.to_vec()),
            ConvPadding::Same if stride.iter().any(|&s| s != 1) => {
                return Err(Error::value(op, "padding='same' is not supported for strided convolutions"));
            }
            p => p,
        };
        let padding_mode = parse_mode(op, &opts.padding_mode)?;
        let (weight, bias) = init_weight_bias([out_channels, in_channels / opts.groups], &kernel_size, opts.bias.then_some(out_channels))?;
        Ok(ConvNd { weight, bias, in_channels, out_channels, kernel_size, stride, padding, dilation, groups: opts.groups, padding_mode })
    }

    /// The padding for `F.pad` when the mode is not zeros: `(left, right)` per dim, last dim first.
    fn reversed_padding(&self) -> Vec<i64> {
        let mut out = Vec::with_capacity(2 * N);
        for d in (0..N).rev() {
            let (l, r) = match &self.padding {
                ConvPadding::Explicit(p) => (p[d], p[d]),
                ConvPadding::Valid => (0, 0),
                ConvPadding::Same => {
                    let total = self.dilation[d] * (self.kernel_size[d] - 1);
                    (total / 2, total - total / 2)
                }
            };
            out.extend([l as i64, r as i64]);
        }
        out
    }
}

impl<const N: usize> Module for ConvNd<N> {
    fn type_name(&self) -> &'static str {
        conv_name(N)
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (x, padding) = if self.padding_mode == PadMode::Constant {
            let p = match &self.padding {
                ConvPadding::Explicit(p) => Padding::Explicit(i64s(p)),
                ConvPadding::Same => Padding::Same,
                ConvPadding::Valid => Padding::Valid,
            };
            (x.clone(), p)
        } else {
            (x.pad(&self.reversed_padding(), self.padding_mode, None)?, Padding::Explicit(vec![0; N]))
        };
        conv(&x, &self.weight, self.bias.as_ref(), N, &i64s(&self.stride), &padding, &i64s(&self.dilation), self.groups as i64)
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        present([("weight", Some(&self.weight)), ("bias", self.bias.as_ref())])
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        present_mut([("weight", Some(&mut self.weight)), ("bias", self.bias.as_mut())])
    }
}

/// `nn.ConvTranspose1d/2d/3d` for `N` = 1, 2, 3: weight `[in, out / groups, *kernel]`, bias `[out]`.
pub struct ConvTransposeNd<const N: usize> {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel_size: [usize; N],
    pub stride: [usize; N],
    pub padding: [usize; N],
    pub output_padding: [usize; N],
    pub dilation: [usize; N],
    pub groups: usize,
}

/// `nn.ConvTranspose1d`.
pub type ConvTranspose1d = ConvTransposeNd<1>;
/// `nn.ConvTranspose2d`.
pub type ConvTranspose2d = ConvTransposeNd<2>;
/// `nn.ConvTranspose3d`.
pub type ConvTranspose3d = ConvTransposeNd<3>;

fn convt_name(n: usize) -> &'static str {
    ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"][n.clamp(1, 3) - 1]
}

impl<const N: usize> ConvTransposeNd<N> {
    /// `ConvTransposeNd(in_channels, out_channels, kernel_size, **options)`; only zeros padding
    /// and explicit padding sizes, as in PyTorch.
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: &[usize], opts: ConvOptions) -> Result<Self> {
        let op = convt_name(N);
        check_new::<N>(op, in_channels, out_channels, opts.groups)?;
        if opts.padding_mode != "zeros" {
            return Err(Error::value(op, format!("Only \"zeros\" padding mode is supported for {op}")));
        }
        let ConvPadding::Explicit(p) = &opts.padding else {
            return Err(Error::value(op, format!("{op} supports only explicit padding sizes")));
        };
        let [kernel_size, stride, dilation] = kernel_stride_dilation::<N>(op, kernel_size, &opts)?;
        let padding = per_dim::<_, N>(op, "padding", p)?;
        let output_padding = per_dim::<_, N>(op, "output_padding", &opts.output_padding)?;
        let (weight, bias) = init_weight_bias([in_channels, out_channels / opts.groups], &kernel_size, opts.bias.then_some(out_channels))?;
        Ok(ConvTransposeNd { weight, bias, in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation, groups: opts.groups })
    }

    fn run(&self, x: &Tensor, output_padding: &[usize]) -> Result<Tensor> {
        conv_transpose(
            x,
            &self.weight,
            self.bias.as_ref(),
            N,
            &i64s(&self.stride),
            &i64s(&self.padding),
            &i64s(output_padding),
            self.groups as i64,
            &i64s(&self.dilation),
        )
    }

    /// `forward(input, output_size)`: picks the output padding that yields `output_size`
    /// (the trailing `N` sizes), as PyTorch's `_output_padding` does.
    pub fn forward_with_output_size(&self, x: &Tensor, output_size: &[usize]) -> Result<Tensor> {
        let op = convt_name(N);
        if x.ndim() < N {
            return Err(Error::shape(op, format!("input of size {:?} has too few dims", x.shape())));
        }
        let sizes = if output_size.len() >= N { &output_size[output_size.len() - N..] } else {
            return Err(Error::value(op, format!("output_size must have {N} or more elements (got {})", output_size.len())));
        };
        let ins = &x.shape()[x.ndim() - N..];
        let mut op_pad = [0usize; N];
        for d in 0..N {
            let min = (ins[d] as i64 - 1) * self.stride[d] as i64 - 2 * self.padding[d] as i64 + (self.dilation[d] * (self.kernel_size[d] - 1)) as i64 + 1;
            let max = min + self.stride[d] as i64 - 1;
            let want = sizes[d] as i64;
            if want < min || want > max {
                return Err(Error::value(op, format!("requested an output size of {sizes:?}, but valid sizes range from {min} to {max} (for an input of {:?})", ins)));
            }
            op_pad[d] = (want - min) as usize;
        }
        self.run(x, &op_pad)
    }
}

impl<const N: usize> Module for ConvTransposeNd<N> {
    fn type_name(&self) -> &'static str {
        convt_name(N)
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.run(x, &self.output_padding)
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        present([("weight", Some(&self.weight)), ("bias", self.bias.as_ref())])
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        present_mut([("weight", Some(&mut self.weight)), ("bias", self.bias.as_mut())])
    }
}
