//! Properties of the samplers and the loader that PyTorch's numbers cannot check (our random
//! streams are Philox, not mt19937): shuffles are permutations, differ per epoch, repeat per
//! seed and do not depend on the worker count; weighted draws follow their weights (chi-square);
//! worker errors and panics surface at their batch; dropping an iterator stops its workers.

use magpie_core::Tensor;
use magpie_data::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Ints(usize);
impl Dataset for Ints {
    fn len(&self) -> usize {
        self.0
    }
    fn get(&self, i: usize) -> magpie_core::Result<Sample> {
        Ok(Sample::Int(i as i64))
    }
}

fn flat(dl: &mut DataLoader) -> Vec<Vec<i64>> {
    dl.iter().unwrap().map(|b| b.unwrap().into_tensor().unwrap().to_vec::<i64>().unwrap()).collect()
}

fn is_perm(v: &[usize], n: usize) -> bool {
    let mut s = v.to_vec();
    s.sort();
    s == (0..n).collect::<Vec<_>>()
}

#[test]
fn shuffles_are_permutations_per_seed_and_epoch() {
    for n in [1, 2, 7, 100, 1001] {
        let mut s = RandomSampler::new(n).seed(5);
        let a = s.epoch_indices().unwrap();
        let b = s.epoch_indices().unwrap();
        assert!(is_perm(&a, n) && is_perm(&b, n));
        if n > 2 {
            assert_ne!(a, b, "consecutive epochs should differ (n = {n})");
            assert_ne!(a, (0..n).collect::<Vec<_>>());
        }
        // set_epoch fixes an epoch's order: (seed, epoch) -> order
        let mut t = RandomSampler::new(n).seed(5);
        t.set_epoch(0);
        assert_eq!(t.epoch_indices().unwrap(), a);
        t.set_epoch(3);
        let e3 = t.epoch_indices().unwrap();
        t.set_epoch(3);
        assert_eq!(t.epoch_indices().unwrap(), e3);
        let mut other = RandomSampler::new(n).seed(6);
        if n > 2 {
            assert_ne!(other.epoch_indices().unwrap(), a, "another seed, another order");
        }
    }
    // more samples than items without replacement: whole permutations, then a cut one
    let mut s = RandomSampler::new(5).num_samples(Some(12)).unwrap().seed(1);
    let v = s.epoch_indices().unwrap();
    assert_eq!(v.len(), 12);
    assert!(is_perm(&v[..5], 5) && is_perm(&v[5..10], 5));
    assert!(RandomSampler::new(5).num_samples(Some(0)).is_err());
    let mut sub = SubsetRandomSampler::new(vec![3, 9, 4, 1]).seed(2);
    let mut p = sub.epoch_indices().unwrap();
    p.sort();
    assert_eq!(p, vec![1, 3, 4, 9]);
}

#[test]
fn loader_order_is_deterministic_and_independent_of_workers() {
    let build = |w: usize, seed: u64| DataLoader::builder(Arc::new(Ints(103))).batch_size(Some(8)).shuffle(true).seed(seed).num_workers(w).build().unwrap();
    let mut base = build(0, 11);
    let e0 = flat(&mut base);
    let e1 = flat(&mut base);
    assert_ne!(e0, e1, "a new permutation per epoch");
    for w in [1, 2, 3, 5] {
        let mut dl = build(w, 11);
        assert_eq!(flat(&mut dl), e0, "{w} workers, epoch 0");
        assert_eq!(flat(&mut dl), e1, "{w} workers, epoch 1");
        // set_epoch replays an epoch
        dl.set_epoch(0);
        assert_eq!(flat(&mut dl), e0);
    }
    let all: Vec<usize> = e0.concat().into_iter().map(|v| v as usize).collect();
    assert!(is_perm(&all, 103));
    assert_ne!(flat(&mut build(0, 12)), e0, "another seed, another order");
    // a DistributedSampler through the loader: set_epoch reshuffles, the same on every rank
    let ranks: Vec<Vec<i64>> = (0..3)
        .map(|r| {
            let s = DistributedSampler::new(20, r, 3, true, 4, false).unwrap();
            let mut dl = DataLoader::builder(Arc::new(Ints(20))).sampler(s).batch_size(Some(7)).num_workers(2).build().unwrap();
            dl.set_epoch(2);
            flat(&mut dl).concat()
        })
        .collect();
    let mut seen: Vec<i64> = ranks.concat();
    assert_eq!(seen.len(), 21);
    seen.sort();
    seen.dedup();
    assert_eq!(seen, (0..20).collect::<Vec<_>>());
}

