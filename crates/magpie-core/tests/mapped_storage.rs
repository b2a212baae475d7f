//! Storages over borrowed bytes (`CpuStorage::Mapped`, what zero-copy checkpoint loading makes):
//! reads in place, copy-on-write on the first mutation (the bytes never change), views sharing
//! the written copy, the owner kept alive by the tensors; and the parallel contiguous copy/cast
//! of `to_vec` / `to_dtype` against the element-by-element cast at several sizes.

use magpie_core::half::{bf16, f16};
use magpie_core::storage::{CpuStorage, MappedStorage, StableBytes, Storage};
use magpie_core::{DType, Element, Tensor};
use std::sync::Arc;

/// `values`' little-endian bytes placed at an 8-byte-aligned offset of a fresh buffer (and the
/// offset), so views of any dtype are aligned.
fn aligned_bytes(le: &[u8]) -> (Arc<Vec<u8>>, usize) {
    let mut v = vec![0u8; le.len() + 16];
    let off = (8 - v.as_ptr() as usize % 8) % 8;
    v[off..off + le.len()].copy_from_slice(le);
    (Arc::new(v), off)
}

fn le_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn mapped(owner: &Arc<Vec<u8>>, off: usize, n: usize, dt: DType, shape: &[usize]) -> Tensor {
    let m = MappedStorage::new(owner.clone() as Arc<dyn StableBytes>, off, n, dt).expect("aligned, in range");
    Tensor::from_cpu_storage(CpuStorage::Mapped(m), shape).unwrap()
}

fn is_mapped(t: &Tensor) -> bool {
    matches!(&*t.storage().read(), Storage::Cpu(c) if c.is_mapped())
}

