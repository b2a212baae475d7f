//! Llama models from GGUF files (llama.cpp's format): the config from the `llama.*` metadata,
//! weights under their Hugging Face names, the Q/K row permutation of llama.cpp's converter
//! undone, and the `rope_freqs` divisors used for the rotary frequencies (llama3 scaling).
//! On the CPU, linear weights of a type with quantized kernels (Q8_0, Q4_0, Q4_K, Q6_K) stay in
//! their blocks (`QuantLinear`); every other tensor is dequantized to the load dtype.

use crate::auto::{AutoModel, ModelKind};
use crate::config::{Architecture, LlamaConfig};
use crate::hub::{Init, LoadOptions, WeightSource};
use crate::llama::LlamaForCausalLM;
use magpie_core::quant::QuantMatrix;
use magpie_core::{Error, Result, Tensor};
use magpie_io::gguf::GgufFile;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::Path;

/// True when `path` is a file starting with GGUF's magic.
pub fn is_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    path.is_file() && std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"GGUF"
}

fn meta_u64(f: &GgufFile, key: &str) -> Result<Option<u64>> {
    match f.get(key) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| Error::value("gguf", format!("metadata '{key}' must be a non-negative integer"))),
    }
}

fn meta_f64(f: &GgufFile, key: &str) -> Result<Option<f64>> {
    use magpie_io::gguf::Value as V;
    match f.get(key) {
        None => Ok(None),
        Some(V::F32(x)) => Ok(Some(*x as f64)),
        Some(V::F64(x)) => Ok(Some(*x)),
        Some(_) => Err(Error::value("gguf", format!("metadata '{key}' must be a float"))),
    }
}

/// The Hugging Face config a llama GGUF file describes.
pub fn config_of(f: &GgufFile) -> Result<Value> {
    let arch = f.get("general.architecture").and_then(|v| v.as_str()).ok_or_else(|| Error::value("gguf", "no general.architecture in the metadata"))?;
    if arch != "llama" {
        return Err(Error::unsupported("gguf", format!("architecture '{arch}' is not supported (only llama)")));
    }
    let need = |k: &str| -> Result<u64> { meta_u64(f, &format!("llama.{k}"))?.ok_or_else(|| Error::value("gguf", format!("metadata 'llama.{k}' is missing"))) };
    let hidden = need("embedding_length")?;
    let heads = need("attention.head_count")?;
    let kv = meta_u64(f, "llama.attention.head_count_kv")?.unwrap_or(heads);
    let head_dim = meta_u64(f, "llama.attention.key_length")?.unwrap_or(hidden.checked_div(heads).unwrap_or(0));
    let vocab = match meta_u64(f, "llama.vocab_size")? {
        Some(v) => v,
        None => f.tensor_info("token_embd.weight").map(|t| t.shape()[0] as u64).ok_or_else(|| Error::value("gguf", "no vocabulary size (llama.vocab_size or token_embd.weight)"))?,
    };
    let mut cfg = json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": need("feed_forward_length")?,
        "num_hidden_layers": need("block_count")?,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
        "max_position_embeddings": meta_u64(f, "llama.context_length")?.unwrap_or(2048),
        "rms_norm_eps": meta_f64(f, "llama.attention.layer_norm_rms_epsilon")?.unwrap_or(1e-5),
        "rope_theta": meta_f64(f, "llama.rope.freq_base")?.unwrap_or(10000.0),
        "tie_word_embeddings": f.tensor_info("output.weight").is_none(),
    });
    for (gk, hk) in [("tokenizer.ggml.bos_token_id", "bos_token_id"), ("tokenizer.ggml.eos_token_id", "eos_token_id")] {
        if let Some(id) = meta_u64(f, gk)? {
            cfg[hk] = json!(id);
        }
    }
    Ok(cfg)
}

/// GGUF tensors under Hugging Face names, dequantized, or kept quantized when `keep_quantized`.
struct GgufWeights<'a> {
    file: &'a GgufFile,
    opts: LoadOptions,
    keep_quantized: bool,
    heads: usize,
    kv_heads: usize,
    used: HashSet<String>,
}

