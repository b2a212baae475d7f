//! Worker identity: which of a loader's worker threads runs, so an [`IterableDataset`]
//! (crate::IterableDataset) can take its own shard (`torch.utils.data.get_worker_info()`).

use std::cell::Cell;

/// `torch.utils.data.get_worker_info()`'s fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    /// This worker, `0..num_workers`.
    pub id: usize,
    pub num_workers: usize,
    /// This epoch's seed for the worker (the loader's base seed + `id`).
    pub seed: u64,
}

thread_local! {
    static CURRENT: Cell<Option<WorkerInfo>> = const { Cell::new(None) };
}

/// The worker running this code, or None on the loader's own thread (`num_workers=0`).
///
/// ```
/// assert_eq!(magpie_data::get_worker_info(), None);
/// ```
pub fn get_worker_info() -> Option<WorkerInfo> {
    CURRENT.with(|c| c.get())
}

/// Marks this thread as worker `info` for the rest of its life.
pub(crate) fn set_worker_info(info: WorkerInfo) {
    CURRENT.with(|c| c.set(Some(info)));
}