#[test]
fn reads_in_place_for_every_numeric_dtype() {
    let vals: Vec<f32> = (0..12).map(|i| i as f32 * 0.75 - 3.0).collect();
    let (o, off) = aligned_bytes(&le_f32(&vals));
    let t = mapped(&o, off, 12, DType::F32, &[3, 4]);
    assert!(is_mapped(&t));
    assert_eq!(t.to_vec::<f32>().unwrap(), vals);
    assert_eq!(t.sum().unwrap().to_vec::<f32>().unwrap()[0], vals.iter().sum::<f32>());
    // a strided view of the mapped storage
    assert_eq!(t.transpose(0, 1).unwrap().contiguous().unwrap().to_vec::<f32>().unwrap()[..3], [vals[0], vals[4], vals[8]]);
    let h: Vec<bf16> = vals.iter().map(|&x| bf16::from_f32(x)).collect();
    let (o, off) = aligned_bytes(&h.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
    assert_eq!(mapped(&o, off, 12, DType::BF16, &[12]).to_vec::<bf16>().unwrap(), h);
    let f: Vec<f16> = vals.iter().map(|&x| f16::from_f32(x)).collect();
    let (o, off) = aligned_bytes(&f.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
    assert_eq!(mapped(&o, off, 12, DType::F16, &[12]).to_vec::<f16>().unwrap(), f);
    let i: Vec<i64> = (0..5).map(|x| x * -1_000_000_007).collect();
    let (o, off) = aligned_bytes(&i.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
    assert_eq!(mapped(&o, off, 5, DType::I64, &[5]).to_vec::<i64>().unwrap(), i);
}

#[test]
fn refuses_bool_misaligned_and_out_of_range() {
    let (o, off) = aligned_bytes(&[0u8; 64]);
    let owner = || o.clone() as Arc<dyn StableBytes>;
    assert!(MappedStorage::new(owner(), off, 4, DType::Bool).is_none());
    assert!(MappedStorage::new(owner(), off + 1, 4, DType::F32).is_none());
    assert!(MappedStorage::new(owner(), off + 2, 4, DType::BF16).is_some());
    assert!(MappedStorage::new(owner(), off + 2, 4, DType::F64).is_none());
    let fits = (o.len() - off) / 4;
    assert!(MappedStorage::new(owner(), off, fits, DType::F32).is_some());
    assert!(MappedStorage::new(owner(), off, fits + 1, DType::F32).is_none());
    assert!(MappedStorage::new(owner(), off, usize::MAX / 2, DType::F32).is_none());
    assert!(MappedStorage::new(owner(), usize::MAX - 2, 1, DType::U8).is_none());
    assert!(MappedStorage::new(owner(), off + 64, 0, DType::F32).is_some());
}

#[test]
fn first_write_copies_and_views_share_it() {
    let vals: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let (o, off) = aligned_bytes(&le_f32(&vals));
    let before = o.as_ref().clone();
    let a = mapped(&o, off, 8, DType::F32, &[2, 4]);
    let b = mapped(&o, off, 8, DType::F32, &[8]); // a second storage over the same bytes
    let view = a.narrow(1, 1, 2).unwrap(); // shares a's storage
    a.add_scalar_(10.0).unwrap();
    assert!(!is_mapped(&a), "the write made an owned copy");
    assert_eq!(a.to_vec::<f32>().unwrap(), vals.iter().map(|x| x + 10.0).collect::<Vec<_>>());
    assert_eq!(view.to_vec::<f32>().unwrap(), vec![11.0, 12.0, 15.0, 16.0], "a view sees its storage's write");
    assert_eq!(*o.as_ref(), before, "the borrowed bytes never change");
    assert!(is_mapped(&b));
    assert_eq!(b.to_vec::<f32>().unwrap(), vals, "another storage over the bytes keeps the original values");
    // a write through a view of a mapped storage copies the whole storage once
    let c = mapped(&o, off, 8, DType::F32, &[8]);
    let cv = c.narrow(0, 2, 3).unwrap();
    cv.fill_(-1.0).unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![0., 1., -1., -1., -1., 5., 6., 7.]);
    assert_eq!(*o.as_ref(), before);
}

#[test]
fn tensors_keep_their_bytes_alive() {
    let vals: Vec<f32> = (0..6).map(|i| i as f32 * 2.0).collect();
    let (o, off) = aligned_bytes(&le_f32(&vals));
    let t = mapped(&o, off, 6, DType::F32, &[6]);
    let weak = Arc::downgrade(&o);
    drop(o);
    assert!(weak.upgrade().is_some(), "the storage holds the owner");
    assert_eq!(t.to_vec::<f32>().unwrap(), vals);
    drop(t);
    assert!(weak.upgrade().is_none(), "and lets it go with the last tensor");
}

fn check_cast<S: Element, T: Element>(src: &[S]) {
    let t = Tensor::from_slice(src);
    let want: Vec<T> = src.iter().map(|&x| T::cast_from(x)).collect();
    let got = t.to_dtype(T::DTYPE).unwrap();
    assert_eq!(got.to_vec::<T>().unwrap(), want, "{:?} -> {:?} at {}", S::DTYPE, T::DTYPE, src.len());
    assert_eq!(t.to_vec::<T>().unwrap(), want);
    // an offset, contiguous view: the parallel path must start at the view's offset
    if src.len() > 3 {
        let v = t.narrow(0, 3, (src.len() - 3) as i64).unwrap();
        assert_eq!(v.to_vec::<T>().unwrap(), want[3..].to_vec());
    }
}

#[test]
fn parallel_copy_and_cast_match_the_elementwise_cast() {
    // around the parallel threshold (2^18 elements) and odd sizes
    for &n in &[0usize, 1, 1000, (1 << 18) - 1, 1 << 18, (1 << 18) + 7, 300_013] {
        let f: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.37).sin() * 1e3 + i as f32 * 1e-3).collect();
        check_cast::<f32, f32>(&f);
        check_cast::<f32, bf16>(&f);
        check_cast::<f32, f16>(&f);
        check_cast::<f32, i32>(&f);
        let b: Vec<bf16> = f.iter().map(|&x| bf16::from_f32(x)).collect();
        check_cast::<bf16, f32>(&b);
        check_cast::<bf16, f64>(&b);
        let i: Vec<i64> = (0..n as i64).map(|x| x * 7919 - 1_000_003).collect();
        check_cast::<i64, f32>(&i);
        check_cast::<i64, u8>(&i);
    }
    // non-contiguous (transposed) large input: the gather path, same values
    let (r, c) = (513usize, 1021usize);
    let f: Vec<f32> = (0..r * c).map(|i| i as f32 * 0.5).collect();
    let t = Tensor::from_vec(f.clone(), &[r, c]).unwrap().transpose(0, 1).unwrap();
    let got = t.to_dtype(DType::BF16).unwrap().to_vec::<bf16>().unwrap();
    let want: Vec<bf16> = (0..c).flat_map(|j| (0..r).map(move |i| (i, j))).map(|(i, j)| bf16::from_f32(f[i * c + j])).collect();
    assert_eq!(got, want);
}

#[test]
fn parallel_cast_of_a_mapped_storage() {
    let n = (1 << 18) + 333;
    let vals: Vec<bf16> = (0..n).map(|i| bf16::from_f32(i as f32 * 0.01 - 7.0)).collect();
    let (o, off) = aligned_bytes(&vals.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
    let t = mapped(&o, off, n, DType::BF16, &[n]);
    let want: Vec<f32> = vals.iter().map(|x| x.to_f32()).collect();
    assert_eq!(t.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap(), want);
    assert!(is_mapped(&t), "reading does not copy");
}
