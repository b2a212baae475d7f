//! `magpie generate`, `magpie forward` and `magpie embed`: pretrained Hugging Face models (a folder
//! as `save_pretrained` writes it). `generate` on CUDA runs the fused engine where it covers the
//! model (`--path module` selects the module path), everything else the module path.

use clap::Args;
use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Error, Result, Tensor};
use magpie_io::gguf::GgufFile;
use magpie_io::safetensors;
use magpie_models::auto::AutoModel;
use magpie_models::embed::{Pooling, SentenceEncoder};
use magpie_models::fused::{self, EngineConfig, FusedDecoder};
use magpie_models::generate::generate;
use magpie_models::gguf::is_gguf;
use magpie_models::hf_tokenizer::{DecodeStream, HfTokenizer};
use magpie_models::hub::LoadOptions;
use std::io::Write;
use std::path::PathBuf;

/// Where and in what dtype to run (shared by the three commands).
#[derive(Args, Debug, Clone)]
pub struct Placement {
    /// cpu or cuda (cuda:N for another GPU).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// float32, bfloat16 or float16.
    #[arg(long, default_value = "float32")]
    pub dtype: String,
}

impl Placement {
    fn options(&self) -> Result<LoadOptions> {
        let device = Device::parse(&self.device)?;
        if let Device::Cuda(_) = device {
            if !cuda::is_available() {
                return Err(cuda::unavailable(&format!("--device {}", self.device)));
            }
        }
        let dtype = match self.dtype.as_str() {
            "float32" | "f32" => DType::F32,
            "bfloat16" | "bf16" => DType::BF16,
            "float16" | "f16" | "half" => DType::F16,
            other => return Err(Error::value("dtype", format!("unsupported --dtype '{other}' (float32, bfloat16 or float16)"))),
        };
        Ok(LoadOptions { dtype, device })
    }
}

/// `magpie generate` flags.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// Hugging Face model folder (config.json, model.safetensors, tokenizer.json), or a llama GGUF file.
    #[arg(long)]
    pub model: PathBuf,
    /// Text to continue (encoded with the folder's tokenizer.json, or the tokenizer a GGUF file's metadata describes).
    #[arg(long, conflicts_with = "input_ids")]
    pub prompt: Option<String>,
    /// Token ids to continue instead of text, comma-separated ("1,2,3").
    #[arg(long)]
    pub input_ids: Option<String>,
    /// New tokens at most (generation also stops at the model's end-of-sequence ids).
    #[arg(long, default_value_t = 64)]
    pub max_new_tokens: usize,
    /// Sampling temperature; 0 is greedy. Default: the folder's generation_config.json (greedy
    /// when it does not ask for sampling).
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Sample only from the k most likely tokens (turns sampling on).
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Sample only from the smallest set of tokens whose probability reaches p (turns sampling on).
    #[arg(long)]
    pub top_p: Option<f64>,
    /// Repetition penalty (1 is off).
    #[arg(long)]
    pub repetition_penalty: Option<f64>,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print only the new token ids, space-separated, on one line.
    #[arg(long)]
    pub print_ids: bool,
    /// fused (the CUDA inference engine), module (the nn modules) or auto: fused on CUDA where it
    /// covers the model, else module with a one-line notice.
    #[arg(long, default_value = "auto", value_parser = ["auto", "fused", "module"])]
    pub path: String,
    #[command(flatten)]
    pub place: Placement,
}

fn parse_ids(s: &str) -> Result<Vec<u32>> {
    let ids: Result<Vec<u32>> = s
        .split(',')
        .map(|x| x.trim())
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<u32>().map_err(|_| Error::value("generate", format!("--input-ids: '{x}' is not a token id"))))
        .collect();
    let ids = ids?;
    if ids.is_empty() {
        return Err(Error::value("generate", "--input-ids holds no token ids"));
    }
    Ok(ids)
}

