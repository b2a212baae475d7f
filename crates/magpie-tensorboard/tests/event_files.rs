//! Event files: the TFRecord framing and CRCs checked by a decoder written here, PyTorch's own
//! event file (tests/fixtures, made by make_tensorboard_fixture.py) read back with the same values
//! and re-encoded byte for byte, and the loss plot's PNG.

use magpie_tensorboard::{default_bins, loss_plot, make_histogram, read_events, summary, SummaryWriter, Value, LOSS_PLOT_SIZE, TRAIN_COLOR, VAL_COLOR};
use std::path::{Path, PathBuf};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("magpie-tb-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// CRC-32C bit by bit (independent of the crate's table), masked as TFRecords store it.
fn masked_crc(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 == 1 { (c >> 1) ^ 0x82F6_3B78 } else { c >> 1 };
        }
    }
    let c = !c;
    ((c >> 15) | (c << 17)).wrapping_add(0xA282_EAD8)
}

/// The records of a file, checking the framing.
fn frames(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let len = u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap()) as usize;
        assert_eq!(u32::from_le_bytes(bytes[i + 8..i + 12].try_into().unwrap()), masked_crc(&bytes[i..i + 8]), "length CRC of record {}", out.len());
        let data = &bytes[i + 12..i + 12 + len];
        assert_eq!(u32::from_le_bytes(bytes[i + 12 + len..i + 16 + len].try_into().unwrap()), masked_crc(data), "data CRC of record {}", out.len());
        out.push(data.to_vec());
        i += 16 + len;
    }
    assert_eq!(i, bytes.len());
    out
}

/// A minimal protobuf field reader: (field, wire type, varint value or bytes).
fn pb(mut b: &[u8]) -> Vec<(u64, u8, u64, Vec<u8>)> {
    fn var(b: &mut &[u8]) -> u64 {
        let (mut v, mut s) = (0u64, 0);
        loop {
            let x = b[0];
            *b = &b[1..];
            v |= ((x & 0x7f) as u64) << s;
            s += 7;
            if x < 0x80 {
                return v;
            }
        }
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let k = var(&mut b);
        let (f, w) = (k >> 3, (k & 7) as u8);
        match w {
            0 => {
                let v = var(&mut b);
                out.push((f, w, v, vec![]));
            }
            1 => {
                out.push((f, w, 0, b[..8].to_vec()));
                b = &b[8..];
            }
            2 => {
                let n = var(&mut b) as usize;
                out.push((f, w, 0, b[..n].to_vec()));
                b = &b[n..];
            }
            5 => {
                out.push((f, w, 0, b[..4].to_vec()));
                b = &b[4..];
            }
            _ => panic!("wire type {w}"),
        }
    }
    out
}

fn field(fs: &[(u64, u8, u64, Vec<u8>)], f: u64) -> &(u64, u8, u64, Vec<u8>) {
    fs.iter().find(|x| x.0 == f).unwrap_or_else(|| panic!("no field {f}"))
}

fn event_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    v.sort();
    v
}

