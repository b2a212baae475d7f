//! Normalisation over channels: `BatchNorm1d/2d/3d` and `InstanceNorm1d/2d/3d` (with running
//! statistics buffers), and `GroupNorm`.

use crate::module::{present, present_mut, Module};
use magpie_core::autograd::no_grad;
use magpie_core::ops::nn::{instance_norm, native_batch_norm, native_group_norm};
use magpie_core::{default_dtype, DType, Device, Error, Result, Tensor};

/// The parameters and buffers shared by batch and instance norm (`_NormBase`).
struct NormState {
    weight: Option<Tensor>,
    bias: Option<Tensor>,
    running_mean: Option<Tensor>,
    running_var: Option<Tensor>,
    num_batches_tracked: Option<Tensor>,
}

fn norm_state(c: usize, affine: bool, track: bool) -> Result<NormState> {
    let f = default_dtype();
    let (weight, bias) = if affine {
        (Some(Tensor::ones_on(&[c], f, Device::Cpu)?.with_requires_grad()?), Some(Tensor::zeros_on(&[c], f, Device::Cpu)?.with_requires_grad()?))
    } else {
        (None, None)
    };
    let (running_mean, running_var, num_batches_tracked) = if track {
        (Some(Tensor::zeros_on(&[c], f, Device::Cpu)?), Some(Tensor::ones_on(&[c], f, Device::Cpu)?), Some(Tensor::zeros_on(&[], DType::I64, Device::Cpu)?))
    } else {
        (None, None, None)
    };
    Ok(NormState { weight, bias, running_mean, running_var, num_batches_tracked })
}

/// Implements the type name (from `NAMES`) and the parameter/buffer lists of a module with `weight`, `bias`, `running_mean`,
/// `running_var`, `num_batches_tracked` option fields, in PyTorch's registration order.
macro_rules! norm_tensors {
    () => {
        fn type_name(&self) -> &'static str {
            Self::NAMES[N.clamp(1, 3) - 1]
        }
        fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
            present([("weight", self.weight.as_ref()), ("bias", self.bias.as_ref())])
        }
        fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
            present_mut([("weight", self.weight.as_mut()), ("bias", self.bias.as_mut())])
        }
        fn local_buffers(&self) -> Vec<(&'static str, &Tensor)> {
            present([("running_mean", self.running_mean.as_ref()), ("running_var", self.running_var.as_ref()), ("num_batches_tracked", self.num_batches_tracked.as_ref())])
        }
        fn local_buffers_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
            present_mut([("running_mean", self.running_mean.as_mut()), ("running_var", self.running_var.as_mut()), ("num_batches_tracked", self.num_batches_tracked.as_mut())])
        }
        fn set_training(&mut self, training: bool) {
            self.training = training;
        }
        fn is_training(&self) -> bool {
            self.training
        }
    };
}

