//! The loss curve of a training run as a PNG (`loss.png`): train and validation loss against
//! step, drawn with `plotters` on its bitmap backend. Text uses DejaVu Sans, embedded in the
//! binary (`fonts/`, Bitstream Vera license with DejaVu's public-domain changes), so no system
//! font is needed.

use magpie_core::{Error, Result};
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::path::Path;
use std::sync::OnceLock;

static FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// The train curve's colour (matplotlib's first colour, as TensorBoard users know it).
pub const TRAIN_COLOR: RGBColor = RGBColor(31, 119, 180);
/// The validation curve's colour.
pub const VAL_COLOR: RGBColor = RGBColor(255, 127, 14);
/// The image size of [`loss_plot`].
pub const SIZE: (u32, u32) = (800, 500);

fn font() -> Result<()> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| register_font("sans-serif", FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(Error::value("loss_plot", "the embedded font could not be loaded"))
    }
}

fn err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::io("loss_plot", format!("{}: {e}", path.display()))
}

/// The data range of the finite points, widened when empty or flat.
fn range(pts: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in pts.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (0.0, 1.0);
    }
    let pad = if hi > lo { (hi - lo) * 0.05 } else { lo.abs().max(1.0) * 0.05 };
    (lo - pad, hi + pad)
}

/// Writes `path` (PNG, [`SIZE`]): the train loss per step and the validation loss at each
/// evaluation, with labelled axes and a legend. Non-finite losses are left out.
///
/// ```
/// let path = std::env::temp_dir().join(format!("loss-doc-{}.png", std::process::id()));
/// let train: Vec<(f64, f64)> = (1..=50).map(|s| (s as f64, 4.0 / (s as f64).sqrt())).collect();
/// magpie_tensorboard::loss_plot(&path, &train, &[(25.0, 1.2), (50.0, 0.9)])?;
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn loss_plot(path: impl AsRef<Path>, train: &[(f64, f64)], val: &[(f64, f64)]) -> Result<()> {
    let path = path.as_ref();
    font()?;
    let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
    let train: Vec<(f64, f64)> = train.iter().filter(finite).copied().collect();
    let val: Vec<(f64, f64)> = val.iter().filter(finite).copied().collect();
    let all = || train.iter().chain(&val);
    let (x0, x1) = range(all().map(|p| p.0));
    let (y0, y1) = range(all().map(|p| p.1));
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("training loss", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| err(path, e))?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("loss (nats)")
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(path, e))?;
    chart
        .draw_series(LineSeries::new(train.iter().copied(), TRAIN_COLOR.stroke_width(2)))
        .map_err(|e| err(path, e))?
        .label("train")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], TRAIN_COLOR.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(val.iter().copied(), VAL_COLOR.stroke_width(2)))
        .map_err(|e| err(path, e))?
        .label("validation")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], VAL_COLOR.stroke_width(2)));
    chart.draw_series(val.iter().map(|&p| Circle::new(p, 4, VAL_COLOR.filled()))).map_err(|e| err(path, e))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))?;
    Ok(())
}
