//! `DataLoader(pin_memory=True)`: with CUDA every tensor of every batch (also inside lists, tuples
//! and maps) is pinned and equal to the unpinned batch, with and without workers; without CUDA
//! the loader warns and loads pageable batches, as PyTorch does without an accelerator.
//! `MAGPIE_REQUIRE_CUDA=1` makes a missing GPU a failure.

use magpie_core::backend::cuda;
use magpie_core::Tensor;
use magpie_data::{default_collate, DataLoader, Sample, TensorDataset};
use std::sync::Arc;

/// Every tensor of a sample tree, in order.
fn tensors(s: &Sample, out: &mut Vec<Tensor>) {
    match s {
        Sample::Tensor(t) => out.push(t.clone()),
        Sample::List(v) | Sample::Tuple(v) => v.iter().for_each(|x| tensors(x, out)),
        Sample::Map(v) => v.iter().for_each(|(_, x)| tensors(x, out)),
        _ => {}
    }
}

fn loader(pin: bool, workers: usize, batch: Option<usize>) -> DataLoader {
    let x = Tensor::from_vec((0..150).map(|v| v as f32 * 0.5).collect::<Vec<_>>(), &[50, 3]).unwrap();
    let y = Tensor::from_vec((0..50i64).collect::<Vec<_>>(), &[50]).unwrap();
    let ds = TensorDataset::new(vec![x, y]).unwrap();
    let mut b = DataLoader::builder(Arc::new(ds)).batch_size(batch).shuffle(true).seed(3).num_workers(workers).pin_memory(pin);
    if batch.is_some() {
        // nested containers: a map holding the default collation and a list
        b = b.collate_fn(|items| {
            let c = default_collate(items)?;
            let first = c.as_list().and_then(|l| l.first().cloned()).unwrap_or(Sample::Int(0));
            Ok(Sample::map([("batch", c), ("extra", Sample::List(vec![first, Sample::Str("tag".into())]))]))
        });
    }
    b.build().unwrap()
}

#[test]
fn pinned_batches_equal_pageable_ones() {
    let have = cuda::is_available();
    if !have && std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("MAGPIE_REQUIRE_CUDA=1 but CUDA is not available: {}", cuda::unavailable("test"));
    }
    for (workers, batch) in [(0, Some(8)), (2, Some(8)), (3, None)] {
        let mut plain = loader(false, workers, batch);
        let mut pinned = loader(true, workers, batch);
        assert!(pinned.pin_memory() && !plain.pin_memory());
        let a: Vec<Sample> = plain.iter().unwrap().map(|b| b.unwrap()).collect();
        let b: Vec<Sample> = pinned.iter().unwrap().map(|b| b.unwrap()).collect();
        assert_eq!(a.len(), b.len());
        let mut n = 0;
        for (sa, sb) in a.iter().zip(&b) {
            let (mut ta, mut tb) = (Vec::new(), Vec::new());
            tensors(sa, &mut ta);
            tensors(sb, &mut tb);
            assert_eq!(ta.len(), tb.len());
            for (x, y) in ta.iter().zip(&tb) {
                assert!(!x.is_pinned());
                // pinned only where an accelerator is present (PyTorch warns and skips otherwise)
                assert_eq!(y.is_pinned(), have, "workers {workers}, batch {batch:?}");
                assert_eq!((x.shape(), x.dtype()), (y.shape(), y.dtype()));
                assert_eq!(x.to_f64_vec().unwrap(), y.to_f64_vec().unwrap());
                n += 1;
            }
        }
        assert!(n >= 21, "{n} tensors compared");
    }
}
