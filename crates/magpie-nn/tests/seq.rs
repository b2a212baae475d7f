//! Behaviour of the sequence modules that a PyTorch fixture cannot pin down (dropout is random):
//! dropout acts only in training, and where PyTorch applies it.

use magpie_core::{Result, Tensor};
use magpie_nn::*;

fn vals(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn attention_dropout_only_in_training() -> Result<()> {
    let mut m = MultiheadAttention::with_options(8, 2, &MhaOptions { dropout: 0.9, ..Default::default() })?;
    let x = Tensor::randn(&[5, 3, 8])?;
    let args = MhaArgs { average_attn_weights: false, ..Default::default() };
    // training: most weights dropped, the kept ones scaled by 1/(1-p) = 10
    let w = m.forward(&x, &x, &x, &args)?.1.unwrap();
    let v = vals(&w);
    let zeros = v.iter().filter(|&&a| a == 0.0).count();
    assert!(zeros > v.len() / 2, "{zeros} of {}", v.len());
    assert!(v.iter().any(|&a| a > 1.0));
    // eval: a probability distribution per query
    m.eval();
    let w = m.forward(&x, &x, &x, &args)?.1.unwrap();
    let sums = vals(&w.sum_dims(Some(&[-1]), false, None)?);
    assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-5));
    // eval through the SDPA path equals the explicit path
    let a = m.forward(&x, &x, &x, &MhaArgs { need_weights: false, ..Default::default() })?.0;
    let b = m.forward(&x, &x, &x, &MhaArgs::default())?.0;
    for (p, q) in vals(&a).iter().zip(vals(&b)) {
        assert!((p - q).abs() < 1e-5);
    }
    Ok(())
}

#[test]
fn rnn_dropout_between_layers_only() -> Result<()> {
    // p = 1 zeroes the first layer's output, so in training the second layer sees only zeros
    let mut m = LSTM::new(3, 4, &RnnOptions { num_layers: 2, dropout: 1.0, ..Default::default() })?;
    let (x1, x2) = (Tensor::randn(&[4, 2, 3])?, Tensor::randn(&[4, 2, 3])?);
    let (o1, o2) = (m.forward(&x1, None)?.0, m.forward(&x2, None)?.0);
    assert_eq!(vals(&o1), vals(&o2));
    m.eval();
    let (o1, o2) = (m.forward(&x1, None)?.0, m.forward(&x2, None)?.0);
    assert_ne!(vals(&o1), vals(&o2));
    // a single layer has nothing to drop
    let mut one = GRU::new(3, 4, &RnnOptions { dropout: 1.0, ..Default::default() })?;
    let a = one.forward(&x1, None)?.0;
    one.eval();
    assert_eq!(vals(&a), vals(&one.forward(&x1, None)?.0));
    Ok(())
}

#[test]
fn encoder_layer_dropout_follows_train_eval() -> Result<()> {
    let o = TransformerOptions { dim_feedforward: 16, dropout: 0.5, ..Default::default() };
    let mut enc = TransformerEncoder::new(&TransformerEncoderLayer::new(8, 2, &o)?, 2, None)?;
    let x = Tensor::randn(&[4, 2, 8])?;
    assert_ne!(vals(&enc.forward(&x)?), vals(&enc.forward(&x)?));
    enc.eval();
    let modules = enc.named_modules();
    let flagged: Vec<_> = modules.iter().filter(|(_, m)| matches!(m.type_name(), "Dropout" | "MultiheadAttention")).collect();
    assert_eq!(flagged.len(), 2 * 4);
    assert!(flagged.iter().all(|(_, m)| !m.is_training()));
    assert_eq!(vals(&enc.forward(&x)?), vals(&enc.forward(&x)?));
    Ok(())
}
