//! `torch.utils.data` for torch-magpie: datasets ([`Dataset`], [`IterableDataset`], [`TensorDataset`],
//! [`Subset`], [`ConcatDataset`], [`random_split`]), samplers ([`SequentialSampler`],
//! [`RandomSampler`], [`SubsetRandomSampler`], [`WeightedRandomSampler`], [`DistributedSampler`],
//! [`BatchSampler`]), the [`Sample`] value tree with [`default_collate`], and the [`DataLoader`]
//! (batching, shuffling, worker threads with prefetch, epochs, batches in pinned memory).
//!
//! ```
//! use magpie_data::{DataLoader, Sample, TensorDataset};
//! use magpie_core::Tensor;
//! use std::sync::Arc;
//!
//! let x = Tensor::from_vec((0..20).map(|v| v as f32).collect::<Vec<_>>(), &[10, 2])?;
//! let y = Tensor::from_vec((0..10i64).collect::<Vec<_>>(), &[10])?;
//! let ds = TensorDataset::new(vec![x, y])?;
//! let mut loader = DataLoader::builder(Arc::new(ds)).batch_size(Some(4)).shuffle(true).seed(0).build()?;
//! assert_eq!(loader.len()?, 3);
//! for batch in loader.iter()? {
//!     let batch = batch?;
//!     let parts = batch.as_list().unwrap();
//!     assert_eq!(parts[0].as_tensor().unwrap().shape()[1], 2);
//! }
//! # Ok::<(), magpie_core::Error>(())
//! ```

pub mod collate;
pub mod dataset;
pub mod distributed;
pub mod generator;
pub mod loader;
mod loader_iter;
pub mod pin;
pub mod sample;
pub mod sampler;
pub mod worker;

pub use collate::{default_collate, CollateFn};
pub use dataset::{random_split, ConcatDataset, Dataset, IterableDataset, SampleIter, Subset, TensorDataset};
pub use distributed::{BatchShard, DistributedSampler};
pub use generator::SharedGenerator;
pub use loader::{DataLoader, DataLoaderBuilder};
pub use loader_iter::DataLoaderIter;
pub use pin::pin_memory;
pub use sample::Sample;
pub use sampler::{BatchSampler, BatchSampling, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler};
pub use worker::{get_worker_info, WorkerInfo};

/// The examples of `docs/data.md` run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/data.md")]
pub struct DataDocs;
