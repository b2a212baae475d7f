//! `magpie inspect FILE` and `magpie convert IN OUT`: tensor files told apart by their content
//! (safetensors, GGUF, PyTorch `.pt`), listed, and converted between formats.

use clap::Args;
use magpie_core::{DType, Error, Result, Tensor};
use magpie_io::gguf::{GgmlType, GgufFile, GgufWriter, Value};
use magpie_io::safetensors;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A file format, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Safetensors,
    Gguf,
    /// A PyTorch zip checkpoint (`PK\x03\x04`) or a legacy pickle.
    Pt,
}

fn sniff(path: &Path) -> Result<Format> {
    let io = |e: std::io::Error| Error::io("inspect", format!("cannot read {}: {e}", path.display()));
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut head = [0u8; 10];
    let n = f.read(&mut head).map_err(io)?;
    let head = &head[..n];
    if head.starts_with(b"GGUF") {
        return Ok(Format::Gguf);
    }
    if head.starts_with(b"PK\x03\x04") || head.starts_with(&[0x80, 0x02, 0x8a, 0x0a]) {
        return Ok(Format::Pt);
    }
    if n >= 9 && head[8] == b'{' {
        return Ok(Format::Safetensors);
    }
    Err(Error::io("inspect", format!("{}: not a safetensors, GGUF or PyTorch file (unknown first bytes)", path.display())))
}

/// `magpie inspect` flags.
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// A safetensors, GGUF or PyTorch (.pt / .bin, zip or legacy) file.
    pub file: PathBuf,
    /// Print whole metadata arrays (default: the first few items).
    #[arg(long)]
    pub full: bool,
}

fn show_value(v: &Value, full: bool) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) => {
            let n = a.items.len();
            let shown = if full { n } else { n.min(6) };
            let items: Vec<String> = a.items[..shown].iter().map(|x| show_value(x, full)).collect();
            let more = if shown < n { format!(", ... ({n} items)") } else { String::new() };
            format!("[{}{more}]", items.join(", "))
        }
        Value::U8(x) => x.to_string(),
        Value::I8(x) => x.to_string(),
        Value::U16(x) => x.to_string(),
        Value::I16(x) => x.to_string(),
        Value::U32(x) => x.to_string(),
        Value::I32(x) => x.to_string(),
        Value::U64(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::F32(x) => format!("{x:?}"),
        Value::F64(x) => format!("{x:?}"),
        Value::Bool(x) => x.to_string(),
    }
}

/// Runs `magpie inspect`.
pub fn inspect(a: InspectArgs) -> Result<()> {
    use std::fmt::Write as _;
    // the listing is built whole, then written once: a closed pipe is an error, not a panic
    let mut o = String::new();
    match sniff(&a.file)? {
        Format::Gguf => {
            let f = GgufFile::open(&a.file)?;
            let _ = writeln!(o, "{}: GGUF v{}, alignment {}, {} metadata keys, {} tensors", a.file.display(), f.version(), f.alignment(), f.metadata().len(), f.tensors().len());
            let _ = writeln!(o, "metadata:");
            for (k, v) in f.metadata() {
                let _ = writeln!(o, "  {k} ({}) = {}", v.value_type(), show_value(v, a.full));
            }
            let _ = writeln!(o, "tensors:");
            for t in f.tensors() {
                let _ = writeln!(o, "  {}  {}  {:?}  ({} bytes)", t.name, t.ggml_type, t.shape(), t.nbytes);
            }
        }
        Format::Safetensors => {
            let f = safetensors::MappedFile::open(&a.file)?;
            let names: Vec<&str> = f.names().collect();
            let _ = writeln!(o, "{}: safetensors, {} tensors", a.file.display(), names.len());
            if !f.metadata().is_empty() {
                let _ = writeln!(o, "metadata:");
                for (k, v) in f.metadata() {
                    let _ = writeln!(o, "  {k} = {v:?}");
                }
            }
            let _ = writeln!(o, "tensors:");
            for n in names {
                if let Some((dt, shape)) = f.info(n) {
                    let _ = writeln!(o, "  {n}  {}  {shape:?}", dt.to_string().trim_start_matches("torch."));
                }
            }
        }
        Format::Pt => {
            let v = magpie_io::pt::load(&a.file)?;
            let tensors = magpie_io::pt::flatten(&v);
            let _ = writeln!(o, "{}: PyTorch checkpoint, {} tensors (paths: dict keys and list indices joined by '.')", a.file.display(), tensors.len());
            let _ = writeln!(o, "tensors:");
            for (n, t) in &tensors {
                let _ = writeln!(o, "  {n}  {}  {:?}", t.dtype().to_string().trim_start_matches("torch."), t.shape());
            }
        }
    }
    use std::io::Write as _;
    std::io::stdout().lock().write_all(o.as_bytes()).map_err(|e| Error::io("inspect", format!("cannot write to stdout: {e}")))
}

