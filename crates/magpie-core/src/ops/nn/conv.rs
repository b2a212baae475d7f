//! Convolution as one trilinear form `T(x, w, y) = sum x[n, c_in, o*s - p + k*d] w[c_out, c_in, k] y[n, c_out, o]`
//! (per group), with three kernels: the conv itself (the `y` slot from `x, w`), its input
//! adjoint (the `x` slot: the transposed conv) and its weight adjoint (the `w` slot). The
//! gradient of each slot is the other two slots, so conv, conv_transpose and their gradients are
//! differentiable to any order. Kernels are im2col + GEMM (the `gemm` crate) in f32/f64, plain
//! loops for integers.

use super::util::{from_real, real_vec};
use crate::autograd;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};
use rayon::prelude::*;
use std::sync::Arc;

/// The geometry of a convolution, spatial dims padded to 3 with unit dims in front.
#[derive(Clone, Debug)]
pub(crate) struct ConvGeom {
    pub n: usize,
    pub groups: usize,
    pub cin: usize,
    pub cout: usize,
    pub ins: [usize; 3],
    pub outs: [usize; 3],
    pub k: [usize; 3],
    pub s: [usize; 3],
    pub p: [usize; 3],
    pub d: [usize; 3],
    /// The real shapes of x, w, y (1 to 3 spatial dims).
    pub x_shape: Vec<usize>,
    pub w_shape: Vec<usize>,
    pub y_shape: Vec<usize>,
}

/// Which argument of the trilinear form a kernel computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Slot {
    /// `y = conv(x, w)`.
    Y,
    /// `x = conv_input_adjoint(w, y)`.
    X,
    /// `w = conv_weight_adjoint(x, y)`.
    W,
}

impl ConvGeom {
    pub(crate) fn cig(&self) -> usize {
        self.cin / self.groups
    }
    pub(crate) fn cog(&self) -> usize {
        self.cout / self.groups
    }
    pub(crate) fn kk(&self) -> usize {
        self.k.iter().product()
    }
    pub(crate) fn o_len(&self) -> usize {
        self.outs.iter().product()
    }
    pub(crate) fn i_len(&self) -> usize {
        self.ins.iter().product()
    }
}

/// Numbers the kernels work on: f32/f64 through GEMM, i64 through loops.
trait ConvNum: crate::element::Element + std::ops::AddAssign + std::ops::Mul<Output = Self> + Send + Sync {
    fn zero() -> Self;
    /// `c (m x n) (+)= a (m x k, strides ars/acs) * b (k x n, strides brs/bcs)`; c row-major.
    #[allow(clippy::too_many_arguments)]
    fn mm(m: usize, n: usize, k: usize, c: &mut [Self], acc: bool, a: &[Self], ars: usize, acs: usize, b: &[Self], brs: usize, bcs: usize, par: bool);
}

macro_rules! gemm_num {
    ($t:ty) => {
        impl ConvNum for $t {
            fn zero() -> Self {
                0.0
            }
            fn mm(m: usize, n: usize, k: usize, c: &mut [Self], acc: bool, a: &[Self], ars: usize, acs: usize, b: &[Self], brs: usize, bcs: usize, par: bool) {
                if m == 0 || n == 0 {
                    return;
                }
                if k == 0 {
                    if !acc {
                        c[..m * n].iter_mut().for_each(|v| *v = 0.0);
                    }
                    return;
                }
                let p = if par { gemm::Parallelism::Rayon(0) } else { gemm::Parallelism::None };
                // SAFETY: the slices hold every element the strides address (checked by the callers' sizes).
                unsafe {
                    gemm::gemm(
                        m, n, k, c.as_mut_ptr(), 1, n as isize, acc, a.as_ptr(), acs as isize, ars as isize, b.as_ptr(), bcs as isize,
                        brs as isize, 1.0, 1.0, false, false, false, p,
                    );
                }
            }
        }
    };
}
gemm_num!(f32);
gemm_num!(f64);

