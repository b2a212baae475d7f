//! What the PyTorch fixture cannot pin down: CTC's gradient against finite differences,
//! dropout statistics (our RNG differs from PyTorch's), batch-norm bookkeeping, init
//! distributions, and layer argument checks.

use magpie_core::autograd::{gradcheck, GradcheckOptions};
use magpie_core::ops::nn::{ctc_loss, Reduction};
use magpie_core::{DType, Result, Tensor};
use magpie_nn::init;
use magpie_nn::*;

fn f64_leaf(shape: &[usize], seed: u64) -> Result<Tensor> {
    magpie_core::ops::random::manual_seed(seed);
    Tensor::randn(shape)?.to_dtype(DType::F64)?.with_requires_grad()
}

#[test]
fn ctc_gradient_matches_finite_differences() -> Result<()> {
    // through log_softmax, as PyTorch's gradient is defined for; padded and concatenated targets,
    // repeated labels (which force a blank between them) and a shorter input length
    let x = f64_leaf(&[6, 2, 4], 7)?;
    let targets = Tensor::from_vec(vec![1i64, 1, 2, 3, 2, 0], &[2, 3])?;
    for r in [Reduction::Sum, Reduction::Mean, Reduction::None] {
        let f = |xs: &[Tensor]| Ok(vec![ctc_loss(&xs[0].log_softmax(2, None)?, &targets, &[6, 5], &[3, 2], 0, r, false)?]);
        gradcheck(f, &[x.clone()], &GradcheckOptions::default())?;
    }
    let flat = Tensor::from_vec(vec![1i64, 1, 2, 3, 2], &[5])?;
    let f = |xs: &[Tensor]| Ok(vec![ctc_loss(&xs[0].log_softmax(2, None)?, &flat, &[6, 4], &[3, 2], 3, Reduction::Sum, false)?]);
    gradcheck(f, &[x], &GradcheckOptions::default())?;
    Ok(())
}

#[test]
fn ctc_brute_force_small_case() -> Result<()> {
    // T = 3, C = 3 (blank 0), target [1]: sum over the paths that collapse to [1]
    let p = [[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]];
    let mut total = 0.0;
    for a in 0..3 {
        for b in 0..3 {
            for c in 0..3 {
                let path = [a, b, c];
                let mut collapsed: Vec<usize> = Vec::new();
                let mut prev = usize::MAX;
                for &s in &path {
                    if s != prev && s != 0 {
                        collapsed.push(s);
                    }
                    prev = s;
                }
                if collapsed == [1] {
                    total += p[0][a] * p[1][b] * p[2][c];
                }
            }
        }
    }
    let lp: Vec<f64> = p.iter().flatten().map(|v: &f64| v.ln()).collect();
    let lp = Tensor::from_vec(lp, &[3, 1, 3])?;
    let l = ctc_loss(&lp, &Tensor::from_vec(vec![1i64], &[1, 1])?, &[3], &[1], 0, Reduction::Sum, false)?;
    assert!((l.item()?.to_f64() + total.ln()).abs() < 1e-12);
    // an impossible alignment is inf, or 0 with zero_infinity
    let tg = Tensor::from_vec(vec![1i64, 1, 1], &[1, 3])?;
    let inf = ctc_loss(&lp, &tg, &[3], &[3], 0, Reduction::Sum, false)?;
    assert!(inf.item()?.to_f64().is_infinite());
    let z = ctc_loss(&lp, &tg, &[3], &[3], 0, Reduction::Sum, true)?;
    assert_eq!(z.item()?.to_f64(), 0.0);
    // bad arguments are errors, not panics
    assert!(ctc_loss(&lp, &tg, &[4], &[3], 0, Reduction::Sum, false).is_err());
    assert!(ctc_loss(&lp, &tg, &[3], &[4], 0, Reduction::Sum, false).is_err());
    assert!(ctc_loss(&lp, &Tensor::from_vec(vec![5i64], &[1, 1])?, &[3], &[1], 0, Reduction::Sum, false).is_err());
    assert!(ctc_loss(&lp, &tg, &[3], &[3], 3, Reduction::Sum, false).is_err());
    Ok(())
}

#[test]
fn channel_dropout_zeroes_whole_channels() -> Result<()> {
    magpie_core::ops::random::manual_seed(3);
    let d = Dropout2d::new(0.5)?;
    let y = d.forward(&Tensor::ones(&[50, 8, 3, 3])?)?;
    let v: Vec<f32> = y.to_vec()?;
    let mut zeros = 0;
    for ch in v.chunks(9) {
        // every channel is all 0 or all 1 / (1 - p) = 2
        assert!(ch.iter().all(|&x| x == 0.0) || ch.iter().all(|&x| x == 2.0));
        zeros += (ch[0] == 0.0) as usize;
    }
    let frac = zeros as f64 / 400.0;
    assert!((frac - 0.5).abs() < 0.1, "dropped fraction {frac}");
    let mut d1 = Dropout1d::new(0.3)?;
    let y = d1.forward(&Tensor::ones(&[4, 5])?)?; // unbatched [C, L]
    for row in y.to_vec::<f32>()?.chunks(5) {
        assert!(row.iter().all(|&x| x == row[0]));
    }
    d1.eval();
    let x = Tensor::randn(&[2, 3, 4])?;
    assert_eq!(d1.forward(&x)?.to_vec::<f32>()?, x.to_vec::<f32>()?);
    // alpha dropout keeps mean 0 and variance 1 of standard normal input
    let a = AlphaDropout::new(0.2)?;
    let y = a.forward(&Tensor::randn(&[20000])?)?;
    let v: Vec<f32> = y.to_vec()?;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64;
    assert!(mean.abs() < 0.05 && (var - 1.0).abs() < 0.1, "mean {mean} var {var}");
    Ok(())
}

