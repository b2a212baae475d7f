//! `--profile`: times each op of the GPT step alone at the step's shapes (forward, and forward +
//! backward), so the breakdown in benchmark/NOTES.md says which kernels the step waits on.

use magpie_core::ops::nn::loss::{cross_entropy, Reduction};
use magpie_core::ops::nn::{embedding, linear, native_layer_norm, scaled_dot_product_attention};
use magpie_core::{Result, Tensor};
use std::time::Instant;

fn time(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut v = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    // the fastest repetition: on a shared machine the slow ones measure the neighbours
    Ok(v.iter().copied().fold(f64::INFINITY, f64::min))
}

fn leaf(shape: &[usize]) -> Result<Tensor> {
    Tensor::randn(shape)?.mul_scalar(0.1)?.with_requires_grad()
}

/// Prints `op, calls per step, forward ms, forward+backward ms, total ms per step` rows.
pub fn run(b: usize, t: usize, c: usize, h: usize, v: usize, layers: usize) -> Result<()> {
    let n = b * t;
    let reps = 30;
    let mut rows: Vec<(String, usize, f64, f64)> = Vec::new();
    let mut add = |name: &str, calls: usize, fwd: &dyn Fn() -> Result<Tensor>| -> Result<()> {
        let f = time(reps, || fwd().map(|_| ()))?;
        let fb = time(reps, || fwd()?.sum()?.backward())?;
        rows.push((name.to_string(), calls, f, fb));
        Ok(())
    };
    let x = leaf(&[b, t, c])?;
    let x4 = leaf(&[b, t, 4 * c])?;
    for (name, i, o) in [("linear c_attn", c, 3 * c), ("linear attn.c_proj", c, c), ("linear c_fc", c, 4 * c)] {
        let w = leaf(&[o, i])?;
        let bias = leaf(&[o])?;
        add(&format!("{name} [{n}x{i}]@[{i}x{o}]"), layers, &|| linear(&x, &w, Some(&bias)))?;
    }
    let w = leaf(&[c, 4 * c])?;
    let bias = leaf(&[c])?;
    add(&format!("linear mlp.c_proj [{n}x{}]@[{}x{c}]", 4 * c, 4 * c), layers, &|| linear(&x4, &w, Some(&bias)))?;
    {
        let w = leaf(&[3 * c, c])?;
        let bias = leaf(&[3 * c])?;
        let x2 = leaf(&[n, c])?;
        add("alt: matmul x2d @ w.T + b (c_attn)", 0, &|| x2.matmul(&w.transpose(0, 1)?)?.add(&bias))?;
        add("alt: identity (sum + backward only) [1024x512]", 0, &|| Ok(x4.clone()))?;
        add("alt: mul_scalar [1024x512]", 0, &|| x4.mul_scalar(2.0))?;
        let y4 = leaf(&[b, t, 4 * c])?;
        add("alt: mul(x, y)", 0, &|| x4.mul(&y4))?;
        add("alt: add(x, y)", 0, &|| x4.add(&y4))?;
        add("alt: sigmoid", 0, &|| x4.sigmoid())?;
        add("alt: tanh", 0, &|| x4.tanh())?;
        add("alt: exp", 0, &|| x4.exp())?;
        add("alt: gelu none", 0, &|| x4.gelu("none"))?;
        add("alt: relu", 0, &|| x4.relu())?;
        add("alt: leaky_relu", 0, &|| x4.leaky_relu(0.01))?;
        add("alt: hardtanh", 0, &|| x4.hardtanh(-1.0, 1.0))?;
        add("alt: hardswish", 0, &|| x4.hardswish())?;
        add("alt: hardsigmoid", 0, &|| x4.hardsigmoid())?;
        add("alt: elu", 0, &|| x4.elu(1.0))?;
        add("alt: silu", 0, &|| x4.silu())?;
        add("alt: softplus", 0, &|| x4.softplus(1.0, 20.0))?;
        add("alt: mish", 0, &|| x4.mish())?;
        add("alt: logsigmoid", 0, &|| x4.logsigmoid())?;
        let x64 = x4.detach().to_dtype(magpie_core::DType::F64)?.with_requires_grad()?;
        add("alt: relu f64", 0, &|| x64.relu())?;
        add("alt: sigmoid f64", 0, &|| x64.sigmoid())?;
        add("alt: sigmoid-gelu x*sigmoid(1.702x)", 0, &|| x4.mul(&x4.mul_scalar(1.702)?.sigmoid()?))?;
    }
    let wte = leaf(&[v, c])?;
    add(&format!("lm head linear [{n}x{c}]@[{c}x{v}]"), 1, &|| linear(&x, &wte, None))?;
    let lw = leaf(&[c])?;
    let lb = leaf(&[c])?;
    add(&format!("layer_norm [{n}x{c}]"), 2 * layers + 1, &|| Ok(native_layer_norm(&x, &[c as i64], Some(&lw), Some(&lb), 1e-5)?.0))?;
    add(&format!("gelu tanh [{n}x{}]", 4 * c), layers, &|| x4.gelu("tanh"))?;
    let q = leaf(&[b, h, t, c / h])?;
    let k = leaf(&[b, h, t, c / h])?;
    let vv = leaf(&[b, h, t, c / h])?;
    add(&format!("sdpa causal [{b}x{h}x{t}x{}]", c / h), layers, &|| scaled_dot_product_attention(&q, &k, &vv, None, 0.0, true, None, false))?;
    let logits = leaf(&[n, v])?;
    let tgt = Tensor::from_vec((0..n as i64).map(|i| i % v as i64).collect::<Vec<_>>(), &[n])?;
    add(&format!("cross_entropy [{n}x{v}]"), 1, &|| cross_entropy(&logits, &tgt, None, -100, Reduction::Mean, 0.0))?;
    let idx = Tensor::from_vec((0..n as i64).map(|i| i % v as i64).collect::<Vec<_>>(), &[b, t])?;
    add(&format!("embedding [{v}x{c}] -> [{b}x{t}x{c}]"), 2, &|| embedding(&idx, &wte, None, None, 2.0))?;
    let y = leaf(&[b, t, c])?;
    add(&format!("residual add [{b}x{t}x{c}]"), 2 * layers + 1, &|| x.add(&y))?;
    let qkv = leaf(&[b, t, 3 * c])?;
    add("qkv split + head transpose (narrow, reshape, transpose)", layers, &|| {
        let hs = |i: i64| qkv.narrow(2, i * c as i64, c as i64)?.reshape(&[b as i64, t as i64, h as i64, (c / h) as i64])?.transpose(1, 2);
        hs(0)?.add(&hs(1)?)?.add(&hs(2)?)
    })?;
    println!("| op (shape) | calls/step | forward ms | fwd+bwd ms | fwd+bwd ms per step |");
    println!("|---|---|---|---|---|");
    let mut total = 0.0;
    for (name, calls, f, fb) in &rows {
        total += fb * *calls as f64;
        println!("| {name} | {calls} | {f:.3} | {fb:.3} | {:.2} |", fb * *calls as f64);
    }
    println!("| sum of the above | | | | {total:.1} |");
    Ok(())
}
