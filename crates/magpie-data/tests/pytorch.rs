//! Against PyTorch (fixtures/make_data_fixtures.py): BatchSampler and DataLoader index lists and
//! lengths, DistributedSampler without shuffling, default_collate's structure, dtypes, shapes and
//! values, and the errors PyTorch raises.

use magpie_core::{DType, Tensor};
use magpie_data::{default_collate, BatchSampler, BatchSampling, DataLoader, Dataset, DistributedSampler, Sample, Sampler, SequentialSampler};
use serde_json::Value;
use std::sync::Arc;

fn fixtures() -> Value {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/data_fixtures.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("fixture file")).expect("fixture JSON")
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
}

fn batches(v: &Value) -> Vec<Vec<usize>> {
    v.as_array().unwrap().iter().map(usizes).collect()
}

#[test]
fn batch_sampler_matches_pytorch() {
    let f = fixtures();
    let cases = f["batch_sampler"].as_array().unwrap();
    assert!(cases.len() >= 40);
    for c in cases {
        let (n, bs, dl) = (c["n"].as_u64().unwrap() as usize, c["batch_size"].as_u64().unwrap() as usize, c["drop_last"].as_bool().unwrap());
        let mut b = BatchSampler::new(Box::new(SequentialSampler::new(n)), bs, dl).unwrap();
        assert_eq!(b.len(), c["len"].as_u64().unwrap() as usize, "{c}");
        assert_eq!(b.epoch_batches().unwrap(), batches(&c["batches"]), "{c}");
    }
}

#[test]
fn distributed_sampler_matches_pytorch() {
    let f = fixtures();
    for c in f["distributed"].as_array().unwrap() {
        let (n, world, dl) = (c["n"].as_u64().unwrap() as usize, c["world"].as_u64().unwrap() as usize, c["drop_last"].as_bool().unwrap());
        for (rank, r) in c["ranks"].as_array().unwrap().iter().enumerate() {
            let mut s = DistributedSampler::new(n, rank, world, false, 0, dl).unwrap();
            assert_eq!(Sampler::len(&s), r["len"].as_u64().unwrap() as usize, "{c}");
            assert_eq!(s.epoch_indices().unwrap(), usizes(&r["indices"]), "n {n} world {world} drop_last {dl} rank {rank}");
        }
    }
}

/// A dataset of the integers `0..n` (as PyTorch's `list(range(n))`).
struct Ints(usize);
impl Dataset for Ints {
    fn len(&self) -> usize {
        self.0
    }
    fn get(&self, i: usize) -> magpie_core::Result<Sample> {
        Ok(Sample::Int(i as i64))
    }
}

#[test]
fn loader_lengths_and_batches_match_pytorch() {
    let f = fixtures();
    for c in f["loader_lengths"].as_array().unwrap() {
        let n = c["n"].as_u64().unwrap() as usize;
        let bs = c["batch_size"].as_u64().map(|v| v as usize);
        let dl = c["drop_last"].as_bool().unwrap();
        for workers in [0, 3] {
            let mut b = DataLoader::builder(Arc::new(Ints(n))).batch_size(bs).drop_last(dl).num_workers(workers).build().unwrap();
            assert_eq!(b.len().unwrap(), c["len"].as_u64().unwrap() as usize, "{c}");
            let got: Vec<Vec<usize>> = b
                .iter()
                .unwrap()
                .map(|s| match s.unwrap() {
                    Sample::Tensor(t) => t.to_vec::<i64>().unwrap().into_iter().map(|v| v as usize).collect(),
                    Sample::Int(v) => vec![v as usize],
                    o => panic!("unexpected {o:?}"),
                })
                .collect();
            assert_eq!(got, batches(&c["batches"]), "{c} with {workers} workers");
        }
    }
}

fn dtype(s: &str) -> DType {
    match s {
        "float32" => DType::F32,
        "float64" => DType::F64,
        "int64" => DType::I64,
        "bool" => DType::Bool,
        o => panic!("dtype {o}"),
    }
}