#[test]
fn batch_norm_counts_batches_and_uses_running_stats_in_eval() -> Result<()> {
    let mut bn = BatchNorm1d::new(2, 1e-5, None, true, true)?;
    let names: Vec<String> = bn.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["running_mean", "running_var", "num_batches_tracked"]);
    let a = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2])?;
    let b = Tensor::from_vec(vec![5f32, 6., 7., 10.], &[2, 2])?;
    bn.forward(&a)?;
    bn.forward(&b)?;
    assert_eq!(bn.num_batches_tracked.as_ref().unwrap().to_vec::<i64>()?, [2]);
    // momentum None: the cumulative average of the batch means (2, 3) and (6, 8)
    assert_eq!(bn.running_mean.as_ref().unwrap().to_vec::<f32>()?, [4.0, 5.5]);
    bn.eval();
    let y = bn.forward(&Tensor::from_vec(vec![4f32, 5.5], &[1, 2])?)?;
    assert!(y.to_vec::<f32>()?.iter().all(|v| v.abs() < 1e-6));
    assert_eq!(bn.num_batches_tracked.as_ref().unwrap().to_vec::<i64>()?, [2]);
    // a training batch of one sample per channel is an error, as in PyTorch
    bn.train(true);
    assert!(bn.forward(&Tensor::ones(&[1, 2])?).is_err());
    assert!(BatchNorm2d::with_features(2)?.forward(&Tensor::ones(&[2, 2, 3])?).is_err());
    Ok(())
}

#[test]
fn trunc_normal_and_orthogonal() -> Result<()> {
    magpie_core::ops::random::manual_seed(1);
    let t = Tensor::zeros(&[20000])?;
    init::trunc_normal_(&t, 0.5, 1.0, -0.5, 1.0)?;
    let v: Vec<f32> = t.to_vec()?;
    assert!(v.iter().all(|&x| (-0.5..=1.0).contains(&x)));
    // the mean of a truncated normal: mu + sigma (pdf(alpha) - pdf(beta)) / (cdf(beta) - cdf(alpha))
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
    let want = 0.5 + (pdf(-1.0) - pdf(0.5)) / (cdf(0.5) - cdf(-1.0));
    assert!((mean - want).abs() < 0.01, "mean {mean}, expected {want}");
    for shape in [[3usize, 5], [5, 3], [4, 4]] {
        let w = Tensor::zeros(&shape)?;
        init::orthogonal_(&w, 2.0)?;
        let (r, c) = (shape[0], shape[1]);
        let wv: Vec<f32> = w.to_vec()?;
        // rows orthogonal when r <= c, columns when r >= c, each with norm gain
        let k = r.min(c);
        for i in 0..k {
            for j in 0..k {
                let dot: f64 = if r <= c {
                    (0..c).map(|m| wv[i * c + m] as f64 * wv[j * c + m] as f64).sum()
                } else {
                    (0..r).map(|m| wv[m * c + i] as f64 * wv[m * c + j] as f64).sum()
                };
                let want = if i == j { 4.0 } else { 0.0 };
                assert!((dot - want).abs() < 1e-4, "{shape:?} ({i},{j}) {dot}");
            }
        }
    }
    Ok(())
}

fn pdf(x: f64) -> f64 {
    (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt()
}
fn cdf(x: f64) -> f64 {
    (1.0 + magpie_core::ops::special::erf::erf(x / std::f64::consts::SQRT_2)) / 2.0
}

#[test]
fn conv_layers_shapes_and_checks() -> Result<()> {
    let c = Conv2d::new(4, 8, &[3], ConvOptions::default().stride(&[2]).padding(&[1]).groups(2))?;
    assert_eq!(c.weight.shape(), &[8, 2, 3, 3]);
    assert_eq!(c.forward(&Tensor::randn(&[1, 4, 9, 9])?)?.shape(), &[1, 8, 5, 5]);
    assert!(Conv2d::new(3, 8, &[3], ConvOptions::default().groups(2)).is_err());
    assert!(Conv1d::new(2, 2, &[3], ConvOptions::default().stride(&[2]).padding_kind(ConvPadding::Same)).is_err());
    assert!(Conv1d::new(2, 2, &[3, 3], ConvOptions::default()).is_err());
    let t = ConvTranspose2d::new(2, 3, &[3], ConvOptions::default().stride(&[2]))?;
    let x = Tensor::randn(&[1, 2, 4, 4])?;
    assert_eq!(t.forward(&x)?.shape(), &[1, 3, 9, 9]);
    assert_eq!(t.forward_with_output_size(&x, &[10, 10])?.shape(), &[1, 3, 10, 10]);
    assert!(t.forward_with_output_size(&x, &[12, 12]).is_err());
    // PyTorch's init bound: U(±1/sqrt(fan_in))
    let fan_in = 2.0 * 9.0;
    let b: Vec<f32> = c.bias.as_ref().unwrap().to_vec()?;
    assert!(b.iter().all(|&v| (v as f64).abs() <= 1.0 / (fan_in as f64).sqrt()));
    Ok(())
}

#[test]
fn multi_input_modules_reject_wrong_arity() -> Result<()> {
    let bl = Bilinear::new(2, 3, 4, true)?;
    assert!(bl.forward(&Tensor::ones(&[1, 2])?).is_err());
    assert!(bl.forward_many(&[&Tensor::ones(&[1, 2])?]).is_err());
    let ce = loss::CrossEntropyLoss::default();
    assert!(ce.forward(&Tensor::ones(&[1, 2])?).is_err());
    let names: Vec<String> = loss::BCEWithLogitsLoss { pos_weight: Some(Tensor::ones(&[3])?), ..Default::default() }.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["pos_weight"]);
    Ok(())
}
