//! The CPU thread pool: rayon's global pool, with the program's main thread as one of its workers.
//!
//! An op called from a thread outside the pool hands its parallel work to the pool's threads and
//! sleeps until they finish: two cross-thread wake-ups per op, tens of microseconds each on a
//! virtual machine, which a small model's training step (hundreds of ops) pays in full. PyTorch
//! avoids it because OpenMP's calling thread is thread 0 of its team. We do the same: the first
//! CPU tensor made on the main thread makes the main thread worker 0 of rayon's global pool
//! (`ThreadPoolBuilder::use_current_thread`), so ops called from it split work in place and the
//! pool starts only `threads - 1` more threads. Measured on the GPT training step of
//! `benchmark/cpu/train_step`: 12% faster at 1 thread, 4% at 2 (benchmark/NOTES.md, "The training step at 2 threads", 2026-11-21).
//!
//! Only the main thread is adopted (it lives as long as the process; a worker thread that exits
//! would leave the pool a worker short). Nothing changes when the global pool already exists
//! (another library initialised it) or with `MAGPIE_MAIN_THREAD_WORKER=0`. `RAYON_NUM_THREADS`
//! sets the number of threads, as before. One caveat, rayon's: with a single thread the main
//! thread is the whole pool, so work `rayon::spawn`ed by other threads only runs while the main
//! thread is inside a parallel call.

use std::sync::Once;

static ADOPT: Once = Once::new();

/// Makes the main thread worker 0 of the global pool, once, if called on the main thread
/// before the pool exists; a no-op otherwise.
#[inline]
pub(crate) fn adopt_main_thread() {
    if !ADOPT.is_completed() && std::thread::current().name() == Some("main") {
        ADOPT.call_once(|| {
            if std::env::var("MAGPIE_MAIN_THREAD_WORKER").is_ok_and(|v| v == "0") {
                return;
            }
            // Err when the global pool already exists: then it stays as it is
            let _ = rayon::ThreadPoolBuilder::new().use_current_thread().build_global();
        });
    }
}

/// Threads CPU ops use (PyTorch's `torch.get_num_threads()`): rayon's global pool size, set by
/// `RAYON_NUM_THREADS` (default: the logical CPUs).
pub fn get_num_threads() -> usize {
    adopt_main_thread();
    rayon::current_num_threads()
}

/// Whether the calling thread is a worker of the global pool (true on an adopted main thread),
/// i.e. whether ops called from it split their work without a hand-off.
pub fn in_pool() -> bool {
    rayon::current_thread_index().is_some()
}