/// Runs `magpie generate`.
pub fn generate_cmd(a: GenerateArgs) -> Result<()> {
    let opts = a.place.options()?;
    let model = AutoModel::load(&a.model, &opts)?;
    let lm = model.as_causal_lm().ok_or_else(|| Error::value("generate", format!("{} is a {}, not a decoder: use `magpie forward` or `magpie embed`", a.model.display(), model.architecture.class_name())))?;
    // a folder's tokenizer.json, or the tokenizer a GGUF file's metadata describes (a file
    // without one still runs with --input-ids, so its error is kept for a text prompt)
    let (tok, why) = match model.tokenizer_path() {
        Some(p) => (Some(HfTokenizer::from_file(p)?), String::new()),
        None if is_gguf(&a.model) => match GgufFile::open(&a.model).and_then(|f| HfTokenizer::from_gguf(&f)) {
            Ok(t) => (Some(t), String::new()),
            Err(e) => (None, e.to_string()),
        },
        None => (None, "no tokenizer.json".to_string()),
    };
    let prompt = match (&a.prompt, &a.input_ids) {
        (_, Some(ids)) => parse_ids(ids)?,
        (Some(text), None) => {
            let t = tok.as_ref().ok_or_else(|| Error::io("generate", format!("{}: {why}; pass --input-ids", a.model.display())))?;
            let ids = t.encode(text, true)?;
            if ids.is_empty() {
                return Err(Error::value("generate", "the prompt encodes to no tokens"));
            }
            ids
        }
        (None, None) => return Err(Error::value("generate", "give --prompt TEXT or --input-ids IDS")),
    };
    let mut cfg = model.generation_defaults();
    cfg.max_new_tokens = a.max_new_tokens;
    cfg.seed = a.seed;
    if let Some(t) = a.temperature {
        cfg.temperature = t;
        cfg.do_sample = t > 0.0;
    }
    if a.top_k.is_some() || a.top_p.is_some() {
        if a.temperature != Some(0.0) {
            cfg.do_sample = true;
        }
        cfg.top_k = a.top_k.or(cfg.top_k);
        cfg.top_p = a.top_p.or(cfg.top_p);
    }
    if let Some(r) = a.repetition_penalty {
        cfg.repetition_penalty = r;
    }
    let shown = if a.print_ids { None } else { tok.as_ref() };
    let fused = match (a.path.as_str(), opts.device, fused::unsupported_reason(&model)) {
        ("module", _, _) => false,
        ("fused", Device::Cpu, _) => return Err(Error::value("generate", "--path fused runs on CUDA; add --device cuda")),
        ("fused", _, Some(why)) => return Err(Error::unsupported("generate", format!("--path fused: {why}"))),
        (_, Device::Cuda(_), None) => true,
        (_, Device::Cuda(_), Some(why)) => {
            eprintln!("magpie generate: {why}; using the module path");
            false
        }
        _ => false,
    };
    if fused {
        // The cache holds exactly this prompt and its new tokens (generate checks the model's limit).
        let max_len = prompt.len() + cfg.max_new_tokens.max(1);
        let max_len = lm.max_positions().map_or(max_len, |m| max_len.min(m.max(prompt.len() + 1)));
        let mut engine = FusedDecoder::from_model(&model, EngineConfig { max_len, ..EngineConfig::default() })?;
        drop(model);
        return run_generation(&prompt, shown, |on_step| engine.generate(&[prompt.clone()], &cfg, on_step));
    }
    run_generation(&prompt, shown, |on_step| generate(lm, &[prompt.clone()], &cfg, on_step))
}

type StepFn<'a> = &'a mut dyn FnMut(&[Option<u32>]) -> Result<()>;

