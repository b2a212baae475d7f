//! Random ops with a seedable, counter-based [`Generator`] (Philox 4x32-10): `rand`, `randn`,
//! `randint`, `randperm`, `normal`, `bernoulli`, `multinomial`, and the in-place samplers
//! (`uniform_`, `normal_`, `exponential_`, `cauchy_`, `geometric_`, `log_normal_`).
//!
//! Counter-based means a (seed, offset) pair fixes every number drawn, so the CUDA backend can
//! produce the same streams; it does not reproduce PyTorch's CPU (mt19937) numbers.

use crate::device::Device;
use crate::dtype::DType;
use crate::element::Element;
use crate::tensor::Tensor;
use crate::{default_dtype, Error, Result};
use std::sync::Mutex;

/// A Philox 4x32-10 generator: `seed` is the key, `offset` counts the 128-bit blocks used.
#[derive(Debug, Clone)]
pub struct Generator {
    seed: u64,
    offset: u64,
}

const M0: u64 = 0xD251_1F53;
const M1: u64 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

fn philox(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for _ in 0..10 {
        let p0 = M0 * c[0] as u64;
        let p1 = M1 * c[2] as u64;
        c = [(p1 >> 32) as u32 ^ c[1] ^ k[0], p1 as u32, (p0 >> 32) as u32 ^ c[3] ^ k[1], p0 as u32];
        k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
    }
    c
}

impl Generator {
    /// A generator with this seed (`torch.Generator().manual_seed(seed)`).
    pub fn new(seed: u64) -> Generator {
        Generator { seed, offset: 0 }
    }
    /// Re-seeds and rewinds.
    pub fn manual_seed(&mut self, seed: u64) {
        self.seed = seed;
        self.offset = 0;
    }
    /// The seed.
    pub fn initial_seed(&self) -> u64 {
        self.seed
    }
    /// The (seed, offset) state, for checkpoints.
    pub fn get_state(&self) -> (u64, u64) {
        (self.seed, self.offset)
    }
    /// Restores a state from [`Generator::get_state`].
    pub fn set_state(&mut self, state: (u64, u64)) {
        self.seed = state.0;
        self.offset = state.1;
    }
    /// `n` uniform u32 values.
    pub fn next_u32(&mut self, n: usize) -> Vec<u32> {
        let key = [self.seed as u32, (self.seed >> 32) as u32];
        let blocks = n.div_ceil(4);
        let mut out = Vec::with_capacity(blocks * 4);
        for b in 0..blocks as u64 {
            let c = self.offset + b;
            out.extend_from_slice(&philox([c as u32, (c >> 32) as u32, 0, 0], key));
        }
        self.offset += blocks as u64;
        out.truncate(n);
        out
    }
    /// `n` uniform values in [0, 1) with 53 random bits each.
    pub fn uniform(&mut self, n: usize) -> Vec<f64> {
        let r = self.next_u32(2 * n);
        r.chunks_exact(2)
            .map(|p| (((p[0] as u64) << 21) ^ (p[1] as u64 >> 11)) as f64 / (1u64 << 53) as f64)
            .collect()
    }
    /// `n` standard normal values (Box-Muller).
    pub fn normal(&mut self, n: usize) -> Vec<f64> {
        let u = self.uniform(n.div_ceil(2) * 2);
        let mut out = Vec::with_capacity(n + 1);
        for p in u.chunks_exact(2) {
            let r = (-2.0 * (1.0 - p[0]).ln()).sqrt();
            let th = 2.0 * std::f64::consts::PI * p[1];
            out.push(r * th.cos());
            out.push(r * th.sin());
        }
        out.truncate(n);
        out
    }
}

static DEFAULT: Mutex<Option<Generator>> = Mutex::new(None);

/// Runs `f` with the default generator (seeded with 0x5eed until `manual_seed` is called).
pub fn with_default_generator<R>(f: impl FnOnce(&mut Generator) -> R) -> R {
    let mut g = DEFAULT.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(|| Generator::new(0x5eed)))
}

/// `torch.manual_seed(seed)`: re-seeds the default generator.
pub fn manual_seed(seed: u64) {
    with_default_generator(|g| g.manual_seed(seed));
}

fn from_f64(op: &str, v: Vec<f64>, shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
    let st = crate::with_dtype!(dtype, T, { T::into_storage(v.into_iter().map(T::from_f64).collect()) });
    let t = Tensor::from_cpu_storage(st, shape)?;
    let _ = op;
    // CUDA tensors draw from the same host generator, then move (one stream of random numbers)
    t.to_device(device)
}

