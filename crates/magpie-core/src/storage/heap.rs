//! Keeping freed tensor memory in the process.
//!
//! glibc's malloc serves blocks above its mmap threshold with fresh `mmap`s and gives freed memory
//! at the top of a heap back to the kernel above its trim threshold. A training step frees and
//! re-allocates the same buffers every step, so with the defaults each step faults in (and the
//! kernel zeroes) thousands of fresh pages: ~2000 page faults per step of the GPT benchmark,
//! ~10% of its time at 2 threads (`perf stat -e page-faults`, benchmark/NOTES.md). Fixed
//! thresholds (32 MiB, glibc's largest mmap threshold; 256 MiB kept at a heap's top) keep those
//! buffers in the heap, as PyTorch users get from jemalloc or tcmalloc.
//!
//! This is process-wide, so it is applied once, on the first CPU storage, and can be turned off
//! with `MAGPIE_KEEP_FREED_MEMORY=0` (for programs that tune malloc themselves).

use std::sync::Once;

/// Largest block glibc serves from its heaps instead of a fresh mapping (its maximum).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 32 << 20;
/// Free memory a heap keeps at its top before giving it back to the kernel.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 256 << 20;

static TUNE: Once = Once::new();

/// Applies the thresholds once per process (no-op on other C libraries or when opted out).
#[inline]
pub(crate) fn keep_freed_memory() {
    if !TUNE.is_completed() {
        TUNE.call_once(apply);
    }
}

fn apply() {
    if std::env::var("MAGPIE_KEEP_FREED_MEMORY").is_ok_and(|v| v == "0") {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets two malloc parameters; both values are in glibc's valid ranges.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}