/// Defines a `_NormBase` layer: the struct (parameters, buffers and options), its `Nd` aliases,
/// its class names per `N` and `new`.
macro_rules! norm_base_layer {
    ($(#[$doc:meta])* $t:ident, $names:expr, $(#[$new_doc:meta])* [$($(#[$adoc:meta])* $alias:ident = $n:literal),*]) => {
        $(#[$doc])*
        pub struct $t<const N: usize> {
            pub weight: Option<Tensor>,
            pub bias: Option<Tensor>,
            pub running_mean: Option<Tensor>,
            pub running_var: Option<Tensor>,
            /// i64 scalar: how many training batches updated the running statistics.
            pub num_batches_tracked: Option<Tensor>,
            pub num_features: usize,
            pub eps: f64,
            pub momentum: Option<f64>,
            pub training: bool,
        }

        $($(#[$adoc])* pub type $alias = $t<$n>;)*

        impl<const N: usize> $t<N> {
            /// The class names for `N` = 1, 2, 3.
            const NAMES: [&'static str; 3] = $names;

            $(#[$new_doc])*
            pub fn new(num_features: usize, eps: f64, momentum: Option<f64>, affine: bool, track_running_stats: bool) -> Result<Self> {
                let s = norm_state(num_features, affine, track_running_stats)?;
                Ok($t {
                    weight: s.weight,
                    bias: s.bias,
                    running_mean: s.running_mean,
                    running_var: s.running_var,
                    num_batches_tracked: s.num_batches_tracked,
                    num_features,
                    eps,
                    momentum,
                    training: true,
                })
            }
        }
    };
}

norm_base_layer!(
    /// `nn.BatchNorm1d/2d/3d(num_features, eps=1e-5, momentum=0.1, affine=True,
    /// track_running_stats=True)` for `N` = 1, 2, 3 spatial-rank classes. `momentum = None` keeps a
    /// cumulative average (factor `1 / num_batches_tracked`). Training normalises with batch
    /// statistics and updates the running ones; eval uses the running ones when tracked.
    BatchNormNd,
    ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"],
    /// A layer with PyTorch's initial values (weight 1, bias 0, running mean 0, var 1).
    [
        /// `nn.BatchNorm1d`: input `[N, C]` or `[N, C, L]`.
        BatchNorm1d = 1,
        /// `nn.BatchNorm2d`: input `[N, C, H, W]`.
        BatchNorm2d = 2,
        /// `nn.BatchNorm3d`: input `[N, C, D, H, W]`.
        BatchNorm3d = 3
    ]
);

impl<const N: usize> BatchNormNd<N> {
    /// `BatchNormNd(num_features)` with the defaults (eps 1e-5, momentum 0.1, affine, tracked).
    pub fn with_features(num_features: usize) -> Result<Self> {
        Self::new(num_features, 1e-5, Some(0.1), true, true)
    }
}

impl<const N: usize> Module for BatchNormNd<N> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let op = self.type_name();
        let ok = if N == 1 { x.ndim() == 2 || x.ndim() == 3 } else { x.ndim() == N + 2 };
        if !ok {
            let want = if N == 1 { "2D or 3D".to_string() } else { format!("{}D", N + 2) };
            return Err(Error::shape(op, format!("expected {want} input (got {}D input)", x.ndim())));
        }
        let mut factor = self.momentum.unwrap_or(0.0);
        if self.training {
            if let Some(nbt) = &self.num_batches_tracked {
                let _g = no_grad();
                nbt.copy_(&nbt.add_scalar(1.0)?)?;
                if self.momentum.is_none() {
                    factor = 1.0 / nbt.item()?.to_f64();
                }
            }
        }
        let use_batch = self.training || (self.running_mean.is_none() && self.running_var.is_none());
        // in training, running stats are updated (when tracked); in eval they are read
        Ok(native_batch_norm(x, self.weight.as_ref(), self.bias.as_ref(), self.running_mean.as_ref(), self.running_var.as_ref(), use_batch, factor, self.eps)?.0)
    }
    norm_tensors!();
}

norm_base_layer!(
    /// `nn.InstanceNorm1d/2d/3d(num_features, eps=1e-5, momentum=0.1, affine=False,
    /// track_running_stats=False)`: normalises each channel of each sample over its spatial dims.
    /// Accepts unbatched input (`[C, L]` for 1d, `[C, H, W]` for 2d).
    InstanceNormNd,
    ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"],
    /// A layer (affine: weight 1, bias 0; tracked: running mean 0, var 1).
    [
        /// `nn.InstanceNorm1d`.
        InstanceNorm1d = 1,
        /// `nn.InstanceNorm2d`.
        InstanceNorm2d = 2,
        /// `nn.InstanceNorm3d`.
        InstanceNorm3d = 3
    ]
);

impl<const N: usize> InstanceNormNd<N> {
    /// `InstanceNormNd(num_features)` with PyTorch's defaults (no affine, no running stats).
    pub fn with_features(num_features: usize) -> Result<Self> {
        Self::new(num_features, 1e-5, Some(0.1), false, false)
    }
}

impl<const N: usize> Module for InstanceNormNd<N> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let op = self.type_name();
        if x.ndim() != N + 1 && x.ndim() != N + 2 {
            return Err(Error::shape(op, format!("expected {}D or {}D input (got {}D input)", N + 1, N + 2, x.ndim())));
        }
        let unbatched = x.ndim() == N + 1;
        let xb = if unbatched { x.unsqueeze(0)? } else { x.clone() };
        let c = xb.shape()[1];
        if c != self.num_features && self.weight.is_some() {
            return Err(Error::shape(op, format!("expected input's size at dim=1 to match num_features ({}), but got: {c}.", self.num_features)));
        }
        let use_input_stats = self.training || self.running_mean.is_none();
        let y = instance_norm(
            &xb,
            self.running_mean.as_ref(),
            self.running_var.as_ref(),
            self.weight.as_ref(),
            self.bias.as_ref(),
            use_input_stats,
            self.momentum.unwrap_or(0.0),
            self.eps,
        )?;
        if unbatched { y.squeeze_dims(&[0]) } else { Ok(y) }
    }
    norm_tensors!();
}

/// `nn.GroupNorm(num_groups, num_channels, eps=1e-5, affine=True)`: normalises each group of
/// channels of each sample.
pub struct GroupNorm {
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub num_groups: usize,
    pub num_channels: usize,
    pub eps: f64,
}

impl GroupNorm {
    /// `num_channels` must be divisible by `num_groups`.
    pub fn new(num_groups: usize, num_channels: usize, eps: f64, affine: bool) -> Result<GroupNorm> {
        if num_groups == 0 || num_channels % num_groups != 0 {
            return Err(Error::value("GroupNorm", "num_channels must be divisible by num_groups"));
        }
        let s = norm_state(num_channels, affine, false)?;
        Ok(GroupNorm { weight: s.weight, bias: s.bias, num_groups, num_channels, eps })
    }
}

impl Module for GroupNorm {
    fn type_name(&self) -> &'static str {
        "GroupNorm"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(native_group_norm(x, self.num_groups as i64, self.weight.as_ref(), self.bias.as_ref(), self.eps)?.0)
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        present([("weight", self.weight.as_ref()), ("bias", self.bias.as_ref())])
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        present_mut([("weight", self.weight.as_mut()), ("bias", self.bias.as_mut())])
    }
}
