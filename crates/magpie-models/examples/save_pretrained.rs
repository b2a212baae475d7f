//! Loads a Hugging Face folder and saves it again with `save_pretrained`, optionally in another
//! dtype: `cargo run --release -p magpie-models --example save_pretrained -- IN_DIR OUT_DIR [bfloat16]`.
//! (`scripts/fixtures/check_hf_roundtrip.py` then checks that transformers loads OUT_DIR.)

use magpie_core::DType;
use magpie_models::auto::AutoModel;
use magpie_models::hub::LoadOptions;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(input), Some(output)) = (args.first(), args.get(1)) else {
        eprintln!("usage: save_pretrained IN_DIR OUT_DIR [float32|bfloat16|float16]");
        std::process::exit(2);
    };
    let dtype = match args.get(2).map(String::as_str) {
        None | Some("float32") => DType::F32,
        Some("bfloat16") => DType::BF16,
        Some("float16") => DType::F16,
        Some(o) => {
            eprintln!("save_pretrained: unknown dtype {o}");
            std::process::exit(2);
        }
    };
    let res = AutoModel::from_pretrained(input, &LoadOptions { dtype, ..LoadOptions::default() }).and_then(|m| m.save_pretrained(output));
    if let Err(e) = res {
        eprintln!("save_pretrained: {e}");
        std::process::exit(1);
    }
}
