//! BERT masked-language-model training: the masking follows transformers' collator (rates,
//! specials never selected, labels), is deterministic, the loss falls below the unigram baseline,
//! resuming is bit-identical, and a checkpoint folder loads back as a `BertForMaskedLM`.

use magpie_core::ops::random::Generator;
use magpie_core::Tensor;
use magpie_models::auto::{AutoModel, ModelKind};
use magpie_models::bert::BertForMaskedLM;
use magpie_models::bert_mlm::bert_config;
use magpie_models::data::{Dataset, Split};
use magpie_models::hub::LoadOptions;
use magpie_models::mlm::{mask_tokens, mlm_batch, MaskConfig, MlmSpec, IGNORE_INDEX};
use magpie_models::mlm_vocab::MlmTokenizer;
use magpie_models::train_model::TrainModel;
use magpie_models::trainer::{corpus_id, BertTrainer, TrainConfig, Trainer};
use magpie_nn::ModuleExt;

/// The default generator is process-wide: tests that draw from it take turns.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

const TEXT: &str = "fn main() { let x = 1 + 2; println!(\"{x}\"); }\n// the quick brown fox jumps over the lazy dog\n";

fn setup(dropout: f64, steps: usize) -> (Dataset, MlmTokenizer, magpie_models::config::BertConfig, TrainConfig) {
    let text = TEXT.repeat(30);
    let tok = MlmTokenizer::fit_chars(&text).unwrap();
    let ids = tok.encode(&text).unwrap();
    let mcfg = bert_config(tok.vocab_size(), 24, 2, 2, 32, dropout).unwrap();
    let tcfg = TrainConfig { steps, batch_size: 8, lr: 3e-3, warmup_steps: 2, eval_iters: 2, seed: 7, ..Default::default() };
    (Dataset::new(ids, 0.1, 22).unwrap(), tok, mcfg, tcfg)
}

#[test]
fn masking_matches_the_collator_rates_and_is_deterministic() {
    let n = 200_000;
    let orig: Vec<i64> = (0..n as i64).map(|i| 5 + i % 50).collect();
    // every 10th position special ([CLS]/[SEP]-like): never selected
    let special: Vec<bool> = (0..n).map(|i| i % 10 == 0).collect();
    let mut ids = orig.clone();
    let labels = mask_tokens(&mut ids, &special, 55, 4, MaskConfig::default(), &mut Generator::new(3)).unwrap();
    let (mut sel, mut masked, mut random, mut kept) = (0usize, 0usize, 0usize, 0usize);
    for i in 0..n {
        if labels[i] == IGNORE_INDEX {
            assert_eq!(ids[i], orig[i], "an unselected position changed");
            continue;
        }
        assert!(!special[i], "a special position was selected");
        assert_eq!(labels[i], orig[i]);
        sel += 1;
        if ids[i] == 4 {
            masked += 1;
        } else if ids[i] == orig[i] {
            kept += 1;
        } else {
            random += 1;
            assert!((0..55).contains(&ids[i]));
        }
    }
    let eligible = special.iter().filter(|s| !**s).count() as f64;
    let rate = sel as f64 / eligible;
    assert!((rate - 0.15).abs() < 0.005, "selection rate {rate}");
    let s = sel as f64;
    assert!((masked as f64 / s - 0.8).abs() < 0.01, "[MASK] share {}", masked as f64 / s);
    // a random draw may pick the original token (1 in 55): it then counts as kept
    assert!((random as f64 / s - 0.1 * 54.0 / 55.0).abs() < 0.01, "random share {}", random as f64 / s);
    assert!((kept as f64 / s - 0.1 - 0.1 / 55.0).abs() < 0.01, "kept share {}", kept as f64 / s);
    // same generator state, same masks
    let mut again = orig.clone();
    assert_eq!(mask_tokens(&mut again, &special, 55, 4, MaskConfig::default(), &mut Generator::new(3)).unwrap(), labels);
    assert_eq!(again, ids);
    let mut other = orig.clone();
    assert_ne!(mask_tokens(&mut other, &special, 55, 4, MaskConfig::default(), &mut Generator::new(4)).unwrap(), labels);
    // a batch with nothing selected still predicts one token
    let mut one = vec![7i64, 8, 9];
    let l = mask_tokens(&mut one, &[true, false, true], 10, 4, MaskConfig { mlm_probability: 0.0, ..MaskConfig::default() }, &mut Generator::new(1)).unwrap();
    assert_eq!((l, one), (vec![IGNORE_INDEX, 8, IGNORE_INDEX], vec![7, 4, 9]));
    assert!(mask_tokens(&mut [1i64], &[], 10, 4, MaskConfig::default(), &mut Generator::new(1)).is_err());
}

