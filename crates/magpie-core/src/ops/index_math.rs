//! Index arithmetic: `torch.unravel_index`, `torch.triu_indices`, `torch.tril_indices`.

use crate::device::Device;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.unravel_index(indices, shape)`: the coordinates of flat `indices` in a row-major
/// tensor of `shape`, one int64 tensor per dim (each shaped like `indices`).
///
/// ```
/// use magpie_core::{ops::index_math::unravel_index, Tensor};
/// let i = Tensor::from_vec(vec![4i64, 5], &[2])?;
/// let c = unravel_index(&i, &[2, 3])?;
/// assert_eq!(c[0].to_vec::<i64>()?, vec![1, 1]);
/// assert_eq!(c[1].to_vec::<i64>()?, vec![1, 2]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn unravel_index(indices: &Tensor, shape: &[i64]) -> Result<Vec<Tensor>> {
    const OP: &str = "unravel_index";
    if !indices.dtype().is_integral() || indices.dtype().is_bool() {
        return Err(Error::dtype(OP, format!("expected 'indices' to be integer dtype, but got {}", indices.dtype().name())));
    }
    if shape.iter().any(|&s| s < 0) {
        return Err(Error::value(OP, "'shape' cannot have negative values, but got ".to_string() + &format!("{shape:?}")));
    }
    let total = shape.iter().try_fold(1i64, |acc, &s| acc.checked_mul(s));
    let Some(total) = total else { return Err(Error::value(OP, "'shape' is too big")) };
    let idx = indices.to_dtype(DType::I64)?.to_vec::<i64>()?;
    for &i in &idx {
        if i < -total || i >= total {
            return Err(Error::index(OP, format!("index {i} is out of bounds for shape {shape:?}")));
        }
    }
    let mut outs = vec![Vec::with_capacity(idx.len()); shape.len()];
    for &i in &idx {
        // negative indices count from the end, as PyTorch allows
        let mut r = if i < 0 { i + total } else { i };
        for (d, &s) in shape.iter().enumerate().rev() {
            outs[d].push(r % s);
            r /= s;
        }
    }
    let dev = indices.device();
    outs.into_iter().map(|v| Tensor::from_vec(v, indices.shape())?.to_device(dev)).collect()
}

/// The (row, col) pairs of a `row x col` matrix on or above (`upper`) / below the
/// `offset`-th diagonal, in row-major order.
fn tri_indices(op: &str, row: i64, col: i64, offset: i64, upper: bool, dtype: DType, device: Device) -> Result<Tensor> {
    if row < 0 {
        return Err(Error::value(op, format!("row must be non-negative, got{row}")));
    }
    if col < 0 {
        return Err(Error::value(op, format!("col must be non-negative, got{col}")));
    }
    if !matches!(dtype, DType::I64 | DType::I32) {
        return Err(Error::dtype(op, format!("\"{op}\" not implemented for '{}'", dtype.name())));
    }
    let (mut rs, mut cs) = (Vec::new(), Vec::new());
    for r in 0..row {
        for c in 0..col {
            let keep = if upper { c - r >= offset } else { c - r <= offset };
            if keep {
                rs.push(r);
                cs.push(c);
            }
        }
    }
    let n = rs.len();
    rs.extend(cs);
    Tensor::from_vec(rs, &[2, n])?.to_dtype(dtype)?.to_device(device)
}

/// `torch.triu_indices(row, col, offset=0, *, dtype=torch.long)`: a `2 x N` tensor of the
/// coordinates of the upper triangle.
///
/// ```
/// use magpie_core::{ops::index_math::triu_indices, DType, Device};
/// let t = triu_indices(2, 2, 0, DType::I64, Device::Cpu)?;
/// assert_eq!(t.to_vec::<i64>()?, vec![0, 0, 1, 0, 1, 1]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn triu_indices(row: i64, col: i64, offset: i64, dtype: DType, device: Device) -> Result<Tensor> {
    tri_indices("triu_indices", row, col, offset, true, dtype, device)
}

/// `torch.tril_indices(row, col, offset=0, *, dtype=torch.long)`: a `2 x N` tensor of the
/// coordinates of the lower triangle.
///
/// ```
/// use magpie_core::{ops::index_math::tril_indices, DType, Device};
/// let t = tril_indices(2, 2, 0, DType::I64, Device::Cpu)?;
/// assert_eq!(t.to_vec::<i64>()?, vec![0, 1, 1, 0, 0, 1]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn tril_indices(row: i64, col: i64, offset: i64, dtype: DType, device: Device) -> Result<Tensor> {
    tri_indices("tril_indices", row, col, offset, false, dtype, device)
}
