//! Pooling over 1 to 3 spatial dims: average (a product of per-dim window maps), adaptive
//! average, max and adaptive max (indices found by a direct loop, values gathered so that the
//! gradient is a scatter-add), and max unpooling.

use super::gather::{put_rows, take_rows, RowIdx};
use super::resample::{adaptive_range, adaptive_taps, apply_separable, sum_taps_int, Taps};
use crate::tensor::Tensor;
use crate::{Error, Result};
use rayon::prelude::*;
use std::sync::Arc;

/// Expands an int-or-list pooling parameter to `nd` values (`[k]` means `k` in every dim).
pub(crate) fn expand_param(op: &str, name: &str, v: &[i64], nd: usize) -> Result<Vec<i64>> {
    match v.len() {
        1 => Ok(vec![v[0]; nd]),
        n if n == nd => Ok(v.to_vec()),
        _ => Err(Error::value(op, format!("{op}: {name} must either be a single int, or a tuple of {nd} ints"))),
    }
}

/// Checks a pooling input (`nd + 1` or `nd + 2` dims, non-batch dims non-empty) and returns it
/// with a batch dim, plus whether it had one.
pub(crate) fn batched(op: &str, x: &Tensor, nd: usize) -> Result<(Tensor, bool)> {
    let n = x.ndim();
    let ok = (n == nd + 1 || n == nd + 2) && x.shape()[n - nd - 1..].iter().all(|&s| s > 0);
    if !ok {
        return Err(Error::shape(
            op,
            format!("{op}: Expected {}D or {}D (batch mode) tensor with optional 0 dim batch size for input, but got {:?}", nd + 1, nd + 2, x.shape()),
        ));
    }
    Ok(if n == nd + 1 { (x.unsqueeze(0)?, false) } else { (x.clone(), true) })
}

fn unbatch(y: Tensor, was_batched: bool) -> Result<Tensor> {
    if was_batched { Ok(y) } else { y.squeeze_dims(&[0]) }
}

/// `pooling_output_shape`: windows of `k` (dilation `d`) every `s` over `n + 2p` positions.
pub(crate) fn pool_out(n: i64, k: i64, s: i64, p: i64, d: i64, ceil: bool) -> i64 {
    let num = n + 2 * p - d * (k - 1) - 1 + if ceil { s - 1 } else { 0 };
    let mut o = num.div_euclid(s) + 1;
    if ceil && (o - 1) * s >= n + p {
        o -= 1;
    }
    o
}

/// Pooling geometry in every spatial dim.
struct Geom {
    ins: Vec<i64>,
    outs: Vec<i64>,
    k: Vec<i64>,
    s: Vec<i64>,
    p: Vec<i64>,
    d: Vec<i64>,
}

#[allow(clippy::too_many_arguments)]
fn geometry(op: &str, x: &Tensor, nd: usize, k: &[i64], s: &[i64], p: &[i64], d: &[i64], ceil: bool) -> Result<Geom> {
    let k = expand_param(op, "kernel_size", k, nd)?;
    let s = if s.is_empty() { k.clone() } else { expand_param(op, "stride", s, nd)? };
    let p = expand_param(op, "padding", p, nd)?;
    let d = expand_param(op, "dilation", d, nd)?;
    if k.iter().any(|&v| v <= 0) {
        return Err(Error::value(op, format!("kernel size should be greater than zero, but got {k:?}")));
    }
    if s.iter().any(|&v| v <= 0) {
        return Err(Error::value(op, format!("stride should be greater than zero, but got {s:?}")));
    }
    if d.iter().any(|&v| v <= 0) {
        return Err(Error::value(op, format!("dilation should be greater than zero, but got {d:?}")));
    }
    if p.iter().zip(&k).any(|(&pp, &kk)| pp < 0 || pp > kk / 2) {
        return Err(Error::value(op, format!("pad should be at most half of effective kernel size, but got pad={p:?}, kernel_size={k:?}")));
    }
    let ins: Vec<i64> = x.shape()[x.ndim() - nd..].iter().map(|&v| v as i64).collect();
    let outs: Vec<i64> = (0..nd).map(|i| pool_out(ins[i], k[i], s[i], p[i], d[i], ceil)).collect();
    if outs.iter().any(|&o| o < 1) {
        return Err(Error::value(op, format!("Given input size: {ins:?}. Calculated output size: {outs:?}. Output size is too small")));
    }
    Ok(Geom { ins, outs, k, s, p, d })
}

