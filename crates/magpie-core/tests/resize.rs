//! `resize_` / `resize_as_`: shrinking and same-size resizes view the storage's first elements,
//! growing keeps the old elements and is seen through every tensor sharing the storage, offsets
//! are kept, and PyTorch's errors (negative sizes, tensors that require grad) are returned.

use magpie_core::registry::{call, Value};
use magpie_core::Tensor;

fn vals(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn shrink_and_same_size() {
    let x = Tensor::arange(0.0, 125.0, 1.0).unwrap().reshape(&[5, 5, 5]).unwrap();
    let y = x.resize_(&[25, 5]).unwrap();
    assert_eq!(y.shape(), &[25, 5]);
    assert_eq!(vals(&y), vals(&x));
    let z = x.resize_(&[2, 3]).unwrap();
    assert_eq!(vals(&z), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    // 0-d to 0-d and to [1, 1, 1]
    let s = Tensor::from_vec(vec![7.5f32], &[]).unwrap();
    assert_eq!(s.resize_(&[]).unwrap().shape(), &[] as &[usize]);
    assert_eq!(vals(&s.resize_(&[1, 1, 1]).unwrap()), vec![7.5]);
    // resize_as_ takes the template's shape; the registry reaches both
    let t = Tensor::zeros(&[3, 4]).unwrap();
    assert_eq!(x.resize_as_(&t).unwrap().shape(), &[3, 4]);
    let r = call("resize_", vec![Value::Tensor(x.clone()), Value::List(vec![Value::Int(4), Value::Int(2)])], vec![]).unwrap();
    let Value::Tensor(r) = r else { panic!("resize_ returned {r:?}") };
    assert_eq!(vals(&r), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let r = call("resize_as_", vec![Value::Tensor(x.clone()), Value::Tensor(t)], vec![]).unwrap();
    let Value::Tensor(r) = r else { panic!("resize_as_ returned {r:?}") };
    assert_eq!(r.shape(), &[3, 4]);
}

#[test]
fn grow_keeps_elements_and_shares_storage() {
    let x = Tensor::arange(0.0, 6.0, 1.0).unwrap();
    let view = x.narrow(0, 2, 3).unwrap();
    // a view at offset 2 grown past the storage's end: the storage grows for every sharer
    let g = view.resize_(&[3, 3]).unwrap();
    assert_eq!(g.shape(), &[3, 3]);
    assert_eq!(g.storage_offset(), 2);
    let v = vals(&g);
    assert_eq!(&v[..4], &[2.0, 3.0, 4.0, 5.0]);
    assert!(v[4..].iter().all(|&e| e == 0.0));
    // a write through the grown tensor is seen by the original (one storage)
    g.narrow(0, 0, 1).unwrap().fill_(9.0).unwrap();
    assert_eq!(vals(&x), vec![0.0, 1.0, 9.0, 9.0, 9.0, 5.0]);
    // empty to non-empty
    let e = Tensor::zeros(&[0]).unwrap();
    assert_eq!(vals(&e.resize_(&[2, 2]).unwrap()), vec![0.0; 4]);
}

#[test]
fn errors() {
    let x = Tensor::arange(0.0, 4.0, 1.0).unwrap();
    let e = x.resize_(&[2, -1]).unwrap_err().to_string();
    assert!(e.contains("negative dimension -1"), "{e}");
    let w = x.requires_grad_(true).unwrap();
    let e = w.resize_(&[2]).unwrap_err().to_string();
    assert!(e.contains("cannot resize variables that require grad"), "{e}");
    assert!(x.resize_(&[i64::MAX, 4]).is_err());
}
