//! [`DataLoader`]: batches of a dataset in a sampler's order, collated, optionally loaded by worker
//! threads ahead of use; built with PyTorch's keyword arguments and their mutual-exclusion errors.

use crate::collate::{default_collate, CollateFn};
use crate::dataset::{Dataset, IterableDataset};
use crate::generator::seed_from_default;
use crate::loader_iter::DataLoaderIter;
use crate::sample::Sample;
use crate::sampler::{BatchSampler, BatchSampling, RandomSampler, Sampler, SequentialSampler};
use magpie_core::{Error, Result};
use std::sync::Arc;

const OP: &str = "DataLoader";

/// The data a loader reads.
#[derive(Clone)]
pub(crate) enum Source {
    Map(Arc<dyn Dataset>),
    Iterable(Arc<dyn IterableDataset>),
}

/// How a map-style loader orders its indices.
pub(crate) enum Order {
    /// Batches of indices (auto-batching or a user `batch_sampler`).
    Batches(Box<dyn BatchSampling>),
    /// Single indices (`batch_size=None`).
    Single(Box<dyn Sampler>),
    /// An iterable dataset: the stream's order.
    Stream,
}

/// `DataLoader(dataset, ...)`'s keyword arguments, checked by [`DataLoaderBuilder::build`].
pub struct DataLoaderBuilder {
    source: Source,
    batch_size: Option<usize>,
    batch_size_set: bool,
    shuffle: Option<bool>,
    sampler: Option<Box<dyn Sampler>>,
    batch_sampler: Option<Box<dyn BatchSampling>>,
    num_workers: usize,
    collate_fn: Option<CollateFn>,
    pin_memory: bool,
    drop_last: bool,
    prefetch_factor: Option<usize>,
    seed: Option<u64>,
}