#[test]
fn batches_are_cls_window_sep_and_fixed_per_seed() {
    let (data, tok, _, _) = setup(0.0, 1);
    let sp = tok.special();
    let b = mlm_batch(&data, &mut Generator::new(5), Split::Val, 4, 24, MlmSpec { vocab_size: tok.vocab_size(), special: sp, rates: MaskConfig::default() }).unwrap();
    assert_eq!(b.input_ids.shape(), [4, 24]);
    let ids = b.input_ids.to_vec::<i64>().unwrap();
    let labels = b.labels.to_vec::<i64>().unwrap();
    for r in 0..4 {
        assert_eq!(ids[r * 24], sp.cls as i64);
        assert_eq!(ids[r * 24 + 23], sp.sep as i64);
        assert_eq!((labels[r * 24], labels[r * 24 + 23]), (IGNORE_INDEX, IGNORE_INDEX));
    }
    assert!(labels.iter().any(|&l| l != IGNORE_INDEX));
    let again = mlm_batch(&data, &mut Generator::new(5), Split::Val, 4, 24, MlmSpec { vocab_size: tok.vocab_size(), special: sp, rates: MaskConfig::default() }).unwrap();
    assert_eq!(again.input_ids.to_vec::<i64>().unwrap(), ids);
    assert_eq!(again.labels.to_vec::<i64>().unwrap(), labels);
}

#[test]
fn loss_falls_below_the_unigram_baseline() {
    let _l = lock();
    let (data, tok, mcfg, tcfg) = setup(0.0, 60);
    let baseline = data.unigram_entropy(tok.vocab_size());
    let mut t = Trainer::<BertForMaskedLM>::start(mcfg, tcfg, tok, corpus_id(&data.train)).unwrap();
    let first = t.evaluate_full(&data, Split::Val).unwrap();
    for _ in 0..60 {
        assert!(t.train_step(&data).unwrap().is_finite());
    }
    let last = t.evaluate_full(&data, Split::Val).unwrap();
    assert!(last.loss < baseline, "val loss {} not below the unigram baseline {baseline} (started at {})", last.loss, first.loss);
    assert!(last.accuracy.unwrap() > first.accuracy.unwrap(), "{first:?} -> {last:?}");
}

fn params(t: &BertTrainer) -> Vec<(String, Vec<f32>)> {
    t.model.state_dict().into_iter().map(|(n, p)| (n, p.to_vec::<f32>().unwrap())).collect()
}

