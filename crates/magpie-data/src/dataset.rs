//! Datasets: map-style ([`Dataset`]: a length and an item per index) and iterable
//! ([`IterableDataset`]: a stream, sharded by worker), and the standard ones built on them
//! ([`TensorDataset`], [`Subset`], [`ConcatDataset`], [`random_split`]).

use crate::generator::permutation;
use crate::sample::Sample;
use crate::worker::WorkerInfo;
use magpie_core::ops::random::Generator;
use magpie_core::{Error, Result, Tensor};
use std::sync::Arc;

/// A map-style dataset (`torch.utils.data.Dataset` with `__len__` and `__getitem__`). Shared by
/// the loader's worker threads, so `get` takes `&self`.
pub trait Dataset: Send + Sync {
    /// The number of items.
    fn len(&self) -> usize;
    /// True when there is no item.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Item `index` (`0..len()`).
    fn get(&self, index: usize) -> Result<Sample>;
}

/// A stream of samples, as an iterable dataset yields it.
pub type SampleIter = Box<dyn Iterator<Item = Result<Sample>> + Send>;

/// An iterable dataset (`torch.utils.data.IterableDataset`). With `num_workers > 0` every worker
/// calls [`IterableDataset::iter`] with its [`WorkerInfo`] and should yield only its own shard
/// (otherwise each worker yields the whole stream, as in PyTorch).
///
/// ```
/// use magpie_data::{IterableDataset, Sample, SampleIter, WorkerInfo};
/// struct Range(i64);
/// impl IterableDataset for Range {
///     fn iter(&self, worker: Option<WorkerInfo>) -> magpie_core::Result<SampleIter> {
///         let (id, n) = worker.map_or((0, 1), |w| (w.id, w.num_workers));
///         Ok(Box::new((0..self.0).skip(id).step_by(n).map(|v| Ok(Sample::Int(v)))))
///     }
/// }
/// assert_eq!(Range(5).iter(None)?.count(), 5);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub trait IterableDataset: Send + Sync {
    /// The stream of `worker` (None on the loader's own thread).
    fn iter(&self, worker: Option<WorkerInfo>) -> Result<SampleIter>;
    /// The stream's length, if known (what `len(loader)` uses).
    fn len(&self) -> Option<usize> {
        None
    }
}

/// `TensorDataset(*tensors)`: item `i` is the tuple of every tensor's row `i`.
///
/// ```
/// use magpie_data::{Dataset, TensorDataset};
/// use magpie_core::Tensor;
/// let ds = TensorDataset::new(vec![Tensor::from_vec(vec![1i64, 2, 3], &[3])?])?;
/// assert_eq!(ds.len(), 3);
/// assert_eq!(ds.get(2)?.as_list().unwrap()[0].as_tensor().unwrap().item()?.to_f64(), 3.0);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct TensorDataset {
    tensors: Vec<Tensor>,
}

impl TensorDataset {
    /// The tensors must share their first dimension.
    pub fn new(tensors: Vec<Tensor>) -> Result<TensorDataset> {
        let op = "TensorDataset";
        let first = tensors.first().ok_or_else(|| Error::value(op, "at least one tensor is needed"))?;
        let n = *first.shape().first().ok_or_else(|| Error::shape(op, "tensors need at least one dimension"))?;
        if tensors.iter().any(|t| t.shape().first() != Some(&n)) {
            return Err(Error::shape(op, "Size mismatch between tensors"));
        }
        Ok(TensorDataset { tensors })
    }
    /// The tensors.
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }
}

impl Dataset for TensorDataset {
    fn len(&self) -> usize {
        self.tensors[0].shape()[0]
    }
    fn get(&self, index: usize) -> Result<Sample> {
        let n = self.len();
        if index >= n {
            return Err(Error::index("TensorDataset", format!("index {index} is out of bounds for dimension 0 with size {n}")));
        }
        Ok(Sample::Tuple(self.tensors.iter().map(|t| t.select(0, index as i64).map(Sample::Tensor)).collect::<Result<_>>()?))
    }
}

