//! The messages of an event file, encoded as `torch.utils.tensorboard` encodes them: `Event`
//! (wall_time = 1, step = 2, file_version = 3, summary = 5), `Summary.Value` (tag = 1,
//! simple_value = 2, histo = 5, tensor = 8, metadata = 9), `HistogramProto` and the text plugin's
//! string tensor.

use crate::proto::Encoder;

/// An `Event` with its header fields; `what` is the already-encoded oneof field.
pub fn event(wall_time: f64, step: i64, what: impl FnOnce(&mut Encoder)) -> Vec<u8> {
    let mut e = Encoder::new();
    e.double(1, wall_time);
    if step != 0 {
        e.int(2, step);
    }
    what(&mut e);
    e.finish()
}

/// The first event of every file: `file_version: "brain.Event:2"`.
pub fn file_version(wall_time: f64) -> Vec<u8> {
    event(wall_time, 0, |e| {
        e.bytes(3, b"brain.Event:2");
    })
}

/// An event holding a `Summary` of one value.
pub fn summary_event(wall_time: f64, step: i64, value: &[u8]) -> Vec<u8> {
    let summary = Encoder::new().bytes(1, value).finish();
    event(wall_time, step, |e| {
        e.bytes(5, &summary);
    })
}

/// `Summary.Value(tag=tag, simple_value=v)` (PyTorch's `scalar`, old style).
pub fn scalar_value(tag: &str, v: f32) -> Vec<u8> {
    Encoder::new().bytes(1, tag.as_bytes()).float(2, v).finish()
}

/// PyTorch's `text(tag, text)`: tag `"<tag>/text_summary"`, the "text" plugin (empty content,
/// TextPluginData version 0), a DT_STRING tensor of shape [1].
pub fn text_value(tag: &str, text: &str) -> Vec<u8> {
    // proto3 leaves out the empty `content` field, as PyTorch's serializer does
    let plugin = Encoder::new().bytes(1, b"text").finish();
    let metadata = Encoder::new().bytes(1, &plugin).finish();
    let dim = Encoder::new().int(1, 1).finish();
    let shape = Encoder::new().bytes(2, &dim).finish();
    // DataType DT_STRING = 7; string_val = 8
    let tensor = Encoder::new().int(1, 7).bytes(2, &shape).bytes(8, text.as_bytes()).finish();
    // fields in number order (tag 1, tensor 8, metadata 9), as protobuf serializers write them
    Encoder::new().bytes(1, format!("{tag}/text_summary").as_bytes()).bytes(8, &tensor).bytes(9, &metadata).finish()
}

/// A `HistogramProto`'s fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    pub min: f64,
    pub max: f64,
    pub num: f64,
    pub sum: f64,
    pub sum_squares: f64,
    /// Right edges of the buckets.
    pub bucket_limit: Vec<f64>,
    pub bucket: Vec<f64>,
}

impl Histogram {
    pub(crate) fn encode(&self) -> Vec<u8> {
        Encoder::new()
            .double(1, self.min)
            .double(2, self.max)
            .double(3, self.num)
            .double(4, self.sum)
            .double(5, self.sum_squares)
            .packed_doubles(6, &self.bucket_limit)
            .packed_doubles(7, &self.bucket)
            .finish()
    }
}

/// `Summary.Value(tag=tag, histo=h)`.
pub fn histogram_value(tag: &str, h: &Histogram) -> Vec<u8> {
    Encoder::new().bytes(1, tag.as_bytes()).bytes(5, &h.encode()).finish()
}

/// `SummaryWriter.default_bins`: ±1.1^k from 1e-12 up to 1e20, and 0 (PyTorch's "tensorflow" bins).
pub fn default_bins() -> Vec<f64> {
    let mut pos = Vec::new();
    let mut v = 1e-12f64;
    while v < 1e20 {
        pos.push(v);
        v *= 1.1;
    }
    let mut bins: Vec<f64> = pos.iter().rev().map(|v| -v).collect();
    bins.push(0.0);
    bins.extend(pos);
    bins
}

/// PyTorch's `make_histogram(values, bins, max_bins)`: `np.histogram` over the edges `bins`
/// (each bucket `[e_i, e_i+1)`, the last closed; values outside, and NaN, not counted), merged
/// into at most `max_bins` buckets, then cut to the buckets from the one before the first
/// non-empty one to the last non-empty one.
pub fn make_histogram(values: &[f64], bins: &[f64], max_bins: Option<usize>) -> Result<Histogram, String> {
    if values.is_empty() {
        return Err("The input has no element.".into());
    }
    if bins.len() < 2 {
        return Err("bins must hold at least two edges".into());
    }
    let n = bins.len() - 1;
    let mut counts = vec![0f64; n];
    let (lo, hi) = (bins[0], bins[n]);
    for &v in values {
        if !(v >= lo && v <= hi) {
            continue;
        }
        let i = if v == hi { n - 1 } else { bins.partition_point(|e| *e <= v) - 1 };
        counts[i] += 1.0;
    }
    let mut limits = bins.to_vec();
    if let Some(mb) = max_bins.filter(|&m| m > 0 && n > m) {
        let sub = n / mb;
        let rem = n % sub;
        if rem != 0 {
            counts.resize(n + sub - rem, 0.0);
        }
        counts = counts.chunks(sub).map(|c| c.iter().sum()).collect();
        let mut nl: Vec<f64> = limits[..limits.len() - 1].iter().step_by(sub).copied().collect();
        nl.truncate(counts.len());
        nl.push(limits[limits.len() - 1]);
        limits = nl;
    }
    // numpy: cum = cumsum(counts > 0); start, end = searchsorted(cum, [0, cum[-1] - 1], "right")
    let mut cum = Vec::with_capacity(counts.len());
    let mut acc = 0i64;
    for c in &counts {
        acc += (*c > 0.0) as i64;
        cum.push(acc);
    }
    let last = *cum.last().unwrap_or(&0);
    let start = cum.partition_point(|&c| c <= 0);
    let end = cum.partition_point(|&c| c <= last - 1) + 1;
    let (bucket, bucket_limit) = if start > 0 {
        (np_slice(&counts, start - 1, end), np_slice(&limits, start, end + 1))
    } else {
        let mut c = vec![0.0];
        c.extend(np_slice(&counts, 0, end));
        (c, np_slice(&limits, 0, end + 1))
    };
    if bucket.is_empty() || bucket_limit.is_empty() {
        return Err("The histogram is empty, please file a bug report.".into());
    }
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Ok(Histogram {
        min,
        max,
        num: values.len() as f64,
        sum: values.iter().sum(),
        sum_squares: values.iter().map(|v| v * v).sum(),
        bucket_limit,
        bucket,
    })
}

/// numpy's `v[a:b]` for non-negative bounds: clamped to the length, empty when `a >= b`.
fn np_slice(v: &[f64], a: usize, b: usize) -> Vec<f64> {
    let b = b.min(v.len());
    if a >= b {
        Vec::new()
    } else {
        v[a..b].to_vec()
    }
}