impl ConvNum for i64 {
    fn zero() -> Self {
        0
    }
    fn mm(m: usize, n: usize, k: usize, c: &mut [Self], acc: bool, a: &[Self], ars: usize, acs: usize, b: &[Self], brs: usize, bcs: usize, _par: bool) {
        for i in 0..m {
            for j in 0..n {
                let mut s: i64 = if acc { c[i * n + j] } else { 0 };
                for l in 0..k {
                    s = s.wrapping_add(a[i * ars + l * acs].wrapping_mul(b[l * brs + j * bcs]));
                }
                c[i * n + j] = s;
            }
        }
    }
}

/// For each (kernel offset, output position): the input position, or None in the padding.
pub(crate) fn positions(g: &ConvGeom) -> Vec<Option<usize>> {
    let (kk, ol) = (g.kk(), g.o_len());
    let mut v = vec![None; kk * ol];
    let mut r = 0;
    for k0 in 0..g.k[0] {
        for k1 in 0..g.k[1] {
            for k2 in 0..g.k[2] {
                let mut c = 0;
                for o0 in 0..g.outs[0] {
                    let i0 = (o0 * g.s[0] + k0 * g.d[0]) as i64 - g.p[0] as i64;
                    for o1 in 0..g.outs[1] {
                        let i1 = (o1 * g.s[1] + k1 * g.d[1]) as i64 - g.p[1] as i64;
                        for o2 in 0..g.outs[2] {
                            let i2 = (o2 * g.s[2] + k2 * g.d[2]) as i64 - g.p[2] as i64;
                            let ok = i0 >= 0 && i1 >= 0 && i2 >= 0 && (i0 as usize) < g.ins[0] && (i1 as usize) < g.ins[1] && (i2 as usize) < g.ins[2];
                            v[r * ol + c] = if ok { Some(((i0 as usize) * g.ins[1] + i1 as usize) * g.ins[2] + i2 as usize) } else { None };
                            c += 1;
                        }
                    }
                }
                r += 1;
            }
        }
    }
    v
}

/// im2col of `cig` channels (`x` holds them consecutively): `[cig * K, O]`.
fn im2col<T: ConvNum>(x: &[T], cig: usize, il: usize, pos: &[Option<usize>], kk: usize, ol: usize, cols: &mut [T]) {
    for c in 0..cig {
        let xc = &x[c * il..(c + 1) * il];
        for r in 0..kk {
            let dst = &mut cols[(c * kk + r) * ol..(c * kk + r + 1) * ol];
            for (d, p) in dst.iter_mut().zip(&pos[r * ol..(r + 1) * ol]) {
                *d = match p {
                    Some(i) => xc[*i],
                    None => T::zero(),
                };
            }
        }
    }
}

/// col2im: adds `cols` back into the `cig` channels of `x`.
fn col2im<T: ConvNum>(cols: &[T], cig: usize, il: usize, pos: &[Option<usize>], kk: usize, ol: usize, x: &mut [T]) {
    for c in 0..cig {
        let xc = &mut x[c * il..(c + 1) * il];
        for r in 0..kk {
            let src = &cols[(c * kk + r) * ol..(c * kk + r + 1) * ol];
            for (v, p) in src.iter().zip(&pos[r * ol..(r + 1) * ol]) {
                if let Some(i) = p {
                    xc[*i] += *v;
                }
            }
        }
    }
}

