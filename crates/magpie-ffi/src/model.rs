//! Pretrained models through handles: load a Hugging Face folder, forward, generate with a
//! streaming callback, parameters, train/eval, save.

use crate::codes;
use crate::error::{arg, guard, FfiError, MAGPIE_ERR_OP};
use crate::handles::{self, Object};
use crate::ptr::{cstr, out, slice, slice_mut};
use crate::tensor::give;
use magpie_core::autograd::no_grad;
use magpie_models::auto::AutoModel;
use magpie_models::embed::{Pooling, SentenceEncoder};
use magpie_models::generate::generate;
use magpie_models::hub::LoadOptions;
use magpie_nn::ModuleExt;
use std::ffi::{c_char, c_void};

/// Called with each new token; return 0 to go on, non-zero to stop generating.
pub type MagpieTokenCallback = Option<unsafe extern "C" fn(user: *mut c_void, token: i64) -> i32>;

/// Loads a Hugging Face model folder (config.json + model.safetensors or shards) or a llama GGUF
/// file on `device`
/// (-1 CPU, n CUDA n) in `dtype` (float32, bfloat16 or float16 codes).
///
/// # Safety
/// `dir` is a NUL-terminated path; `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_model_load(dir: *const c_char, device: i32, dtype: i32, out_h: *mut i64) -> i32 {
    guard("magpie_model_load", || {
        let o = out(out_h, "out")?;
        let dir = cstr(dir, "dir")?;
        let opts = LoadOptions { dtype: codes::dtype(dtype)?, device: codes::device(device)? };
        let m = AutoModel::load(dir, &opts)?;
        *o = handles::insert(Object::Model(Box::new(m)));
        Ok(())
    })
}

/// `model(input_ids, attention_mask)`: `input_ids` an int64 `[B, T]` tensor handle,
/// `attention_mask` one of the same shape or 0 for none. `out` gets the logits (the last hidden
/// state for a bare encoder), without gradient tracking.
///
/// # Safety
/// `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_model_forward(model: i64, input_ids: i64, attention_mask: i64, out_h: *mut i64) -> i32 {
    guard("magpie_model_forward", || {
        let o = out(out_h, "out")?;
        let ids = handles::tensor(input_ids)?;
        let mask = if attention_mask == 0 { None } else { Some(handles::tensor(attention_mask)?) };
        let r = handles::with_model(model, |m| {
            let _g = no_grad();
            let out = m.forward(&ids, mask.as_ref(), None, false)?;
            Ok(out.logits.unwrap_or(out.last_hidden_state))
        })?;
        give(r, o);
        Ok(())
    })
}

/// Generates after the `n_ids` prompt ids: greedy when `temperature` <= 0, else sampling with that
/// temperature, top-k (`top_k` > 0) and top-p (0 < `top_p` < 1), seeded by `seed`; stops at the
/// model's eos ids or after `max_new_tokens`. `callback` (may be NULL) sees each new token as it
/// is made and can stop generation by returning non-zero. The new ids go to `out_ids` (room for
/// `cap`), their count to `n_out`.
///
/// # Safety
/// `ids` points to `n_ids` values, `out_ids` to `cap`, `n_out` to a `size_t`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn magpie_model_generate(
    model: i64,
    ids: *const i64,
    n_ids: usize,
    max_new_tokens: usize,
    temperature: f64,
    top_k: i64,
    top_p: f64,
    seed: u64,
    callback: MagpieTokenCallback,
    user: *mut c_void,
    out_ids: *mut i64,
    cap: usize,
    n_out: *mut usize,
) -> i32 {
    guard("magpie_model_generate", || {
        let n = out(n_out, "n_out")?;
        let prompt = slice(ids, n_ids, "ids")?.iter().map(|&v| u32::try_from(v).map_err(|_| arg(format!("token id {v} is not a valid id")))).collect::<Result<Vec<u32>, _>>()?;
        let new = handles::with_model(model, |m| {
            let lm = m.as_causal_lm().ok_or_else(|| arg(format!("the model is a {}, not a decoder", m.architecture.class_name())))?;
            let mut cfg = m.generation_defaults();
            cfg.max_new_tokens = max_new_tokens;
            cfg.seed = seed;
            cfg.do_sample = temperature > 0.0;
            cfg.temperature = if temperature > 0.0 { temperature } else { 1.0 };
            cfg.top_k = if top_k > 0 { Some(top_k as usize) } else { None };
            cfg.top_p = if top_p > 0.0 && top_p < 1.0 { Some(top_p) } else { None };
            let stop = FfiError { code: MAGPIE_ERR_OP, msg: String::new() };
            let mut stopped = false;
            let mut got = Vec::new();
            let r = generate(lm, &[prompt.clone()], &cfg, |step| {
                if let Some(tok) = step[0] {
                    got.push(tok);
                    if let Some(cb) = callback {
                        // SAFETY: the caller gave a callback that takes its own user pointer
                        if unsafe { cb(user, tok as i64) } != 0 {
                            stopped = true;
                            return Err(magpie_core::Error::value("generate", "stopped by the callback"));
                        }
                    }
                }
                Ok(())
            });
            match r {
                Ok(v) => Ok(v.into_iter().next().unwrap_or_default()),
                Err(_) if stopped => Ok(got),
                Err(e) => Err(FfiError { msg: e.to_string(), ..stop }),
            }
        })?;
        *n = new.len();
        if new.len() > cap {
            return Err(arg(format!("{} tokens were generated but out_ids holds {cap}", new.len())));
        }
        let dst = slice_mut(out_ids, new.len(), "out_ids")?;
        for (d, &t) in dst.iter_mut().zip(&new) {
            *d = t as i64;
        }
        Ok(())
    })
}

