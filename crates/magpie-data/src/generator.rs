//! Random draws of the samplers: a generator shared between a sampler and its owner (what passing
//! `generator=g` does in PyTorch), seeded permutations and 64-bit index draws.

use magpie_core::ops::random::{with_default_generator, Generator};
use std::sync::{Arc, Mutex};

/// A [`Generator`] several owners draw from in turn: `RandomSampler(generator=g)` in PyTorch
/// advances the caller's `g`, and this is that `g`.
///
/// ```
/// use magpie_data::SharedGenerator;
/// use magpie_core::ops::random::Generator;
/// let g = SharedGenerator::new(Generator::new(7));
/// let h = g.clone();
/// h.with(|g| g.next_u32(4));
/// assert_eq!(g.get_state(), (7, 1));
/// ```
#[derive(Clone, Debug)]
pub struct SharedGenerator(Arc<Mutex<Generator>>);

impl SharedGenerator {
    /// Shares `gen`.
    pub fn new(gen: Generator) -> SharedGenerator {
        SharedGenerator(Arc::new(Mutex::new(gen)))
    }
    /// Runs `f` with the generator.
    pub fn with<R>(&self, f: impl FnOnce(&mut Generator) -> R) -> R {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }
    /// The (seed, offset) state.
    pub fn get_state(&self) -> (u64, u64) {
        self.with(|g| g.get_state())
    }
    /// A copy of the generator in its current state.
    pub fn snapshot(&self) -> Generator {
        self.with(|g| g.clone())
    }
}

/// The generator of epoch `epoch` of a sampler seeded with `seed` (PyTorch's
/// `DistributedSampler`: `g.manual_seed(seed + epoch)`).
pub(crate) fn epoch_generator(seed: u64, epoch: u64) -> Generator {
    Generator::new(seed.wrapping_add(epoch))
}

/// A seed drawn from the default generator (what PyTorch's samplers do without a generator).
pub(crate) fn seed_from_default() -> u64 {
    let r = with_default_generator(|g| g.next_u32(2));
    ((r[0] as u64) << 32) | r[1] as u64
}

/// `k` indices in `0..n`, each from 64 random bits (the modulo bias is below 2^-40 for any
/// realistic `n`); all drawn in one call, so a batch of `k` costs the same stream whatever `n` is.
pub(crate) fn draw_indices(gen: &mut Generator, n: usize, k: usize) -> Vec<usize> {
    let r = gen.next_u32(2 * k);
    r.chunks_exact(2).map(|p| ((((p[0] as u64) << 32) | p[1] as u64) % n.max(1) as u64) as usize).collect()
}

/// A uniformly random permutation of `0..n` (Fisher-Yates with 64 random bits per swap).
pub(crate) fn permutation(gen: &mut Generator, n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    if n > 1 {
        let r = gen.next_u32(2 * n);
        for i in (1..n).rev() {
            let v = ((r[2 * i] as u64) << 32) | r[2 * i + 1] as u64;
            idx.swap(i, (v % (i as u64 + 1)) as usize);
        }
    }
    idx
}