/// Pearson's chi-square statistic of `counts` against expected probabilities `p`.
fn chi2(counts: &[usize], p: &[f64]) -> f64 {
    let n: usize = counts.iter().sum();
    counts.iter().zip(p).filter(|(_, &q)| q > 0.0).map(|(&c, &q)| {
        let e = n as f64 * q;
        (c as f64 - e).powi(2) / e
    }).sum()
}

#[test]
fn weighted_sampler_follows_its_weights() {
    let w = vec![1.0, 2.0, 3.0, 4.0, 0.0, 10.0];
    let total: f64 = w.iter().sum();
    let p: Vec<f64> = w.iter().map(|x| x / total).collect();
    for seed in [0, 1, 2] {
        let mut s = WeightedRandomSampler::new(w.clone(), 20_000, true).unwrap().seed(seed);
        let mut counts = vec![0usize; w.len()];
        for i in s.epoch_indices().unwrap() {
            counts[i] += 1;
        }
        assert_eq!(counts[4], 0, "a zero weight is never drawn");
        // 4 degrees of freedom: P(chi2 > 18.47) = 0.001; uniform draws would give thousands
        let c = chi2(&counts, &p);
        assert!(c < 18.47, "chi-square {c} for counts {counts:?}");
    }
    // without replacement: distinct indices, never a zero weight, heavy ones first more often
    let mut first_heavy = 0;
    for seed in 0..200 {
        let mut s = WeightedRandomSampler::new(w.clone(), 5, false).unwrap().seed(seed);
        let v = s.epoch_indices().unwrap();
        let mut d = v.clone();
        d.sort();
        d.dedup();
        assert_eq!(d, vec![0, 1, 2, 3, 5]);
        first_heavy += (v[0] == 5) as usize;
    }
    // P(first = 5) = 0.5: 200 draws put it in [70, 130] except with probability < 3e-5
    assert!((70..=130).contains(&first_heavy), "{first_heavy}");
    assert!(WeightedRandomSampler::new(vec![1.0, -1.0], 3, true).unwrap_err().to_string().contains("< 0"));
    assert!(WeightedRandomSampler::new(vec![0.0, 0.0], 3, true).unwrap_err().to_string().contains("sum of probabilities"));
    assert!(WeightedRandomSampler::new(vec![1.0, 0.0, 1.0], 3, false).unwrap_err().to_string().contains("without replacement"));
    // uniform draws with replacement: chi-square against 1/n
    let mut r = RandomSampler::new(7).replacement(true).num_samples(Some(14_000)).unwrap().seed(9);
    let mut counts = vec![0usize; 7];
    for i in r.epoch_indices().unwrap() {
        counts[i] += 1;
    }
    assert!(chi2(&counts, &[1.0 / 7.0; 7]) < 22.46, "{counts:?}"); // 6 dof, p = 0.001
}

/// Fails at one index (an error or a panic), counts the calls, sleeps a little per item.
struct Faulty {
    n: usize,
    bad: usize,
    panic: bool,
    calls: Arc<AtomicUsize>,
    delay: Duration,
}
impl Dataset for Faulty {
    fn len(&self) -> usize {
        self.n
    }
    fn get(&self, i: usize) -> magpie_core::Result<Sample> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        if i == self.bad {
            if self.panic {
                panic!("item {i} is corrupt");
            }
            return Err(magpie_core::Error::io("read_item", format!("item {i} is unreadable")));
        }
        Ok(Sample::Tensor(Tensor::from_vec(vec![i as f32; 3], &[3])?))
    }
}

