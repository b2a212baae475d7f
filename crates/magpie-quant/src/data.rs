//! Borrowing a CPU tensor's elements as a slice (copying only when it is not dense).

use magpie_core::storage::Storage;
use magpie_core::{DType, Element, Error, Result, Tensor};

/// Runs `f` on the elements of `t` (row-major) as `T`; `op` names the caller in errors.
pub(crate) fn with_slice<T: Element, R>(op: &str, t: &Tensor, dtype: DType, f: impl FnOnce(&[T]) -> R) -> Result<R> {
    if t.dtype() != dtype {
        return Err(Error::dtype(op, format!("expected a {dtype:?} tensor, got {:?}", t.dtype())));
    }
    let t = if t.is_contiguous() { t.clone() } else { t.contiguous()? };
    let guard = t.storage().read();
    let Storage::Cpu(cpu) = &*guard else {
        return Err(Error::device(op, "quantized ops run on CPU tensors only"));
    };
    let all = cpu.as_slice::<T>().ok_or_else(|| Error::dtype(op, format!("storage is not {dtype:?}")))?;
    let start = t.storage_offset();
    let data = all.get(start..start + t.numel()).ok_or_else(|| Error::shape(op, "tensor extends past its storage"))?;
    Ok(f(data))
}
