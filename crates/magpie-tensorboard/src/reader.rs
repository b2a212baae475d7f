//! Reading event files back: records checked by their CRCs, `Event`s decoded into scalars,
//! histograms and text (what this crate and PyTorch write).

use crate::proto::{fields, Field};
use crate::record::records;
use crate::summary::Histogram;
use magpie_core::{Error, Result};
use std::path::Path;

/// A decoded `Summary.Value`.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Scalar(f32),
    Histogram(Histogram),
    /// A string tensor (the text plugin's), with the plugin's name.
    Text { plugin: String, text: String },
    /// A value of another kind (images, audio, ...), kept undecoded.
    Other,
}

/// A decoded `Event`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Event {
    pub wall_time: f64,
    pub step: i64,
    pub file_version: Option<String>,
    /// (tag, value) of its summary.
    pub values: Vec<(String, Value)>,
}

fn bad(m: impl std::fmt::Display) -> Error {
    Error::value("read_events", m.to_string())
}

fn text(b: &[u8]) -> Result<String> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("a string field is not UTF-8"))
}

fn doubles(b: &[u8]) -> Result<Vec<f64>> {
    if b.len() % 8 != 0 {
        return Err(bad("packed doubles of a length not a multiple of 8"));
    }
    Ok(b.chunks_exact(8).map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect())
}

fn histogram(b: &[u8]) -> Result<Histogram> {
    let mut h = Histogram { min: 0.0, max: 0.0, num: 0.0, sum: 0.0, sum_squares: 0.0, bucket_limit: Vec::new(), bucket: Vec::new() };
    for (f, v) in fields(b).map_err(bad)? {
        match (f, v) {
            (1..=5, Field::Fixed64(x)) => {
                let x = f64::from_le_bytes(x);
                *[&mut h.min, &mut h.max, &mut h.num, &mut h.sum, &mut h.sum_squares][f as usize - 1] = x;
            }
            (6, Field::Bytes(p)) => h.bucket_limit.extend(doubles(p)?),
            (7, Field::Bytes(p)) => h.bucket.extend(doubles(p)?),
            (6, Field::Fixed64(x)) => h.bucket_limit.push(f64::from_le_bytes(x)),
            (7, Field::Fixed64(x)) => h.bucket.push(f64::from_le_bytes(x)),
            _ => {}
        }
    }
    Ok(h)
}

/// The first `string_val` of a `TensorProto`.
fn string_tensor(b: &[u8]) -> Result<String> {
    for (f, v) in fields(b).map_err(bad)? {
        if let (8, Field::Bytes(s)) = (f, v) {
            return text(s);
        }
    }
    Ok(String::new())
}

fn plugin_name(metadata: &[u8]) -> Result<String> {
    for (f, v) in fields(metadata).map_err(bad)? {
        if let (1, Field::Bytes(pd)) = (f, v) {
            for (g, w) in fields(pd).map_err(bad)? {
                if let (1, Field::Bytes(n)) = (g, w) {
                    return text(n);
                }
            }
        }
    }
    Ok(String::new())
}

fn summary_value(b: &[u8]) -> Result<(String, Value)> {
    let (mut tag, mut value, mut plugin, mut tensor) = (String::new(), Value::Other, String::new(), None);
    for (f, v) in fields(b).map_err(bad)? {
        match (f, v) {
            (1, Field::Bytes(t)) => tag = text(t)?,
            (2, Field::Fixed32(x)) => value = Value::Scalar(f32::from_le_bytes(x)),
            (5, Field::Bytes(h)) => value = Value::Histogram(histogram(h)?),
            (8, Field::Bytes(t)) => tensor = Some(string_tensor(t)?),
            (9, Field::Bytes(m)) => plugin = plugin_name(m)?,
            _ => {}
        }
    }
    if let Some(text) = tensor {
        value = Value::Text { plugin, text };
    }
    Ok((tag, value))
}

/// Decodes one `Event` message.
pub fn decode_event(b: &[u8]) -> Result<Event> {
    let mut e = Event::default();
    for (f, v) in fields(b).map_err(bad)? {
        match (f, v) {
            (1, Field::Fixed64(x)) => e.wall_time = f64::from_le_bytes(x),
            (2, Field::Varint(s)) => e.step = s as i64,
            (3, Field::Bytes(s)) => e.file_version = Some(text(s)?),
            (5, Field::Bytes(s)) => {
                for (g, w) in fields(s).map_err(bad)? {
                    if let (1, Field::Bytes(val)) = (g, w) {
                        e.values.push(summary_value(val)?);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(e)
}

/// Every event of an event file, in order (CRCs checked).
pub fn read_events(path: impl AsRef<Path>) -> Result<Vec<Event>> {
    let p = path.as_ref();
    let bytes = std::fs::read(p).map_err(|e| Error::io("read_events", format!("{}: {e}", p.display())))?;
    let recs = records(&bytes).map_err(|m| bad(format!("{}: {m}", p.display())))?;
    recs.into_iter().map(decode_event).collect()
}