fn kernel<T: ConvNum>(g: &ConvGeom, slot: Slot, a: &[T], b: &[T]) -> Vec<T> {
    let (cig, cog, kk, ol, il, grp) = (g.cig(), g.cog(), g.kk(), g.o_len(), g.i_len(), g.groups);
    let pos = positions(g);
    let ck = cig * kk;
    let par_inner = g.n <= 1;
    match slot {
        Slot::Y => {
            // a = x [n, cin, I], b = w [cout, cig*K]; y [n, cout, O]
            let mut y = vec![T::zero(); g.n * g.cout * ol];
            let per_n = g.cout * ol;
            if per_n == 0 {
                return y;
            }
            y.par_chunks_mut(per_n).enumerate().for_each(|(n, yn)| {
                let mut cols = vec![T::zero(); ck * ol];
                for gi in 0..grp {
                    let xs = &a[(n * g.cin + gi * cig) * il..];
                    im2col(xs, cig, il, &pos, kk, ol, &mut cols);
                    let w = &b[gi * cog * ck..(gi + 1) * cog * ck];
                    T::mm(cog, ol, ck, &mut yn[gi * cog * ol..(gi + 1) * cog * ol], false, w, ck, 1, &cols, ol, 1, par_inner);
                }
            });
            y
        }
        Slot::X => {
            // a = w [cout, cig*K], b = y [n, cout, O]; x [n, cin, I]
            let mut x = vec![T::zero(); g.n * g.cin * il];
            let per_n = g.cin * il;
            if per_n == 0 {
                return x;
            }
            x.par_chunks_mut(per_n).enumerate().for_each(|(n, xn)| {
                let mut cols = vec![T::zero(); ck * ol];
                for gi in 0..grp {
                    let w = &a[gi * cog * ck..(gi + 1) * cog * ck];
                    let yv = &b[(n * g.cout + gi * cog) * ol..(n * g.cout + (gi + 1) * cog) * ol];
                    // cols = w^T (ck x cog) * y (cog x O)
                    T::mm(ck, ol, cog, &mut cols, false, w, 1, ck, yv, ol, 1, par_inner);
                    col2im(&cols, cig, il, &pos, kk, ol, &mut xn[gi * cig * il..(gi + 1) * cig * il]);
                }
            });
            x
        }
        Slot::W => {
            // a = x [n, cin, I], b = y [n, cout, O]; w [cout, cig*K]
            let mut w = vec![T::zero(); g.cout * ck];
            let mut cols = vec![T::zero(); ck * ol];
            for n in 0..g.n {
                for gi in 0..grp {
                    let xs = &a[(n * g.cin + gi * cig) * il..];
                    im2col(xs, cig, il, &pos, kk, ol, &mut cols);
                    let yv = &b[(n * g.cout + gi * cog) * ol..(n * g.cout + (gi + 1) * cog) * ol];
                    // w_g (cog x ck) += y (cog x O) * cols^T (O x ck)
                    T::mm(cog, ck, ol, &mut w[gi * cog * ck..(gi + 1) * cog * ck], true, yv, ol, 1, &cols, 1, ol, true);
                }
            }
            w
        }
    }
}

fn out_shape(g: &ConvGeom, slot: Slot) -> &[usize] {
    match slot {
        Slot::Y => &g.y_shape,
        Slot::X => &g.x_shape,
        Slot::W => &g.w_shape,
    }
}