/// Streams the text (or prints the ids) of what `run` generates after `prompt`.
fn run_generation(prompt: &[u32], tok: Option<&HfTokenizer>, run: impl FnOnce(StepFn<'_>) -> Result<Vec<Vec<u32>>>) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let io = |e: std::io::Error| Error::io("generate", format!("cannot write to stdout: {e}"));
    let mut stream = tok.map(DecodeStream::new);
    // the prompt's text goes out with the first token, after generate has checked its input
    let mut echo = tok.map(|t| t.decode(prompt, true)).transpose()?;
    let new = run(&mut |step: &[Option<u32>]| {
        if let Some(p) = echo.take() {
            write!(out, "{p}").map_err(io)?;
        }
        if let (Some(s), Some(id)) = (stream.as_mut(), step[0]) {
            let piece = s.push(id)?;
            write!(out, "{piece}").map_err(io)?;
            out.flush().map_err(io)?;
        }
        Ok(())
    })?;
    match stream.as_mut() {
        Some(s) => {
            let rest = s.finish()?;
            writeln!(out, "{}{rest}", echo.unwrap_or_default()).map_err(io)?;
        }
        None => {
            let ids: Vec<String> = new[0].iter().map(|v| v.to_string()).collect();
            writeln!(out, "{}", ids.join(" ")).map_err(io)?;
        }
    }
    Ok(())
}

/// `magpie forward` flags.
#[derive(Args, Debug)]
pub struct ForwardArgs {
    /// Hugging Face model folder, or a llama GGUF file.
    #[arg(long)]
    pub model: PathBuf,
    /// safetensors file with `input_ids` (int64 [batch, seq]) and optional `attention_mask`, `token_type_ids`.
    #[arg(long)]
    pub inputs: PathBuf,
    /// Where to write `logits` (float32), `last_hidden_state` (encoders) and `hidden_states.N`.
    #[arg(long)]
    pub out: PathBuf,
    /// Also write every layer's hidden state (`hidden_states.0` = embeddings).
    #[arg(long)]
    pub hidden_states: bool,
    #[command(flatten)]
    pub place: Placement,
}

/// Runs `magpie forward`.
pub fn forward_cmd(a: ForwardArgs) -> Result<()> {
    let opts = a.place.options()?;
    let inputs = safetensors::load(&a.inputs)?;
    let ids = inputs.get("input_ids").ok_or_else(|| Error::value("forward", format!("{}: no 'input_ids' tensor", a.inputs.display())))?;
    let as_i64 = |name: &str, t: &Tensor| -> Result<Tensor> {
        if t.dtype().is_float() || t.dtype().is_complex() {
            return Err(Error::dtype("forward", format!("{name} must be an integer tensor, got {}", t.dtype())));
        }
        t.to_dtype(DType::I64)
    };
    let ids = as_i64("input_ids", ids)?;
    let mask = inputs.get("attention_mask").map(|m| as_i64("attention_mask", m)).transpose()?;
    let tt = inputs.get("token_type_ids").map(|m| as_i64("token_type_ids", m)).transpose()?;
    if let Some(m) = &mask {
        if m.shape() != ids.shape() {
            return Err(Error::shape("forward", format!("attention_mask {:?} must have input_ids' shape {:?}", m.shape(), ids.shape())));
        }
    }
    let model = AutoModel::load(&a.model, &opts)?;
    let _g = magpie_core::autograd::no_grad();
    let out = model.forward(&ids, mask.as_ref(), tt.as_ref(), a.hidden_states)?;
    let f32 = |t: &Tensor| -> Result<Tensor> { t.to_dtype(DType::F32)?.to_device(Device::Cpu)?.contiguous() };
    let mut tensors = Vec::new();
    if let Some(l) = &out.logits {
        tensors.push(("logits".to_string(), f32(l)?));
    }
    if model.is_encoder() || out.logits.is_none() {
        tensors.push(("last_hidden_state".to_string(), f32(&out.last_hidden_state)?));
    }
    if let Some(p) = &out.pooler_output {
        tensors.push(("pooler_output".to_string(), f32(p)?));
    }
    for (i, h) in out.hidden_states.iter().enumerate() {
        tensors.push((format!("hidden_states.{i}"), f32(h)?));
    }
    safetensors::save(&tensors, None, &a.out)?;
    eprintln!("wrote {} ({})", a.out.display(), tensors.iter().map(|(n, t)| format!("{n} {:?}", t.shape())).collect::<Vec<_>>().join(", "));
    Ok(())
}

/// `magpie embed` flags.
#[derive(Args, Debug)]
pub struct EmbedArgs {
    /// A BERT folder with tokenizer.json (sentence-transformers' files, when present, set the defaults).
    #[arg(long)]
    pub model: PathBuf,
    /// mean (over the attention mask) or cls. Default: the folder's 1_Pooling/config.json, else mean.
    #[arg(long)]
    pub pooling: Option<String>,
    /// L2-normalize (the default when the folder's modules.json lists Normalize).
    #[arg(long, conflicts_with = "no_normalize")]
    pub normalize: bool,
    /// Do not normalize, whatever modules.json says.
    #[arg(long)]
    pub no_normalize: bool,
    /// One JSON array per line.
    #[arg(long)]
    pub json: bool,
    /// The texts to embed.
    #[arg(required = true)]
    pub texts: Vec<String>,
    #[command(flatten)]
    pub place: Placement,
}

/// Runs `magpie embed`.
pub fn embed_cmd(a: EmbedArgs) -> Result<()> {
    let opts = a.place.options()?;
    let mut enc = SentenceEncoder::load(&a.model, &opts)?;
    if let Some(p) = &a.pooling {
        enc.pooling = Pooling::parse(p)?;
    }
    if a.normalize {
        enc.normalize = true;
    }
    if a.no_normalize {
        enc.normalize = false;
    }
    let texts: Vec<&str> = a.texts.iter().map(String::as_str).collect();
    let embs = enc.embed(&texts)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let io = |e: std::io::Error| Error::io("embed", format!("cannot write to stdout: {e}"));
    for e in &embs {
        // shortest round-trip forms of the float32 values
        let vals: Vec<String> = e.iter().map(|v| format!("{v:?}")).collect();
        if a.json {
            writeln!(out, "[{}]", vals.join(",")).map_err(io)?;
        } else {
            writeln!(out, "{}", vals.join(" ")).map_err(io)?;
        }
    }
    Ok(())
}
