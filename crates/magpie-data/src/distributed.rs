//! Splitting data between ranks. [`DistributedSampler`] is PyTorch's: a seeded permutation of a
//! dataset's indices (the same on every rank, reshuffled per epoch), padded to a multiple of the
//! world size by repeating its first indices (or cut with `drop_last`), rank `r` taking every
//! `world`-th index from `r`. [`BatchShard`] is what the trainer uses: every rank draws the same
//! global batch of `N·B` rows from the same seeded generator and keeps its own `B` rows, so `N`
//! ranks see exactly the batches one process with batch `N·B` sees.

use crate::generator::{epoch_generator, permutation};
use crate::sampler::Sampler;
use magpie_core::{Error, Result, Tensor};
use std::ops::Range;

/// A rank's rows of each global batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchShard {
    pub rank: usize,
    pub world_size: usize,
}

impl BatchShard {
    /// The shard of `rank` in a world of `world_size`.
    pub fn new(rank: usize, world_size: usize) -> Result<BatchShard> {
        if world_size == 0 || rank >= world_size {
            return Err(Error::value("BatchShard", format!("rank {rank} is not below the world size {world_size}")));
        }
        Ok(BatchShard { rank, world_size })
    }
    /// This rank's rows of a global batch of `global` rows (which the world size must divide).
    pub fn rows(&self, global: usize) -> Result<Range<usize>> {
        if global % self.world_size != 0 || global == 0 {
            return Err(Error::value(
                "BatchShard",
                format!("the global batch of {global} rows does not split evenly over {} ranks (choose a batch size that is a multiple of the world size)", self.world_size),
            ));
        }
        let per = global / self.world_size;
        Ok(self.rank * per..(self.rank + 1) * per)
    }
    /// This rank's rows of `t` (dim 0 is the global batch), as a view.
    pub fn slice(&self, t: &Tensor) -> Result<Tensor> {
        let n = t.shape().first().copied().ok_or_else(|| Error::value("BatchShard", "a batch needs at least one dimension"))?;
        let r = self.rows(n)?;
        t.narrow(0, r.start as i64, (r.end - r.start) as i64)
    }
}

/// `torch.utils.data.distributed.DistributedSampler(dataset, num_replicas, rank, shuffle, seed,
/// drop_last)`.
///
/// ```
/// use magpie_data::DistributedSampler;
/// // 5 items over 2 ranks: padded to 6 by repeating index 0
/// let r1 = DistributedSampler::new(5, 1, 2, false, 0, false)?;
/// assert_eq!(r1.indices(), vec![1, 3, 0]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DistributedSampler {
    len: usize,
    rank: usize,
    world_size: usize,
    shuffle: bool,
    seed: u64,
    epoch: u64,
    drop_last: bool,
}

impl DistributedSampler {
    /// A sampler over `len` items for `rank` of `world_size`, shuffled with `seed` when `shuffle`;
    /// `drop_last` drops the tail that does not split evenly instead of repeating the first indices.
    pub fn new(len: usize, rank: usize, world_size: usize, shuffle: bool, seed: u64, drop_last: bool) -> Result<DistributedSampler> {
        if world_size == 0 {
            return Err(Error::value("DistributedSampler", "num_replicas should be a positive integer value, but got num_replicas=0"));
        }
        if rank >= world_size {
            return Err(Error::value("DistributedSampler", format!("Invalid rank {rank}, rank should be in the interval [0, {}]", world_size - 1)));
        }
        Ok(DistributedSampler { len, rank, world_size, shuffle, seed, epoch: 0, drop_last })
    }
    /// `sampler.set_epoch(e)`: a different shuffle each epoch, the same on every rank.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }
    /// Indices per rank.
    pub fn num_samples(&self) -> usize {
        if self.drop_last {
            self.len / self.world_size
        } else {
            self.len.div_ceil(self.world_size)
        }
    }
    /// This rank's indices for the current epoch.
    pub fn indices(&self) -> Vec<usize> {
        let mut idx = if self.shuffle {
            permutation(&mut epoch_generator(self.seed, self.epoch), self.len)
        } else {
            (0..self.len).collect()
        };
        let total = self.num_samples() * self.world_size;
        if total > idx.len() && !idx.is_empty() {
            // pad by repeating from the start (PyTorch's behaviour)
            let extra: Vec<usize> = idx.iter().cycle().take(total - idx.len()).copied().collect();
            idx.extend(extra);
        }
        idx.truncate(total);
        idx.into_iter().skip(self.rank).step_by(self.world_size).collect()
    }
}

impl Sampler for DistributedSampler {
    fn len(&self) -> usize {
        self.num_samples()
    }
    fn epoch_indices(&mut self) -> Result<Vec<usize>> {
        Ok(self.indices())
    }
    fn set_epoch(&mut self, epoch: u64) {
        DistributedSampler::set_epoch(self, epoch);
    }
}