/// The model's parameters as tensor handles (sharing the model's storage: optimizers built on them
/// train the model). `n_out` gets the count; `out` must hold it (`cap`).
///
/// # Safety
/// `out` points to `cap` `int64_t`s; `n_out` to a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_model_parameters(model: i64, out_h: *mut i64, cap: usize, n_out: *mut usize) -> i32 {
    guard("magpie_model_parameters", || {
        let n = out(n_out, "n_out")?;
        let params = handles::with_model(model, |m| Ok(m.module().parameters()))?;
        *n = params.len();
        if params.len() > cap {
            return Err(arg(format!("the model has {} parameters but out holds {cap}", params.len())));
        }
        let dst = slice_mut(out_h, params.len(), "out")?;
        for (d, p) in dst.iter_mut().zip(params) {
            *d = handles::insert(Object::Tensor(p));
        }
        Ok(())
    })
}

/// Training mode (1: dropout on) or evaluation mode (0), as `model.train(flag)`.
#[no_mangle]
pub extern "C" fn magpie_model_train(model: i64, flag: i32) -> i32 {
    guard("magpie_model_train", || {
        handles::with_model(model, |m| {
            m.module_mut().train(flag != 0);
            Ok(())
        })
    })
}

/// `save_pretrained(dir)`: a folder transformers loads back.
///
/// # Safety
/// `dir` is a NUL-terminated path.
#[no_mangle]
pub unsafe extern "C" fn magpie_model_save(model: i64, dir: *const c_char) -> i32 {
    guard("magpie_model_save", || {
        let dir = cstr(dir, "dir")?;
        handles::with_model(model, |m| Ok(m.save_pretrained(dir)?))
    })
}

/// Loads a BERT folder with tokenizer.json as a sentence embedder (sentence-transformers' pooling
/// and normalization from the folder's files; mean pooling otherwise).
///
/// # Safety
/// `dir` is NUL-terminated; `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_embedder_load(dir: *const c_char, device: i32, dtype: i32, out_h: *mut i64) -> i32 {
    guard("magpie_embedder_load", || {
        let o = out(out_h, "out")?;
        let dir = cstr(dir, "dir")?;
        let opts = LoadOptions { dtype: codes::dtype(dtype)?, device: codes::device(device)? };
        let e = SentenceEncoder::load(std::path::Path::new(dir), &opts)?;
        *o = handles::insert(Object::Embedder(Box::new(e)));
        Ok(())
    })
}

/// Embeds the `n` NUL-terminated texts: `out` gets a float32 `[n, hidden]` tensor. `pooling` 0 is
/// mean, 1 cls, -1 the folder's; `normalize` 1 / 0 forces L2 normalization on / off, -1 the folder's.
///
/// # Safety
/// `texts` points to `n` NUL-terminated strings; `out` to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_embed(embedder: i64, texts: *const *const c_char, n: usize, pooling: i32, normalize: i32, out_h: *mut i64) -> i32 {
    guard("magpie_embed", || {
        let o = out(out_h, "out")?;
        let ptrs = slice(texts, n, "texts")?;
        let strs = ptrs.iter().enumerate().map(|(i, &p)| cstr(p, &format!("texts[{i}]"))).collect::<Result<Vec<&str>, _>>()?;
        let t = handles::with_embedder(embedder, |e| {
            let (keep_pool, keep_norm) = (e.pooling, e.normalize);
            match pooling {
                -1 => {}
                0 => e.pooling = Pooling::Mean,
                1 => e.pooling = Pooling::Cls,
                p => return Err(arg(format!("pooling {p} is not -1, 0 (mean) or 1 (cls)"))),
            }
            match normalize {
                -1 => {}
                0 | 1 => e.normalize = normalize == 1,
                v => return Err(arg(format!("normalize {v} is not -1, 0 or 1"))),
            }
            let r = e.embed(&strs);
            (e.pooling, e.normalize) = (keep_pool, keep_norm);
            let rows = r?;
            let h = rows.first().map_or(0, |r| r.len());
            Ok(magpie_core::Tensor::from_vec(rows.concat(), &[rows.len(), h])?)
        })?;
        give(t, o);
        Ok(())
    })
}
