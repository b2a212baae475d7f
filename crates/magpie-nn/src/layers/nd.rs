//! Argument helpers shared by the N-d layers (convolutions, pooling): PyTorch's int-or-tuple
//! sizes and the `i64` lists the functional ops take.

use magpie_core::{Error, Result};

/// One value per spatial dim from a PyTorch int-or-tuple argument (`name` for the error).
pub(crate) fn per_dim<T: Copy + Default, const N: usize>(op: &str, name: &str, v: &[T]) -> Result<[T; N]> {
    match v.len() {
        1 => Ok([v[0]; N]),
        n if n == N => {
            let mut o = [T::default(); N];
            o.copy_from_slice(v);
            Ok(o)
        }
        n => Err(Error::value(op, format!("{name} must be one value or {N} values, got {n}"))),
    }
}

/// Sizes as the `i64`s of the functional ops.
pub(crate) fn i64s(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}
