//! The kernel disk cache: after the in-memory kernels are forgotten (as in a new process), the
//! same ops load their cubins from disk and compile nothing. One test in its own binary, so that
//! no other test compiles kernels meanwhile. Skips without CUDA unless `MAGPIE_REQUIRE_CUDA=1`.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::backend::cuda;
use magpie_core::{DType, Tensor};

#[test]
fn second_start_compiles_nothing() {
    let Some(dev) = util::gpu() else { return };
    let dir = std::env::temp_dir().join(format!("magpie-cuda-cache-test-{}", std::process::id()));
    // set before the first kernel of this process is compiled (this binary's only test)
    std::env::set_var("MAGPIE_CUDA_CACHE", &dir);
    let run = || {
        let x = Tensor::from_vec((0..100).map(|i| i as f32 * 0.1).collect(), &[10, 10]).unwrap().to_device(dev).unwrap();
        let y = x.sin().unwrap().add(&x.t().unwrap()).unwrap().to_dtype(DType::F16).unwrap();
        y.to_vec::<f32>().unwrap()
    };
    let first = run();
    let s1 = cuda::kernel_cache_stats();
    assert!(s1.compiles >= 3, "{s1:?}");
    assert!(std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0) >= 3, "no cubins in {dir:?}");
    cuda::compile::clear_memory_cache();
    let second = run();
    let s2 = cuda::kernel_cache_stats();
    assert_eq!(first, second);
    assert_eq!(s2.compiles, s1.compiles, "kernels were compiled again: {s1:?} -> {s2:?}");
    assert!(s2.disk_hits >= s1.disk_hits + 3, "{s1:?} -> {s2:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
