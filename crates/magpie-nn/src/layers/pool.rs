//! Pooling layers: `MaxPool1d/2d/3d`, `AvgPool1d/2d/3d`, `AdaptiveAvgPool1d/2d/3d` and
//! `AdaptiveMaxPool1d/2d/3d`, generic over the number of spatial dims.

use crate::layers::nd::{i64s, per_dim};
use crate::module::Module;
use magpie_core::ops::nn::{adaptive_avg_pool, adaptive_max_pool, avg_pool, max_pool};
use magpie_core::{Result, Tensor};

fn name(kind: usize, n: usize) -> &'static str {
    const NAMES: [[&str; 3]; 4] = [
        ["MaxPool1d", "MaxPool2d", "MaxPool3d"],
        ["AvgPool1d", "AvgPool2d", "AvgPool3d"],
        ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d"],
        ["AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d"],
    ];
    NAMES[kind][n.clamp(1, 3) - 1]
}

/// `nn.MaxPool1d/2d/3d(kernel_size, stride=kernel_size, padding=0, dilation=1, ceil_mode=False)`.
/// `forward_with_indices` gives the flat argmax indices too (`return_indices=True`).
#[derive(Debug, Clone)]
pub struct MaxPoolNd<const N: usize> {
    pub kernel_size: [usize; N],
    pub stride: [usize; N],
    pub padding: [usize; N],
    pub dilation: [usize; N],
    pub ceil_mode: bool,
}

/// `nn.MaxPool1d`.
pub type MaxPool1d = MaxPoolNd<1>;
/// `nn.MaxPool2d`.
pub type MaxPool2d = MaxPoolNd<2>;
/// `nn.MaxPool3d`.
pub type MaxPool3d = MaxPoolNd<3>;

impl<const N: usize> MaxPoolNd<N> {
    /// `stride = None` uses the kernel size, as PyTorch does.
    pub fn new(kernel_size: &[usize], stride: Option<&[usize]>, padding: &[usize], dilation: &[usize], ceil_mode: bool) -> Result<Self> {
        let op = name(0, N);
        let kernel_size = per_dim::<_, N>(op, "kernel_size", kernel_size)?;
        let stride = match stride {
            Some(s) => per_dim::<_, N>(op, "stride", s)?,
            None => kernel_size,
        };
        Ok(MaxPoolNd { kernel_size, stride, padding: per_dim::<_, N>(op, "padding", padding)?, dilation: per_dim::<_, N>(op, "dilation", dilation)?, ceil_mode })
    }
    /// A pool with only the kernel size given (stride = kernel, no padding, no dilation).
    pub fn with_kernel(kernel_size: &[usize]) -> Result<Self> {
        Self::new(kernel_size, None, &[0], &[1], false)
    }
    /// The output and the indices of the maxima (flat within each spatial plane).
    pub fn forward_with_indices(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        max_pool(x, N, &i64s(&self.kernel_size), &i64s(&self.stride), &i64s(&self.padding), &i64s(&self.dilation), self.ceil_mode)
    }
}

impl<const N: usize> Module for MaxPoolNd<N> {
    fn type_name(&self) -> &'static str {
        name(0, N)
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_with_indices(x)?.0)
    }
}

/// `nn.AvgPool1d/2d/3d(kernel_size, stride=kernel_size, padding=0, ceil_mode=False,
/// count_include_pad=True, divisor_override=None)` (`divisor_override` is 2d/3d only in PyTorch).
#[derive(Debug, Clone)]
pub struct AvgPoolNd<const N: usize> {
    pub kernel_size: [usize; N],
    pub stride: [usize; N],
    pub padding: [usize; N],
    pub ceil_mode: bool,
    pub count_include_pad: bool,
    pub divisor_override: Option<i64>,
}

/// `nn.AvgPool1d`.
pub type AvgPool1d = AvgPoolNd<1>;
/// `nn.AvgPool2d`.
pub type AvgPool2d = AvgPoolNd<2>;
/// `nn.AvgPool3d`.
pub type AvgPool3d = AvgPoolNd<3>;

