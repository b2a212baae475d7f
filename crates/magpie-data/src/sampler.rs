//! Samplers: which dataset indices an epoch visits, in which order ([`Sampler`]), and how they
//! group into batches ([`BatchSampling`], [`BatchSampler`]). Each epoch's indices are drawn at once
//! when the epoch starts, on the loader's thread, so worker threads never touch a generator and
//! the order does not depend on how many workers there are.

use crate::generator::{draw_indices, epoch_generator, permutation, seed_from_default, SharedGenerator};
use magpie_core::ops::random::Generator;
use magpie_core::{Error, Result};

/// An order of dataset indices (`torch.utils.data.Sampler`).
pub trait Sampler: Send {
    /// Indices per epoch (`len(sampler)`).
    fn len(&self) -> usize;
    /// True when an epoch yields no index.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The next epoch's indices; a random sampler advances its generator.
    fn epoch_indices(&mut self) -> Result<Vec<usize>>;
    /// Makes the next epoch's order the one of `epoch` (for seeded samplers; others ignore it).
    fn set_epoch(&mut self, _epoch: u64) {}
}

/// `SequentialSampler`: `0, 1, ..., n - 1`.
///
/// ```
/// use magpie_data::{Sampler, SequentialSampler};
/// assert_eq!(SequentialSampler::new(3).epoch_indices()?, vec![0, 1, 2]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SequentialSampler {
    n: usize,
}

impl SequentialSampler {
    /// A sampler over `n` items.
    pub fn new(n: usize) -> SequentialSampler {
        SequentialSampler { n }
    }
}

impl Sampler for SequentialSampler {
    fn len(&self) -> usize {
        self.n
    }
    fn epoch_indices(&mut self) -> Result<Vec<usize>> {
        Ok((0..self.n).collect())
    }
}

/// Where a random sampler's numbers come from.
#[derive(Clone, Debug)]
enum Source {
    /// A fresh seed from the default generator each epoch (PyTorch without `generator=`).
    Default,
    /// A generator seeded with `seed + epoch` at [`Sampler::set_epoch`], advancing between epochs.
    Seeded { seed: u64, gen: Generator },
    /// The caller's generator, advanced by every draw.
    Shared(SharedGenerator),
}

impl Source {
    fn seeded(seed: u64) -> Source {
        Source::Seeded { seed, gen: epoch_generator(seed, 0) }
    }
    fn draw<R>(&mut self, f: impl FnOnce(&mut Generator) -> R) -> R {
        match self {
            Source::Default => f(&mut Generator::new(seed_from_default())),
            Source::Seeded { gen, .. } => f(gen),
            Source::Shared(g) => g.with(f),
        }
    }
    fn set_epoch(&mut self, epoch: u64) {
        if let Source::Seeded { seed, gen } = self {
            *gen = epoch_generator(*seed, epoch);
        }
    }
}

/// `RandomSampler(data_source, replacement=False, num_samples=None, generator=None)`: a random
/// permutation (repeated whole, then cut, when `num_samples` exceeds `n`), or with `replacement`
/// `num_samples` independent uniform draws.
///
/// With [`RandomSampler::seed`] each epoch's order is fixed by (seed, epoch): epoch `e` after
/// `set_epoch(e)` draws from a generator seeded with `seed + e`, and consecutive epochs without
/// `set_epoch` continue that generator. Without a seed or generator each epoch draws a seed from
/// the default generator, as PyTorch does.
///
/// ```
/// use magpie_data::{RandomSampler, Sampler};
/// let mut s = RandomSampler::new(5).seed(1);
/// let mut p = s.epoch_indices()?;
/// p.sort();
/// assert_eq!(p, vec![0, 1, 2, 3, 4]);
/// let mut r = RandomSampler::new(5).replacement(true).num_samples(Some(8))?.seed(1);
/// assert_eq!(r.epoch_indices()?.len(), 8);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct RandomSampler {
    n: usize,
    replacement: bool,
    num_samples: Option<usize>,
    source: Source,
}