impl DataLoaderBuilder {
    fn new(source: Source) -> DataLoaderBuilder {
        DataLoaderBuilder {
            source,
            batch_size: Some(1),
            batch_size_set: false,
            shuffle: None,
            sampler: None,
            batch_sampler: None,
            num_workers: 0,
            collate_fn: None,
            pin_memory: false,
            drop_last: false,
            prefetch_factor: None,
            seed: None,
        }
    }
    /// `batch_size=` (default 1; None turns batching off: samples come out one by one, uncollated).
    pub fn batch_size(mut self, batch_size: Option<usize>) -> Self {
        self.batch_size = batch_size;
        self.batch_size_set = batch_size != Some(1);
        self
    }
    /// `shuffle=`: a [`RandomSampler`] (seeded by [`DataLoaderBuilder::seed`] if given).
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = Some(shuffle);
        self
    }
    /// `sampler=`.
    pub fn sampler(mut self, sampler: impl Sampler + 'static) -> Self {
        self.sampler = Some(Box::new(sampler));
        self
    }
    /// `batch_sampler=`.
    pub fn batch_sampler(mut self, batch_sampler: impl BatchSampling + 'static) -> Self {
        self.batch_sampler = Some(Box::new(batch_sampler));
        self
    }
    /// `num_workers=`: worker threads loading batches ahead (0: on the iterating thread).
    pub fn num_workers(mut self, n: usize) -> Self {
        self.num_workers = n;
        self
    }
    /// `collate_fn=` (default [`default_collate`]).
    pub fn collate_fn(mut self, f: impl Fn(Vec<Sample>) -> Result<Sample> + Send + Sync + 'static) -> Self {
        self.collate_fn = Some(Arc::new(f));
        self
    }
    /// `pin_memory=`: batches come out in page-locked host memory (every tensor, also inside
    /// containers), pinned by the thread that loads them, so that `to_device_with(dev, true)`
    /// copies them asynchronously. Where CUDA is not available it warns once and loads pageable
    /// batches, as PyTorch does without an accelerator.
    pub fn pin_memory(mut self, pin: bool) -> Self {
        self.pin_memory = pin;
        self
    }
    /// `drop_last=`: drop the last, short batch.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }
    /// `prefetch_factor=`: batches each worker loads ahead (default 2 with workers; an error without).
    pub fn prefetch_factor(mut self, f: usize) -> Self {
        self.prefetch_factor = Some(f);
        self
    }
    /// The seed of `shuffle=True`'s sampler and of the workers' seeds (`generator=`): epoch `e`'s
    /// order is fixed by (seed, e).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Checks the arguments as PyTorch's `DataLoader.__init__` does and builds the loader.
    pub fn build(self) -> Result<DataLoader> {
        let shuffle = self.shuffle.unwrap_or(false);
        if let Source::Iterable(_) = self.source {
            if let Some(s) = self.shuffle.filter(|&s| s) {
                return Err(Error::value(OP, format!("DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={}", py_bool(s))));
            }
            if self.sampler.is_some() {
                return Err(Error::value(OP, "DataLoader with IterableDataset: expected unspecified sampler option, but got a sampler"));
            }
            if self.batch_sampler.is_some() {
                return Err(Error::value(OP, "DataLoader with IterableDataset: expected unspecified batch_sampler option, but got a batch_sampler"));
            }
        }
        if self.sampler.is_some() && shuffle {
            return Err(Error::value(OP, "sampler option is mutually exclusive with shuffle"));
        }
        if self.batch_sampler.is_some() && (self.batch_size_set || shuffle || self.sampler.is_some() || self.drop_last) {
            return Err(Error::value(OP, "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"));
        }
        if self.batch_sampler.is_none() && self.batch_size.is_none() && self.drop_last {
            return Err(Error::value(OP, "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"));
        }
        if self.batch_size == Some(0) && self.batch_sampler.is_none() {
            return Err(Error::value(OP, "batch_size should be a positive integer value, but got batch_size=0"));
        }
        let prefetch_factor = match (self.num_workers, self.prefetch_factor) {
            (0, Some(_)) => {
                return Err(Error::value(
                    OP,
                    "prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.",
                ))
            }
            (_, Some(0)) => return Err(Error::value(OP, "prefetch_factor should be a positive integer value, but got prefetch_factor=0")),
            (_, f) => f.unwrap_or(2),
        };
        let batch_size = if self.batch_sampler.is_some() { None } else { self.batch_size };
        let order = match &self.source {
            Source::Iterable(_) => Order::Stream,
            Source::Map(ds) => {
                let sampler: Box<dyn Sampler> = match self.sampler {
                    Some(s) => s,
                    None if shuffle => {
                        let r = RandomSampler::new(ds.len());
                        Box::new(match self.seed {
                            Some(seed) => r.seed(seed),
                            None => r,
                        })
                    }
                    None => Box::new(SequentialSampler::new(ds.len())),
                };
                match (self.batch_sampler, batch_size) {
                    (Some(b), _) => Order::Batches(b),
                    (None, Some(bs)) => Order::Batches(Box::new(BatchSampler::new(sampler, bs, self.drop_last)?)),
                    (None, None) => Order::Single(sampler),
                }
            }
        };
        Ok(DataLoader {
            source: self.source,
            order,
            batch_size,
            drop_last: self.drop_last,
            num_workers: self.num_workers,
            prefetch_factor,
            collate_fn: self.collate_fn,
            pin_memory: self.pin_memory,
            seed: self.seed,
            epoch: 0,
        })
    }
}

/// True where batches can be pinned; else PyTorch's warning, once per process.
fn pinning_available() -> bool {
    if magpie_core::backend::cuda::is_available() {
        return true;
    }
    static WARN: std::sync::Once = std::sync::Once::new();
    WARN.call_once(|| eprintln!("UserWarning: 'pin_memory' argument is set as true but no accelerator is found, then device pinned memory won't be used."));
    false
}

/// `collate` (or passing the one sample through, without batching) followed by pinning: runs in
/// the thread that loads the batch (a worker, or the iterating thread without workers).
fn pinning(collate: Option<CollateFn>) -> CollateFn {
    Arc::new(move |mut items: Vec<Sample>| {
        let batch = match &collate {
            Some(f) => f(items)?,
            None => items.pop().ok_or_else(|| Error::value(OP, "an empty batch"))?,
        };
        crate::pin::pin_memory(batch)
    })
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// `torch.utils.data.DataLoader`: iterate with [`DataLoader::iter`], one epoch per iterator.
///
/// Batches come out in the sampler's order whatever `num_workers` is: worker `w` loads batches
/// `w, w + N, w + 2N, ...` and the iterator takes them in turn. A dataset or collate error comes
/// out at its batch, naming the index; a panicking worker becomes an error at its batch; dropping
/// the iterator stops the workers.
///
/// ```
/// use magpie_data::{DataLoader, Dataset, Sample};
/// use std::sync::Arc;
/// struct Squares;
/// impl Dataset for Squares {
///     fn len(&self) -> usize { 10 }
///     fn get(&self, i: usize) -> magpie_core::Result<Sample> { Ok(Sample::Int((i * i) as i64)) }
/// }
/// let mut dl = DataLoader::builder(Arc::new(Squares)).batch_size(Some(4)).num_workers(2).build()?;
/// let batches: Vec<Vec<i64>> = dl.iter()?.map(|b| b?.into_tensor().unwrap().to_vec::<i64>()).collect::<Result<_, _>>()?;
/// assert_eq!(batches, vec![vec![0, 1, 4, 9], vec![16, 25, 36, 49], vec![64, 81]]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub struct DataLoader {
    pub(crate) source: Source,
    pub(crate) order: Order,
    pub(crate) batch_size: Option<usize>,
    pub(crate) drop_last: bool,
    pub(crate) num_workers: usize,
    pub(crate) prefetch_factor: usize,
    pub(crate) collate_fn: Option<CollateFn>,
    pin_memory: bool,
    seed: Option<u64>,
    epoch: u64,
}

