//! `torch.utils.tensorboard` for torch-magpie: a [`SummaryWriter`] writing TensorBoard event files
//! (TFRecord framing with masked CRC-32C, hand-encoded `Event` protobufs: scalars, histograms with
//! PyTorch's default buckets, text), a reader of such files, and [`loss_plot`], the loss-curve
//! PNG of `magpie train`.

pub mod crc32c;
mod plot;
pub mod proto;
pub mod reader;
pub mod record;
pub mod summary;
mod writer;

pub use plot::{loss_plot, SIZE as LOSS_PLOT_SIZE, TRAIN_COLOR, VAL_COLOR};
pub use reader::{read_events, Event, Value};
pub use summary::{default_bins, make_histogram, Histogram};
pub use writer::SummaryWriter;

/// The examples of `docs/tensorboard.md` run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/tensorboard.md")]
pub struct TensorboardDocs;

/// The examples of `docs/profiler.md` (the profiler lives in magpie-core; its guide's examples
/// compile here, beside the other observability docs).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/profiler.md")]
pub struct ProfilerDocs;
