//! Pinned host memory on a GPU: `pin_memory`, `is_pinned`, `non_blocking` copies both ways, the
//! host buffer outliving a copy its tensor was dropped before, host writes waiting for copies,
//! and the pinned allocator's cache over many pin/unpin cycles. Skips without CUDA unless
//! `MAGPIE_REQUIRE_CUDA=1`.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Tensor};
use std::sync::Mutex;

/// The allocator counters are per process: tests that read them run one at a time.
static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Queues enough GPU work (chained matmuls) that copies queued after it wait a while.
fn busy(dev: Device) -> Tensor {
    let a = Tensor::randn_on(&[2048, 2048], DType::F32, dev).unwrap();
    let mut y = a.clone();
    for _ in 0..8 {
        y = y.matmul(&a).unwrap().mul_scalar(1e-3).unwrap();
    }
    y
}

#[test]
fn pinned_tensors_copy_both_ways() {
    let Some(dev) = util::gpu() else { return };
    let _g = lock();
    let mut rng = util::Rng::new(7);
    for dt in [DType::F32, DType::I64, DType::Bool, DType::F16, DType::BF16, DType::C64, DType::U8, DType::F64] {
        for shape in [vec![0usize], vec![1], vec![7, 3], vec![1001, 17]] {
            let x = util::rand(&mut rng, &shape, dt, -50.0, 50.0);
            let p = x.pin_memory().unwrap();
            assert!(p.is_pinned() && !x.is_pinned(), "{dt} {shape:?}");
            assert!(p.pin_memory().unwrap().shares_storage(&p), "pinning a pinned tensor is itself");
            util::assert_close("pinned values", &p, &x, 0.0, 0.0);
            // CPU ops take pinned tensors; their results are ordinary memory
            let s = p.copy().unwrap();
            assert!(!s.is_pinned());
            util::assert_close("clone of pinned", &s, &x, 0.0, 0.0);
            let other = if dt.is_complex() { DType::C128 } else if dt == DType::F64 { DType::F32 } else { DType::F64 };
            let w = p.to_dtype(other).unwrap();
            assert!(!w.is_pinned());
            util::assert_close("cast of pinned", &w, &x.to_dtype(other).unwrap(), 0.0, 0.0);
            for nb in [true, false] {
                let g = p.to_device_with(dev, nb).unwrap();
                assert_eq!(g.device(), dev);
                util::assert_close("pinned -> gpu", &g, &x, 0.0, 0.0);
                let h = g.to_device_with(Device::Cpu, nb).unwrap();
                assert_eq!(h.is_pinned(), nb, "a non_blocking copy to the CPU lands in pinned memory");
                util::assert_close("gpu -> cpu", &h, &x, 0.0, 0.0);
            }
            if shape.len() == 2 && shape[0] > 1 {
                // views of pinned memory are pinned; strided ones copy through the usual path
                let v = p.narrow(0, 1, shape[0] as i64 - 1).unwrap();
                assert!(v.is_pinned());
                util::assert_close("row view", &v.to_device_with(dev, true).unwrap(), &x.narrow(0, 1, shape[0] as i64 - 1).unwrap(), 0.0, 0.0);
                let t = p.t().unwrap();
                util::assert_close("transposed view", &t.to_device_with(dev, true).unwrap(), &x.t().unwrap(), 0.0, 0.0);
            }
        }
    }
    let e = Tensor::zeros_on(&[2], DType::F32, dev).unwrap().pin_memory().unwrap_err().to_string();
    assert!(e.contains("cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned"), "{e}");
    // gradients pass through pin_memory
    let w = Tensor::from_vec(vec![1f32, 2., 3.], &[3]).unwrap().with_requires_grad().unwrap();
    w.pin_memory().unwrap().to_device_with(dev, true).unwrap().mul_scalar(2.0).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![2., 2., 2.]);
}

