//! The trainer's batches come through a `magpie_data::DataLoader` and are the batches drawn
//! directly from the data-order generator (the stream before the loader): checked against that
//! direct draw, written out here, for GPT windows and BERT's masked windows at several batch
//! sizes, including odd ones (a Philox block holds four u32s, so odd sizes leave partial blocks).

use magpie_core::ops::random::Generator;
use magpie_data::Dataset as _;
use magpie_models::data::{Dataset, Split, Windows};
use magpie_models::mlm::{mask_tokens, mlm_batch, MaskConfig, MlmSpec};
use magpie_models::mlm_vocab::SpecialIds;
use std::sync::Arc;

/// The direct draw: `batch` window starts from 64 random bits each, all in one call.
fn direct_starts(gen: &mut Generator, parts: usize, batch: usize) -> Vec<usize> {
    let r = gen.next_u32(2 * batch);
    r.chunks_exact(2).map(|p| ((((p[0] as u64) << 32) | p[1] as u64) % parts as u64) as usize).collect()
}

fn corpus() -> Dataset {
    let tokens: Vec<u32> = (0..3000u32).map(|i| (i * 7919 + i / 3) % 50 + 5).collect();
    Dataset::new(tokens, 0.2, 16).unwrap()
}

#[test]
fn gpt_batches_are_the_direct_draw() {
    let data = corpus();
    for batch in [1, 3, 4, 5, 16] {
        for split in [Split::Train, Split::Val] {
            let part = data.part(split).clone();
            let (mut g, mut h) = (Generator::new(11), Generator::new(11));
            for _ in 0..4 {
                let (x, y) = data.batch(&mut g, split, batch, 16).unwrap();
                let starts = direct_starts(&mut h, part.len() + 1 - 17, batch);
                let want_x: Vec<i64> = starts.iter().flat_map(|&s| part[s..s + 16].iter().map(|&v| v as i64)).collect();
                let want_y: Vec<i64> = starts.iter().flat_map(|&s| part[s + 1..s + 17].iter().map(|&v| v as i64)).collect();
                assert_eq!(x.shape(), &[batch, 16]);
                assert_eq!(x.to_vec::<i64>().unwrap(), want_x, "batch {batch}");
                assert_eq!(y.to_vec::<i64>().unwrap(), want_y, "batch {batch}");
                assert_eq!(g.get_state(), h.get_state(), "the generator ends where the direct draw leaves it");
            }
        }
    }
}

#[test]
fn bert_batches_are_the_direct_draw() {
    let data = corpus();
    let sp = SpecialIds { pad: 0, cls: 2, sep: 3, mask: 4 };
    let spec = MlmSpec { vocab_size: 55, special: sp, rates: MaskConfig::default() };
    let part = data.part(Split::Train).clone();
    for batch in [1, 3, 5, 8] {
        let (mut g, mut h) = (Generator::new(5), Generator::new(5));
        for _ in 0..3 {
            let b = mlm_batch(&data, &mut g, Split::Train, batch, 12, spec).unwrap();
            let starts = direct_starts(&mut h, part.len() + 1 - 10, batch);
            let mut ids = Vec::new();
            let mut special = Vec::new();
            for s in starts {
                ids.push(2);
                ids.extend(part[s..s + 10].iter().map(|&v| v as i64));
                ids.push(3);
                special.push(true);
                special.extend(part[s..s + 10].iter().map(|&v| v <= 4 && v != 1));
                special.push(true);
            }
            let labels = mask_tokens(&mut ids, &special, 55, 4, MaskConfig::default(), &mut h).unwrap();
            assert_eq!(b.input_ids.to_vec::<i64>().unwrap(), ids, "batch {batch}");
            assert_eq!(b.labels.to_vec::<i64>().unwrap(), labels, "batch {batch}");
            assert_eq!(g.get_state(), h.get_state());
        }
    }
}

#[test]
fn windows_dataset_items_and_errors() {
    let w = Windows::new(Arc::new((0..10u32).collect()), 4, true).unwrap();
    assert_eq!(w.len(), 7);
    let item = w.get(6).unwrap();
    let parts = item.as_list().unwrap();
    assert_eq!(parts[0].as_tensor().unwrap().to_vec::<i64>().unwrap(), vec![6, 7, 8]);
    assert_eq!(parts[1].as_tensor().unwrap().to_vec::<i64>().unwrap(), vec![7, 8, 9]);
    assert!(w.get(7).is_err());
    assert!(Windows::new(Arc::new(vec![1, 2]), 3, false).err().unwrap().to_string().contains("do not fit"));
}
