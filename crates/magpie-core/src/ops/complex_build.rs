//! `torch.complex` and `torch.polar`: complex tensors built from two real ones.

use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};
use num_complex::{Complex32, Complex64};

/// PyTorch's checks shared by `complex` and `polar`: both float (half, float or double) of one dtype.
fn check(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    let ok = |d: DType| matches!(d, DType::F16 | DType::F32 | DType::F64);
    if !ok(a.dtype()) || !ok(b.dtype()) {
        return Err(Error::dtype(
            op,
            format!("Expected both inputs to be Half, Float or Double tensors but got {} and {}", a.dtype().name(), b.dtype().name()),
        ));
    }
    if a.dtype() != b.dtype() {
        return Err(Error::dtype(
            op,
            format!("Expected object of scalar type {} but got scalar type {} for second argument", a.dtype().name(), b.dtype().name()),
        ));
    }
    if a.requires_grad() || b.requires_grad() {
        return Err(Error::unsupported(op, "autograd through complex construction"));
    }
    Ok(())
}

/// Builds `f(a_i, b_i)` over the broadcast inputs as complex64 (float inputs) or complex128.
fn build(op: &str, a: &Tensor, b: &Tensor, f: impl Fn(f64, f64) -> (f64, f64)) -> Result<Tensor> {
    check(op, a, b)?;
    let dev = crate::ops::common_device(op, &[a, b])?;
    let shape = crate::ops::shape_ops::broadcast_shapes(&[a.shape().to_vec(), b.shape().to_vec()])?;
    let av = a.broadcast_to(&shape)?.to_f64_vec()?;
    let bv = b.broadcast_to(&shape)?.to_f64_vec()?;
    let out = if a.dtype() == DType::F64 {
        let v: Vec<Complex64> = av.iter().zip(&bv).map(|(&x, &y)| f(x, y)).map(|(r, i)| Complex64::new(r, i)).collect();
        Tensor::from_vec(v, &shape)?
    } else {
        // computed in the input precision, as PyTorch's float kernels are
        let v: Vec<Complex32> = av.iter().zip(&bv).map(|(&x, &y)| f(x, y)).map(|(r, i)| Complex32::new(r as f32, i as f32)).collect();
        Tensor::from_vec(v, &shape)?
    };
    out.to_device(dev)
}

/// `torch.complex(real, imag)`: `real + imag * 1j`.
///
/// ```
/// use magpie_core::{ops::complex_build::complex, Tensor};
/// let c = complex(&Tensor::from_vec(vec![1f32], &[1])?, &Tensor::from_vec(vec![2f32], &[1])?)?;
/// assert_eq!(c.to_vec::<num_complex::Complex32>()?[0], num_complex::Complex32::new(1., 2.));
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn complex(real: &Tensor, imag: &Tensor) -> Result<Tensor> {
    build("complex", real, imag, |r, i| (r, i))
}

/// `torch.polar(abs, angle)`: `abs * (cos(angle) + sin(angle) * 1j)`.
///
/// ```
/// use magpie_core::{ops::complex_build::polar, Tensor};
/// let c = polar(&Tensor::from_vec(vec![2f64], &[1])?, &Tensor::from_vec(vec![0f64], &[1])?)?;
/// assert_eq!(c.to_vec::<num_complex::Complex64>()?[0], num_complex::Complex64::new(2., 0.));
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn polar(abs: &Tensor, angle: &Tensor) -> Result<Tensor> {
    let f32_in = abs.dtype() != DType::F64;
    build("polar", abs, angle, move |r, t| {
        if f32_in {
            let (r, t) = (r as f32, t as f32);
            ((r * t.cos()) as f64, (r * t.sin()) as f64)
        } else {
            (r * t.cos(), r * t.sin())
        }
    })
}
