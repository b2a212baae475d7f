//! Logits processors as transformers applies them, on one row of host logits: repetition penalty,
//! then (when sampling) temperature, top-k and top-p, then a draw from the softmax.

use magpie_core::ops::random::Generator;

/// `RepetitionPenaltyLogitsProcessor`: every token already in `seen` has its logit divided by
/// `penalty` when positive, multiplied when negative.
pub fn repetition_penalty(logits: &mut [f32], seen: &[u32], penalty: f64) {
    if penalty == 1.0 {
        return;
    }
    let p = penalty as f32;
    let mut done = vec![false; logits.len()];
    for &id in seen {
        let i = id as usize;
        if i < logits.len() && !done[i] {
            done[i] = true;
            logits[i] = if logits[i] < 0.0 { logits[i] * p } else { logits[i] / p };
        }
    }
}

/// The index of the largest logit (the first one on ties, as `argmax`).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = (0usize, f32::NEG_INFINITY);
    for (i, &v) in logits.iter().enumerate() {
        if v > best.1 || (best.1 == f32::NEG_INFINITY && i == 0) {
            best = (i, v);
        }
    }
    best.0 as u32
}

/// Sampling settings for one draw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Warpers {
    /// > 0.
    pub temperature: f64,
    /// Keep the `k` most likely tokens.
    pub top_k: Option<usize>,
    /// Keep the smallest set of most likely tokens whose probability reaches `p` (in (0, 1]).
    pub top_p: Option<f64>,
}

/// Temperature, top-k and top-p, then one draw from `gen`: the candidates' probabilities in f64,
/// sorted by logit (ties by id, so the draw is deterministic for a seed).
pub fn sample(logits: &[f32], w: &Warpers, gen: &mut Generator) -> u32 {
    let mut idx: Vec<usize> = (0..logits.len()).filter(|&i| logits[i] > f32::NEG_INFINITY).collect();
    if idx.is_empty() {
        return argmax(logits);
    }
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    if let Some(k) = w.top_k {
        idx.truncate(k.max(1));
    }
    let m = logits[idx[0]] as f64;
    let mut p: Vec<f64> = idx.iter().map(|&i| ((logits[i] as f64 - m) / w.temperature).exp()).collect();
    let z: f64 = p.iter().sum();
    p.iter_mut().for_each(|v| *v /= z);
    if let Some(top_p) = w.top_p {
        let mut acc = 0.0;
        let mut keep = p.len();
        for (j, v) in p.iter().enumerate() {
            acc += v;
            if acc >= top_p {
                keep = j + 1;
                break;
            }
        }
        p.truncate(keep);
        idx.truncate(keep);
        let z: f64 = p.iter().sum();
        p.iter_mut().for_each(|v| *v /= z);
    }
    let u = gen.uniform(1)[0];
    let mut acc = 0.0;
    for (j, v) in p.iter().enumerate() {
        acc += v;
        if u < acc {
            return idx[j] as u32;
        }
    }
    idx[p.len() - 1] as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn penalty_divides_positive_and_multiplies_negative_once() {
        let mut l = vec![2.0f32, -2.0, 1.0];
        repetition_penalty(&mut l, &[0, 1, 0], 2.0);
        assert_eq!(l, vec![1.0, -4.0, 1.0]);
    }

    #[test]
    fn top_k_one_is_argmax_and_top_p_keeps_the_crossing_token() {
        let mut g = Generator::new(3);
        let l = [0.1f32, 3.0, 2.9, -1.0];
        for _ in 0..20 {
            assert_eq!(sample(&l, &Warpers { temperature: 1.0, top_k: Some(1), top_p: None }, &mut g), 1);
        }
        // p(1) ≈ 0.51 < 0.6: token 2 must stay in, token 0 and 3 never drawn
        let mut seen = [0; 4];
        for _ in 0..400 {
            seen[sample(&l, &Warpers { temperature: 1.0, top_k: None, top_p: Some(0.6) }, &mut g) as usize] += 1;
        }
        assert!(seen[1] > 100 && seen[2] > 100 && seen[0] == 0 && seen[3] == 0, "{seen:?}");
    }

    #[test]
    fn argmax_takes_the_first_of_ties() {
        assert_eq!(argmax(&[1.0, 5.0, 5.0]), 1);
        assert_eq!(argmax(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), 0);
    }
}