/// Uniform on [a, b) (`normal` false) or normal with mean a and std b, drawn on the GPU when
/// `device` is CUDA (the same numbers as the CPU path would draw); None for the CPU.
fn cuda_draw(device: Device, shape: &[usize], dtype: DType, normal: bool, a: f64, b: f64) -> Result<Option<Tensor>> {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(ord) = device {
        if crate::backend::cuda::rng::supported(dtype) {
            let t = if normal {
                crate::backend::cuda::rng::normal(ord, shape, dtype, a, b)?
            } else {
                crate::backend::cuda::rng::uniform(ord, shape, dtype, a, b)?
            };
            return Ok(Some(t));
        }
    }
    let _ = (device, shape, dtype, normal, a, b);
    Ok(None)
}

fn need_float(op: &str, dtype: DType) -> Result<()> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(Error::dtype(op, format!("\"{op}\" not implemented for '{}'", dtype.name())))
    }
}

impl Tensor {
    /// `torch.rand(shape, dtype=...)`: uniform on [0, 1).
    pub fn rand_on(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        need_float("rand", dtype)?;
        if let Some(t) = cuda_draw(device, shape, dtype, false, 0.0, 1.0)? {
            return Ok(t);
        }
        let v = with_default_generator(|g| g.uniform(crate::shape::numel(shape)));
        from_f64("rand", v, shape, dtype, device)
    }
    /// `torch.rand(shape)` in the default dtype.
    pub fn rand(shape: &[usize]) -> Result<Tensor> {
        Self::rand_on(shape, default_dtype(), Device::Cpu)
    }
    /// `torch.randn(shape, dtype=...)`: standard normal.
    pub fn randn_on(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        need_float("randn", dtype)?;
        if let Some(t) = cuda_draw(device, shape, dtype, true, 0.0, 1.0)? {
            return Ok(t);
        }
        let v = with_default_generator(|g| g.normal(crate::shape::numel(shape)));
        from_f64("randn", v, shape, dtype, device)
    }
    /// `torch.randn(shape)` in the default dtype.
    pub fn randn(shape: &[usize]) -> Result<Tensor> {
        Self::randn_on(shape, default_dtype(), Device::Cpu)
    }
    /// `torch.randint(low, high, shape, dtype=int64)`: uniform integers in [low, high).
    pub fn randint_on(low: i64, high: i64, shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        if high <= low {
            return Err(Error::value("randint", format!("random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")));
        }
        let range = (high - low) as u128;
        let n = crate::shape::numel(shape);
        let r = with_default_generator(|g| g.next_u32(2 * n));
        let v: Vec<f64> = r.chunks_exact(2).map(|p| (low as i128 + ((((p[0] as u128) << 32) | p[1] as u128) % range) as i128) as f64).collect();
        let st = crate::with_dtype!(dtype, T, { T::into_storage(v.iter().map(|&x| T::from_i64(x as i64)).collect()) });
        let t = Tensor::from_cpu_storage(st, shape)?;
        t.to_device(device)
    }
    /// `torch.randperm(n)`: a random permutation of `0..n` (int64).
    pub fn randperm_on(n: usize, dtype: DType, device: Device) -> Result<Tensor> {
        let mut p: Vec<i64> = (0..n as i64).collect();
        let r = with_default_generator(|g| g.uniform(n));
        for i in (1..n).rev() {
            let j = ((r[i] * (i + 1) as f64) as usize).min(i);
            p.swap(i, j);
        }
        let t = Tensor::from_vec(p, &[n])?.to_dtype(dtype)?;
        t.to_device(device)
    }
    /// Fills this tensor in place with values from `sample(generator, n)`.
    fn fill_random_(&self, op: &str, sample: impl FnOnce(&mut Generator, usize) -> Vec<f64>) -> Result<Tensor> {
        need_float(op, self.dtype())?;
        let v = with_default_generator(|g| sample(g, self.numel()));
        let t = from_f64(op, v, self.shape(), self.dtype(), self.device())?;
        let _ng = crate::autograd::no_grad();
        self.copy_(&t)
    }
    /// `tensor.uniform_(from, to)`.
    pub fn uniform_(&self, from: f64, to: f64) -> Result<Tensor> {
        if from > to {
            return Err(Error::value("uniform_", format!("uniform_ expects to return a [from, to) range, but found from={from} > to={to}")));
        }
        if let Some(t) = cuda_draw(self.device(), self.shape(), self.dtype(), false, from, to)? {
            let _ng = crate::autograd::no_grad();
            return self.copy_(&t);
        }
        self.fill_random_("uniform_", |g, n| g.uniform(n).into_iter().map(|u| from + (to - from) * u).collect())
    }
    /// `tensor.normal_(mean, std)`.
    pub fn normal_(&self, mean: f64, std: f64) -> Result<Tensor> {
        if std < 0.0 {
            return Err(Error::value("normal_", format!("normal expects std >= 0.0, but found std {std}")));
        }
        if let Some(t) = cuda_draw(self.device(), self.shape(), self.dtype(), true, mean, std)? {
            let _ng = crate::autograd::no_grad();
            return self.copy_(&t);
        }
        self.fill_random_("normal_", |g, n| g.normal(n).into_iter().map(|z| mean + std * z).collect())
    }
    /// `tensor.exponential_(lambd)`.
    pub fn exponential_(&self, lambd: f64) -> Result<Tensor> {
        if lambd <= 0.0 {
            return Err(Error::value("exponential_", format!("exponential_ expects lambda > 0.0, but found lambda={lambd}")));
        }
        self.fill_random_("exponential_", |g, n| g.uniform(n).into_iter().map(|u| -(1.0 - u).ln() / lambd).collect())
    }
    /// `tensor.cauchy_(median, sigma)`.
    pub fn cauchy_(&self, median: f64, sigma: f64) -> Result<Tensor> {
        if sigma <= 0.0 {
            return Err(Error::value("cauchy_", format!("cauchy_ expects sigma > 0.0, but found sigma={sigma}")));
        }
        self.fill_random_("cauchy_", |g, n| {
            g.uniform(n).into_iter().map(|u| median + sigma * (std::f64::consts::PI * (u - 0.5)).tan()).collect()
        })
    }
    /// `tensor.log_normal_(mean, std)`.
    pub fn log_normal_(&self, mean: f64, std: f64) -> Result<Tensor> {
        if std <= 0.0 {
            return Err(Error::value("log_normal_", format!("log_normal_ expects std > 0.0, but found std={std}")));
        }
        self.fill_random_("log_normal_", |g, n| g.normal(n).into_iter().map(|z| (mean + std * z).exp()).collect())
    }
    /// `tensor.geometric_(p)`: number of trials to the first success.
    pub fn geometric_(&self, p: f64) -> Result<Tensor> {
        if !(p > 0.0 && p < 1.0) {
            return Err(Error::value("geometric_", format!("geometric_ expects p to be in (0, 1), but got p={p}")));
        }
        self.fill_random_("geometric_", |g, n| g.uniform(n).into_iter().map(|u| ((1.0 - u).ln() / (1.0 - p).ln()).ceil().max(1.0)).collect())
    }
    /// `torch.bernoulli(p)`: 1 with probability `p` elementwise, in `p`'s dtype.
    pub fn bernoulli(&self) -> Result<Tensor> {
        need_float("bernoulli", self.dtype())?;
        let p: Vec<f64> = self.to_vec()?;
        if p.iter().any(|&x| !(0.0..=1.0).contains(&x)) {
            return Err(Error::value("bernoulli", "Expected p_in >= 0 && p_in <= 1 to be true"));
        }
        let u = with_default_generator(|g| g.uniform(p.len()));
        let v = p.iter().zip(u).map(|(&p, u)| if u < p { 1.0 } else { 0.0 }).collect();
        from_f64("bernoulli", v, self.shape(), self.dtype(), self.device())
    }
    /// `torch.bernoulli(input, p)`: a tensor shaped like this one with probability `p`.
    pub fn bernoulli_p(&self, p: f64) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::value("bernoulli", format!("bernoulli_ expects p to be in [0, 1], but got p={p}")));
        }
        #[cfg(feature = "cuda")]
        if let Device::Cuda(ord) = self.device() {
            if crate::backend::cuda::rng::supported(self.dtype()) {
                return crate::backend::cuda::rng::bernoulli_scalar(ord, self.shape(), self.dtype(), p);
            }
        }
        let u = with_default_generator(|g| g.uniform(self.numel()));
        let v = u.into_iter().map(|u| if u < p { 1.0 } else { 0.0 }).collect();
        from_f64("bernoulli", v, self.shape(), self.dtype(), self.device())
    }
    /// `torch.multinomial(probs, num_samples, replacement)`: indices sampled from each row of weights.
    pub fn multinomial(&self, num_samples: usize, replacement: bool) -> Result<Tensor> {
        let op = "multinomial";
        need_float(op, self.dtype())?;
        if self.ndim() == 0 || self.ndim() > 2 {
            return Err(Error::shape(op, format!("prob_dist must be 1 or 2 dim, got {}", self.ndim())));
        }
        let (rows, cats) = if self.ndim() == 1 { (1, self.shape()[0]) } else { (self.shape()[0], self.shape()[1]) };
        if cats == 0 {
            return Err(Error::value(op, "number of categories cannot be zero"));
        }
        if !replacement && num_samples > cats {
            return Err(Error::value(op, "cannot sample n_sample > prob_dist.size(-1) samples without replacement"));
        }
        if self.device().is_cuda() {
            return multinomial_device(self, rows, cats, num_samples, replacement);
        }
        let w: Vec<f64> = self.to_vec()?;
        if w.iter().any(|&x| !x.is_finite() || x < 0.0) {
            return Err(Error::value(op, "probability tensor contains either `inf`, `nan` or element < 0"));
        }
        let mut out = Vec::with_capacity(rows * num_samples);
        for r in 0..rows {
            let mut row = w[r * cats..(r + 1) * cats].to_vec();
            if row.iter().sum::<f64>() <= 0.0 {
                return Err(Error::value(op, "invalid multinomial distribution (sum of probabilities <= 0)"));
            }
            let u = with_default_generator(|g| g.uniform(num_samples));
            for &ui in &u {
                let total: f64 = row.iter().sum();
                let target = ui * total;
                let mut acc = 0.0;
                let mut pick = cats - 1;
                for (i, &p) in row.iter().enumerate() {
                    acc += p;
                    if target < acc && p > 0.0 {
                        pick = i;
                        break;
                    }
                }
                while row[pick] <= 0.0 && pick > 0 {
                    pick -= 1;
                }
                out.push(pick as i64);
                if !replacement {
                    row[pick] = 0.0;
                }
            }
        }
        let shape: Vec<usize> = if self.ndim() == 1 { vec![num_samples] } else { vec![rows, num_samples] };
        Tensor::from_vec(out, &shape)
    }
}