impl RandomSampler {
    /// A sampler over `n` items (no replacement, one permutation per epoch).
    pub fn new(n: usize) -> RandomSampler {
        RandomSampler { n, replacement: false, num_samples: None, source: Source::Default }
    }
    /// `replacement=`.
    pub fn replacement(mut self, replacement: bool) -> RandomSampler {
        self.replacement = replacement;
        self
    }
    /// `num_samples=` (None: the dataset's length). Zero is PyTorch's error.
    pub fn num_samples(mut self, num_samples: Option<usize>) -> Result<RandomSampler> {
        if num_samples == Some(0) {
            return Err(Error::value("RandomSampler", "num_samples should be a positive integer value, but got num_samples=0"));
        }
        self.num_samples = num_samples;
        Ok(self)
    }
    /// Draws from a generator seeded with `seed` (`seed + epoch` after `set_epoch`).
    pub fn seed(mut self, seed: u64) -> RandomSampler {
        self.source = Source::seeded(seed);
        self
    }
    /// Draws from the caller's generator (`generator=g`), advancing it.
    pub fn generator(mut self, gen: SharedGenerator) -> RandomSampler {
        self.source = Source::Shared(gen);
        self
    }
}

impl Sampler for RandomSampler {
    fn len(&self) -> usize {
        self.num_samples.unwrap_or(self.n)
    }
    fn epoch_indices(&mut self) -> Result<Vec<usize>> {
        let (n, k) = (self.n, self.len());
        if n == 0 {
            if k == 0 {
                return Ok(Vec::new());
            }
            return Err(Error::value("RandomSampler", format!("cannot draw {k} samples from an empty dataset")));
        }
        if self.replacement {
            return Ok(self.source.draw(|g| draw_indices(g, n, k)));
        }
        self.source.draw(|g| {
            let mut out = Vec::with_capacity(k);
            while out.len() < k {
                let p = permutation(g, n);
                let take = (k - out.len()).min(n);
                out.extend_from_slice(&p[..take]);
            }
            Ok(out)
        })
    }
    fn set_epoch(&mut self, epoch: u64) {
        self.source.set_epoch(epoch);
    }
}

/// `SubsetRandomSampler(indices)`: the given indices in a random order.
///
/// ```
/// use magpie_data::{Sampler, SubsetRandomSampler};
/// let mut s = SubsetRandomSampler::new(vec![10, 20, 30]).seed(0);
/// let mut p = s.epoch_indices()?;
/// p.sort();
/// assert_eq!(p, vec![10, 20, 30]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SubsetRandomSampler {
    indices: Vec<usize>,
    source: Source,
}

impl SubsetRandomSampler {
    /// A sampler over `indices`.
    pub fn new(indices: Vec<usize>) -> SubsetRandomSampler {
        SubsetRandomSampler { indices, source: Source::Default }
    }
    /// Draws from a generator seeded with `seed` (`seed + epoch` after `set_epoch`).
    pub fn seed(mut self, seed: u64) -> SubsetRandomSampler {
        self.source = Source::seeded(seed);
        self
    }
    /// Draws from the caller's generator.
    pub fn generator(mut self, gen: SharedGenerator) -> SubsetRandomSampler {
        self.source = Source::Shared(gen);
        self
    }
}

impl Sampler for SubsetRandomSampler {
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn epoch_indices(&mut self) -> Result<Vec<usize>> {
        let n = self.indices.len();
        let p = self.source.draw(|g| permutation(g, n));
        Ok(p.into_iter().map(|i| self.indices[i]).collect())
    }
    fn set_epoch(&mut self, epoch: u64) {
        self.source.set_epoch(epoch);
    }
}

/// `WeightedRandomSampler(weights, num_samples, replacement=True)`: index `i` drawn with
/// probability `weights[i] / sum(weights)` (`torch.multinomial`); without replacement each index
/// at most once.
///
/// ```
/// use magpie_data::{Sampler, WeightedRandomSampler};
/// let mut s = WeightedRandomSampler::new(vec![0.0, 1.0, 0.0], 4, true)?.seed(3);
/// assert_eq!(s.epoch_indices()?, vec![1, 1, 1, 1]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct WeightedRandomSampler {
    weights: Vec<f64>,
    num_samples: usize,
    replacement: bool,
    source: Source,
}