/// `avg_pool{1,2,3}d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)`.
#[allow(clippy::too_many_arguments)]
pub fn avg_pool(x: &Tensor, nd: usize, k: &[i64], s: &[i64], p: &[i64], ceil: bool, count_include_pad: bool, divisor_override: Option<i64>) -> Result<Tensor> {
    let op = ["avg_pool1d", "avg_pool2d", "avg_pool3d"][nd - 1];
    if x.dtype().is_bool() || x.dtype().is_complex() {
        return Err(Error::dtype(op, format!("\"{op}\" not implemented for '{}'", x.dtype().name())));
    }
    if divisor_override == Some(0) {
        return Err(Error::value(op, "divisor must be not zero"));
    }
    let (xb, was) = batched(op, x, nd)?;
    let g = geometry(op, &xb, nd, k, s, p, &[1], ceil)?;
    // per dim: window sums (weight 1) and the divisor factor of each output position
    let mut maps = Vec::new();
    let mut divs: Vec<Vec<f64>> = Vec::new();
    for i in 0..nd {
        let (n, kk, ss, pp) = (g.ins[i], g.k[i], g.s[i], g.p[i]);
        let mut t = Taps::new(n as usize);
        let mut dv = Vec::new();
        for o in 0..g.outs[i] {
            let start = o * ss - pp;
            let end = (start + kk).min(n + pp);
            let size = end - start;
            let (a, b) = (start.max(0), end.min(n));
            t.row((a..b.max(a)).map(|j| (j as usize, 1.0)));
            dv.push(if count_include_pad { size as f64 } else { (b - a).max(0) as f64 });
        }
        maps.push(t);
        divs.push(dv);
    }
    let y = if x.dtype().is_float() {
        match divisor_override {
            Some(dv) => apply_separable(&xb, maps)?.div_scalar(dv as f64)?,
            None => {
                let maps = maps.into_iter().zip(&divs).map(|(t, dv)| t.scale_rows(|o| 1.0 / dv[o])).collect();
                apply_separable(&xb, maps)?
            }
        }
    } else {
        // integers: exact window sums, then a truncating division by the whole divisor
        let sums: Vec<i64> = sum_taps_int(&xb, 2, &maps)?.to_vec()?;
        let spatial: usize = g.outs.iter().product::<i64>() as usize;
        let mut div = vec![1f64; spatial];
        let mut stride = spatial;
        for dv in &divs {
            stride /= dv.len();
            for (j, v) in div.iter_mut().enumerate() {
                *v *= dv[(j / stride) % dv.len()];
            }
        }
        let out: Vec<i64> = sums
            .iter()
            .enumerate()
            .map(|(j, &v)| {
                let dd = divisor_override.unwrap_or(div[j % spatial] as i64);
                if dd == 0 { 0 } else { v / dd }
            })
            .collect();
        let mut shape = xb.shape()[..2].to_vec();
        shape.extend(g.outs.iter().map(|&o| o as usize));
        Tensor::from_vec(out, &shape)?.to_device(x.device())?.to_dtype(x.dtype())?
    };
    unbatch(y, was)
}

fn parse_output_size(op: &str, x: &Tensor, nd: usize, out: &[Option<i64>]) -> Result<Vec<usize>> {
    let out: Vec<Option<i64>> = match out.len() {
        1 => vec![out[0]; nd],
        n if n == nd => out.to_vec(),
        _ => return Err(Error::value(op, format!("{op}: output_size must be {nd} ints"))),
    };
    let ins = &x.shape()[x.ndim() - nd..];
    out.iter()
        .zip(ins)
        .map(|(o, &n)| match o {
            Some(v) if *v < 0 => Err(Error::value(op, format!("{op}: elements of output_size must be greater than or equal to 0 but received {v}"))),
            Some(v) => Ok(*v as usize),
            None => Ok(n),
        })
        .collect()
}

