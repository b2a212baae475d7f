//! torch-magpie's C ABI (`include/magpie.h`). Every object crossing the boundary (tensor, model,
//! optimizer) is an `int64_t` handle from a table with generation counters: 0 is never a handle,
//! and a released or wrong-kind handle is an error code, never a crash. Every function returns a
//! status (0 = ok; `MAGPIE_ERR_OP` for a failed operation, `MAGPIE_ERR_ARG` for a bad argument,
//! `MAGPIE_ERR_INTERNAL` for a caught bug) and writes results through out-parameters;
//! `magpie_last_error()` gives the message of the last failure on the calling thread, prefixed by
//! the function's name. No panic crosses the boundary.
//!
//! dtype codes: 0 bool, 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float16, 7 bfloat16,
//! 8 float32, 9 float64, 10 complex64, 11 complex128, 12 float8_e4m3fn, 13 float8_e5m2.
//! Device codes: -1 the CPU, n >= 0 CUDA device n.
//!
//! The surface: tensors (`magpie_tensor_*`, `magpie_retain`, `magpie_release`), any op by its
//! PyTorch name (`magpie_call`, JSON arguments) and typed shortcuts (`magpie_add`, `magpie_matmul`,
//! ...), autograd (`magpie_backward`, `magpie_grad`, no-grad scopes), nn layers by name
//! (`magpie_module_*`), models (`magpie_model_*`:
//! load a Hugging Face folder, forward, generate with a streaming callback, parameters, train/eval,
//! save), optimizers by name (`magpie_optimizer_*`), checkpoints (`magpie_save_safetensors`,
//! `magpie_load_safetensors`), devices and the version.

pub mod autograd;
pub mod call;
pub mod codes;
pub mod device;
pub mod error;
pub mod handles;
pub mod io;
pub mod model;
pub mod module;
pub mod optim;
pub mod ptr;
pub mod tensor;

pub use error::{magpie_last_error, MAGPIE_ERR_ARG, MAGPIE_ERR_INTERNAL, MAGPIE_ERR_OP, MAGPIE_OK};
