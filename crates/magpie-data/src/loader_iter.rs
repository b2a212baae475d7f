//! [`DataLoaderIter`]: one epoch of a [`DataLoader`], loaded on the iterating thread or by worker
//! threads. Worker `w` of `N` loads batches `w, w + N, ...` (or, for an iterable dataset, its own
//! stream) into a queue of `prefetch_factor` batches; the iterator takes from the workers in turn,
//! so the order is the sampler's whatever `N` is, as in PyTorch.

use crate::collate::{with_context, CollateFn};
use crate::dataset::{Dataset, SampleIter};
use crate::loader::{DataLoader, Plan, Source};
use crate::sample::Sample;
use crate::worker::{set_worker_info, WorkerInfo};
use magpie_core::{Error, Result};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

const OP: &str = "DataLoader";

/// Where a batch is loaded, for error messages.
fn place(worker: Option<usize>, batch: usize) -> String {
    match worker {
        Some(w) => format!("in DataLoader worker {w} at batch {batch}"),
        None => format!("at batch {batch}"),
    }
}

/// The text of a panic's payload.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "a panic without a message".into())
}

/// Runs `f`, turning a panic into an error that says where it happened.
fn guarded<T>(worker: Option<usize>, batch: usize, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(Error::value(OP, format!("Caught a panic {}: {}", place(worker, batch), panic_text(p.as_ref())))),
    }
}

/// Loads and collates one batch of a map-style dataset.
fn fetch(ds: &dyn Dataset, indices: &[usize], collate: Option<&CollateFn>, worker: Option<usize>, batch: usize) -> Result<Sample> {
    guarded(worker, batch, || {
        let mut items = Vec::with_capacity(indices.len());
        for &i in indices {
            items.push(ds.get(i).map_err(|e| with_context(e, &format!("{}, index {i}", place(worker, batch))))?);
        }
        finish(items, collate, worker, batch)
    })
}

/// Collates a batch's samples (or passes the single sample through without a collate function).
fn finish(mut items: Vec<Sample>, collate: Option<&CollateFn>, worker: Option<usize>, batch: usize) -> Result<Sample> {
    match collate {
        Some(f) => f(items).map_err(|e| with_context(e, &format!("collating {}", place(worker, batch)))),
        None => items.pop().ok_or_else(|| Error::value(OP, "an empty batch")),
    }
}

/// Batches of a sample stream: `batch_size` items each (one uncollated item without batching).
struct StreamBatches {
    stream: Option<SampleIter>,
    batch_size: Option<usize>,
    drop_last: bool,
    collate: Option<CollateFn>,
    worker: Option<usize>,
    batch: usize,
}

impl StreamBatches {
    fn next_batch(&mut self) -> Option<Result<Sample>> {
        let (worker, batch) = (self.worker, self.batch);
        let want = self.batch_size.unwrap_or(1);
        let stream = self.stream.as_mut()?;
        let mut items = Vec::with_capacity(want);
        while items.len() < want {
            match guarded(worker, batch, || Ok(stream.next())) {
                Ok(Some(Ok(s))) => items.push(s),
                Ok(Some(Err(e))) => {
                    self.batch += 1;
                    return Some(Err(with_context(e, &format!("{}, item {}", place(worker, batch), items.len()))));
                }
                Ok(None) => {
                    self.stream = None;
                    break;
                }
                Err(e) => {
                    // a panicking stream cannot be resumed
                    self.stream = None;
                    return Some(Err(e));
                }
            }
        }
        if items.is_empty() || (self.drop_last && items.len() < want) {
            return None;
        }
        self.batch += 1;
        Some(guarded(worker, batch, || finish(items, self.collate.as_ref(), worker, batch)))
    }
}

enum Inner {
    /// `num_workers=0`, map-style.
    Local { ds: Arc<dyn Dataset>, batches: VecDeque<Vec<usize>>, collate: Option<CollateFn>, next: usize },
    /// `num_workers=0`, iterable.
    LocalStream(StreamBatches),
    /// Worker threads, each with its queue; `active[w]` until worker `w` has sent everything.
    Workers { rx: Vec<Receiver<Result<Sample>>>, active: Vec<bool>, turn: usize, handles: Vec<JoinHandle<()>>, stop: Arc<AtomicBool>, expected: Option<usize>, taken: usize },
}

/// One epoch of a [`DataLoader`]: yields `Result<Sample>` batches in order.
pub struct DataLoaderIter {
    inner: Inner,
}