#[test]
fn worker_errors_and_panics_surface_at_their_batch() {
    for panic in [false, true] {
        for workers in [0, 1, 3] {
            let ds = Faulty { n: 20, bad: 13, panic, calls: Arc::new(AtomicUsize::new(0)), delay: Duration::ZERO };
            let mut dl = DataLoader::builder(Arc::new(ds)).batch_size(Some(4)).num_workers(workers).build().unwrap();
            let out: Vec<_> = dl.iter().unwrap().collect();
            assert_eq!(out.len(), 5, "every batch comes out, the bad one as an error");
            for (k, b) in out.iter().enumerate() {
                match (k, b) {
                    (3, Err(e)) => {
                        let m = e.to_string();
                        assert!(m.contains("batch 3"), "{m}");
                        if panic {
                            assert!(m.contains("panic") && m.contains("item 13 is corrupt"), "{m}");
                        } else {
                            assert!(m.contains("index 13") && m.contains("item 13 is unreadable"), "{m}");
                        }
                        if workers > 0 {
                            assert!(m.contains(&format!("worker {}", 3 % workers)), "{m}");
                        }
                    }
                    (3, Ok(_)) => panic!("batch 3 should fail"),
                    (_, r) => assert_eq!(r.as_ref().unwrap().as_tensor().unwrap().shape(), &[4, 3]),
                }
            }
        }
    }
}

#[test]
fn dropping_an_iterator_stops_its_workers() {
    let calls = Arc::new(AtomicUsize::new(0));
    let ds = Faulty { n: 1000, bad: usize::MAX, panic: false, calls: calls.clone(), delay: Duration::from_millis(2) };
    let mut dl = DataLoader::builder(Arc::new(ds)).batch_size(Some(2)).num_workers(3).prefetch_factor(2).build().unwrap();
    let t = Instant::now();
    {
        let mut it = dl.iter().unwrap();
        it.next().unwrap().unwrap();
    } // dropped here: workers stop and are joined
    let after_drop = calls.load(Ordering::SeqCst);
    // loading all 1000 items would take 2 s of sleeping per worker
    assert!(t.elapsed() < Duration::from_millis(1500), "{:?}", t.elapsed());
    // at most: the batch taken, prefetch_factor queued per worker, one in progress per worker
    assert!(after_drop <= 2 * (1 + 3 * 2 + 3), "{after_drop} items loaded");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(calls.load(Ordering::SeqCst), after_drop, "no worker runs after the drop");
    // the loader starts a fresh epoch afterwards
    assert_eq!(dl.iter().unwrap().count(), 500);
}

/// An iterable dataset that shards by worker and records the worker info its threads see.
struct Stream(i64);
impl IterableDataset for Stream {
    fn iter(&self, worker: Option<WorkerInfo>) -> magpie_core::Result<SampleIter> {
        assert_eq!(worker, get_worker_info(), "the argument and get_worker_info() agree");
        let (id, n) = worker.map_or((0, 1), |w| (w.id, w.num_workers));
        Ok(Box::new((0..self.0).skip(id).step_by(n).map(|v| Ok(Sample::Int(v)))))
    }
    fn len(&self) -> Option<usize> {
        Some(self.0 as usize)
    }
}

#[test]
fn iterable_datasets_shard_by_worker() {
    let mut dl = DataLoader::iterable(Arc::new(Stream(10))).batch_size(Some(2)).build().unwrap();
    assert_eq!(dl.len().unwrap(), 5);
    assert_eq!(flat(&mut dl), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7], vec![8, 9]]);
    // two workers: worker 0 has 0,2,4,6,8, worker 1 has 1,3,5,7,9; batches alternate between them
    let mut dl = DataLoader::iterable(Arc::new(Stream(10))).batch_size(Some(2)).num_workers(2).build().unwrap();
    assert_eq!(flat(&mut dl), vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7], vec![8], vec![9]]);
    let mut dl = DataLoader::iterable(Arc::new(Stream(10))).batch_size(Some(2)).num_workers(2).drop_last(true).build().unwrap();
    assert_eq!(flat(&mut dl).len(), 4);
    let e = DataLoader::iterable(Arc::new(Stream(3))).shuffle(true).build().err().unwrap().to_string();
    assert!(e.contains("expected unspecified shuffle option, but got shuffle=True"), "{e}");
}

