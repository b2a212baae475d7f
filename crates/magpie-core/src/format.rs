//! Printing tensors the way PyTorch does: `tensor([[1.0000, 2.5000], ...], dtype=torch.float16)`,
//! summarized with `...` when large.

use crate::dtype::DType;
use crate::tensor::Tensor;

const THRESHOLD: usize = 1000;
const EDGE: usize = 3;

/// Formats a tensor as PyTorch's `repr` would.
pub fn format_tensor(t: &Tensor) -> String {
    let vals: Vec<String> = match element_strings(t) {
        Ok(v) => v,
        Err(e) => return format!("tensor(<unreadable: {e}>)"),
    };
    let summarize = t.numel() > THRESHOLD;
    let width = vals.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut body = String::new();
    if t.numel() == 0 {
        body.push_str("[]");
    } else {
        fmt_dims(&mut body, &vals, t.shape(), 0, 0, width, summarize, 7);
    }
    let mut suffix = String::new();
    let default_shown = matches!(t.dtype(), DType::F32 | DType::I64 | DType::Bool);
    if t.numel() == 0 && t.ndim() != 1 {
        suffix.push_str(&format!(", size={:?}", t.shape()));
    }
    if !default_shown {
        suffix.push_str(&format!(", dtype={}", t.dtype()));
    }
    if t.requires_grad() {
        match t.grad_fn() {
            Some(n) => suffix.push_str(&format!(", grad_fn=<{}>", n.name())),
            None => suffix.push_str(", requires_grad=True"),
        }
    }
    format!("tensor({body}{suffix})")
}

fn element_strings(t: &Tensor) -> crate::Result<Vec<String>> {
    let d = t.dtype();
    if d.is_bool() {
        return Ok(t.to_vec::<bool>()?.iter().map(|&b| if b { "True".into() } else { "False".into() }).collect());
    }
    if d.is_int() {
        return Ok(t.to_vec::<i64>()?.iter().map(|v| v.to_string()).collect());
    }
    if d.is_complex() {
        let v = t.to_vec::<num_complex::Complex64>()?;
        return Ok(v.iter().map(|c| format!("{:.4}{:+.4}j", c.re, c.im)).collect());
    }
    let v = t.to_vec::<f64>()?;
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    let all_int = finite.iter().all(|x| x.fract() == 0.0);
    let max = finite.iter().fold(0f64, |m, x| m.max(x.abs()));
    let min_nz = finite.iter().filter(|x| **x != 0.0).fold(f64::INFINITY, |m, x| m.min(x.abs()));
    let sci = max >= 1e8 || (min_nz < 1e-4 && min_nz.is_finite()) || (max / min_nz > 1000.0 && !all_int);
    Ok(v.iter()
        .map(|&x| {
            if x.is_nan() {
                "nan".into()
            } else if x.is_infinite() {
                if x > 0.0 { "inf".into() } else { "-inf".into() }
            } else if sci {
                format!("{x:.4e}")
            } else if all_int {
                format!("{x:.0}.")
            } else {
                format!("{x:.4}")
            }
        })
        .collect())
}

#[allow(clippy::too_many_arguments)]
fn fmt_dims(out: &mut String, vals: &[String], shape: &[usize], dim: usize, base: usize, width: usize, summarize: bool, indent: usize) {
    if shape.is_empty() {
        out.push_str(&vals[0]);
        return;
    }
    let n = shape[dim];
    let inner: usize = shape[dim + 1..].iter().product();
    out.push('[');
    let idx: Vec<Option<usize>> = if summarize && n > 2 * EDGE {
        (0..EDGE).map(Some).chain(std::iter::once(None)).chain((n - EDGE..n).map(Some)).collect()
    } else {
        (0..n).map(Some).collect()
    };
    let last = dim + 1 == shape.len();
    for (k, i) in idx.iter().enumerate() {
        if k > 0 {
            if last {
                out.push_str(", ");
            } else {
                out.push(',');
                out.push_str(&"\n".repeat(shape.len() - dim - 1));
                out.push_str(&" ".repeat(indent + dim + 1));
            }
        }
        match i {
            None => out.push_str("..."),
            Some(i) => {
                if last {
                    out.push_str(&format!("{:>width$}", vals[base + i]));
                } else {
                    fmt_dims(out, vals, shape, dim + 1, base + i * inner, width, summarize, indent);
                }
            }
        }
    }
    out.push(']');
}