#[test]
fn resume_is_bit_identical_and_the_checkpoint_is_a_transformers_folder() {
    let _l = lock();
    // dropout > 0 so the default generator's state matters for the resume
    let (data, tok, mcfg, tcfg) = setup(0.1, 6);
    let id = corpus_id(&data.train);
    let mut a = BertTrainer::start(mcfg.clone(), tcfg.clone(), tok.clone(), id).unwrap();
    let losses_a: Vec<f32> = (0..6).map(|_| a.train_step(&data).unwrap()).collect();
    let val_a = a.evaluate_full(&data, Split::Val).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let mut b = BertTrainer::start(mcfg.clone(), tcfg.clone(), tok.clone(), id).unwrap();
    let mut losses_b: Vec<f32> = (0..3).map(|_| b.train_step(&data).unwrap()).collect();
    b.save(&ck).unwrap();
    drop(b);
    magpie_core::ops::random::manual_seed(999);
    let _ = Tensor::randn(&[100]).unwrap();
    let mut c = BertTrainer::resume(&ck, Some(id)).unwrap();
    assert_eq!(c.step, 3);
    losses_b.extend((0..3).map(|_| c.train_step(&data).unwrap()));
    assert_eq!(losses_a, losses_b, "losses differ after resume");
    assert_eq!(params(&a), params(&c), "parameters differ after resume");
    assert_eq!(val_a, c.evaluate_full(&data, Split::Val).unwrap());

    // a GPT trainer refuses the BERT checkpoint by name
    let e = Trainer::load(&ck, None).err().unwrap().to_string();
    assert!(e.contains("holds a bert model"), "{e}");

    // the folder loads as transformers' BertForMaskedLM, with the same logits
    let end = dir.path().join("end");
    c.save(&end).unwrap();
    let names: Vec<String> = c.model.state_dict().into_iter().map(|(n, _)| n).collect();
    assert!(names.contains(&"bert.embeddings.word_embeddings.weight".to_string()) && names.contains(&"cls.predictions.bias".to_string()), "{names:?}");
    let m = AutoModel::from_pretrained(&end, &LoadOptions::default()).unwrap();
    assert!(matches!(m.kind, ModelKind::BertForMaskedLM(_)));
    let x = mlm_batch(&data, &mut Generator::new(1), Split::Val, 2, 24, MlmSpec { vocab_size: tok.vocab_size(), special: tok.special(), rates: MaskConfig::default() }).unwrap().input_ids;
    c.model.eval();
    let want = c.model.mlm_logits(&x).unwrap().to_vec::<f32>().unwrap();
    let got = m.forward(&x, None, None, false).unwrap().logits.unwrap().to_vec::<f32>().unwrap();
    assert_eq!(want, got);
    assert_eq!(<BertForMaskedLM as TrainModel>::KIND, "bert");
}

#[test]
fn wordpiece_vocabulary_trains_and_round_trips() {
    let _l = lock();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/wordpiece/tokenizer.json");
    // with a truncation like all-MiniLM's (128 tokens), which must not cut the corpus
    let json = std::fs::read_to_string(path).unwrap().replace("\"truncation\": null", "\"truncation\": {\"direction\": \"Right\", \"max_length\": 8, \"strategy\": \"LongestFirst\", \"stride\": 0}");
    assert_eq!(MlmTokenizer::wordpiece(json, "t").unwrap().encode("the quick brown fox jumps over the lazy dog . hello").unwrap().len(), 11);
    let tok = MlmTokenizer::wordpiece_file(std::path::Path::new(path)).unwrap();
    assert_eq!(tok.special(), magpie_models::mlm_vocab::SpecialIds { pad: 0, cls: 2, sep: 3, mask: 4 });
    let text = "the quick brown fox jumps over the lazy dog. hello magpie! ".repeat(40);
    let ids = tok.encode(&text).unwrap();
    assert!(ids.len() < text.len() / 2, "words should be single tokens");
    let mcfg = bert_config(tok.vocab_size(), 16, 1, 2, 16, 0.0).unwrap();
    let tcfg = TrainConfig { steps: 4, batch_size: 4, warmup_steps: 1, eval_iters: 1, seed: 2, ..Default::default() };
    let data = Dataset::new(ids.clone(), 0.1, 14).unwrap();
    let mut t = BertTrainer::start(mcfg, tcfg, tok, corpus_id(&ids)).unwrap();
    for _ in 0..4 {
        assert!(t.train_step(&data).unwrap().is_finite());
    }
    let dir = tempfile::tempdir().unwrap();
    t.save(&dir.path().join("ck")).unwrap();
    // the checkpoint keeps the tokenizer.json as given
    let saved = std::fs::read_to_string(dir.path().join("ck/tokenizer.json")).unwrap();
    assert_eq!(saved, std::fs::read_to_string(path).unwrap());
    assert!(BertTrainer::resume(&dir.path().join("ck"), Some(corpus_id(&ids))).is_ok());
    // a tokenizer without [MASK] is refused by name
    let bad = saved.replace("[MASK]", "[MASQUE]");
    let e = MlmTokenizer::wordpiece(bad, "x.json").err().unwrap().to_string();
    assert!(e.contains("no [MASK] token"), "{e}");
}
