//! `pin_memory` / `is_pinned` where CUDA cannot be used (CI): PyTorch's error, nothing pinned,
//! and the registry and factory keywords agree. On a GPU machine see `cuda_pinned.rs`.

use magpie_core::backend::cuda;
use magpie_core::registry::{self, Value};
use magpie_core::{Device, Tensor};

#[test]
fn pin_memory_without_cuda_is_pytorchs_error() {
    if cuda::is_available() {
        eprintln!("skipped: CUDA is available (cuda_pinned.rs covers pinning)");
        return;
    }
    let x = Tensor::from_vec(vec![1f32, 2., 3.], &[3]).unwrap();
    assert!(!x.is_pinned());
    let e = x.pin_memory().unwrap_err().to_string();
    assert!(e.starts_with("[pin_memory]"), "{e}");
    // PyTorch: no driver, no GPU, or (a build without CUDA) no accelerator at all
    assert!(
        e.contains("Found no NVIDIA driver on your system") || e.contains("No CUDA GPUs are available") || e.contains("CUDA is not available") || e.contains("Cannot access accelerator device when none is available."),
        "{e}"
    );
    let r = registry::call("is_pinned", vec![Value::Tensor(x.clone())], vec![]).unwrap();
    assert!(matches!(r, Value::Bool(false)));
    assert!(registry::call("pin_memory", vec![Value::Tensor(x.clone())], vec![]).is_err());
    let kw = vec![("pin_memory".to_string(), Value::Bool(true))];
    assert!(registry::call("empty", vec![Value::List(vec![Value::Int(2)])], kw).unwrap_err().to_string().contains("pin_memory"));
    let kw = vec![("pin_memory".to_string(), Value::Bool(false))];
    assert!(registry::call("empty", vec![Value::List(vec![Value::Int(2)])], kw).is_ok());
    // the factories that take their device from another tensor refuse too (never silently pageable)
    for (op, args) in [
        ("zeros_like", vec![Value::Tensor(x.clone())]),
        ("new_ones", vec![Value::Tensor(x.clone()), Value::List(vec![Value::Int(2)])]),
        ("empty_strided", vec![Value::List(vec![Value::Int(2)]), Value::List(vec![Value::Int(1)])]),
        ("fft.fftfreq", vec![Value::Int(4)]),
    ] {
        let kw = vec![("pin_memory".to_string(), Value::Bool(true))];
        let e = registry::call(op, args, kw).unwrap_err().to_string();
        assert!(e.contains("pin_memory"), "{op}: {e}");
    }
    // non_blocking to the CPU from the CPU is the same tensor; to a GPU it is the usual error
    assert!(x.to_device_with(Device::Cpu, true).unwrap().shares_storage(&x));
    assert!(x.to_device_with(Device::Cuda(0), true).is_err());
    assert_eq!(cuda::pinned_stats(), cuda::PinnedStats::default());
}
