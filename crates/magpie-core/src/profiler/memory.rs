//! `profile_memory`: bytes of tensor storage allocated and freed on each thread, counted where
//! every storage is made and dropped (`StorageCell`), so an op's memory is the change of the
//! counters while it runs.

use super::state::{flags, MEMORY};
use crate::storage::Storage;
use std::cell::Cell;

thread_local! {
    /// Net bytes (allocated minus freed) on the host and on CUDA devices since the thread began.
    static NET: Cell<(i64, i64)> = const { Cell::new((0, 0)) };
}

/// The counters of this thread: (host bytes, CUDA bytes).
pub(crate) fn net() -> (i64, i64) {
    NET.with(|n| n.get())
}

/// Counts a storage made (`sign` 1) or dropped (`sign` -1); one flag check when not profiling memory.
#[inline]
pub(crate) fn track(s: &Storage, sign: i64) {
    if flags() & MEMORY == 0 {
        return;
    }
    count(s, sign);
}

#[cold]
fn count(s: &Storage, sign: i64) {
    let bytes = (s.len() * s.dtype().size()) as i64 * sign;
    NET.with(|n| {
        let (h, c) = n.get();
        n.set(match s {
            Storage::Cpu(_) => (h + bytes, c),
            Storage::Cuda(_) => (h, c + bytes),
        })
    });
}