/// Computes `slot` of the convolution form from the two other arguments `(a, b)`, in the
/// order `Y: (x, w)`, `X: (w, y)`, `W: (x, y)`; records the gradient.
pub(crate) fn conv_slot(g: Arc<ConvGeom>, slot: Slot, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let dt = a.dtype();
    let shape = out_shape(&g, slot).to_vec();
    let out = if super::conv_gemm::applies(a.device(), dt) {
        // CUDA tensors: gather + cuBLAS GEMM + scatter_add on the device (conv_gemm.rs)
        super::conv_gemm::slot(&g, slot, &positions(&g), a, b)?
    } else if dt.is_float() {
        super::util::with_real!(dt, R, {
            let (av, bv) = (real_vec::<R>(a)?, real_vec::<R>(b)?);
            from_real(kernel::<R>(&g, slot, &av, &bv), &shape, dt)?
        })
    } else if dt.is_integral() && !dt.is_bool() {
        let (av, bv): (Vec<i64>, Vec<i64>) = (a.to_vec()?, b.to_vec()?);
        let _ng = autograd::no_grad();
        Tensor::from_vec(kernel::<i64>(&g, slot, &av, &bv), &shape)?.to_dtype(dt)?
    } else {
        return Err(Error::dtype("conv", format!("\"conv\" not implemented for '{}'", dt.name())));
    };
    let out = if out.device() == a.device() { out } else { crate::backend::cuda::host_result("host:conv", out, a.device())? };
    let (sa, sb) = (autograd::Saved::new("conv", a), autograd::Saved::new("conv", b));
    autograd::record("Convolution", &[a, b], &[out.clone()], move |ctx, gr| {
        let (a, b, go) = (sa.get()?, sb.get()?, &gr[0]);
        let g2 = g.clone();
        let (ga, gb) = match slot {
            // y = F(x, w): dx = X(w, gy), dw = W(x, gy)
            Slot::Y => (
                if ctx.needs_input_grad(0) { Some(conv_slot(g2.clone(), Slot::X, &b, go)?) } else { None },
                if ctx.needs_input_grad(1) { Some(conv_slot(g2, Slot::W, &a, go)?) } else { None },
            ),
            // x = X(w, y): dw = W(gx, y), dy = F(gx, w)
            Slot::X => (
                if ctx.needs_input_grad(0) { Some(conv_slot(g2.clone(), Slot::W, go, &b)?) } else { None },
                if ctx.needs_input_grad(1) { Some(conv_slot(g2, Slot::Y, go, &a)?) } else { None },
            ),
            // w = W(x, y): dx = X(gw, y), dy = F(x, gw)
            Slot::W => (
                if ctx.needs_input_grad(0) { Some(conv_slot(g2.clone(), Slot::X, go, &b)?) } else { None },
                if ctx.needs_input_grad(1) { Some(conv_slot(g2, Slot::Y, &a, go)?) } else { None },
            ),
        };
        Ok(vec![ga, gb])
    });
    Ok(out)
}

/// The padding of a convolution: explicit sizes, `'same'` or `'valid'`.
#[derive(Clone, Debug)]
pub enum Padding {
    Explicit(Vec<i64>),
    Same,
    Valid,
}

fn expand(op: &str, name: &str, v: &[i64], nd: usize) -> Result<Vec<i64>> {
    match v.len() {
        1 => Ok(vec![v[0]; nd]),
        n if n == nd => Ok(v.to_vec()),
        n => Err(Error::value(op, format!("expected {name} to be a single integer value or a list of {nd} values to match the convolution dimensions, but got {name}={v:?} ({n} values)"))),
    }
}

fn pad3(v: &[usize], fill: usize) -> [usize; 3] {
    let mut o = [fill; 3];
    let off = 3 - v.len();
    o[off..].copy_from_slice(v);
    o
}

/// Input with a batch dim (and whether it had one), checking its rank.
fn batched(op: &str, x: &Tensor, nd: usize) -> Result<(Tensor, bool)> {
    if x.ndim() == nd + 2 {
        Ok((x.clone(), true))
    } else if x.ndim() == nd + 1 {
        Ok((x.unsqueeze(0)?, false))
    } else {
        Err(Error::shape(op, format!("Expected {}D (unbatched) or {}D (batched) input to {op}, but got input of size: {:?}", nd + 1, nd + 2, x.shape())))
    }
}

fn check_common(op: &str, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, nd: usize) -> Result<()> {
    if w.ndim() != nd + 2 {
        return Err(Error::shape(op, format!("weight should have at least three dimensions: expected {}D weight, got {:?}", nd + 2, w.shape())));
    }
    if x.dtype() != w.dtype() {
        return Err(Error::dtype(op, format!("Input type ({}) and weight type ({}) should be the same", x.dtype(), w.dtype())));
    }
    if let Some(b) = bias {
        if b.dtype() != x.dtype() {
            return Err(Error::dtype(op, format!("Input type ({}) and bias type ({}) should be the same", x.dtype(), b.dtype())));
        }
    }
    if x.dtype().is_bool() || x.dtype().is_complex() || x.dtype() == DType::F8E4M3 || x.dtype() == DType::F8E5M2 {
        return Err(Error::dtype(op, format!("\"{op}\" not implemented for '{}'", x.dtype().name())));
    }
    Ok(())
}