/// Rebuilds a tagged sample from the fixture.
fn decode(v: &Value) -> Sample {
    let (tag, x) = v.as_object().unwrap().iter().next().unwrap();
    match tag.as_str() {
        "tensor" => {
            let shape = usizes(&x["shape"]);
            let vals: Vec<f64> = x["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap_or_else(|| v.as_bool().map(|b| b as u8 as f64).unwrap())).collect();
            let t = Tensor::from_vec(vals, &shape).unwrap().to_dtype(dtype(x["dtype"].as_str().unwrap())).unwrap();
            Sample::Tensor(t)
        }
        "int" => Sample::Int(x.as_i64().unwrap()),
        "float" => Sample::Float(x.as_f64().unwrap()),
        "bool" => Sample::Bool(x.as_bool().unwrap()),
        "str" => Sample::Str(x.as_str().unwrap().into()),
        "list" => Sample::List(x.as_array().unwrap().iter().map(decode).collect()),
        "tuple" => Sample::Tuple(x.as_array().unwrap().iter().map(decode).collect()),
        "map" => Sample::Map(x.as_array().unwrap().iter().map(|p| (p[0].as_str().unwrap().to_string(), decode(&p[1]))).collect()),
        o => panic!("tag {o}"),
    }
}

/// Compares structure, dtypes, shapes and values exactly.
fn same(a: &Sample, b: &Sample, at: &str) {
    match (a, b) {
        (Sample::Tensor(x), Sample::Tensor(y)) => {
            assert_eq!(x.dtype(), y.dtype(), "dtype at {at}");
            assert_eq!(x.shape(), y.shape(), "shape at {at}");
            let xv = x.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
            let yv = y.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
            assert_eq!(xv, yv, "values at {at}");
        }
        (Sample::Int(x), Sample::Int(y)) => assert_eq!(x, y, "{at}"),
        (Sample::Float(x), Sample::Float(y)) => assert_eq!(x, y, "{at}"),
        (Sample::Bool(x), Sample::Bool(y)) => assert_eq!(x, y, "{at}"),
        (Sample::Str(x), Sample::Str(y)) => assert_eq!(x, y, "{at}"),
        (Sample::List(x), Sample::List(y)) | (Sample::Tuple(x), Sample::Tuple(y)) => {
            assert_eq!(x.len(), y.len(), "length at {at}");
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                same(p, q, &format!("{at}[{i}]"));
            }
        }
        (Sample::Map(x), Sample::Map(y)) => {
            let kx: Vec<&String> = x.iter().map(|(k, _)| k).collect();
            let ky: Vec<&String> = y.iter().map(|(k, _)| k).collect();
            assert_eq!(kx, ky, "keys at {at}");
            for ((k, p), (_, q)) in x.iter().zip(y) {
                same(p, q, &format!("{at}.{k}"));
            }
        }
        _ => panic!("structure differs at {at}: {} vs {}", a.kind(), b.kind()),
    }
}

#[test]
fn default_collate_matches_pytorch() {
    let f = fixtures();
    let cases = f["collate"].as_object().unwrap();
    assert!(cases.len() >= 10);
    for (name, c) in cases {
        let batch: Vec<Sample> = c["batch"].as_array().unwrap().iter().map(decode).collect();
        let out = default_collate(batch).unwrap_or_else(|e| panic!("{name}: {e}"));
        same(&out, &decode(&c["out"]), name);
    }
}

#[test]
fn default_collate_errors_match_pytorch() {
    let f = fixtures();
    for (name, c) in f["collate_errors"].as_object().unwrap() {
        let batch: Vec<Sample> = c["batch"].as_array().unwrap().iter().map(decode).collect();
        let e = default_collate(batch).unwrap_err().to_string();
        assert!(e.contains(c["message"].as_str().unwrap()), "{name}: {e}");
    }
    // structures PyTorch would also reject or mis-collate: mixed kinds, differing dict keys
    let e = default_collate(vec![Sample::Int(1), Sample::from("a")]).unwrap_err().to_string();
    assert!(e.contains("mixes int (entry 0) and str (entry 1)"), "{e}");
    let a = Sample::map([("x", Sample::Int(1))]);
    let b = Sample::map([("y", Sample::Int(1))]);
    let e = default_collate(vec![a, b]).unwrap_err().to_string();
    assert!(e.contains("entry 1 has keys [\"y\"]"), "{e}");
    let inner = Sample::map([("t", Sample::Tensor(Tensor::zeros(&[2]).unwrap()))]);
    let inner2 = Sample::map([("t", Sample::Tensor(Tensor::zeros(&[3]).unwrap()))]);
    let e = default_collate(vec![inner, inner2]).unwrap_err().to_string();
    assert!(e.contains("at key \"t\"") && e.contains("[2] at entry 0 and [3] at entry 1"), "{e}");
    assert!(default_collate(vec![]).is_err());
}

#[test]
fn loader_argument_errors_match_pytorch() {
    let f = fixtures();
    let m = &f["loader_errors"];
    let ds = || Arc::new(Ints(10));
    let msg = |r: magpie_core::Result<DataLoader>| r.err().expect("an error").to_string();
    let bsamp = || BatchSampler::new(Box::new(SequentialSampler::new(10)), 2, false).unwrap();
    let cases = [
        ("sampler_and_shuffle", msg(DataLoader::builder(ds()).sampler(SequentialSampler::new(10)).shuffle(true).build())),
        ("batch_sampler_and_batch_size", msg(DataLoader::builder(ds()).batch_sampler(bsamp()).batch_size(Some(3)).build())),
        ("batch_sampler_and_drop_last", msg(DataLoader::builder(ds()).batch_sampler(bsamp()).drop_last(true).build())),
        ("no_batching_and_drop_last", msg(DataLoader::builder(ds()).batch_size(None).drop_last(true).build())),
        ("prefetch_without_workers", msg(DataLoader::builder(ds()).prefetch_factor(2).build())),
    ];
    for (name, got) in cases {
        let want = m[name].as_str().unwrap();
        assert!(got.contains(want), "{name}: {got} vs {want}");
    }
    // a batch_sampler with the default batch_size (1) is fine, as in PyTorch
    let mut dl = DataLoader::builder(ds()).batch_sampler(bsamp()).build().unwrap();
    assert_eq!(dl.len().unwrap(), 5);
    assert_eq!(dl.iter().unwrap().count(), 5);
}
