//! `torch.frexp`: split floats into a mantissa in `[0.5, 1)` and an integer power of two.

use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `frexp` of one value: `(m, e)` with `v = m * 2^e`; zeros, infinities and NaN give `(v, 0)`.
pub fn frexp_f64(v: f64) -> (f64, i32) {
    if v == 0.0 || !v.is_finite() {
        return (v, 0);
    }
    let bits = v.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    if biased == 0 {
        // subnormal: scale into the normal range first
        let (m, e) = frexp_f64(v * 2f64.powi(64));
        return (m, e - 64);
    }
    let e = biased - 1022;
    let m = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (m, e)
}

/// `torch.frexp(input)`: `(mantissa, exponent)` with `input = mantissa * 2^exponent`, the
/// mantissa of `input`'s dtype (differentiable: its gradient is `grad / 2^exponent`), the
/// exponent `int32`.
///
/// ```
/// use magpie_core::{ops::frexp::frexp, Tensor};
/// let x = Tensor::from_vec(vec![8f32, 0.75, 0.], &[3])?;
/// let (m, e) = frexp(&x)?;
/// assert_eq!(m.to_vec::<f32>()?, vec![0.5, 0.75, 0.]);
/// assert_eq!(e.to_vec::<i32>()?, vec![4, 0, 0]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn frexp(input: &Tensor) -> Result<(Tensor, Tensor)> {
    if !input.dtype().is_float() {
        return Err(Error::dtype("frexp", "torch.frexp() only supports floating-point dtypes"));
    }
    let v = input.to_f64_vec()?;
    // 2^-e as two factors applied one after the other: for subnormal or huge inputs 2^-e
    // itself is out of f64's range, each half is not, and each product stays exact
    let mut s1 = Vec::with_capacity(v.len());
    let mut s2 = Vec::with_capacity(v.len());
    let mut exps = Vec::with_capacity(v.len());
    for &x in &v {
        let (_, e) = frexp_f64(x);
        s1.push(2f64.powi(-e / 2));
        s2.push(2f64.powi(-e + e / 2));
        exps.push(e);
    }
    let dev = input.device();
    let s1 = Tensor::from_vec(s1, input.shape())?.to_device(dev)?;
    let s2 = Tensor::from_vec(s2, input.shape())?.to_device(dev)?;
    let m = input.to_dtype(DType::F64)?.mul(&s1)?.mul(&s2)?.to_dtype(input.dtype())?;
    let e = Tensor::from_vec(exps, input.shape())?.to_device(dev)?;
    Ok((m, e))
}