/// `Subset(dataset, indices)`: item `i` is `dataset[indices[i]]`.
///
/// ```
/// use magpie_data::{Dataset, Subset, TensorDataset};
/// use magpie_core::Tensor;
/// use std::sync::Arc;
/// let ds = Arc::new(TensorDataset::new(vec![Tensor::from_vec(vec![5i64, 6, 7], &[3])?])?);
/// let s = Subset::new(ds, vec![2, 0]);
/// assert_eq!(s.len(), 2);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Subset {
    dataset: Arc<dyn Dataset>,
    indices: Vec<usize>,
}

impl Subset {
    /// The items of `dataset` at `indices`, in that order.
    pub fn new(dataset: Arc<dyn Dataset>, indices: Vec<usize>) -> Subset {
        Subset { dataset, indices }
    }
    /// The indices into the underlying dataset.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }
}

impl Dataset for Subset {
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn get(&self, index: usize) -> Result<Sample> {
        let i = *self.indices.get(index).ok_or_else(|| Error::index("Subset", format!("index {index} is out of range for a subset of {} items", self.indices.len())))?;
        self.dataset.get(i)
    }
}

/// `ConcatDataset(datasets)`: the datasets one after another.
///
/// ```
/// use magpie_data::{ConcatDataset, Dataset, TensorDataset};
/// use magpie_core::Tensor;
/// use std::sync::Arc;
/// let a = Arc::new(TensorDataset::new(vec![Tensor::from_vec(vec![1i64, 2], &[2])?])?);
/// let b = Arc::new(TensorDataset::new(vec![Tensor::from_vec(vec![3i64], &[1])?])?);
/// let c = ConcatDataset::new(vec![a, b])?;
/// assert_eq!(c.len(), 3);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Clone)]
pub struct ConcatDataset {
    datasets: Vec<Arc<dyn Dataset>>,
    /// Running totals of the lengths (PyTorch's `cumulative_sizes`).
    cumulative_sizes: Vec<usize>,
}

impl ConcatDataset {
    /// At least one dataset is needed (PyTorch's error otherwise).
    pub fn new(datasets: Vec<Arc<dyn Dataset>>) -> Result<ConcatDataset> {
        if datasets.is_empty() {
            return Err(Error::value("ConcatDataset", "datasets should not be an empty iterable"));
        }
        let cumulative_sizes = datasets.iter().scan(0, |s, d| { *s += d.len(); Some(*s) }).collect();
        Ok(ConcatDataset { datasets, cumulative_sizes })
    }
    /// The running totals of the lengths.
    pub fn cumulative_sizes(&self) -> &[usize] {
        &self.cumulative_sizes
    }
}

impl Dataset for ConcatDataset {
    fn len(&self) -> usize {
        self.cumulative_sizes.last().copied().unwrap_or(0)
    }
    fn get(&self, index: usize) -> Result<Sample> {
        if index >= self.len() {
            return Err(Error::value("ConcatDataset", format!("absolute value of index should not exceed dataset length (index {index}, length {})", self.len())));
        }
        let d = self.cumulative_sizes.partition_point(|&c| c <= index);
        let start = if d == 0 { 0 } else { self.cumulative_sizes[d - 1] };
        self.datasets[d].get(index - start)
    }
}

/// `random_split(dataset, lengths, generator)`: non-overlapping random subsets of the given
/// lengths, which must add up to the dataset's length.
///
/// ```
/// use magpie_data::{random_split, Dataset, TensorDataset};
/// use magpie_core::{ops::random::Generator, Tensor};
/// use std::sync::Arc;
/// let ds = Arc::new(TensorDataset::new(vec![Tensor::from_vec((0..10i64).collect(), &[10])?])?);
/// let parts = random_split(ds, &[7, 3], &mut Generator::new(42))?;
/// assert_eq!((parts[0].len(), parts[1].len()), (7, 3));
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn random_split(dataset: Arc<dyn Dataset>, lengths: &[usize], gen: &mut Generator) -> Result<Vec<Subset>> {
    let n = dataset.len();
    if lengths.iter().sum::<usize>() != n {
        return Err(Error::value("random_split", "Sum of input lengths does not equal the length of the input dataset!"));
    }
    let perm = permutation(gen, n);
    let mut start = 0;
    Ok(lengths
        .iter()
        .map(|&l| {
            let s = Subset::new(dataset.clone(), perm[start..start + l].to_vec());
            start += l;
            s
        })
        .collect())
}
