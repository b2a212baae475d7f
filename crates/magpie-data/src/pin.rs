//! Pinning batches: PyTorch's `torch.utils.data._utils.pin_memory.pin_memory`, what
//! `DataLoader(pin_memory=True)` applies to each batch.

use crate::sample::Sample;
use magpie_core::Result;

/// `sample` with every tensor in it (through lists, tuples and maps) copied to page-locked host
/// memory ([`magpie_core::Tensor::pin_memory`]); numbers and strings pass through.
///
/// ```
/// use magpie_core::{backend::cuda, Tensor};
/// use magpie_data::{pin_memory, Sample};
/// let s = Sample::Tuple(vec![Sample::Tensor(Tensor::from_vec(vec![1i64, 2], &[2])?), Sample::Int(7)]);
/// match pin_memory(s) {
///     Ok(p) => assert!(p.as_list().unwrap()[0].as_tensor().unwrap().is_pinned()),
///     Err(e) => assert!(!cuda::is_available(), "{e}"),
/// }
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn pin_memory(sample: Sample) -> Result<Sample> {
    Ok(match sample {
        Sample::Tensor(t) => Sample::Tensor(t.pin_memory()?),
        Sample::List(v) => Sample::List(v.into_iter().map(pin_memory).collect::<Result<_>>()?),
        Sample::Tuple(v) => Sample::Tuple(v.into_iter().map(pin_memory).collect::<Result<_>>()?),
        Sample::Map(v) => Sample::Map(v.into_iter().map(|(k, s)| Ok((k, pin_memory(s)?))).collect::<Result<_>>()?),
        other => other,
    })
}