impl DataLoaderIter {
    pub(crate) fn start(dl: &DataLoader, plan: Plan, collate: Option<CollateFn>, base_seed: u64) -> Result<DataLoaderIter> {
        let n = dl.num_workers;
        let inner = match (&dl.source, plan, n) {
            (Source::Map(ds), Plan::Batches(b), 0) => Inner::Local { ds: ds.clone(), batches: b.into(), collate, next: 0 },
            (Source::Iterable(ds), _, 0) => {
                let stream = match ds.iter(None) {
                    Ok(s) => Some(s),
                    Err(e) => Some(Box::new(std::iter::once(Err(e))) as SampleIter),
                };
                Inner::LocalStream(StreamBatches { stream, batch_size: dl.batch_size, drop_last: dl.drop_last, collate, worker: None, batch: 0 })
            }
            (source, plan, n) => {
                let stop = Arc::new(AtomicBool::new(false));
                let mut rx = Vec::with_capacity(n);
                let mut handles = Vec::with_capacity(n);
                let expected = match &plan {
                    Plan::Batches(b) => Some(b.len()),
                    Plan::Stream => None,
                };
                let mut shares: Vec<Vec<(usize, Vec<usize>)>> = (0..n).map(|_| Vec::new()).collect();
                if let Plan::Batches(b) = plan {
                    for (k, idx) in b.into_iter().enumerate() {
                        shares[k % n].push((k, idx));
                    }
                }
                for (w, share) in shares.into_iter().enumerate() {
                    let (tx, r) = sync_channel(dl.prefetch_factor);
                    let info = WorkerInfo { id: w, num_workers: n, seed: base_seed.wrapping_add(w as u64) };
                    let job = Job { source: source.clone(), share, collate: collate.clone(), batch_size: dl.batch_size, drop_last: dl.drop_last, info, stop: stop.clone() };
                    let h = std::thread::Builder::new()
                        .name(format!("dataloader-{w}"))
                        .spawn(move || job.run(tx))
                        .map_err(|e| Error::value(OP, format!("could not start DataLoader worker {w}: {e}")))?;
                    rx.push(r);
                    handles.push(h);
                }
                Inner::Workers { rx, active: vec![true; n], turn: 0, handles, stop, expected, taken: 0 }
            }
        };
        Ok(DataLoaderIter { inner })
    }
}

/// What one worker thread does in an epoch.
struct Job {
    source: Source,
    /// (batch number, indices) of a map-style dataset.
    share: Vec<(usize, Vec<usize>)>,
    collate: Option<CollateFn>,
    batch_size: Option<usize>,
    drop_last: bool,
    info: WorkerInfo,
    stop: Arc<AtomicBool>,
}

impl Job {
    fn run(self, tx: SyncSender<Result<Sample>>) {
        set_worker_info(self.info);
        let w = Some(self.info.id);
        match &self.source {
            Source::Map(ds) => {
                for (k, idx) in &self.share {
                    if self.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    // a send fails once the iterator is dropped: stop quietly
                    if tx.send(fetch(ds.as_ref(), idx, self.collate.as_ref(), w, *k)).is_err() {
                        return;
                    }
                }
            }
            Source::Iterable(ds) => {
                let stream = match guarded(w, 0, || ds.iter(Some(self.info))) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let mut sb = StreamBatches { stream: Some(stream), batch_size: self.batch_size, drop_last: self.drop_last, collate: self.collate.clone(), worker: w, batch: 0 };
                while !self.stop.load(Ordering::Relaxed) {
                    match sb.next_batch() {
                        Some(b) => {
                            if tx.send(b).is_err() {
                                return;
                            }
                        }
                        None => return,
                    }
                }
            }
        }
    }
}

impl Iterator for DataLoaderIter {
    type Item = Result<Sample>;

    fn next(&mut self) -> Option<Result<Sample>> {
        match &mut self.inner {
            Inner::Local { ds, batches, collate, next } => {
                let idx = batches.pop_front()?;
                let k = *next;
                *next += 1;
                Some(fetch(ds.as_ref(), &idx, collate.as_ref(), None, k))
            }
            Inner::LocalStream(sb) => sb.next_batch(),
            Inner::Workers { rx, active, turn, expected, taken, .. } => {
                let n = rx.len();
                for _ in 0..n {
                    let w = *turn;
                    *turn = (*turn + 1) % n;
                    if !active[w] {
                        continue;
                    }
                    match rx[w].recv() {
                        Ok(b) => {
                            *taken += 1;
                            return Some(b);
                        }
                        // this worker has sent all it had
                        Err(_) => active[w] = false,
                    }
                }
                match *expected {
                    Some(e) if *taken < e => {
                        let t = *taken;
                        *taken = e;
                        Some(Err(Error::value(OP, format!("DataLoader workers exited unexpectedly after {t} of {e} batches"))))
                    }
                    _ => None,
                }
            }
        }
    }
}

impl Drop for DataLoaderIter {
    fn drop(&mut self) {
        if let Inner::Workers { rx, handles, stop, .. } = &mut self.inner {
            stop.store(true, Ordering::Relaxed);
            // dropping the queues wakes workers blocked on a full one
            rx.clear();
            for h in handles.drain(..) {
                let _ = h.join();
            }
        }
    }
}