fn add_bias(y: Tensor, bias: Option<&Tensor>, cout: usize, nd: usize) -> Result<Tensor> {
    match bias {
        None => Ok(y),
        Some(b) => {
            if b.ndim() != 1 || b.shape()[0] != cout {
                return Err(Error::shape("conv", format!("Given weight of size ..., expected bias to be 1-dimensional with {cout} elements, but got bias of size {:?} instead", b.shape())));
            }
            let mut s = vec![cout as i64];
            s.extend(std::iter::repeat_n(1i64, nd));
            y.add(&b.reshape(&s)?)
        }
    }
}

/// `conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)`.
#[allow(clippy::too_many_arguments)]
pub fn conv(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, nd: usize, stride: &[i64], padding: &Padding, dilation: &[i64], groups: i64) -> Result<Tensor> {
    let _prof = crate::profiler::op_opt("convolution", &[Some(x), Some(w), bias]);
    if (1..=3).contains(&nd) {
        if let Some(c) = crate::amp::optional(["conv1d", "conv2d", "conv3d"][nd - 1], &[Some(x), Some(w), bias])? {
            return conv(c.req(0)?, c.req(1)?, c.opt(2), nd, stride, padding, dilation, groups);
        }
    }
    let op = ["conv1d", "conv2d", "conv3d"][nd - 1];
    // half tensors: products and bias in float32, rounded once (PyTorch's acc_type)
    if let Some(h) = crate::ops::acc::half_acc_opt(x, &[Some(w), bias]) {
        use crate::ops::acc::{down, up, up_opt};
        return down(conv(&up(x)?, &up(w)?, up_opt(bias)?.as_ref(), nd, stride, padding, dilation, groups)?, h);
    }
    check_common(op, x, w, bias, nd)?;
    let (xb, was) = batched(op, x, nd)?;
    let s = expand(op, "stride", stride, nd)?;
    let d = expand(op, "dilation", dilation, nd)?;
    if s.iter().any(|&v| v <= 0) {
        return Err(Error::value(op, "non-positive stride is not supported"));
    }
    if d.iter().any(|&v| v <= 0) {
        return Err(Error::value(op, "dilation should be greater than zero"));
    }
    if groups <= 0 {
        return Err(Error::value(op, "non-positive groups is not supported"));
    }
    let groups = groups as usize;
    let (n, cin) = (xb.shape()[0], xb.shape()[1]);
    let cout = w.shape()[0];
    let ins: Vec<i64> = xb.shape()[2..].iter().map(|&v| v as i64).collect();
    let ks: Vec<i64> = w.shape()[2..].iter().map(|&v| v as i64).collect();
    if cout % groups != 0 {
        return Err(Error::value(op, format!("Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of size {:?} instead", w.shape())));
    }
    if cin != w.shape()[1] * groups {
        return Err(Error::shape(op, format!("Given groups={groups}, weight of size {:?}, expected input{:?} to have {} channels, but got {cin} channels instead", w.shape(), xb.shape(), w.shape()[1] * groups)));
    }
    // left padding and output sizes per dim
    let (pl, outs): (Vec<i64>, Vec<i64>) = match padding {
        Padding::Explicit(p) => {
            let p = expand(op, "padding", p, nd)?;
            if p.iter().any(|&v| v < 0) {
                return Err(Error::value(op, "negative padding is not supported"));
            }
            let outs = (0..nd).map(|i| (ins[i] + 2 * p[i] - d[i] * (ks[i] - 1) - 1).div_euclid(s[i]) + 1).collect();
            (p, outs)
        }
        Padding::Valid => (vec![0; nd], (0..nd).map(|i| (ins[i] - d[i] * (ks[i] - 1) - 1).div_euclid(s[i]) + 1).collect()),
        Padding::Same => {
            if s.iter().any(|&v| v != 1) {
                return Err(Error::value(op, "padding='same' is not supported for strided convolutions"));
            }
            ((0..nd).map(|i| d[i] * (ks[i] - 1) / 2).collect(), ins.clone())
        }
    };
    for i in 0..nd {
        let padded = match padding {
            Padding::Explicit(_) => ins[i] + 2 * pl[i],
            Padding::Valid => ins[i],
            Padding::Same => ins[i] + d[i] * (ks[i] - 1),
        };
        if padded < d[i] * (ks[i] - 1) + 1 {
            return Err(Error::value(
                op,
                format!("Calculated padded input size per channel: ({padded}). Kernel size: ({}). Kernel size can't be greater than actual input size", d[i] * (ks[i] - 1) + 1),
            ));
        }
    }
    let outs_u: Vec<usize> = outs.iter().map(|&o| o.max(0) as usize).collect();
    let mut y_shape = vec![n, cout];
    y_shape.extend(&outs_u);
    let u = |v: &[i64]| v.iter().map(|&x| x as usize).collect::<Vec<_>>();
    let g = ConvGeom {
        n,
        groups,
        cin,
        cout,
        ins: pad3(&u(&ins), 1),
        outs: pad3(&outs_u, 1),
        k: pad3(&u(&ks), 1),
        s: pad3(&u(&s), 1),
        p: pad3(&u(&pl), 0),
        d: pad3(&u(&d), 1),
        x_shape: xb.shape().to_vec(),
        w_shape: w.shape().to_vec(),
        y_shape,
    };
    let y = conv_slot(Arc::new(g), Slot::Y, &xb, w)?;
    let y = add_bias(y, bias, cout, nd)?;
    if was { Ok(y) } else { y.squeeze_dims(&[0]) }
}