#[test]
fn dropping_the_host_tensor_right_after_a_copy_keeps_the_data() {
    let Some(dev) = util::gpu() else { return };
    let _g = lock();
    let n = 8 << 20; // 32 MiB of f32
    let mut copies = Vec::new();
    let mut saw_pending = false;
    for round in 0..12u32 {
        let p = Tensor::full_on(&[n], round as f64, DType::F32, Device::Cpu).unwrap().pin_memory().unwrap();
        let _busy = busy(dev);
        copies.push(p.to_device_with(dev, true).unwrap());
        drop(p);
        // the copy waits behind the matmuls: the block must not be handed out again yet
        saw_pending |= cuda::pinned_stats().pending > 0;
        // a new pinned tensor of the same size, overwritten at once: if it reused the block
        // early, the copy above would read these values
        let q = Tensor::full_on(&[n], -1.0, DType::F32, Device::Cpu).unwrap().pin_memory().unwrap();
        q.fill_(-2.0).unwrap();
        // a host write to a pinned tensor waits for the copy reading it
        let r = Tensor::full_on(&[n], 5.0, DType::F32, Device::Cpu).unwrap().pin_memory().unwrap();
        let rg = r.to_device_with(dev, true).unwrap();
        r.fill_(6.0).unwrap();
        assert!(rg.to_vec::<f32>().unwrap().iter().all(|&x| x == 5.0), "round {round}: the write did not wait for the copy");
    }
    assert!(saw_pending, "no copy was still queued when its host tensor was dropped: the test did not test");
    for (round, g) in copies.iter().enumerate() {
        let v = g.to_vec::<f32>().unwrap();
        assert!(v.iter().all(|&x| x == round as f32), "round {round}: the copy read reused memory");
    }
    // device -> pinned host without waiting, the device tensor dropped and its memory reused
    for round in 0..8 {
        let _busy = busy(dev);
        let g = Tensor::full_on(&[n], round as f64 + 0.5, DType::F32, dev).unwrap();
        let h = g.to_device_with(Device::Cpu, true).unwrap();
        drop(g);
        let _reuse = Tensor::full_on(&[n], -3.0, DType::F32, dev).unwrap();
        assert!(h.is_pinned());
        let v = h.to_vec::<f32>().unwrap();
        assert!(v.iter().all(|&x| x == round as f32 + 0.5), "round {round}");
    }
}

#[test]
fn pin_unpin_cycles_reuse_blocks_and_free_them() {
    let Some(dev) = util::gpu() else { return };
    let _g = lock();
    cuda::synchronize(None).unwrap();
    cuda::empty_pinned_cache();
    let base = cuda::pinned_stats();
    assert_eq!((base.allocated, base.pending), (0, 0), "{base:?}");
    let src = Tensor::randn_on(&[3 << 18], DType::F32, Device::Cpu).unwrap();
    let mut sum = 0.0;
    for i in 0..300 {
        let p = src.narrow(0, 0, ((1 << 18) + i) as i64).unwrap().pin_memory().unwrap();
        let q = src.pin_memory().unwrap();
        sum += p.to_device_with(dev, true).unwrap().sum().unwrap().item().unwrap().to_f64();
        let _ = q.to_device_with(dev, true).unwrap();
    }
    assert!(sum.is_finite());
    cuda::synchronize(None).unwrap();
    let s = cuda::pinned_stats();
    assert_eq!((s.allocated, s.pending), (0, 0), "every pinned tensor was dropped: {s:?}");
    // two sizes in flight at a time (plus blocks waiting on copies): a handful of driver calls
    assert!(s.driver_allocs - base.driver_allocs <= 8, "{s:?}");
    assert!(s.cache_hits - base.cache_hits >= 590, "{s:?}");
    cuda::empty_pinned_cache();
    let e = cuda::pinned_stats();
    assert_eq!(e.reserved, 0, "{e:?}");
    assert_eq!(e.driver_allocs, e.driver_frees, "{e:?}");
}

/// `pin_memory=True` on every factory that takes it (`*_like`, `new_*`, `empty_strided`, the
/// frequency and window factories): the result is pinned, as in PyTorch, never silently pageable.
#[test]
fn factories_honour_pin_memory() {
    use magpie_core::registry::{self, Value};
    let Some(_dev) = util::gpu() else { return };
    let _g = lock();
    let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2]).unwrap();
    let pin = || vec![("pin_memory".to_string(), Value::Bool(true))];
    let size = || Value::List(vec![Value::Int(2), Value::Int(3)]);
    let calls: Vec<(&str, Vec<Value>)> = vec![
        ("zeros_like", vec![Value::Tensor(x.clone())]),
        ("ones_like", vec![Value::Tensor(x.clone())]),
        ("empty_like", vec![Value::Tensor(x.clone())]),
        ("full_like", vec![Value::Tensor(x.clone()), Value::Float(2.5)]),
        ("new_zeros", vec![Value::Tensor(x.clone()), size()]),
        ("new_ones", vec![Value::Tensor(x.clone()), size()]),
        ("new_empty", vec![Value::Tensor(x.clone()), size()]),
        ("new_full", vec![Value::Tensor(x.clone()), size(), Value::Float(1.5)]),
        ("empty_strided", vec![size(), Value::List(vec![Value::Int(3), Value::Int(1)])]),
        ("fft.fftfreq", vec![Value::Int(5)]),
        ("signal.windows.hann", vec![Value::Int(5)]),
    ];
    for (op, args) in calls {
        let r = registry::call(op, args.clone(), pin()).unwrap_or_else(|e| panic!("{op}: {e}"));
        let Value::Tensor(t) = r else { panic!("{op}: not a tensor") };
        assert!(t.is_pinned(), "{op}(pin_memory=True) is pinned");
        let Value::Tensor(u) = registry::call(op, args, vec![]).unwrap() else { panic!("{op}") };
        assert!(!u.is_pinned(), "{op}() is pageable");
    }
}
