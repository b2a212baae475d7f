//! Hugging Face folders: `config.json`, `model.safetensors` or a sharded
//! `model.safetensors.index.json`, `generation_config.json`, `tokenizer.json`. Weights are read from
//! memory-mapped files one tensor at a time, checked against the shape the config implies, and
//! converted to the requested dtype and device; a missing, unexpected or misshapen weight is an
//! error that names it.

use magpie_core::{DType, Device, Error, Result, Tensor};
use magpie_io::safetensors::MappedFile;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The dtype and device a model is loaded to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadOptions {
    /// float32, bfloat16 or float16.
    pub dtype: DType,
    pub device: Device,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { dtype: DType::F32, device: Device::Cpu }
    }
}

impl LoadOptions {
    /// Checks the dtype is one models run in.
    pub fn validate(&self) -> Result<()> {
        match self.dtype {
            DType::F32 | DType::BF16 | DType::F16 => Ok(()),
            d => Err(Error::unsupported("load", format!("models run in float32, bfloat16 or float16, not {d}"))),
        }
    }
}

/// How a weight that a random source makes is initialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Init {
    /// N(0, 0.02²): projections and embeddings.
    Normal,
    /// Norm scales.
    Ones,
    /// Biases.
    Zeros,
}

/// Where an architecture's builder gets its tensors, by full parameter name.
pub trait WeightSource {
    /// The tensor `name` of `shape`, in the load dtype on the load device, as a trainable leaf.
    fn take(&mut self, name: &str, shape: &[usize], init: Init) -> Result<Tensor>;
    /// Whether `name` is available (optional weights: a pooler, an untied head).
    fn has(&self, name: &str) -> bool;
    /// The dtype and device tensors come in.
    fn options(&self) -> LoadOptions;
    /// The 2-D weight `name` of `shape` kept in a quantized block format, when the source holds
    /// it in one the kernels run on and the load options allow it; `None` means: take it dense.
    fn take_quant(&mut self, name: &str, shape: &[usize]) -> Result<Option<magpie_core::quant::QuantMatrix>> {
        let _ = (name, shape);
        Ok(None)
    }
}

fn leaf(t: Tensor, opts: LoadOptions) -> Result<Tensor> {
    t.to_dtype(opts.dtype)?.to_device(opts.device)?.detach().requires_grad_(true)
}

/// Weights from the safetensors file(s) of a folder.
pub struct FileWeights {
    files: Vec<MappedFile>,
    /// tensor name -> index into `files`
    index: HashMap<String, usize>,
    used: HashSet<String>,
    /// A leading `prefix.` the model's names have but the checkpoint's do not (or the reverse).
    alias: Option<(String, bool)>,
    opts: LoadOptions,
}

impl FileWeights {
    /// Opens `model.safetensors` or, failing that, `model.safetensors.index.json` and its shards.
    pub fn open(dir: &Path, opts: LoadOptions) -> Result<FileWeights> {
        opts.validate()?;
        let single = dir.join("model.safetensors");
        let indexed = dir.join("model.safetensors.index.json");
        let files = if single.is_file() {
            vec![MappedFile::open(&single)?]
        } else if indexed.is_file() {
            let idx = read_json(&indexed)?;
            let map = idx.get("weight_map").and_then(|m| m.as_object()).ok_or_else(|| {
                Error::io("load", format!("{}: no 'weight_map' object", indexed.display()))
            })?;
            let mut shards: Vec<String> = map.values().filter_map(|v| v.as_str().map(str::to_string)).collect();
            if shards.len() != map.len() {
                return Err(Error::io("load", format!("{}: every weight_map value must be a file name", indexed.display())));
            }
            shards.sort();
            shards.dedup();
            let mut files = Vec::new();
            for s in &shards {
                // a shard is a file beside the index, never a path elsewhere
                if s.is_empty() || s.contains('/') || s.contains('\\') || s == "." || s == ".." {
                    return Err(Error::io("load", format!("{}: shard name '{s}' is not a plain file name", indexed.display())));
                }
                files.push(MappedFile::open(dir.join(s))?);
            }
            // every name the index lists must be in the shard it names
            for (name, shard) in map {
                let shard = shard.as_str().unwrap_or_default();
                let f = files.iter().find(|f| f.path().file_name().and_then(|n| n.to_str()) == Some(shard));
                if f.and_then(|f| f.info(name)).is_none() {
                    return Err(Error::io("load", format!("{}: '{name}' is listed in shard {shard} but not stored there", indexed.display())));
                }
            }
            files
        } else {
            return Err(Error::io("load", format!("{}: no model.safetensors or model.safetensors.index.json", dir.display())));
        };
        let mut index = HashMap::new();
        for (i, f) in files.iter().enumerate() {
            for n in f.names() {
                if index.insert(n.to_string(), i).is_some() {
                    return Err(Error::io("load", format!("{}: tensor '{n}' is stored twice", dir.display())));
                }
            }
        }
        Ok(FileWeights { files, index, used: HashSet::new(), alias: None, opts })
    }