impl<const N: usize> AvgPoolNd<N> {
    /// `stride = None` uses the kernel size.
    pub fn new(kernel_size: &[usize], stride: Option<&[usize]>, padding: &[usize], ceil_mode: bool, count_include_pad: bool, divisor_override: Option<i64>) -> Result<Self> {
        let op = name(1, N);
        let kernel_size = per_dim::<_, N>(op, "kernel_size", kernel_size)?;
        let stride = match stride {
            Some(s) => per_dim::<_, N>(op, "stride", s)?,
            None => kernel_size,
        };
        Ok(AvgPoolNd { kernel_size, stride, padding: per_dim::<_, N>(op, "padding", padding)?, ceil_mode, count_include_pad, divisor_override })
    }
    /// A pool with only the kernel size given.
    pub fn with_kernel(kernel_size: &[usize]) -> Result<Self> {
        Self::new(kernel_size, None, &[0], false, true, None)
    }
}

impl<const N: usize> Module for AvgPoolNd<N> {
    fn type_name(&self) -> &'static str {
        name(1, N)
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        avg_pool(x, N, &i64s(&self.kernel_size), &i64s(&self.stride), &i64s(&self.padding), self.ceil_mode, self.count_include_pad, self.divisor_override)
    }
}

/// `nn.AdaptiveAvgPool1d/2d/3d(output_size)`; a `None` entry keeps that input size.
#[derive(Debug, Clone)]
pub struct AdaptiveAvgPoolNd<const N: usize> {
    pub output_size: [Option<usize>; N],
}

/// `nn.AdaptiveAvgPool1d`.
pub type AdaptiveAvgPool1d = AdaptiveAvgPoolNd<1>;
/// `nn.AdaptiveAvgPool2d`.
pub type AdaptiveAvgPool2d = AdaptiveAvgPoolNd<2>;
/// `nn.AdaptiveAvgPool3d`.
pub type AdaptiveAvgPool3d = AdaptiveAvgPoolNd<3>;

fn opt_i64(v: &[Option<usize>]) -> Vec<Option<i64>> {
    v.iter().map(|o| o.map(|x| x as i64)).collect()
}

impl<const N: usize> AdaptiveAvgPoolNd<N> {
    /// `AdaptiveAvgPoolNd(output_size)`: one size for every dim or one per dim.
    pub fn new(output_size: &[Option<usize>]) -> Result<Self> {
        Ok(AdaptiveAvgPoolNd { output_size: per_dim::<_, N>(name(2, N), "output_size", output_size)? })
    }
}

impl<const N: usize> Module for AdaptiveAvgPoolNd<N> {
    fn type_name(&self) -> &'static str {
        name(2, N)
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        adaptive_avg_pool(x, N, &opt_i64(&self.output_size))
    }
}

/// `nn.AdaptiveMaxPool1d/2d/3d(output_size)`; `forward_with_indices` also returns the argmax.
#[derive(Debug, Clone)]
pub struct AdaptiveMaxPoolNd<const N: usize> {
    pub output_size: [Option<usize>; N],
}

/// `nn.AdaptiveMaxPool1d`.
pub type AdaptiveMaxPool1d = AdaptiveMaxPoolNd<1>;
/// `nn.AdaptiveMaxPool2d`.
pub type AdaptiveMaxPool2d = AdaptiveMaxPoolNd<2>;
/// `nn.AdaptiveMaxPool3d`.
pub type AdaptiveMaxPool3d = AdaptiveMaxPoolNd<3>;

impl<const N: usize> AdaptiveMaxPoolNd<N> {
    /// `AdaptiveMaxPoolNd(output_size)`.
    pub fn new(output_size: &[Option<usize>]) -> Result<Self> {
        Ok(AdaptiveMaxPoolNd { output_size: per_dim::<_, N>(name(3, N), "output_size", output_size)? })
    }
    /// The output and the indices of the maxima.
    pub fn forward_with_indices(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        adaptive_max_pool(x, N, &opt_i64(&self.output_size))
    }
}

impl<const N: usize> Module for AdaptiveMaxPoolNd<N> {
    fn type_name(&self) -> &'static str {
        name(3, N)
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_with_indices(x)?.0)
    }
}