/// `adaptive_avg_pool{1,2,3}d(input, output_size)` (None entries keep the input size).
pub fn adaptive_avg_pool(x: &Tensor, nd: usize, output_size: &[Option<i64>]) -> Result<Tensor> {
    let op = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"][nd - 1];
    super::util::check_float(op, x)?;
    let (xb, was) = batched(op, x, nd)?;
    let outs = parse_output_size(op, &xb, nd, output_size)?;
    let ins = &xb.shape()[2..];
    let maps = ins.iter().zip(&outs).map(|(&n, &o)| adaptive_taps(n, o)).collect();
    unbatch(apply_separable(&xb, maps)?, was)
}

/// Windows along each of up to 3 dims: for output `o` of dim `i`, the valid input positions.
type Windows = Vec<Vec<Vec<usize>>>;

/// Index of the max of each window (first max wins, NaN wins), flattened within the plane.
fn argmax_windows(x: &Tensor, planes: usize, ins: &[usize], win: &Windows) -> Result<Vec<usize>> {
    let v: Vec<f64> = x.to_vec()?;
    let plane: usize = ins.iter().product();
    let outs: Vec<usize> = win.iter().map(|w| w.len()).collect();
    let per: usize = outs.iter().product();
    // pad to 3 dims with unit dims in front
    let pad = 3 - ins.len();
    let one = vec![vec![0usize]];
    let w3: Vec<&Vec<Vec<usize>>> = (0..3).map(|i| if i < pad { &one } else { &win[i - pad] }).collect();
    let in3: Vec<usize> = (0..3).map(|i| if i < pad { 1 } else { ins[i - pad] }).collect();
    let mut idx = vec![0usize; planes * per];
    idx.par_chunks_mut(per.max(1)).enumerate().for_each(|(pl, out)| {
        if per == 0 {
            return;
        }
        let src = &v[pl * plane..(pl + 1) * plane];
        let mut j = 0;
        for a in w3[0] {
            for b in w3[1] {
                for c in w3[2] {
                    let mut best = f64::NEG_INFINITY;
                    let mut bi = None;
                    for &ia in a {
                        for &ib in b {
                            for &ic in c {
                                let pos = (ia * in3[1] + ib) * in3[2] + ic;
                                let val = src[pos];
                                if bi.is_none() {
                                    bi = Some(pos);
                                }
                                if val > best || val.is_nan() {
                                    best = val;
                                    bi = Some(pos);
                                }
                            }
                        }
                    }
                    out[j] = bi.unwrap_or(0);
                    j += 1;
                }
            }
        }
    });
    Ok(idx)
}

fn max_from_windows(x: &Tensor, nd: usize, win: Windows) -> Result<(Tensor, Tensor)> {
    let planes: usize = x.shape()[..2].iter().product();
    let ins = x.shape()[2..].to_vec();
    let idx = argmax_windows(x, planes, &ins, &win)?;
    let mut shape = x.shape()[..2].to_vec();
    shape.extend(win.iter().map(|w| w.len()));
    let per: usize = shape[2..].iter().product();
    let ind = Tensor::from_vec(idx.iter().map(|&i| i as i64).collect::<Vec<_>>(), &shape)?.to_device(x.device())?;
    let ri = Arc::new(RowIdx { rows: planes, per_row: per, n_src: ins.iter().product(), idx });
    let _ = nd;
    Ok((take_rows(x, ri, &shape)?, ind))
}

/// `max_pool{1,2,3}d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)`.
#[allow(clippy::too_many_arguments)]
pub fn max_pool(x: &Tensor, nd: usize, k: &[i64], s: &[i64], p: &[i64], d: &[i64], ceil: bool) -> Result<(Tensor, Tensor)> {
    let op = ["max_pool1d", "max_pool2d", "max_pool3d"][nd - 1];
    if x.dtype().is_bool() || x.dtype().is_complex() {
        return Err(Error::dtype(op, format!("\"{op}\" not implemented for '{}'", x.dtype().name())));
    }
    let (xb, was) = batched(op, x, nd)?;
    let g = geometry(op, &xb, nd, k, s, p, d, ceil)?;
    let win: Windows = (0..nd)
        .map(|i| {
            (0..g.outs[i])
                .map(|o| {
                    (0..g.k[i])
                        .map(|kk| o * g.s[i] - g.p[i] + kk * g.d[i])
                        .filter(|&j| j >= 0 && j < g.ins[i])
                        .map(|j| j as usize)
                        .collect()
                })
                .collect()
        })
        .collect();
    let (v, i) = max_from_windows(&xb, nd, win)?;
    Ok((unbatch(v, was)?, unbatch(i, was)?))
}

