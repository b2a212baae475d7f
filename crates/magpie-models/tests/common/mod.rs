//! Helpers of the CUDA training tests (`cuda_train.rs`, `cuda_bert_train.rs`,
//! `cuda_graph_train.rs`): the lock tests take turns on, the CUDA check, the corpus.
#![allow(dead_code)]

use magpie_core::backend::cuda;

/// The default generator and a device's capture state are process-wide: tests take turns.
static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes the test lock (also after another test panicked while holding it).
pub fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// True where CUDA is available; else skips (with a message), or panics when
/// `MAGPIE_REQUIRE_CUDA=1`.
pub fn have_cuda() -> bool {
    if cuda::is_available() {
        return true;
    }
    if std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("MAGPIE_REQUIRE_CUDA=1 but CUDA is not available: {}", cuda::unavailable("test"));
    }
    eprintln!("skipped: CUDA is not available");
    false
}

/// The training text, repeated by each test to the length it needs.
pub const TEXT: &str = "fn main() { let x = 1 + 2; println!(\"{x}\"); }\n// the quick brown fox jumps over the lazy dog\nimpl Tensor { pub fn add(&self) -> Result<Tensor> { todo() } }\n";