#[test]
fn framing_crcs_and_messages() {
    let dir = tmp("framing");
    let mut w = SummaryWriter::new(&dir).unwrap();
    w.add_scalar("Loss/train", 1.5, 7).unwrap();
    w.add_scalar("lr", 3e-4, 8).unwrap();
    w.add_text("cfg", "lr 3e-4", 9).unwrap();
    w.add_histogram("h", &magpie_core::Tensor::from_vec(vec![0.5f32, -2.0, 0.5, 3.0], &[4]).unwrap(), 10).unwrap();
    w.add_scalars("Loss", &[("train", 1.0), ("val", 2.0)], 11).unwrap();
    w.close().unwrap();

    let files = event_files(&dir);
    assert_eq!(files.len(), 1);
    let name = files[0].file_name().unwrap().to_string_lossy().to_string();
    let parts: Vec<&str> = name.split('.').collect();
    assert_eq!(&parts[..3], ["events", "out", "tfevents"], "{name}");
    assert_eq!(parts[3].len(), 10, "{name}");
    assert!(parts[3].parse::<u64>().unwrap() > 1_600_000_000);
    assert_eq!(parts[parts.len() - 2], std::process::id().to_string());

    let recs = frames(&std::fs::read(&files[0]).unwrap());
    assert_eq!(recs.len(), 5);
    let first = pb(&recs[0]);
    assert_eq!(first[0].0, 1, "wall_time comes first");
    let wall = f64::from_le_bytes(first[0].3.clone().try_into().unwrap());
    assert!(wall > 1.6e9);
    assert_eq!(field(&first, 3).3, b"brain.Event:2");

    let e = pb(&recs[1]);
    assert_eq!(field(&e, 2).2, 7);
    let value = pb(&field(&pb(&field(&e, 5).3), 1).3);
    assert_eq!(field(&value, 1).3, b"Loss/train");
    assert_eq!(f32::from_le_bytes(field(&value, 2).3.clone().try_into().unwrap()), 1.5);
    let lr = pb(&field(&pb(&field(&pb(&recs[2]), 5).3), 1).3);
    assert_eq!(f32::from_le_bytes(field(&lr, 2).3.clone().try_into().unwrap()), 3e-4f32);

    let text = pb(&field(&pb(&field(&pb(&recs[3]), 5).3), 1).3);
    assert_eq!(field(&text, 1).3, b"cfg/text_summary");
    let plugin = pb(&field(&pb(&field(&text, 9).3), 1).3);
    assert_eq!(field(&plugin, 1).3, b"text");
    let tensor = pb(&field(&text, 8).3);
    assert_eq!(field(&tensor, 1).2, 7, "DT_STRING");
    assert_eq!(field(&tensor, 8).3, b"lr 3e-4");

    let h = pb(&field(&pb(&field(&pb(&recs[4]), 5).3), 1).3);
    let hp = pb(&field(&h, 5).3);
    let d = |f: u64| f64::from_le_bytes(field(&hp, f).3.clone().try_into().unwrap());
    assert_eq!((d(1), d(2), d(3), d(4), d(5)), (-2.0, 3.0, 4.0, 2.0, 0.25 + 4.0 + 0.25 + 9.0));
    let counts: Vec<f64> = field(&hp, 7).3.chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(counts.iter().sum::<f64>(), 4.0);

    // the crate's reader agrees
    let evs = read_events(&files[0]).unwrap();
    assert_eq!(evs[0].file_version.as_deref(), Some("brain.Event:2"));
    assert_eq!(evs[1].values, vec![("Loss/train".to_string(), Value::Scalar(1.5))]);

    // add_scalars: one file per series in <main_tag>_<tag>, under the main tag
    for (sub, v) in [("Loss_train", 1.0f32), ("Loss_val", 2.0)] {
        let f = event_files(&dir.join(sub));
        assert_eq!(f.len(), 1, "{sub}");
        let evs = read_events(&f[0]).unwrap();
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[1].step, 11);
        assert_eq!(evs[1].values, vec![("Loss".to_string(), Value::Scalar(v))]);
    }

    // a corrupted byte is caught by the CRC
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let n = bytes.len();
    bytes[n - 6] ^= 1;
    let bad = dir.join("bad");
    std::fs::write(&bad, &bytes).unwrap();
    assert!(read_events(&bad).unwrap_err().to_string().contains("CRC"));
    std::fs::remove_dir_all(&dir).ok();
}

fn fixture() -> (PathBuf, serde_json::Value) {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("pytorch_events.json")).unwrap()).unwrap();
    (d.join("pytorch_events/events.out.tfevents.pytorch"), j)
}