#[test]
fn datasets_compose() {
    let x = Tensor::from_vec((0..12).map(|v| v as f32).collect::<Vec<_>>(), &[6, 2]).unwrap();
    let y = Tensor::from_vec((0..6i64).collect::<Vec<_>>(), &[6]).unwrap();
    let ds: Arc<dyn Dataset> = Arc::new(TensorDataset::new(vec![x, y]).unwrap());
    assert!(TensorDataset::new(vec![Tensor::zeros(&[3]).unwrap(), Tensor::zeros(&[4]).unwrap()]).unwrap_err().to_string().contains("Size mismatch between tensors"));
    assert!(ds.get(6).is_err());
    let label = |s: &Sample| s.as_list().unwrap()[1].as_tensor().unwrap().item().unwrap().to_f64() as usize;
    let parts = random_split(ds.clone(), &[4, 2], &mut magpie_core::ops::random::Generator::new(1)).unwrap();
    let mut all: Vec<usize> = parts.iter().flat_map(|p| (0..p.len()).map(|i| label(&p.get(i).unwrap())).collect::<Vec<_>>()).collect();
    all.sort();
    assert_eq!(all, (0..6).collect::<Vec<_>>(), "the parts cover the dataset once");
    assert!(random_split(ds.clone(), &[4, 1], &mut magpie_core::ops::random::Generator::new(1)).is_err());
    let c = ConcatDataset::new(vec![ds.clone(), Arc::new(Subset::new(ds.clone(), vec![5, 0]))]).unwrap();
    assert_eq!(c.len(), 8);
    assert_eq!(c.cumulative_sizes(), &[6, 8]);
    assert_eq!(label(&c.get(6).unwrap()), 5);
    assert_eq!(label(&c.get(7).unwrap()), 0);
    assert!(c.get(8).is_err());
    // a custom collate_fn
    let mut dl = DataLoader::builder(Arc::new(c)).batch_size(Some(3)).collate_fn(|b| Ok(Sample::Int(b.len() as i64))).build().unwrap();
    assert_eq!(dl.iter().unwrap().map(|b| b.unwrap().as_int().unwrap()).collect::<Vec<_>>(), vec![3, 3, 2]);
}

#[test]
fn a_loader_without_workers_leaves_the_default_generator_alone() {
    use magpie_core::ops::random::with_default_generator;
    let before = with_default_generator(|g| g.get_state());
    let mut dl = DataLoader::builder(Arc::new(Ints(9))).batch_size(Some(2)).build().unwrap();
    assert_eq!(dl.iter().unwrap().count(), 5);
    assert_eq!(with_default_generator(|g| g.get_state()), before);
}

#[test]
fn distributed_sampler_partitions_a_seeded_permutation() {
    for (len, world, drop_last) in [(10, 3, false), (10, 3, true), (7, 2, false), (8, 4, true), (101, 4, false)] {
        let per: Vec<Vec<usize>> = (0..world).map(|r| DistributedSampler::new(len, r, world, true, 42, drop_last).unwrap().indices()).collect();
        let n = per[0].len();
        assert!(per.iter().all(|p| p.len() == n));
        let mut seen: Vec<usize> = per.concat();
        if drop_last {
            assert_eq!(n, len / world);
            let mut s = seen.clone();
            s.sort();
            s.dedup();
            assert_eq!(s.len(), seen.len(), "no index twice");
        } else {
            assert_eq!(n, len.div_ceil(world));
            seen.sort();
            seen.dedup();
            assert_eq!(seen, (0..len).collect::<Vec<_>>(), "every index");
        }
    }
    // shuffled, the same on every construction, different per epoch, the epoch replayable
    let a = DistributedSampler::new(100, 0, 1, true, 1, false).unwrap();
    assert_ne!(a.indices(), (0..100).collect::<Vec<_>>());
    assert_eq!(a.indices(), DistributedSampler::new(100, 0, 1, true, 1, false).unwrap().indices());
    let mut b = a.clone();
    b.set_epoch(1);
    assert_ne!(a.indices(), b.indices());
    b.set_epoch(0);
    assert_eq!(a.indices(), b.indices());
    let e = DistributedSampler::new(5, 2, 2, false, 0, false).unwrap_err().to_string();
    assert!(e.contains("Invalid rank 2, rank should be in the interval [0, 1]"), "{e}");
}