impl GgufWeights<'_> {
    /// The GGUF name of a Hugging Face parameter, and the head count to un-permute its rows by.
    fn map(&self, name: &str) -> Option<(String, Option<usize>)> {
        let fixed = match name {
            "model.embed_tokens.weight" => Some("token_embd.weight"),
            "model.norm.weight" => Some("output_norm.weight"),
            "lm_head.weight" => Some("output.weight"),
            _ => None,
        };
        if let Some(f) = fixed {
            return Some((f.to_string(), None));
        }
        let rest = name.strip_prefix("model.layers.")?;
        let (layer, part) = rest.split_once('.')?;
        let (g, perm) = match part {
            "input_layernorm.weight" => ("attn_norm.weight", None),
            "post_attention_layernorm.weight" => ("ffn_norm.weight", None),
            "self_attn.q_proj.weight" => ("attn_q.weight", Some(self.heads)),
            "self_attn.k_proj.weight" => ("attn_k.weight", Some(self.kv_heads)),
            "self_attn.v_proj.weight" => ("attn_v.weight", None),
            "self_attn.o_proj.weight" => ("attn_output.weight", None),
            "mlp.gate_proj.weight" => ("ffn_gate.weight", None),
            "mlp.up_proj.weight" => ("ffn_up.weight", None),
            "mlp.down_proj.weight" => ("ffn_down.weight", None),
            _ => return None,
        };
        Some((format!("blk.{layer}.{g}"), perm))
    }
}

/// llama.cpp's converter stores Q and K rows as `w.reshape(h, 2, r/h/2, c).swapaxes(1, 2)`; this is
/// the inverse, `w.reshape(h, r/h/2, 2, c).swapaxes(1, 2)`, back to rotate-half order.
fn unpermute(w: &Tensor, heads: usize) -> Result<Tensor> {
    let &[rows, cols] = w.shape() else {
        return Err(Error::shape("gguf", format!("a Q/K weight must be 2-D, got {:?}", w.shape())));
    };
    if heads == 0 || rows % (2 * heads) != 0 {
        return Err(Error::shape("gguf", format!("{rows} rows do not split into {heads} heads of rotary pairs")));
    }
    let (h, r, c) = (heads as i64, rows as i64, cols as i64);
    w.reshape(&[h, r / h / 2, 2, c])?.transpose(1, 2)?.contiguous()?.reshape(&[r, c])
}

/// The row order [`unpermute`] produces, as source row per destination row (for moving whole
/// rows of quantized blocks).
fn unpermute_rows(rows: usize, heads: usize) -> Result<Vec<usize>> {
    if heads == 0 || !rows.is_multiple_of(2 * heads) {
        return Err(Error::shape("gguf", format!("{rows} rows do not split into {heads} heads of rotary pairs")));
    }
    let (per, half) = (rows / heads, rows / heads / 2);
    // destination (head, two, i) <- source (head, i, two)
    Ok((0..rows).map(|r| (r / per) * per + (r % per % half) * 2 + (r % per) / half).collect())
}

impl WeightSource for GgufWeights<'_> {
    fn take_quant(&mut self, name: &str, shape: &[usize]) -> Result<Option<QuantMatrix>> {
        if !self.keep_quantized {
            return Ok(None);
        }
        let Some((g, perm)) = self.map(name) else { return Ok(None) };
        let Some(info) = self.file.tensor_info(&g) else { return Ok(None) };
        let Some(ty) = info.ggml_type.quant_type() else { return Ok(None) };
        if info.shape() != shape || shape.len() != 2 {
            return Err(Error::shape("gguf", format!("tensor '{g}' has shape {:?} but the config needs {shape:?}", info.shape())));
        }
        let mut q = QuantMatrix::new(ty, shape[0], shape[1], self.file.tensor_bytes(&g)?.to_vec())?;
        if let Some(h) = perm {
            q = q.permute_rows(&unpermute_rows(shape[0], h)?)?;
        }
        let q = q.to_device(self.opts.device)?;
        self.used.insert(g);
        Ok(Some(q))
    }

    fn take(&mut self, name: &str, shape: &[usize], _init: Init) -> Result<Tensor> {
        let (g, perm) = self.map(name).ok_or_else(|| Error::value("gguf", format!("no GGUF tensor corresponds to '{name}'")))?;
        let info = self.file.tensor_info(&g).ok_or_else(|| Error::value("gguf", format!("tensor '{g}' ({name}) is missing from the file")))?;
        if info.shape() != shape {
            return Err(Error::shape("gguf", format!("tensor '{g}' has shape {:?} but the config needs {shape:?}", info.shape())));
        }
        let mut t = self.file.tensor_f32(&g)?;
        if let Some(h) = perm {
            t = unpermute(&t, h)?;
        }
        self.used.insert(g);
        t.to_dtype(self.opts.dtype)?.to_device(self.opts.device)?.detach().requires_grad_(true)
    }
    fn has(&self, name: &str) -> bool {
        self.map(name).is_some_and(|(g, _)| self.file.tensor_info(&g).is_some())
    }
    fn options(&self) -> LoadOptions {
        self.opts
    }
}

