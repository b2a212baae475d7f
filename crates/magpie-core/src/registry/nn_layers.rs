//! Registry entries for the nn family's layers: convolution, linear, fold, normalization,
//! embeddings, dropout and attention.

use super::{Args, Registry, Value};
use crate::ops::nn;
use crate::tensor::Tensor;
use crate::{Error, Result};

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}

fn ints_or(a: &mut Args, i: usize, name: &str, default: &[i64]) -> Result<Vec<i64>> {
    Ok(a.opt_ints(i, name)?.unwrap_or_else(|| default.to_vec()))
}

fn list(v: Vec<Tensor>) -> Result<Value> {
    Ok(Value::List(v.into_iter().map(Value::Tensor).collect()))
}

fn conv(a: &mut Args, nd: usize) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let w = a.tensor(1, "weight")?;
    let b = a.opt_tensor(2, "bias")?;
    let s = ints_or(a, 3, "stride", &[1])?;
    let p = match a.get_some(4, "padding") {
        None => nn::Padding::Explicit(vec![0]),
        Some(Value::Str(s)) if s == "same" => nn::Padding::Same,
        Some(Value::Str(s)) if s == "valid" => nn::Padding::Valid,
        Some(Value::Str(s)) => return Err(Error::value(a.op(), format!("Invalid padding string '{s}', should be one of ['valid', 'same']"))),
        Some(Value::Int(v)) => nn::Padding::Explicit(vec![v]),
        Some(Value::List(l)) => nn::Padding::Explicit(
            l.iter().map(|x| match x {
                Value::Int(v) => Ok(*v),
                o => Err(Error::value("conv", format!("padding must be ints, not {}", o.kind()))),
            }).collect::<Result<Vec<_>>>()?,
        ),
        Some(v) => return Err(Error::value(a.op(), format!("padding must be ints or a string, not {}", v.kind()))),
    };
    let d = ints_or(a, 5, "dilation", &[1])?;
    let g = a.int_or(6, "groups", 1)?;
    t(nn::conv(&x, &w, b.as_ref(), nd, &s, &p, &d, g)?)
}

fn conv_t(a: &mut Args, nd: usize) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let w = a.tensor(1, "weight")?;
    let b = a.opt_tensor(2, "bias")?;
    let s = ints_or(a, 3, "stride", &[1])?;
    let p = ints_or(a, 4, "padding", &[0])?;
    let op = ints_or(a, 5, "output_padding", &[0])?;
    let g = a.int_or(6, "groups", 1)?;
    let d = ints_or(a, 7, "dilation", &[1])?;
    t(nn::conv_transpose(&x, &w, b.as_ref(), nd, &s, &p, &op, g, &d)?)
}

fn dropout(a: &mut Args, feature: bool, alpha: bool) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let p = a.float_or(1, "p", 0.5)?;
    let tr = a.bool_or(2, "training", !alpha)?;
    let _ = a.bool_or(3, "inplace", false)?;
    let y = if alpha { nn::alpha_dropout(&x, p, tr, feature)? } else { nn::dropout(&x, p, tr, feature)? };
    t(y)
}