/// `magpie convert` flags.
#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// The input file (safetensors, GGUF or PyTorch .pt/.bin).
    pub input: PathBuf,
    /// The output file: `.gguf` writes GGUF, `.pt`/`.bin`/`.pth` a PyTorch (zip) state dict,
    /// anything else safetensors.
    pub output: PathBuf,
    /// Floating dtype of the tensors written to safetensors: float32, bfloat16 or float16.
    #[arg(long, default_value = "float32")]
    pub dtype: String,
    /// GGUF tensor type for 2-D weights whose rows fit its blocks (f32, f16, bf16, q8_0, q4_0, q4_1,
    /// q5_0, q5_1, q4_k); 1-D tensors stay f32, as llama.cpp's converter keeps norms.
    #[arg(long)]
    pub quant: Option<String>,
}

fn float_dtype(s: &str) -> Result<DType> {
    match s {
        "float32" => Ok(DType::F32),
        "bfloat16" => Ok(DType::BF16),
        "float16" => Ok(DType::F16),
        o => Err(Error::value("convert", format!("--dtype must be float32, bfloat16 or float16, got '{o}'"))),
    }
}

fn read_tensors(path: &Path, dtype: DType) -> Result<Vec<(String, Tensor)>> {
    match sniff(path)? {
        Format::Gguf => {
            let f = GgufFile::open(path)?;
            f.tensors().iter().map(|t| Ok((t.name.clone(), f.tensor_f32(&t.name)?.to_dtype(dtype)?))).collect()
        }
        Format::Safetensors => {
            let f = safetensors::MappedFile::open(path)?;
            let names: Vec<String> = f.names().map(str::to_string).collect();
            names
                .into_iter()
                .map(|n| {
                    let t = f.tensor(&n)?;
                    let t = if t.dtype().is_float() { t.to_dtype(dtype)? } else { t };
                    Ok((n, t))
                })
                .collect()
        }
        Format::Pt => magpie_io::pt::load_tensors(path)?.into_iter().map(|(n, t)| Ok((n, if t.dtype().is_float() { t.to_dtype(dtype)? } else { t }))).collect(),
    }
}

/// Runs `magpie convert`.
pub fn convert(a: ConvertArgs) -> Result<()> {
    let dtype = float_dtype(&a.dtype)?;
    let ext = a.output.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    let to_gguf = ext == "gguf";
    let to_pt = matches!(ext.as_str(), "pt" | "pth" | "bin");
    if a.quant.is_some() && !to_gguf {
        return Err(Error::value("convert", "--quant applies to GGUF output (OUT ending in .gguf)"));
    }
    let tensors = read_tensors(&a.input, if to_gguf { DType::F32 } else { dtype })?;
    if to_gguf {
        let q = a.quant.as_deref().unwrap_or("f32");
        let ty = GgmlType::from_name(&q.to_ascii_uppercase()).filter(|t| matches!(t, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 | GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q4_K));
        let ty = ty.ok_or_else(|| Error::value("convert", format!("--quant {q} is not one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k")))?;
        let mut w = GgufWriter::new();
        w.add("general.name", Value::String(a.input.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()))?;
        let mut quantized = 0;
        for (name, t) in &tensors {
            if !t.dtype().is_float() {
                return Err(Error::dtype("convert", format!("tensor '{name}' is {}; GGUF output takes floating tensors", t.dtype())));
            }
            let row = t.shape().last().copied().unwrap_or(1);
            let this = if t.ndim() >= 2 && row % ty.block_size() == 0 { ty } else { GgmlType::F32 };
            quantized += (this == ty) as usize;
            w.add_tensor(name.clone(), t, this)?;
        }
        w.write(&a.output)?;
        eprintln!("wrote {} ({} tensors, {quantized} as {ty})", a.output.display(), tensors.len());
    } else if to_pt {
        magpie_io::pt::save(&a.output, &tensors)?;
        eprintln!("wrote {} ({} tensors as a PyTorch state dict, floating ones as {})", a.output.display(), tensors.len(), a.dtype);
    } else {
        safetensors::save(&tensors, None, &a.output)?;
        eprintln!("wrote {} ({} tensors, floating ones as {})", a.output.display(), tensors.len(), a.dtype);
    }
    Ok(())
}
