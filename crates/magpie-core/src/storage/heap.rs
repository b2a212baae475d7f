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
//!
//! Blocks from the threshold up still come from fresh mappings, and faulting those in 4 KiB at a
//! time is most of the cost of a large elementwise op (a 64 MiB output: 16,384 faults; `mul`
//! of 16M floats 53 -> 17 ms with huge pages on the 2-core benchmark VM). [`advise_huge_pages`]
//! asks for transparent huge pages on such a block before its first write (PyTorch does the same
//! when `THP_MEM_ALLOC_ENABLE=1`); `MAGPIE_HUGE_PAGES=0` turns it off.

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

/// Bytes from which a buffer gets transparent huge pages: the mmap threshold above, so only
/// blocks that are fresh mappings of their own (not parts of a heap) are advised.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HUGE_MIN: usize = MMAP_THRESHOLD as usize;

/// Asks the kernel to back the 2 MiB-aligned part of `v`'s allocation with transparent huge
/// pages, when it is at least [`HUGE_MIN`] bytes; call it before the buffer is first written
/// (pages already touched keep their size). A no-op elsewhere, on other systems, when the kernel
/// declines, or with `MAGPIE_HUGE_PAGES=0`.
#[inline]
pub fn advise_huge_pages<T>(v: &mut Vec<T>) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let bytes = v.capacity() * std::mem::size_of::<T>();
        if bytes < HUGE_MIN || !huge_pages_on() {
            return;
        }
        const HUGE: usize = 2 << 20;
        let start = v.as_mut_ptr() as usize;
        let (lo, hi) = ((start + HUGE - 1) & !(HUGE - 1), (start + bytes) & !(HUGE - 1));
        if hi > lo {
            // SAFETY: [lo, hi) lies inside `v`'s live allocation; MADV_HUGEPAGE only changes how
            // the kernel backs those pages, never their contents. A failure is harmless.
            unsafe {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = v;
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn huge_pages_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| !std::env::var("MAGPIE_HUGE_PAGES").is_ok_and(|v| v == "0"))
}