/// `adaptive_max_pool{1,2,3}d(input, output_size, return_indices=True)`.
pub fn adaptive_max_pool(x: &Tensor, nd: usize, output_size: &[Option<i64>]) -> Result<(Tensor, Tensor)> {
    let op = ["adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"][nd - 1];
    if x.dtype().is_bool() || x.dtype().is_complex() {
        return Err(Error::dtype(op, format!("\"{op}\" not implemented for '{}'", x.dtype().name())));
    }
    let (xb, was) = batched(op, x, nd)?;
    let outs = parse_output_size(op, &xb, nd, output_size)?;
    let ins = xb.shape()[2..].to_vec();
    let win: Windows = (0..nd)
        .map(|i| {
            (0..outs[i])
                .map(|o| {
                    let (a, b) = adaptive_range(o, ins[i], outs[i]);
                    (a..b).collect()
                })
                .collect()
        })
        .collect();
    let (v, i) = max_from_windows(&xb, nd, win)?;
    Ok((unbatch(v, was)?, unbatch(i, was)?))
}

/// `max_unpool{1,2,3}d(input, indices, kernel_size, stride, padding, output_size)`.
#[allow(clippy::too_many_arguments)]
pub fn max_unpool(x: &Tensor, indices: &Tensor, nd: usize, k: &[i64], s: &[i64], p: &[i64], output_size: Option<&[i64]>) -> Result<Tensor> {
    let op = ["max_unpool1d", "max_unpool2d", "max_unpool3d"][nd - 1];
    if indices.dtype() != crate::DType::I64 {
        return Err(Error::dtype(op, format!("elements in indices should be type int64 but got: {}", indices.dtype())));
    }
    if indices.shape() != x.shape() {
        return Err(Error::shape(op, format!("Expected shape of indices to be same as that of the input tensor ({:?}) but got indices tensor with shape: {:?}", x.shape(), indices.shape())));
    }
    let (xb, was) = batched(op, x, nd)?;
    let k = expand_param(op, "kernel_size", k, nd)?;
    let s = if s.is_empty() { k.clone() } else { expand_param(op, "stride", s, nd)? };
    let p = expand_param(op, "padding", p, nd)?;
    let ins: Vec<i64> = xb.shape()[2..].iter().map(|&v| v as i64).collect();
    let default: Vec<i64> = (0..nd).map(|i| (ins[i] - 1) * s[i] - 2 * p[i] + k[i]).collect();
    let outs: Vec<i64> = match output_size {
        None => default.clone(),
        Some(o) => {
            let o = if o.len() == nd + 2 || (o.len() == nd + 1 && !was) { &o[o.len() - nd..] } else { o };
            if o.len() != nd {
                return Err(Error::value(op, format!("output_size must have {nd} or {} elements, got {}", nd + 2, o.len())));
            }
            for i in 0..nd {
                let (lo, hi) = (default[i] - s[i], default[i] + s[i]);
                if o[i] <= lo || o[i] >= hi {
                    return Err(Error::value(op, format!("invalid output_size {o:?} (dim {i} must be between {lo} and {hi})")));
                }
            }
            o.to_vec()
        }
    };
    if outs.iter().any(|&o| o <= 0) {
        return Err(Error::value(op, format!("{op}: output size {outs:?} must be positive")));
    }
    let planes: usize = xb.shape()[..2].iter().product();
    let n_src: usize = outs.iter().product::<i64>() as usize;
    let raw: Vec<i64> = indices.to_vec()?;
    let mut idx = Vec::with_capacity(raw.len());
    for &i in &raw {
        if i < 0 || i as usize >= n_src {
            return Err(Error::index(op, format!("Found an invalid max index: {i} (output volumes are of size {outs:?})")));
        }
        idx.push(i as usize);
    }
    let per: usize = ins.iter().product::<i64>() as usize;
    let mut shape = xb.shape()[..2].to_vec();
    shape.extend(outs.iter().map(|&o| o as usize));
    let ri = Arc::new(RowIdx { rows: planes, per_row: per, n_src, idx });
    unbatch(put_rows(&xb, ri, &shape, true)?, was)
}
