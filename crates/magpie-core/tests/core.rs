//! Tensor core: construction, dtype conversion, views sharing storage, printing, errors.

use magpie_core::{DType, Device, Tensor};

#[test]
fn views_share_storage_and_write_through() {
    let x = Tensor::from_vec((0..12).map(|v| v as f32).collect(), &[3, 4]).unwrap();
    let row = x.select(0, 1).unwrap();
    assert!(row.shares_storage(&x));
    row.fill_(7.0).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap()[4..8], [7.0; 4]);
    let col = x.t().unwrap().select(0, 2).unwrap();
    assert_eq!(col.to_vec::<f32>().unwrap(), vec![2.0, 7.0, 10.0]);
    let s = x.slice(1, Some(-3), None, 2).unwrap();
    assert_eq!(s.shape(), &[3, 2]);
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 7.0, 7.0, 9.0, 11.0]);
}

#[test]
fn view_requires_compatible_strides_and_reshape_copies() {
    let x = Tensor::from_vec((0..6).map(|v| v as i64).collect(), &[2, 3]).unwrap();
    let xt = x.t().unwrap();
    let err = xt.view(&[6]).unwrap_err().to_string();
    assert!(err.starts_with("[view]"), "{err}");
    let r = xt.reshape(&[-1]).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
    assert!(x.view(&[4, -1]).is_err());
}

#[test]
fn dtype_conversion_follows_pytorch_casts() {
    let x = Tensor::from_vec(vec![-1.7f32, 2.5, 300.0, f32::NAN], &[4]).unwrap();
    assert_eq!(x.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap()[..3], [-1, 2, 300]);
    assert_eq!(x.to_dtype(DType::Bool).unwrap().to_vec::<bool>().unwrap(), vec![true, true, true, true]);
    let h = x.to_dtype(DType::F16).unwrap();
    assert_eq!(h.dtype(), DType::F16);
    assert_eq!(h.to_vec::<f32>().unwrap()[..3], [-1.7001953, 2.5, 300.0]);
    let f8 = x.to_dtype(DType::F8E4M3).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(f8[..2], [-1.75, 2.5]);
    assert!(f8[3].is_nan());
    for d in DType::ALL {
        let y = x.to_dtype(d).unwrap();
        assert_eq!(y.dtype(), d);
        assert_eq!(y.shape(), &[4]);
    }
}

#[test]
fn printing_matches_pytorch_style() {
    let x = Tensor::from_vec(vec![1f32, 2.5, -3.0, 4.0], &[2, 2]).unwrap();
    assert_eq!(format!("{x}"), "tensor([[ 1.0000,  2.5000],\n        [-3.0000,  4.0000]])");
    let i = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
    assert_eq!(format!("{i}"), "tensor([1, 2, 3], dtype=torch.int32)");
    let b = Tensor::scalar(true);
    assert_eq!(format!("{b}"), "tensor(True)");
    let big = Tensor::zeros(&[2000]).unwrap();
    assert!(format!("{big}").contains("..."));
}

#[test]
fn broadcasting_errors_name_the_op() {
    let a = Tensor::zeros(&[2, 3]).unwrap();
    let b = Tensor::zeros(&[4]).unwrap();
    let e = a.add(&b).unwrap_err().to_string();
    assert!(e.starts_with("[add]") && e.contains("must match"), "{e}");
    assert!(Tensor::zeros_on(&[1], DType::F32, Device::Cuda(0)).is_err());
}

#[test]
fn empty_and_zero_dim_tensors() {
    let e = Tensor::zeros(&[0, 3]).unwrap();
    assert_eq!(e.sum().unwrap().item().unwrap().to_f64(), 0.0);
    assert_eq!(e.add_scalar(1).unwrap().shape(), &[0, 3]);
    let s = Tensor::scalar(2.0f32);
    assert_eq!(s.mul(&s).unwrap().item().unwrap().to_f64(), 4.0);
    assert_eq!(s.sum_dims(Some(&[0]), false, None).unwrap().shape(), &[] as &[usize]);
}