    /// Lets names under `prefix.` (a task model's base model, `bert.`, `transformer.`) match a
    /// checkpoint saved without that prefix (a base model's), and a base model's names match a
    /// checkpoint saved with it, as transformers does.
    pub fn with_base_prefix(mut self, prefix: &str, model_has_prefix: bool) -> Self {
        let with = format!("{prefix}.");
        let file_has = self.index.keys().any(|k| k.starts_with(&with));
        if file_has != model_has_prefix {
            self.alias = Some((with, model_has_prefix));
        }
        self
    }

    fn resolve(&self, name: &str) -> String {
        match &self.alias {
            Some((p, true)) => name.strip_prefix(p.as_str()).unwrap_or(name).to_string(),
            Some((p, false)) => format!("{p}{name}"),
            None => name.to_string(),
        }
    }

    /// Errors on checkpoint tensors no parameter took, except those matching `ignore` (buffers such
    /// as `position_ids`, heads the loaded class does not have), as transformers ignores them.
    pub fn finish(&self, ignore: &[&str]) -> Result<()> {
        let mut extra: Vec<&String> = self
            .index
            .keys()
            .filter(|k| !self.used.contains(*k))
            .filter(|k| !ignore.iter().any(|pat| matches_pattern(k, pat)))
            .collect();
        if extra.is_empty() {
            return Ok(());
        }
        extra.sort();
        let shown: Vec<&str> = extra.iter().take(8).map(|s| s.as_str()).collect();
        let more = if extra.len() > 8 { format!(" and {} more", extra.len() - 8) } else { String::new() };
        Err(Error::value("load", format!("unexpected weights in the checkpoint (the config's model has no such parameter): {}{more}", shown.join(", "))))
    }
}

/// Whether dotted `name` matches `pat` component by component, `#` standing for any one component
/// and a trailing `.*` for any non-empty rest (`cls.*`, `transformer.h.#.attn.bias`).
fn matches_pattern(name: &str, pat: &str) -> bool {
    if let Some(p) = pat.strip_suffix(".*") {
        let n = name.split('.').collect::<Vec<_>>();
        let p = p.split('.').collect::<Vec<_>>();
        return n.len() > p.len() && p.iter().zip(&n).all(|(a, b)| *a == "#" || a == b);
    }
    let n = name.split('.').collect::<Vec<_>>();
    let p = pat.split('.').collect::<Vec<_>>();
    n.len() == p.len() && p.iter().zip(&n).all(|(a, b)| *a == "#" || a == b)
}

