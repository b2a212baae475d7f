//! Storage records (raw little-endian bytes) to 1-d tensors that the file's tensors view.

use magpie_core::num_complex::Complex64;
use magpie_core::{DType, Error, Result, Tensor};

/// A 1-d tensor of `numel` elements of `dtype` from the start of `bytes` (which must hold them).
pub(crate) fn storage_tensor(key: &str, dtype: DType, numel: usize, bytes: &[u8]) -> Result<Tensor> {
    let need = numel
        .checked_mul(dtype.size())
        .ok_or_else(|| Error::io("pt", format!("storage '{key}' of {numel} elements overflows")))?;
    if need > bytes.len() {
        return Err(Error::io(
            "pt",
            format!("storage '{key}' declares {numel} elements ({need} bytes) but its record holds {} bytes", bytes.len()),
        ));
    }
    let b = &bytes[..need];
    let t = if dtype == DType::C128 {
        let v: Vec<Complex64> = b
            .chunks_exact(16)
            .map(|c| {
                let mut re = [0u8; 8];
                let mut im = [0u8; 8];
                re.copy_from_slice(&c[..8]);
                im.copy_from_slice(&c[8..]);
                Complex64::new(f64::from_le_bytes(re), f64::from_le_bytes(im))
            })
            .collect();
        Tensor::from_vec(v, &[numel])
    } else {
        crate::safetensors::tensor_from_le_bytes(dtype, b, &[numel])
    };
    t.map_err(|e| Error::io("pt", format!("storage '{key}': {e}")))
}