/// `conv_transpose{1,2,3}d(input, weight, bias, stride, padding, output_padding, groups, dilation)`.
#[allow(clippy::too_many_arguments)]
pub fn conv_transpose(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, nd: usize, stride: &[i64], padding: &[i64], output_padding: &[i64], groups: i64, dilation: &[i64]) -> Result<Tensor> {
    let _prof = crate::profiler::op_opt("conv_transpose", &[Some(x), Some(w), bias]);
    if (1..=3).contains(&nd) {
        let name = ["conv_transpose1d", "conv_transpose2d", "conv_transpose3d"][nd - 1];
        if let Some(c) = crate::amp::optional(name, &[Some(x), Some(w), bias])? {
            return conv_transpose(c.req(0)?, c.req(1)?, c.opt(2), nd, stride, padding, output_padding, groups, dilation);
        }
    }
    let op = ["conv_transpose1d", "conv_transpose2d", "conv_transpose3d"][nd - 1];
    if let Some(h) = crate::ops::acc::half_acc_opt(x, &[Some(w), bias]) {
        use crate::ops::acc::{down, up, up_opt};
        return down(conv_transpose(&up(x)?, &up(w)?, up_opt(bias)?.as_ref(), nd, stride, padding, output_padding, groups, dilation)?, h);
    }
    check_common(op, x, w, bias, nd)?;
    let (xb, was) = batched(op, x, nd)?;
    let s = expand(op, "stride", stride, nd)?;
    let d = expand(op, "dilation", dilation, nd)?;
    let p = expand(op, "padding", padding, nd)?;
    let op_ = expand(op, "output_padding", output_padding, nd)?;
    if s.iter().any(|&v| v <= 0) {
        return Err(Error::value(op, "non-positive stride is not supported"));
    }
    if d.iter().any(|&v| v <= 0) {
        return Err(Error::value(op, "dilation should be greater than zero"));
    }
    if p.iter().any(|&v| v < 0) {
        return Err(Error::value(op, "negative padding is not supported"));
    }
    if op_.iter().any(|&v| v < 0) {
        return Err(Error::value(op, "negative output_padding is not supported"));
    }
    for i in 0..nd {
        if op_[i] >= s[i] && op_[i] >= d[i] {
            return Err(Error::value(op, format!("output padding must be smaller than either stride or dilation, but got output_padding={op_:?}, stride={s:?}, dilation={d:?}")));
        }
    }
    if groups <= 0 {
        return Err(Error::value(op, "non-positive groups is not supported"));
    }
    let groups = groups as usize;
    let (n, cin_t) = (xb.shape()[0], xb.shape()[1]);
    if w.shape()[0] != cin_t {
        return Err(Error::shape(op, format!("Given transposed=1, weight of size {:?}, expected input{:?} to have {} channels, but got {cin_t} channels instead", w.shape(), xb.shape(), w.shape()[0])));
    }
    if cin_t % groups != 0 {
        return Err(Error::value(op, format!("Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of size {:?} instead", w.shape())));
    }
    let cout_t = w.shape()[1] * groups;
    let ins: Vec<i64> = xb.shape()[2..].iter().map(|&v| v as i64).collect();
    let ks: Vec<i64> = w.shape()[2..].iter().map(|&v| v as i64).collect();
    let outs: Vec<i64> = (0..nd).map(|i| (ins[i] - 1) * s[i] - 2 * p[i] + d[i] * (ks[i] - 1) + op_[i] + 1).collect();
    if outs.iter().any(|&o| o < 0) {
        return Err(Error::value(op, format!("Given input size per channel: {ins:?}, calculated output size per channel: {outs:?}. Output size is too small")));
    }
    let u = |v: &[i64]| v.iter().map(|&x| x.max(0) as usize).collect::<Vec<_>>();
    // the transposed conv is the input adjoint of a conv from the output (cout_t channels) to x (cin_t channels)
    let mut x_shape = vec![n, cout_t];
    x_shape.extend(u(&outs));
    let g = ConvGeom {
        n,
        groups,
        cin: cout_t,
        cout: cin_t,
        ins: pad3(&u(&outs), 1),
        outs: pad3(&u(&ins), 1),
        k: pad3(&u(&ks), 1),
        s: pad3(&u(&s), 1),
        p: pad3(&u(&p), 0),
        d: pad3(&u(&d), 1),
        x_shape,
        w_shape: w.shape().to_vec(),
        y_shape: xb.shape().to_vec(),
    };
    let y = conv_slot(Arc::new(g), Slot::X, w, &xb)?;
    let y = add_bias(y, bias, cout_t, nd)?;
    if was { Ok(y) } else { y.squeeze_dims(&[0]) }
}