impl WeightedRandomSampler {
    /// Checks the weights as `torch.multinomial` does.
    pub fn new(weights: Vec<f64>, num_samples: usize, replacement: bool) -> Result<WeightedRandomSampler> {
        let op = "WeightedRandomSampler";
        if num_samples == 0 {
            return Err(Error::value(op, "num_samples should be a positive integer value, but got num_samples=0"));
        }
        if weights.iter().any(|w| !w.is_finite()) {
            return Err(Error::value(op, "invalid multinomial distribution (encountering probability entry = infinity or NaN)"));
        }
        if weights.iter().any(|&w| w < 0.0) {
            return Err(Error::value(op, "invalid multinomial distribution (encountering probability entry < 0)"));
        }
        if weights.iter().sum::<f64>() <= 0.0 {
            return Err(Error::value(op, "invalid multinomial distribution (sum of probabilities <= 0)"));
        }
        let positive = weights.iter().filter(|&&w| w > 0.0).count();
        if !replacement && num_samples > positive {
            return Err(Error::value(op, "cannot sample n_sample > prob_dist.size(-1) samples without replacement"));
        }
        Ok(WeightedRandomSampler { weights, num_samples, replacement, source: Source::Default })
    }
    /// Draws from a generator seeded with `seed` (`seed + epoch` after `set_epoch`).
    pub fn seed(mut self, seed: u64) -> WeightedRandomSampler {
        self.source = Source::seeded(seed);
        self
    }
    /// Draws from the caller's generator.
    pub fn generator(mut self, gen: SharedGenerator) -> WeightedRandomSampler {
        self.source = Source::Shared(gen);
        self
    }
}

/// The index whose cumulative weight first exceeds `u * total`.
fn pick(cum: &[f64], u: f64) -> usize {
    let total = cum.last().copied().unwrap_or(0.0);
    let x = u * total;
    let i = cum.partition_point(|&c| c <= x);
    // a zero-weight tail never wins: step back to the last index with weight
    let mut i = i.min(cum.len() - 1);
    while i > 0 && cum[i] == cum[i - 1] {
        i -= 1;
    }
    i
}

impl Sampler for WeightedRandomSampler {
    fn len(&self) -> usize {
        self.num_samples
    }
    fn epoch_indices(&mut self) -> Result<Vec<usize>> {
        let k = self.num_samples;
        let mut w = self.weights.clone();
        let replacement = self.replacement;
        Ok(self.source.draw(|g| {
            let u = g.uniform(k);
            let mut out = Vec::with_capacity(k);
            let mut cum: Vec<f64> = w.iter().scan(0.0, |s, &x| { *s += x; Some(*s) }).collect();
            for &x in &u {
                let i = pick(&cum, x);
                out.push(i);
                if !replacement {
                    // drop the drawn index from the distribution
                    w[i] = 0.0;
                    cum = w.iter().scan(0.0, |s, &x| { *s += x; Some(*s) }).collect();
                }
            }
            out
        }))
    }
    fn set_epoch(&mut self, epoch: u64) {
        self.source.set_epoch(epoch);
    }
}

/// Batches of indices (what `batch_sampler=` takes: anything yielding lists of indices).
pub trait BatchSampling: Send {
    /// Batches per epoch.
    fn len(&self) -> usize;
    /// True when an epoch yields no batch.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The next epoch's batches.
    fn epoch_batches(&mut self) -> Result<Vec<Vec<usize>>>;
    /// Forwards to the sampler underneath.
    fn set_epoch(&mut self, _epoch: u64) {}
}

/// `BatchSampler(sampler, batch_size, drop_last)`: consecutive indices of `sampler` in groups of
/// `batch_size`; the short last group is kept unless `drop_last`.
///
/// ```
/// use magpie_data::{BatchSampler, BatchSampling, SequentialSampler};
/// let mut b = BatchSampler::new(Box::new(SequentialSampler::new(5)), 2, false)?;
/// assert_eq!(b.epoch_batches()?, vec![vec![0, 1], vec![2, 3], vec![4]]);
/// assert_eq!(b.len(), 3);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub struct BatchSampler {
    sampler: Box<dyn Sampler>,
    batch_size: usize,
    drop_last: bool,
}

impl BatchSampler {
    /// Groups `sampler`'s indices; `batch_size` 0 is PyTorch's error.
    pub fn new(sampler: Box<dyn Sampler>, batch_size: usize, drop_last: bool) -> Result<BatchSampler> {
        if batch_size == 0 {
            return Err(Error::value("BatchSampler", "batch_size should be a positive integer value, but got batch_size=0"));
        }
        Ok(BatchSampler { sampler, batch_size, drop_last })
    }
}

impl BatchSampling for BatchSampler {
    fn len(&self) -> usize {
        let n = self.sampler.len();
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }
    fn epoch_batches(&mut self) -> Result<Vec<Vec<usize>>> {
        let idx = self.sampler.epoch_indices()?;
        let mut out: Vec<Vec<usize>> = idx.chunks(self.batch_size).map(<[usize]>::to_vec).collect();
        if self.drop_last && out.last().is_some_and(|b| b.len() < self.batch_size) {
            out.pop();
        }
        Ok(out)
    }
    fn set_epoch(&mut self, epoch: u64) {
        self.sampler.set_epoch(epoch);
    }
}
