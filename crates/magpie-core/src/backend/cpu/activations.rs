//! Vectorized one-pass CPU kernels for elementwise activations: f32 forwards (the exp-based
//! ones through `vmath`'s branch-free `expf`, instead of a libm call per element) and fused
//! backwards `grad_in = g * f'(x)` for f32 and f64 (one pass instead of a chain of masks,
//! `where` and products). Each kernel is a `simd_kernel!` (AVX2 when the CPU has it); the
//! tensor-level entry points run them in parallel blocks through `map_unary_block` /
//! `map_binary_block`. The ops in `ops/activation.rs` use them when no graph of the gradient
//! is built; their tensor-op rules stay for double backward.

use super::vmath;
use crate::tensor::Tensor;
use crate::{DType, Device, Result};
use std::mem::MaybeUninit;

/// Defines `pub fn $name(x: &[T], $params, o)`: `o[i] = $e` with `$v = x[i]`, as one AVX2 kernel.
macro_rules! map1 {
    ($(#[$m:meta])* $name:ident($($p:ident: $pt:ty),*) |$v:ident| $e:expr) => {
        crate::simd_kernel! {
            $(#[$m])*
            pub fn $name(x: &[T], o: &mut [MaybeUninit<T>] $(, $p: $pt)*) {
                for (o, &$v) in o.iter_mut().zip(x) {
                    o.write($e);
                }
            }
        }
    };
}

/// Defines `pub fn $name(x: &[T], g: &[T], $params, o)`: `o[i] = $e` with `$v = x[i]`, `$g = g[i]`.
macro_rules! map2 {
    ($(#[$m:meta])* $name:ident($($p:ident: $pt:ty),*) |$v:ident, $g:ident| $e:expr) => {
        crate::simd_kernel! {
            $(#[$m])*
            pub fn $name(x: &[T], g: &[T], o: &mut [MaybeUninit<T>] $(, $p: $pt)*) {
                for ((o, &$v), &$g) in o.iter_mut().zip(x).zip(g) {
                    o.write($e);
                }
            }
        }
    };
}

/// The backward kernels, written once over the module's `T` and its `exp` / `sigmoid` /
/// `sigmoid_pair`.
macro_rules! backward_kernels {
    () => {
        map2!(
            /// relu from its output `y`: `g` where `y > 0`, else 0.
            relu_bwd() |y, g| if y > 0.0 { g } else { 0.0 }
        );
        map2!(
            /// hardtanh / relu6: `g` where `lo < x < hi`, else 0.
            hardtanh_bwd(lo: T, hi: T) |x, g| if x > lo && x < hi { g } else { 0.0 }
        );
        map2!(
            /// threshold: `g` where `x > t`, else 0.
            threshold_bwd(t: T) |x, g| if x > t { g } else { 0.0 }
        );
        map2!(
            /// leaky_relu: `g` where `x > 0`, else `g * slope`.
            leaky_relu_bwd(slope: T) |x, g| if x > 0.0 { g } else { g * slope }
        );
        map2!(
            /// hardswish: 0 below -3, `g (x / 3 + 1/2)` up to 3, `g` above.
            hardswish_bwd() |x, g| if x < -3.0 { 0.0 } else if x <= 3.0 { g * (x * (1.0 / 3.0) + 0.5) } else { g }
        );
        map2!(
            /// hardsigmoid: `g / 6` inside (-3, 3), else 0.
            hardsigmoid_bwd() |x, g| if x > -3.0 && x < 3.0 { g * (1.0 / 6.0) } else { 0.0 }
        );
        map2!(
            /// hardshrink / softshrink: 0 inside `[-l, l]`, else `g`.
            shrink_bwd(l: T) |x, g| if x >= -l && x <= l { 0.0 } else { g }
        );
        map2!(
            /// elu family: `g scale` where `x > 0`, else `g e^{x is} c` with `c = is alpha scale`.
            elu_bwd(scale: T, is: T, c: T) |x, g| if x > 0.0 { g * scale } else { g * (exp(x * is) * c) }
        );
        map2!(
            /// sigmoid from its output `y`: `g y (1 - y)`.
            sigmoid_bwd() |y, g| g * (y * (1.0 - y))
        );
        map2!(
            /// tanh from its output `y`: `g (1 - y^2)`.
            tanh_bwd() |y, g| g * (1.0 - y * y)
        );
        map2!(
            /// silu: `g s (1 + x (1 - s))` with `s = sigmoid(x)` (`1 - s` computed as `sigmoid(-x)`:
            /// no cancellation where `s ~ 1`).
            silu_bwd() |x, g| {
                let (s, sm) = sigmoid_pair(x);
                g * (s * (1.0 + x * sm))
            }
        );
        map2!(
            /// softplus: `g` where `beta x > threshold`, else `g sigmoid(beta x)`.
            softplus_bwd(beta: T, threshold: T) |x, g| {
                let z = x * beta;
                if z > threshold { g } else { g * sigmoid(z) }
            }
        );
        map2!(
            /// logsigmoid: `g sigmoid(-x)`.
            logsigmoid_bwd() |x, g| g * sigmoid(-x)
        );
        map2!(
            /// mish: `g (t + x sigmoid(x) (1 - t^2))` with `t = tanh(softplus(x))` (softplus linear
            /// above 20: `1 + x * 0`, NaN at +inf as the tensor-op rule). With `e = e^x` and
            /// `n = e (e + 2)`: `t = n / (n + 2)` and `1 - t^2 = 4 (n + 1) / (n + 2)^2`, no cancellation.
            mish_bwd() |x, g| {
                let xc = if x > 20.0 { 20.0 } else { x };
                let e = exp(xc);
                let n = e * (e + 2.0);
                let d2 = 1.0 / (n + 2.0);
                let t = n * d2;
                let s = e / (1.0 + e);
                let d = t + x * s * (4.0 * (n + 1.0) * d2 * d2);
                if x > 20.0 { g * (1.0 + x * 0.0) } else { g * d }
            }
        );
    };
}

/// f32 kernels: forwards and backwards.
pub mod f32k {
    use super::vmath::{self, expf as exp, sigmoidf as sigmoid};
    use std::mem::MaybeUninit;
    type T = f32;

    /// `(sigmoid(x), 1 - sigmoid(x))` from one `e^{-|x|}`, both without cancellation.
    #[inline(always)]
    fn sigmoid_pair(x: f32) -> (f32, f32) {
        let e = exp(-x.abs());
        let inv = 1.0 / (1.0 + e);
        if x >= 0.0 { (inv, e * inv) } else { (e * inv, inv) }
    }

    backward_kernels!();

    map1!(
        /// `leaky_relu`: `x` where `x > 0`, else `x slope` (the product in f64, rounded once, as
        /// the scalar path).
        leaky_relu_fwd(slope: f64) |v| if v > 0.0 { v } else { (v as f64 * slope) as f32 }
    );
    map1!(
        /// `hardtanh`: `x` clamped to `[lo, hi]` (NaN stays NaN).
        hardtanh_fwd(lo: f32, hi: f32) |v| if v < lo { lo } else if v > hi { hi } else { v }
    );
    map1!(
        /// `hardswish`: `x relu6(x + 3) / 6`, in f64 and rounded once.
        hardswish_fwd() |v| {
            let x = v as f64;
            (x * (x + 3.0).clamp(0.0, 6.0) * (1.0 / 6.0)) as f32
        }
    );
    map1!(
        /// `hardsigmoid`: `relu6(x + 3) / 6`, in f64 and rounded once.
        hardsigmoid_fwd() |v| ((v as f64 + 3.0).clamp(0.0, 6.0) * (1.0 / 6.0)) as f32
    );
    map1!(
        /// `e^x`.
        exp_fwd() |v| exp(v)
    );
    map1!(
        /// `sigmoid(x)`.
        sigmoid_fwd() |v| sigmoid(v)
    );
    map1!(
        /// `tanh(x)`.
        tanh_fwd() |v| vmath::tanhf(v)
    );
    map1!(
        /// `silu(x) = x sigmoid(x)`.
        silu_fwd() |v| v * sigmoid(v)
    );
    map1!(
        /// `elu`: `scale x` where `x > 0`, else `sa expm1(x is)` (`sa = scale alpha`).
        elu_fwd(scale: f32, sa: f32, is: f32) |v| if v > 0.0 { scale * v } else { sa * vmath::expm1f(v * is) }
    );
    map1!(
        /// `softplus`: `x` where `beta x > threshold`, else `(max(z, 0) + log1p(e^{-|z|})) / beta`
        /// with `z = beta x` (the stable form of `log(1 + e^z) / beta`).
        softplus_fwd(beta: f32, threshold: f32) |v| {
            let z = v * beta;
            let sp = z.max(0.0) + vmath::log1pf_unit(exp(-z.abs()));
            if z > threshold { v } else { sp / beta }
        }
    );
    map1!(
        /// `logsigmoid(x) = min(x, 0) - log1p(e^{-|x|})`.
        logsigmoid_fwd() |v| v.min(0.0) - vmath::log1pf_unit(exp(-v.abs()))
    );
    map1!(
        /// `mish(x) = x tanh(softplus(x))` with `tanh(log(1 + e)) = n / (n + 2)`, `n = e (e + 2)`
        /// (`x` itself above 20, where softplus is linear and tanh rounds to 1).
        mish_fwd() |v| {
            let xc = if v > 20.0 { 20.0 } else { v };
            let e = exp(xc);
            let n = e * (e + 2.0);
            if v > 20.0 { v } else { v * (n / (n + 2.0)) }
        }
    );
}

/// f64 backward kernels (libm's `exp`: the win is one pass instead of several).
pub mod f64k {
    use std::mem::MaybeUninit;
    type T = f64;

    #[inline(always)]
    fn exp(x: f64) -> f64 {
        x.exp()
    }
    /// The stable `sigmoid` (as `vmath::sigmoidf`).
    #[inline(always)]
    fn sigmoid(x: f64) -> f64 {
        let e = (-x.abs()).exp();
        let num = if x >= 0.0 { 1.0 } else { e };
        num / (1.0 + e)
    }
    /// `(sigmoid(x), 1 - sigmoid(x))` (as the f32 one).
    #[inline(always)]
    fn sigmoid_pair(x: f64) -> (f64, f64) {
        let e = (-x.abs()).exp();
        let inv = 1.0 / (1.0 + e);
        if x >= 0.0 { (inv, e * inv) } else { (e * inv, inv) }
    }

    backward_kernels!();
}

/// True when the fused kernels serve `x` (f32 or f64 on the CPU).
pub fn fast(x: &Tensor) -> bool {
    matches!(x.dtype(), DType::F32 | DType::F64) && x.device() == Device::Cpu
}

/// True when a fused backward serves `x` and `g`: same float dtype, CPU, same shape, and no
/// graph of the gradient is being built (`create_graph` needs the tensor-op rule).
pub fn fast_backward(x: &Tensor, g: &Tensor) -> bool {
    fast(x) && g.dtype() == x.dtype() && g.device() == Device::Cpu && g.shape() == x.shape() && !crate::autograd::is_grad_enabled()
}

/// `k(x)` over an f32 tensor.
pub fn forward_f32(x: &Tensor, k: impl Fn(&[f32], &mut [MaybeUninit<f32>]) + Sync + Send) -> Result<Tensor> {
    super::map_unary_block::<f32>(x, k)
}

/// Runs the backward kernel `$name` of the matching dtype module over `(x, g)` with parameters
/// (converted to the dtype): `backward!(op, x, g, relu)` or `backward!(op, x, g, elu, scale, is, c)`.
#[macro_export]
#[doc(hidden)]
macro_rules! act_backward {
    ($op:expr, $x:expr, $g:expr, $name:ident $(, $p:expr)*) => {{
        use $crate::backend::cpu::{activations, map_binary_block};
        if $x.dtype() == $crate::DType::F32 {
            map_binary_block::<f32>($op, $x, $g, |x, g, o| activations::f32k::$name(x, g, o $(, $p as f32)*))
        } else {
            map_binary_block::<f64>($op, $x, $g, |x, g, o| activations::f64k::$name(x, g, o $(, $p as f64)*))
        }
    }};
}
