//! `SummaryWriter`: `torch.utils.tensorboard.SummaryWriter`'s event files in a log folder.

use crate::record::frame;
use crate::summary::{self, default_bins, make_histogram};
use magpie_core::{DType, Error, Result, Tensor};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// PyTorch's `_global_uid`: the last part of each file name, unique within the process.
static UID: AtomicUsize = AtomicUsize::new(0);

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn io(op: &str, path: &Path, e: std::io::Error) -> Error {
    Error::io(op, format!("{}: {e}", path.display()))
}

/// The host name in file names (`socket.gethostname()`).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// One event file (`events.out.tfevents.<secs>.<host>.<pid>.<n>`), opened with its
/// `file_version` event written.
struct EventFile {
    path: PathBuf,
    out: BufWriter<File>,
}

impl EventFile {
    fn create(dir: &Path) -> Result<EventFile> {
        std::fs::create_dir_all(dir).map_err(|e| io("SummaryWriter", dir, e))?;
        let t = now();
        let name = format!("events.out.tfevents.{:010}.{}.{}.{}", t as u64, hostname(), std::process::id(), UID.fetch_add(1, Ordering::Relaxed));
        let path = dir.join(name);
        let f = File::create(&path).map_err(|e| io("SummaryWriter", &path, e))?;
        let mut ef = EventFile { path, out: BufWriter::new(f) };
        ef.write(&summary::file_version(t))?;
        ef.flush()?;
        Ok(ef)
    }
    fn write(&mut self, event: &[u8]) -> Result<()> {
        self.out.write_all(&frame(event)).map_err(|e| io("SummaryWriter", &self.path, e))
    }
    fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| io("SummaryWriter", &self.path, e))
    }
}

/// `torch.utils.tensorboard.SummaryWriter(log_dir)`: writes scalars, histograms and text to an
/// event file that TensorBoard reads (`tensorboard --logdir <log_dir>`).
///
/// ```
/// use magpie_tensorboard::SummaryWriter;
/// let dir = std::env::temp_dir().join(format!("tb-doc-{}", std::process::id()));
/// let mut w = SummaryWriter::new(&dir)?;
/// for step in 0..3 {
///     w.add_scalar("Loss/train", 1.0 / (step + 1) as f64, step)?;
/// }
/// w.add_scalars("Loss", &[("train", 0.5), ("val", 0.7)], 3)?;
/// w.add_histogram("weights", &magpie_core::Tensor::randn(&[100])?, 3)?;
/// w.add_text("notes", "a **markdown** note", 3)?;
/// w.close()?;
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub struct SummaryWriter {
    log_dir: PathBuf,
    file: EventFile,
    /// `add_scalars`' writers, one per `<main_tag>_<tag>` subfolder.
    others: BTreeMap<String, EventFile>,
    default_bins: Vec<f64>,
}

impl SummaryWriter {
    /// A writer into `log_dir` (made if missing), with a new event file.
    pub fn new(log_dir: impl AsRef<Path>) -> Result<SummaryWriter> {
        let log_dir = log_dir.as_ref().to_path_buf();
        let file = EventFile::create(&log_dir)?;
        Ok(SummaryWriter { log_dir, file, others: BTreeMap::new(), default_bins: default_bins() })
    }

    /// The folder written to.
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// The path of the main event file.
    pub fn file_path(&self) -> &Path {
        &self.file.path
    }

    /// `add_scalar(tag, value, global_step)` (stored as a float32 `simple_value`, as PyTorch does).
    pub fn add_scalar(&mut self, tag: &str, value: f64, global_step: i64) -> Result<()> {
        self.add_scalar_at(tag, value, global_step, now())
    }

    /// [`SummaryWriter::add_scalar`] with an explicit `walltime` (seconds since the epoch).
    pub fn add_scalar_at(&mut self, tag: &str, value: f64, global_step: i64, walltime: f64) -> Result<()> {
        let v = summary::scalar_value(tag, value as f32);
        self.file.write(&summary::summary_event(walltime, global_step, &v))
    }

    /// `add_scalars(main_tag, {tag: value}, global_step)`: each value goes to the event file of the
    /// subfolder `<main_tag>_<tag>` (slashes in `main_tag` become `_`) under the tag `main_tag`,
    /// so TensorBoard draws them as runs on one chart.
    pub fn add_scalars(&mut self, main_tag: &str, values: &[(&str, f64)], global_step: i64) -> Result<()> {
        let t = now();
        for (tag, v) in values {
            let sub = format!("{}_{tag}", main_tag.replace('/', "_"));
            let f = match self.others.entry(sub.clone()) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => e.insert(EventFile::create(&self.log_dir.join(&sub))?),
            };
            f.write(&summary::summary_event(t, global_step, &summary::scalar_value(main_tag, *v as f32)))?;
        }
        Ok(())
    }

    /// `add_histogram(tag, values, global_step)` with PyTorch's default ("tensorflow") buckets.
    pub fn add_histogram(&mut self, tag: &str, values: &Tensor, global_step: i64) -> Result<()> {
        let v: Vec<f64> = values.detach().to_dtype(DType::F64)?.to_vec::<f64>()?;
        let bins = std::mem::take(&mut self.default_bins);
        let r = self.add_histogram_raw(tag, &v, &bins, None, global_step);
        self.default_bins = bins;
        r
    }

    /// `add_histogram(tag, values, global_step, bins=edges, max_bins=...)` on plain values.
    pub fn add_histogram_raw(&mut self, tag: &str, values: &[f64], bins: &[f64], max_bins: Option<usize>, global_step: i64) -> Result<()> {
        let h = make_histogram(values, bins, max_bins).map_err(|m| Error::value("add_histogram", m))?;
        self.file.write(&summary::summary_event(now(), global_step, &summary::histogram_value(tag, &h)))
    }

    /// `add_text(tag, text_string, global_step)`: the text plugin's tensor summary, under the tag
    /// `<tag>/text_summary` as PyTorch writes it (TensorBoard renders markdown).
    pub fn add_text(&mut self, tag: &str, text: &str, global_step: i64) -> Result<()> {
        self.file.write(&summary::summary_event(now(), global_step, &summary::text_value(tag, text)))
    }

    /// `flush()`: everything written so far reaches the files.
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()?;
        for f in self.others.values_mut() {
            f.flush()?;
        }
        Ok(())
    }

    /// `close()`: flushes and closes the files.
    pub fn close(mut self) -> Result<()> {
        self.flush()
    }
}

impl Drop for SummaryWriter {
    fn drop(&mut self) {
        // a writer dropped without close() still leaves complete records
        let _ = self.flush();
    }
}