/// `multinomial` drawn on the weights' device from native ops, in f64: with replacement, each
/// draw `u * total` counts the cumulative sums at or below it (the first category whose cumulative
/// sum passes it, as the CPU loop); without replacement, the exponential race (each category's key
/// is `Exp(1) / w`; the `n` smallest keys are a draw without replacement with probabilities
/// proportional to `w`, zero weights last), taken by `topk`. Checking the weights reads two counts
/// back, as PyTorch's checks synchronize too.
fn multinomial_device(p: &Tensor, rows: usize, cats: usize, n: usize, replacement: bool) -> Result<Tensor> {
    let op = "multinomial";
    let _ng = crate::autograd::no_grad();
    let dev = p.device();
    let w = p.detach().to_dtype(DType::F64)?.reshape(&[rows as i64, cats as i64])?;
    let count = |m: Tensor| -> Result<i64> { Ok(m.to_dtype(DType::I64)?.sum()?.item()?.to_i64()) };
    if count(w.isfinite()?.logical_not()?.logical_or(&w.lt_scalar(0)?)?)? != 0 {
        return Err(Error::value(op, "probability tensor contains either `inf`, `nan` or element < 0"));
    }
    if count(w.sum_dims(Some(&[1]), false, None)?.le_scalar(0)?)? != 0 {
        return Err(Error::value(op, "invalid multinomial distribution (sum of probabilities <= 0)"));
    }
    let idx = if n == 0 {
        Tensor::zeros_on(&[rows, 0], DType::I64, dev)?
    } else if replacement {
        let cdf = w.cumsum(1, None)?;
        let total = cdf.narrow(1, cats as i64 - 1, 1)?;
        let u = Tensor::rand_on(&[rows, n], DType::F64, dev)?.mul(&total)?;
        let below = cdf.unsqueeze(1)?.le(&u.unsqueeze(2)?)?;
        // u * total rounding up to total would count every category
        below.sum_dims(Some(&[2]), false, Some(DType::I64))?.clamp_max(cats as i64 - 1)?
    } else {
        let e = Tensor::rand_on(&[rows, cats], DType::F64, dev)?.neg()?.log1p()?.neg()?;
        e.div(&w)?.topk(n as i64, 1, false)?.1
    };
    if p.ndim() == 1 {
        idx.reshape(&[n as i64])?.contiguous()
    } else {
        idx.contiguous()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn reproducible_and_roughly_uniform() {
        let mut a = Generator::new(7);
        let mut b = Generator::new(7);
        assert_eq!(a.next_u32(9), b.next_u32(9));
        let u = a.uniform(20000);
        let mean = u.iter().sum::<f64>() / u.len() as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        let z = a.normal(20000);
        let var = z.iter().map(|x| x * x).sum::<f64>() / z.len() as f64;
        assert!((var - 1.0).abs() < 0.05, "{var}");
    }
}
