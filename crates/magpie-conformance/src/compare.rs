//! Comparing our results with PyTorch's: values within tolerance, exact ints and bools,
//! matching shapes and dtypes.

use crate::manifest::Tol;
use magpie_core::registry::Value;
use magpie_core::Tensor;

/// Compares `ours` with `theirs` (converted from the manifest). `Err` says what differs.
pub fn compare(ours: &Value, theirs: &Value, tol: Tol, shape_only: bool, path: &str) -> Result<(), String> {
    match (ours, theirs) {
        (Value::Tensor(a), Value::Tensor(b)) => compare_tensors(a, b, tol, shape_only, path),
        (Value::List(a), Value::List(b)) => {
            if a.len() != b.len() {
                return Err(format!("{path}: {} outputs, expected {}", a.len(), b.len()));
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                compare(x, y, tol, shape_only, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (Value::Bool(a), Value::Bool(b)) => (a == b).then_some(()).ok_or_else(|| format!("{path}: {a}, expected {b}")),
        (Value::Int(a), Value::Int(b)) => (a == b).then_some(()).ok_or_else(|| format!("{path}: {a}, expected {b}")),
        (Value::Float(a), Value::Float(b)) => {
            if shape_only || close(*a, *b, tol) {
                Ok(())
            } else {
                Err(format!("{path}: {a}, expected {b}"))
            }
        }
        (Value::Float(a), Value::Int(b)) | (Value::Int(b), Value::Float(a)) if !shape_only => {
            if close(*a, *b as f64, tol) {
                Err(format!("{path}: a float where PyTorch gives an int ({b})"))
            } else {
                Err(format!("{path}: {a}, expected {b}"))
            }
        }
        (Value::None, Value::None) => Ok(()),
        (a, b) => Err(format!("{path}: got a {}, expected a {}", a.kind(), b.kind())),
    }
}

/// `|a - b| <= atol + rtol * |b|`, NaN equal to NaN, infinities equal by sign.
pub fn close(a: f64, b: f64, tol: Tol) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= tol.atol + tol.rtol * b.abs()
}

fn compare_tensors(a: &Tensor, b: &Tensor, tol: Tol, shape_only: bool, path: &str) -> Result<(), String> {
    if a.shape() != b.shape() {
        return Err(format!("{path}: shape {:?}, expected {:?}", a.shape(), b.shape()));
    }
    if a.dtype() != b.dtype() {
        return Err(format!("{path}: dtype {}, expected {}", a.dtype(), b.dtype()));
    }
    if shape_only {
        return Ok(());
    }
    let d = b.dtype();
    if d.is_integral() {
        let x = a.to_vec::<i64>().map_err(|e| e.to_string())?;
        let y = b.to_vec::<i64>().map_err(|e| e.to_string())?;
        if let Some(i) = x.iter().zip(&y).position(|(p, q)| p != q) {
            return Err(format!("{path}: element {i} is {}, expected {}", x[i], y[i]));
        }
        return Ok(());
    }
    if d.is_complex() {
        let x = a.to_vec::<magpie_core::num_complex::Complex64>().map_err(|e| e.to_string())?;
        let y = b.to_vec::<magpie_core::num_complex::Complex64>().map_err(|e| e.to_string())?;
        for (i, (p, q)) in x.iter().zip(&y).enumerate() {
            if !close(p.re, q.re, tol) || !close(p.im, q.im, tol) {
                return Err(format!("{path}: element {i} is {p}, expected {q}"));
            }
        }
        return Ok(());
    }
    let x = a.to_vec::<f64>().map_err(|e| e.to_string())?;
    let y = b.to_vec::<f64>().map_err(|e| e.to_string())?;
    let mut bad = 0;
    let mut first = None;
    for (i, (&p, &q)) in x.iter().zip(&y).enumerate() {
        if !close(p, q, tol) {
            bad += 1;
            first.get_or_insert((i, p, q));
        }
    }
    match first {
        None => Ok(()),
        Some((i, p, q)) => Err(format!("{path}: {bad} of {} elements differ; element {i} is {p}, expected {q}", x.len())),
    }
}