impl WeightSource for FileWeights {
    fn take(&mut self, name: &str, shape: &[usize], _init: Init) -> Result<Tensor> {
        let key = self.resolve(name);
        let Some(&fi) = self.index.get(&key) else {
            return Err(Error::value("load", format!("weight '{key}' is missing from the checkpoint")));
        };
        let f = &self.files[fi];
        let (dt, got) = f.info(&key).ok_or_else(|| Error::value("load", format!("weight '{key}' is missing from the checkpoint")))?;
        if got != shape {
            return Err(Error::shape("load", format!("weight '{key}' has shape {got:?} in the checkpoint but the config needs {shape:?}")));
        }
        if !dt.is_float() {
            return Err(Error::dtype("load", format!("weight '{key}' is stored as {dt}, not a floating dtype")));
        }
        let t = f.tensor(&key)?;
        self.used.insert(key);
        leaf(t, self.opts)
    }
    fn has(&self, name: &str) -> bool {
        self.index.contains_key(&self.resolve(name))
    }
    fn options(&self) -> LoadOptions {
        self.opts
    }
}

/// Random weights of the right shapes (for speed measurements with real configs): N(0, 0.02²)
/// projections and embeddings, unit norms, zero biases, drawn on the target device.
pub struct RandomWeights {
    opts: LoadOptions,
    /// Optional weights to include (an untied head is not optional; a pooler is).
    with_optional: bool,
}

impl RandomWeights {
    /// A source seeded with `seed` (the default generator is reseeded).
    pub fn new(opts: LoadOptions, seed: u64) -> Result<RandomWeights> {
        opts.validate()?;
        magpie_core::ops::random::manual_seed(seed);
        Ok(RandomWeights { opts, with_optional: false })
    }
}

impl WeightSource for RandomWeights {
    fn take(&mut self, _name: &str, shape: &[usize], init: Init) -> Result<Tensor> {
        let (dt, dev) = (self.opts.dtype, self.opts.device);
        let t = match init {
            Init::Normal => Tensor::randn_on(shape, dt, dev)?.mul_scalar(0.02)?,
            Init::Ones => Tensor::ones_on(shape, dt, dev)?,
            Init::Zeros => Tensor::zeros_on(shape, dt, dev)?,
        };
        t.detach().requires_grad_(true)
    }
    fn has(&self, _name: &str) -> bool {
        self.with_optional
    }
    fn options(&self) -> LoadOptions {
        self.opts
    }
}

/// Reads a JSON file, naming the file in errors.
pub fn read_json(path: &Path) -> Result<Value> {
    let s = std::fs::read_to_string(path).map_err(|e| Error::io("load", format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&s).map_err(|e| Error::io("load", format!("{}: not valid JSON: {e}", path.display())))
}

/// The files of a model folder that loading reads.
#[derive(Clone, Debug)]
pub struct ModelFolder {
    pub dir: PathBuf,
    pub config: Value,
    /// `generation_config.json`, when present.
    pub generation_config: Option<Value>,
}

impl ModelFolder {
    /// Reads `config.json` (required) and `generation_config.json` (optional) of `dir`.
    pub fn open(dir: &Path) -> Result<ModelFolder> {
        if !dir.is_dir() {
            return Err(Error::io("load", format!("{} is not a folder", dir.display())));
        }
        let cfg_path = dir.join("config.json");
        if !cfg_path.is_file() {
            return Err(Error::io("load", format!("{}: no config.json (not a Hugging Face model folder?)", dir.display())));
        }
        let config = read_json(&cfg_path)?;
        let gen_path = dir.join("generation_config.json");
        let generation_config = if gen_path.is_file() { Some(read_json(&gen_path)?) } else { None };
        Ok(ModelFolder { dir: dir.to_path_buf(), config, generation_config })
    }

    /// `tokenizer.json`, when the folder has one.
    pub fn tokenizer_path(&self) -> Option<PathBuf> {
        let p = self.dir.join("tokenizer.json");
        p.is_file().then_some(p)
    }
}

/// Writes `tensors` as `model.safetensors` with transformers' `{"format": "pt"}` metadata.
pub fn save_weights(dir: &Path, tensors: &[(String, Tensor)]) -> Result<()> {
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    let host: Vec<(String, Tensor)> =
        tensors.iter().map(|(n, t)| Ok((n.clone(), t.detach().to_device(Device::Cpu)?.contiguous()?))).collect::<Result<_>>()?;
    magpie_io::safetensors::save(&host, Some(&meta), dir.join("model.safetensors"))
}