impl AutoModel {
    /// Loads a llama GGUF file (any tensor type the reader dequantizes) in `opts`' dtype and
    /// device; linear weights of a type with quantized kernels (Q8_0, Q4_0, Q4_K, Q6_K) stay
    /// quantized, on the CPU and on CUDA.
    pub fn from_gguf(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<AutoModel> {
        AutoModel::from_gguf_with(path, opts, true)
    }

    /// [`from_gguf`](Self::from_gguf) choosing whether Q8_0/Q4_0/Q4_K/Q6_K linear weights stay in
    /// their blocks (`keep_quantized`: on the CPU they run on the CPU kernels, on CUDA on the
    /// quantized GEMV for up to 8 rows and dequantize-then-cuBLAS for more) or are dequantized
    /// to `opts.dtype` like every other tensor.
    pub fn from_gguf_with(path: impl AsRef<Path>, opts: &LoadOptions, keep_quantized: bool) -> Result<AutoModel> {
        opts.validate()?;
        let file = GgufFile::open(path.as_ref())?;
        let config = config_of(&file)?;
        let cfg = LlamaConfig::from_json(&config, false)?;
        let mut w = GgufWeights { file: &file, opts: *opts, keep_quantized, heads: cfg.num_attention_heads, kv_heads: cfg.num_key_value_heads, used: HashSet::new() };
        let mut model = LlamaForCausalLM::build(&cfg, &mut w)?;
        if file.tensor_info("rope_freqs.weight").is_some() {
            let divisors = file.tensor_data_f32("rope_freqs.weight")?;
            model.rope = crate::blocks::rope::Rope::with_divisors(cfg.head_dim, cfg.rope_theta, &divisors)?;
            w.used.insert("rope_freqs.weight".into());
        }
        let extra: Vec<&str> = file.tensors().iter().map(|t| t.name.as_str()).filter(|n| !w.used.contains(*n)).take(8).collect();
        if !extra.is_empty() {
            return Err(Error::value("gguf", format!("tensors the llama model does not use: {}", extra.join(", "))));
        }
        Ok(AutoModel { kind: ModelKind::Llama(model), architecture: Architecture::LlamaForCausalLM, config, generation_config: None, dir: None, options: *opts })
    }

    /// A Hugging Face folder or a GGUF file, told apart by content.
    pub fn load(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<AutoModel> {
        let p = path.as_ref();
        if is_gguf(p) {
            AutoModel::from_gguf(p, opts)
        } else if p.is_file() {
            Err(Error::io("load", format!("{} is a file but not a GGUF file; a Hugging Face model is a folder", p.display())))
        } else {
            AutoModel::from_pretrained(p, opts)
        }
    }
}

/// The bytes a model's weights take in memory: every tensor parameter and buffer, plus the
/// block bytes of quantized layers (which are not tensor parameters).
pub fn resident_weight_bytes(m: &LlamaForCausalLM) -> usize {
    use magpie_nn::{AnyLinear, ModuleExt};
    let tensors: usize = m.named_parameters().iter().chain(m.named_buffers().iter()).map(|(_, t)| t.numel() * t.dtype().size()).sum();
    let quant = |l: &AnyLinear| if l.is_quantized() { l.weight_nbytes() } else { 0 };
    let mut q: usize = m.lm_head.as_ref().map_or(0, quant);
    for layer in m.model.layers.iter() {
        let (a, f) = (&layer.self_attn, &layer.mlp);
        q += [&a.q_proj, &a.k_proj, &a.v_proj, &a.o_proj, &f.gate_proj, &f.up_proj, &f.down_proj].into_iter().map(quant).sum::<usize>();
    }
    tensors + q
}