/// `F.linear(input, weight, bias)`: `input @ weight.T + bias`, one GEMM over the flattened rows.
pub fn linear(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let _prof = crate::profiler::op_opt("linear", &[Some(x), Some(w), bias]);
    // CUDA autocast with float32 parameters: float32 gradients from the kernels, no casts back
    #[cfg(feature = "cuda")]
    if crate::amp::any_active() {
        if let Some(y) = super::linear_amp::linear(x, w, bias)? {
            return Ok(y);
        }
    }
    if let Some(c) = crate::amp::optional("linear", &[Some(x), Some(w), bias])? {
        return linear(c.req(0)?, c.req(1)?, c.opt(2));
    }
    let op = "linear";
    if w.ndim() > 2 || w.ndim() == 0 {
        return Err(Error::shape(op, format!("weight must be 1-D or 2-D, got {:?}", w.shape())));
    }
    if x.ndim() == 0 {
        return Err(Error::shape(op, "both arguments to linear need to be at least 1D, but they are 0D and 1D"));
    }
    let inf = *x.shape().last().unwrap_or(&0);
    let w2 = if w.ndim() == 1 { w.unsqueeze(0)? } else { w.clone() };
    if w2.shape()[1] != inf {
        return Err(Error::shape(op, format!("mat1 and mat2 shapes cannot be multiplied ({}x{inf} and {}x{})", x.numel() / inf.max(1), w2.shape()[1], w2.shape()[0])));
    }
    if x.dtype() != w.dtype() {
        return Err(Error::dtype(op, format!("expected m1 and m2 to have the same dtype, but got: {} != {}", x.dtype(), w.dtype())));
    }
    // half CPU tensors with a bias: product and bias in float32, rounded once (PyTorch's addmm).
    // CUDA ones keep the 16-bit product and add the bias to it (two roundings), as the autocast
    // path (`linear_amp`), which is tested bit for bit against this one, does
    if let (Some(h), Some(b), false) = (crate::ops::acc::half_acc_opt(x, &[Some(w), bias]), bias, x.device().is_cuda()) {
        use crate::ops::acc::{down, up};
        return down(linear(&up(x)?, &up(w)?, Some(&up(b)?))?, h);
    }
    if let Some(y) = super::linear::linear_gemm(x, w, bias)? {
        return Ok(y);
    }
    let outf = w2.shape()[0];
    let rows: usize = x.shape()[..x.ndim() - 1].iter().product();
    // one 2-D GEMM over all rows (the matmul kernel and its backward are much faster than the
    // 1x1-convolution path for the shapes of transformer layers)
    let y = x.reshape(&[rows as i64, inf as i64])?.matmul(&w2.t()?)?;
    let mut shape: Vec<i64> = x.shape()[..x.ndim() - 1].iter().map(|&v| v as i64).collect();
    if w.ndim() == 2 {
        shape.push(outf as i64);
    }
    let y = y.reshape(&shape)?;
    match bias {
        Some(b) => y.add(b),
        None => Ok(y),
    }
}