impl DataLoader {
    /// A loader over a map-style dataset (configure, then [`DataLoaderBuilder::build`]).
    pub fn builder(dataset: Arc<dyn Dataset>) -> DataLoaderBuilder {
        DataLoaderBuilder::new(Source::Map(dataset))
    }
    /// A loader over an iterable dataset.
    pub fn iterable(dataset: Arc<dyn IterableDataset>) -> DataLoaderBuilder {
        DataLoaderBuilder::new(Source::Iterable(dataset))
    }

    /// `len(loader)`: batches per epoch (samples with `batch_size=None`). An iterable dataset
    /// without a length is an error, as in PyTorch.
    pub fn len(&self) -> Result<usize> {
        match (&self.order, &self.source) {
            (Order::Batches(b), _) => Ok(b.len()),
            (Order::Single(s), _) => Ok(s.len()),
            (Order::Stream, Source::Iterable(ds)) => {
                let n = ds.len().ok_or_else(|| Error::value(OP, "object of type 'IterableDataset' has no len()"))?;
                Ok(match self.batch_size {
                    None => n,
                    Some(b) if self.drop_last => n / b,
                    Some(b) => n.div_ceil(b),
                })
            }
            (Order::Stream, Source::Map(_)) => Err(Error::value(OP, "a map-style dataset has a sampler")),
        }
    }
    /// `loader.pin_memory`: as requested (an iterator pins only where CUDA is available).
    pub fn pin_memory(&self) -> bool {
        self.pin_memory
    }
    /// True when an epoch yields no batch.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Makes the next epoch's order that of `epoch` (forwarded to the sampler: `shuffle=True`
    /// with a seed, a seeded sampler, a `DistributedSampler`).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
        match &mut self.order {
            Order::Batches(b) => b.set_epoch(epoch),
            Order::Single(s) => s.set_epoch(epoch),
            Order::Stream => {}
        }
    }

    /// One epoch: draws its order now and starts the workers.
    pub fn iter(&mut self) -> Result<DataLoaderIter> {
        // the workers' seeds; drawn from the default generator only when there are workers, so a
        // loader without them leaves that stream (dropout's) as it found it
        let base_seed = match self.seed {
            Some(s) => s.wrapping_add(self.epoch).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            None if self.num_workers > 0 => seed_from_default(),
            None => 0,
        };
        self.epoch = self.epoch.wrapping_add(1);
        let plan = match &mut self.order {
            Order::Batches(b) => Plan::Batches(b.epoch_batches()?),
            Order::Single(s) => Plan::Batches(s.epoch_indices()?.into_iter().map(|i| vec![i]).collect()),
            Order::Stream => Plan::Stream,
        };
        let collate = match (&self.collate_fn, self.batch_size.is_some() || matches!(self.order, Order::Batches(_))) {
            (Some(f), _) => Some(f.clone()),
            (None, true) => Some(Arc::new(default_collate) as CollateFn),
            // batch_size=None: samples pass through (PyTorch's default_convert)
            (None, false) => None,
        };
        let collate = if self.pin_memory && pinning_available() { Some(pinning(collate)) } else { collate };
        DataLoaderIter::start(self, plan, collate, base_seed)
    }
}

/// What an epoch loads.
pub(crate) enum Plan {
    /// Index lists, one per batch (one index each without batching).
    Batches(Vec<Vec<usize>>),
    /// The iterable dataset's stream(s).
    Stream,
}