#[test]
fn reads_pytorchs_event_file_with_the_same_values() {
    let (path, j) = fixture();
    let bytes = std::fs::read(&path).unwrap();
    let recs = frames(&bytes);
    let evs = read_events(&path).unwrap();
    assert_eq!(evs.len(), recs.len());
    assert_eq!(evs[0].file_version.as_deref(), Some("brain.Event:2"));

    let scalars: Vec<(i64, f32)> = evs.iter().flat_map(|e| e.values.iter().filter(|v| v.0 == "Loss/train").map(move |v| (e.step, v.1.clone()))).map(|(s, v)| match v {
        Value::Scalar(x) => (s, x),
        other => panic!("{other:?}"),
    }).collect();
    let want: Vec<(i64, f32)> = j["scalars"]["Loss/train"].as_array().unwrap().iter().map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap() as f32)).collect();
    assert_eq!(scalars, want);

    // our encoding of the same scalar and text events is PyTorch's, byte for byte
    let idx = |tag: &str| evs.iter().position(|e| e.values.iter().any(|v| v.0 == tag)).unwrap();
    let i = idx("Loss/train");
    let ours = summary::summary_event(evs[i].wall_time, evs[i].step, &summary::scalar_value("Loss/train", 2.5));
    assert_eq!(ours, recs[i]);
    let t = idx("notes/text_summary");
    let want_text = j["text"]["notes/text_summary"][1].as_str().unwrap();
    assert_eq!(evs[t].values[0].1, Value::Text { plugin: "text".into(), text: want_text.into() });
    assert_eq!(summary::summary_event(evs[t].wall_time, evs[t].step, &summary::text_value("notes", want_text)), recs[t]);

    // histograms: our buckets of the same values are PyTorch's
    let values: Vec<f64> = j["histogram_values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    for (tag, max_bins) in [("weights", None), ("weights_max_bins", Some(30))] {
        let k = idx(tag);
        let Value::Histogram(theirs) = &evs[k].values[0].1 else { panic!("{tag}") };
        let ours = make_histogram(&values, &default_bins(), max_bins).unwrap();
        assert_eq!(ours.bucket_limit, theirs.bucket_limit, "{tag}");
        assert_eq!(ours.bucket, theirs.bucket, "{tag}");
        assert_eq!((ours.min, ours.max, ours.num), (theirs.min, theirs.max, theirs.num), "{tag}");
        assert!((ours.sum - theirs.sum).abs() <= 1e-12 * theirs.sum_squares.sqrt() * values.len() as f64, "{tag}");
        assert!((ours.sum_squares - theirs.sum_squares).abs() <= 1e-12 * theirs.sum_squares, "{tag}");
        assert!(theirs.bucket.iter().sum::<f64>() == values.len() as f64);
    }
    assert!(make_histogram(&[], &default_bins(), None).unwrap_err().contains("no element"));
}

#[test]
fn loss_plot_draws_both_curves() {
    let dir = tmp("plot");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("loss.png");
    let train: Vec<(f64, f64)> = (1..=200).map(|s| (s as f64, 4.0 * (-(s as f64) / 60.0).exp() + 1.0 + 0.05 * ((s * 7) % 5) as f64)).collect();
    let val = [(50.0, 2.9), (100.0, 2.0), (150.0, 1.6), (200.0, 1.4)];
    loss_plot(&path, &train, &val).unwrap();
    let dec = png::Decoder::new(std::fs::File::open(&path).unwrap());
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), LOSS_PLOT_SIZE);
    let ch = info.color_type.samples();
    assert!(ch >= 3);
    let px = |c: plotters::style::RGBColor| buf[..info.buffer_size()].chunks(ch).filter(|p| (p[0], p[1], p[2]) == (c.0, c.1, c.2)).count();
    let (tr, va) = (px(TRAIN_COLOR), px(VAL_COLOR));
    // a 2-pixel line across most of the plot's width, and the validation markers and line
    assert!(tr > 1000, "train pixels {tr}");
    assert!(va > 300, "validation pixels {va}");
    // text (title, axis labels, tick labels, legend) in near-black
    let dark = buf[..info.buffer_size()].chunks(ch).filter(|p| p[0] < 60 && p[1] < 60 && p[2] < 60).count();
    assert!(dark > 500, "dark pixels {dark}");
    // a plot with nothing finite still writes a valid image
    loss_plot(dir.join("empty.png"), &[(1.0, f64::NAN)], &[]).unwrap();
    std::fs::remove_dir_all(&dir).ok();
}