/// `F.bilinear(input1, input2, weight, bias)`: `y[.., o] = x1 W[o] x2 + b[o]`.
pub fn bilinear(x1: &Tensor, x2: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let _prof = crate::profiler::op_opt("bilinear", &[Some(x1), Some(x2), Some(w), bias]);
    if let Some(c) = crate::amp::optional("bilinear", &[Some(x1), Some(x2), Some(w), bias])? {
        return bilinear(c.req(0)?, c.req(1)?, c.req(2)?, c.opt(3));
    }
    let op = "bilinear";
    if let Some(h) = crate::ops::acc::half_acc_opt(x1, &[Some(x2), Some(w), bias]) {
        use crate::ops::acc::{down, up, up_opt};
        return down(bilinear(&up(x1)?, &up(x2)?, &up(w)?, up_opt(bias)?.as_ref())?, h);
    }
    if w.ndim() != 3 {
        return Err(Error::shape(op, format!("bilinear(): weight must be 3-dimensional, got {:?}", w.shape())));
    }
    let (o, i, j) = (w.shape()[0], w.shape()[1], w.shape()[2]);
    if x1.ndim() == 0 || x2.ndim() == 0 || x1.shape()[..x1.ndim() - 1] != x2.shape()[..x2.ndim() - 1] {
        return Err(Error::shape(op, format!("bilinear(): input batch dimensions do not match: got {:?} and {:?}", x1.shape(), x2.shape())));
    }
    if x1.shape()[x1.ndim() - 1] != i || x2.shape()[x2.ndim() - 1] != j {
        return Err(Error::shape(op, format!("bilinear(): input sizes {:?} and {:?} do not match weight {:?}", x1.shape(), x2.shape(), w.shape())));
    }
    // t[.., o*i] = x2 . W[o, i, :]; then y[.., o] = sum_i x1[.., i] t[.., o, i]
    let t = linear(x2, &w.reshape(&[(o * i) as i64, j as i64])?, None)?;
    let mut shape: Vec<i64> = x1.shape()[..x1.ndim() - 1].iter().map(|&v| v as i64).collect();
    shape.extend([o as i64, i as i64]);
    let t = t.reshape(&shape)?;
    let y = t.mul(&x1.unsqueeze(-2)?)?.sum_dims(Some(&[-1]), false, None)?;
    match bias {
        Some(b) => y.add(b),
        None => Ok(y),
    }
}