/// Registers the layer ops.
pub(crate) fn register(r: &mut Registry) {
    r.add("nn.functional.conv1d", |a| conv(a, 1));
    r.add("nn.functional.conv2d", |a| conv(a, 2));
    r.add("nn.functional.conv3d", |a| conv(a, 3));
    r.add("nn.functional.conv_transpose1d", |a| conv_t(a, 1));
    r.add("nn.functional.conv_transpose2d", |a| conv_t(a, 2));
    r.add("nn.functional.conv_transpose3d", |a| conv_t(a, 3));
    r.add("nn.functional.linear", |a| {
        let x = a.tensor(0, "input")?;
        let w = a.tensor(1, "weight")?;
        let b = a.opt_tensor(2, "bias")?;
        t(nn::linear(&x, &w, b.as_ref())?)
    });
    r.add("nn.functional.bilinear", |a| {
        let x1 = a.tensor(0, "input1")?;
        let x2 = a.tensor(1, "input2")?;
        let w = a.tensor(2, "weight")?;
        let b = a.opt_tensor(3, "bias")?;
        t(nn::bilinear(&x1, &x2, &w, b.as_ref())?)
    });
    r.add("nn.functional.unfold", |a| {
        let x = a.tensor(0, "input")?;
        let k = a.ints(1, "kernel_size")?;
        let d = ints_or(a, 2, "dilation", &[1])?;
        let p = ints_or(a, 3, "padding", &[0])?;
        let s = ints_or(a, 4, "stride", &[1])?;
        t(nn::unfold(&x, &k, &d, &p, &s)?)
    });
    r.add("nn.functional.fold", |a| {
        let x = a.tensor(0, "input")?;
        let o = a.ints(1, "output_size")?;
        let k = a.ints(2, "kernel_size")?;
        let d = ints_or(a, 3, "dilation", &[1])?;
        let p = ints_or(a, 4, "padding", &[0])?;
        let s = ints_or(a, 5, "stride", &[1])?;
        t(nn::fold(&x, &o, &k, &d, &p, &s)?)
    });
    r.add("nn.functional.layer_norm", |a| {
        let x = a.tensor(0, "input")?;
        let ns = a.ints(1, "normalized_shape")?;
        let w = a.opt_tensor(2, "weight")?;
        let b = a.opt_tensor(3, "bias")?;
        let eps = a.float_or(4, "eps", 1e-5)?;
        t(nn::native_layer_norm(&x, &ns, w.as_ref(), b.as_ref(), eps)?.0)
    });
    r.add("native_layer_norm", |a| {
        let x = a.tensor(0, "input")?;
        let ns = a.ints(1, "normalized_shape")?;
        let w = a.opt_tensor(2, "weight")?;
        let b = a.opt_tensor(3, "bias")?;
        let eps = a.float(4, "eps")?;
        let (y, m, r) = nn::native_layer_norm(&x, &ns, w.as_ref(), b.as_ref(), eps)?;
        // the saved statistics are not differentiable outputs in PyTorch
        list(vec![y, m.detach(), r.detach()])
    });
    r.add("nn.functional.rms_norm", |a| {
        let x = a.tensor(0, "input")?;
        let ns = a.ints(1, "normalized_shape")?;
        let w = a.opt_tensor(2, "weight")?;
        let eps = a.opt_float(3, "eps")?;
        t(nn::rms_norm(&x, &ns, w.as_ref(), eps)?)
    });
    r.add("nn.functional.group_norm", |a| {
        let x = a.tensor(0, "input")?;
        let g = a.int(1, "num_groups")?;
        let w = a.opt_tensor(2, "weight")?;
        let b = a.opt_tensor(3, "bias")?;
        let eps = a.float_or(4, "eps", 1e-5)?;
        t(nn::native_group_norm(&x, g, w.as_ref(), b.as_ref(), eps)?.0)
    });
    r.add("native_group_norm", |a| {
        let x = a.tensor(0, "input")?;
        let w = a.opt_tensor(1, "weight")?;
        let b = a.opt_tensor(2, "bias")?;
        let _n = a.int(3, "N")?;
        let _c = a.int(4, "C")?;
        let _hw = a.int(5, "HxW")?;
        let g = a.int(6, "group")?;
        let eps = a.float(7, "eps")?;
        let (y, m, r) = nn::native_group_norm(&x, g, w.as_ref(), b.as_ref(), eps)?;
        list(vec![y, m, r])
    });
    r.add("nn.functional.batch_norm", |a| {
        let x = a.tensor(0, "input")?;
        let rm = a.opt_tensor(1, "running_mean")?;
        let rv = a.opt_tensor(2, "running_var")?;
        let w = a.opt_tensor(3, "weight")?;
        let b = a.opt_tensor(4, "bias")?;
        let tr = a.bool_or(5, "training", false)?;
        let m = a.float_or(6, "momentum", 0.1)?;
        let eps = a.float_or(7, "eps", 1e-5)?;
        t(nn::native_batch_norm(&x, w.as_ref(), b.as_ref(), rm.as_ref(), rv.as_ref(), tr, m, eps)?.0)
    });
    r.add_all(&["native_batch_norm", "_native_batch_norm_legit"], |a| {
        let x = a.tensor(0, "input")?;
        let w = a.opt_tensor(1, "weight")?;
        let b = a.opt_tensor(2, "bias")?;
        let rm = a.opt_tensor(3, "running_mean")?;
        let rv = a.opt_tensor(4, "running_var")?;
        let tr = a.bool_or(5, "training", false)?;
        let m = a.float(6, "momentum")?;
        let eps = a.float(7, "eps")?;
        let (y, sm, si) = nn::native_batch_norm(&x, w.as_ref(), b.as_ref(), rm.as_ref(), rv.as_ref(), tr, m, eps)?;
        list(vec![y, sm.detach(), si.detach()])
    });
    r.add("_batch_norm_with_update", |a| {
        let x = a.tensor(0, "input")?;
        let w = a.opt_tensor(1, "weight")?;
        let b = a.opt_tensor(2, "bias")?;
        let rm = a.tensor(3, "running_mean")?;
        let rv = a.tensor(4, "running_var")?;
        let m = a.float(5, "momentum")?;
        let eps = a.float(6, "eps")?;
        let (y, sm, si) = nn::native_batch_norm(&x, w.as_ref(), b.as_ref(), Some(&rm), Some(&rv), true, m, eps)?;
        let reserve = Tensor::zeros_on(&[0], crate::DType::U8, x.device())?;
        list(vec![y, sm.detach(), si.detach(), reserve])
    });
    r.add("nn.functional.instance_norm", |a| {
        let x = a.tensor(0, "input")?;
        let rm = a.opt_tensor(1, "running_mean")?;
        let rv = a.opt_tensor(2, "running_var")?;
        let w = a.opt_tensor(3, "weight")?;
        let b = a.opt_tensor(4, "bias")?;
        let uis = a.bool_or(5, "use_input_stats", true)?;
        let m = a.float_or(6, "momentum", 0.1)?;
        let eps = a.float_or(7, "eps", 1e-5)?;
        t(nn::instance_norm(&x, rm.as_ref(), rv.as_ref(), w.as_ref(), b.as_ref(), uis, m, eps)?)
    });
    r.add("nn.functional.local_response_norm", |a| {
        let x = a.tensor(0, "input")?;
        let size = a.int(1, "size")?;
        let al = a.float_or(2, "alpha", 1e-4)?;
        let be = a.float_or(3, "beta", 0.75)?;
        let k = a.float_or(4, "k", 1.0)?;
        t(nn::local_response_norm(&x, size, al, be, k)?)
    });
    r.add("nn.functional.normalize", |a| {
        let x = a.tensor(0, "input")?;
        let p = a.float_or(1, "p", 2.0)?;
        let d = a.int_or(2, "dim", 1)?;
        let eps = a.float_or(3, "eps", 1e-12)?;
        t(nn::normalize(&x, p, d, eps)?)
    });
    r.add("nn.functional.cosine_similarity", |a| {
        let x1 = a.tensor(0, "x1")?;
        let x2 = a.tensor(1, "x2")?;
        let d = a.int_or(2, "dim", 1)?;
        let eps = a.float_or(3, "eps", 1e-8)?;
        t(nn::cosine_similarity(&x1, &x2, d, eps)?)
    });
    r.add("nn.functional.pairwise_distance", |a| {
        let x1 = a.tensor(0, "x1")?;
        let x2 = a.tensor(1, "x2")?;
        let p = a.float_or(2, "p", 2.0)?;
        let eps = a.float_or(3, "eps", 1e-6)?;
        let k = a.bool_or(4, "keepdim", false)?;
        t(nn::pairwise_distance(&x1, &x2, p, eps, k)?)
    });
    r.add("nn.functional.pdist", |a| {
        let x = a.tensor(0, "input")?;
        let p = a.float_or(1, "p", 2.0)?;
        t(nn::pdist(&x, p)?)
    });
    r.add("cdist", |a| {
        let x1 = a.tensor(0, "x1")?;
        let x2 = a.tensor(1, "x2")?;
        let p = a.float_or(2, "p", 2.0)?;
        let _mode = a.opt_str(3, "compute_mode")?;
        t(nn::cdist(&x1, &x2, p)?)
    });
    r.add("nn.functional.embedding", |a| {
        let i = a.tensor(0, "input")?;
        let w = a.tensor(1, "weight")?;
        let pi = a.opt_int(2, "padding_idx")?;
        let mn = a.opt_float(3, "max_norm")?;
        let nt = a.float_or(4, "norm_type", 2.0)?;
        if a.bool_or(5, "scale_grad_by_freq", false)? {
            return Err(Error::unsupported("embedding", "scale_grad_by_freq=True"));
        }
        let _sparse = a.bool_or(6, "sparse", false)?;
        t(nn::embedding(&i, &w, pi, mn, nt)?)
    });
    r.add("nn.functional.embedding_bag", |a| {
        let i = a.tensor(0, "input")?;
        let w = a.tensor(1, "weight")?;
        let off = a.opt_tensor(2, "offsets")?;
        let mn = a.opt_float(3, "max_norm")?;
        let nt = a.float_or(4, "norm_type", 2.0)?;
        if a.bool_or(5, "scale_grad_by_freq", false)? {
            return Err(Error::unsupported("embedding_bag", "scale_grad_by_freq=True"));
        }
        let mode = a.opt_str(6, "mode")?.unwrap_or_else(|| "mean".into());
        let _sparse = a.bool_or(7, "sparse", false)?;
        let psw = a.opt_tensor(8, "per_sample_weights")?;
        let ilo = a.bool_or(9, "include_last_offset", false)?;
        let pi = a.opt_int(10, "padding_idx")?;
        t(nn::embedding_bag(&i, &w, off.as_ref(), mn, nt, &mode, psw.as_ref(), ilo, pi)?)
    });
    r.add("nn.functional.grid_sample", |a| {
        let x = a.tensor(0, "input")?;
        let g = a.tensor(1, "grid")?;
        let mode = a.opt_str(2, "mode")?.unwrap_or_else(|| "bilinear".into());
        let pm = a.opt_str(3, "padding_mode")?.unwrap_or_else(|| "zeros".into());
        let ac = a.bool_or(4, "align_corners", false)?;
        t(nn::grid_sample(&x, &g, &mode, &pm, ac)?)
    });
    r.add_all(&["grid_sampler_2d", "grid_sampler_3d"], |a| {
        let x = a.tensor(0, "input")?;
        let g = a.tensor(1, "grid")?;
        let op = a.op().to_string();
        let mode = match a.int(2, "interpolation_mode")? {
            0 => "bilinear",
            1 => "nearest",
            2 => "bicubic",
            m => return Err(Error::value(op, format!("invalid interpolation_mode {m}"))),
        };
        let pm = match a.int(3, "padding_mode")? {
            0 => "zeros",
            1 => "border",
            2 => "reflection",
            m => return Err(Error::value(op, format!("invalid padding_mode {m}"))),
        };
        let want = if op == "grid_sampler_3d" { 5 } else { 4 };
        if x.ndim() != want {
            return Err(Error::shape(&op, format!("{op}: expected {want}D input, but got input with sizes {:?}", x.shape())));
        }
        let ac = a.bool_or(4, "align_corners", false)?;
        t(nn::grid_sample(&x, &g, mode, pm, ac)?)
    });
    r.add("nn.functional.one_hot", |a| {
        let x = a.tensor(0, "tensor")?;
        let n = a.int_or(1, "num_classes", -1)?;
        t(nn::one_hot(&x, n)?)
    });
    r.add("nn.functional.dropout", |a| dropout(a, false, false));
    r.add_all(&["nn.functional.dropout1d", "nn.functional.dropout2d", "nn.functional.dropout3d"], |a| dropout(a, true, false));
    r.add("nn.functional.alpha_dropout", |a| dropout(a, false, true));
    r.add("native_dropout_backward", |a| {
        let g = a.tensor(0, "grad_output")?;
        let m = a.tensor(1, "mask")?;
        let s = a.float(2, "scale")?;
        t(nn::native_dropout_backward(&g, &m, s)?)
    });
    r.add("nn.functional.feature_alpha_dropout", |a| dropout(a, true, true));
    r.add_all(&["torch.ops.aten._scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu"], |a| {
        let q = a.tensor(0, "query")?;
        let k = a.tensor(1, "key")?;
        let v = a.tensor(2, "value")?;
        let dp = a.float_or(3, "dropout_p", 0.0)?;
        let c = a.bool_or(4, "is_causal", false)?;
        let m = a.opt_tensor(usize::MAX, "attn_mask")?;
        let s = a.opt_float(usize::MAX, "scale")?;
        let (out, lse) = nn::sdpa_with_lse(&q, &k, &v, dp, c, m.as_ref(), s)?;
        Ok(Value::from(vec![out, lse]))
    });
    r.add("nn.functional.scaled_dot_product_attention", |a| {
        let q = a.tensor(0, "query")?;
        let k = a.tensor(1, "key")?;
        let v = a.tensor(2, "value")?;
        let m = a.opt_tensor(3, "attn_mask")?;
        let dp = a.float_or(4, "dropout_p", 0.0)?;
        let c = a.bool_or(5, "is_causal", false)?;
        let s = a.opt_float(6, "scale")?;
        let g = a.bool_or(7, "enable_gqa", false)?;
        t(nn::scaled_dot_product_attention(&q, &k, &v, m.as_ref(), dp, c, s, g)?)
    });
}
