//! `magpie`: torch-magpie's command-line tool.
//!
//! `magpie train` trains a small GPT on a built-in corpus (this project's sources) and
//! `magpie sample` generates from its checkpoint: the main job. `magpie generate`, `magpie forward`
//! and `magpie embed` run pretrained Hugging Face models (BERT, GPT-2, Llama 3, Qwen2). `magpie demo` (the default
//! without a subcommand) fits a line with autograd; `magpie ops` lists the ops reachable by name.

use clap::{Parser, Subcommand};
use magpie_core::{autograd, registry, Result, Tensor};
use std::process::ExitCode;

mod formats;
mod hf;
mod observe;
mod sample;
mod train;

#[derive(Parser)]
#[command(name = "magpie", version, about = "torch-magpie: PyTorch in Rust")]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Fit y = 3x + 2 by gradient descent with autograd (the default).
    Demo {
        /// Gradient-descent steps.
        #[arg(long, default_value_t = 500)]
        steps: usize,
        /// Learning rate.
        #[arg(long, default_value_t = 0.1)]
        lr: f64,
    },
    /// List every op reachable by its PyTorch name.
    Ops,
    /// Train a small GPT on a text corpus (default: this project's own sources, built in).
    Train(train::TrainArgs),
    /// Generate text from a checkpoint written by `train`.
    Sample(sample::SampleArgs),
    /// Generate with a pretrained Hugging Face decoder (GPT-2, Llama 3, Qwen2), streaming the text.
    Generate(hf::GenerateArgs),
    /// Run a Hugging Face model on token ids from a safetensors file; write logits and hidden states.
    Forward(hf::ForwardArgs),
    /// Sentence embeddings with a BERT model (sentence-transformers' pooling and normalization).
    Embed(hf::EmbedArgs),
    /// List a tensor file's tensors and metadata (safetensors, GGUF, .pt; told apart by content).
    Inspect(formats::InspectArgs),
    /// Convert tensors between safetensors, GGUF (--quant) and PyTorch .pt.
    Convert(formats::ConvertArgs),
}

fn demo(steps: usize, lr: f64) -> Result<()> {
    magpie_core::ops::random::manual_seed(0);
    let x = Tensor::rand(&[64, 1])?;
    let noise = Tensor::randn(&[64, 1])?.mul_scalar(0.01)?;
    let y = x.mul_scalar(3.0)?.add_scalar(2.0)?.add(&noise)?;
    let w = Tensor::zeros(&[1, 1])?.with_requires_grad()?;
    let b = Tensor::zeros(&[1])?.with_requires_grad()?;
    println!("fitting y = 3x + 2 on 64 noisy points with gradient descent (lr {lr}, {steps} steps)");
    for step in 0..=steps {
        let pred = x.mul(&w)?.add(&b)?;
        let loss = pred.sub(&y)?.pow_scalar(2)?.mean()?;
        if step % (steps / 5).max(1) == 0 {
            println!("step {step:>4}  loss {:.6}", loss.item()?.to_f64());
        }
        if step == steps {
            break;
        }
        w.set_grad(None);
        b.set_grad(None);
        loss.backward()?;
        let _ng = autograd::no_grad();
        for p in [&w, &b] {
            let g = p.grad().ok_or_else(|| magpie_core::Error::autograd("demo", "no gradient"))?;
            p.sub_(&g.mul_scalar(lr)?)?;
        }
    }
    println!("learned w = {:.4}, b = {:.4} (true 3, 2)", w.item()?.to_f64(), b.item()?.to_f64());
    Ok(())
}

fn main() -> ExitCode {
    // a bug must still end in one line, not a backtrace
    std::panic::set_hook(Box::new(|info| {
        let msg = info.payload().downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| info.payload().downcast_ref::<String>().cloned());
        eprintln!("magpie: internal error: {} (at {})", msg.unwrap_or_default(), info.location().map(|l| l.to_string()).unwrap_or_default());
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            // --help and --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // clap's message without its usage block: one line, like every other error
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or("invalid arguments").trim_start_matches("error: ");
            eprintln!("magpie: {first} (see magpie --help)");
            return ExitCode::from(2);
        }
    };
    let res = match cli.cmd.unwrap_or(Cmd::Demo { steps: 500, lr: 0.1 }) {
        Cmd::Demo { steps, lr } => demo(steps, lr),
        Cmd::Ops => {
            for n in registry::op_names() {
                println!("{n}");
            }
            Ok(())
        }
        Cmd::Train(a) => train::run(a),
        Cmd::Sample(a) => sample::run(a),
        Cmd::Generate(a) => hf::generate_cmd(a),
        Cmd::Forward(a) => hf::forward_cmd(a),
        Cmd::Embed(a) => hf::embed_cmd(a),
        Cmd::Inspect(a) => formats::inspect(a),
        Cmd::Convert(a) => formats::convert(a),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("magpie: {e}");
            ExitCode::FAILURE
        }
    }
}
