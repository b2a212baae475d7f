//! What `magpie train` records beside its checkpoints: TensorBoard scalars (`--tensorboard DIR`:
//! `loss/train` each step, `loss/val` at each evaluation, `lr`, and the command line as text),
//! the loss curve every run writes (`loss.png` in the output folder), and a profile of a few
//! steps (`--profile FILE.json`: a Chrome trace and the `key_averages()` table).

use magpie_core::profiler::{profile, ProfileConfig, Profiler, ProfilerAction, ProfilerActivity, Schedule};
use magpie_core::{Error, Result};
use magpie_tensorboard::{loss_plot, SummaryWriter};
use std::path::{Path, PathBuf};

/// The steps `--profile` records, counted from the first step of this run: PyTorch's
/// `schedule(wait=1, warmup=2, active=3, repeat=1)`: step 1 idle, steps 2 and 3 recorded and
/// thrown away (first-use costs: kernel compilation, allocator growth), steps 4 to 6 kept.
pub const PROFILE_SCHEDULE: Schedule = Schedule { wait: 1, warmup: 2, active: 3, repeat: 1, skip_first: 0 };

/// A running `--profile`.
struct ProfileRun {
    prof: Option<Profiler>,
    path: PathBuf,
    cuda: bool,
}

impl ProfileRun {
    /// Stops the profile, writes the trace, and returns the table to print.
    fn finish(&mut self) -> Result<Option<String>> {
        let Some(p) = self.prof.take() else { return Ok(None) };
        let trace = p.stop()?;
        trace.export_chrome_trace(&self.path)?;
        let sort = if self.cuda { "self_cuda_time_total" } else { "self_cpu_time_total" };
        let table = trace.key_averages().table(sort, 20)?;
        let steps: Vec<&str> = trace.events().iter().filter(|e| e.name.starts_with("ProfilerStep#")).map(|e| e.name.as_str()).collect();
        Ok(Some(format!(
            "profile of steps {} ({} events, sorted by {sort}); Chrome trace (chrome://tracing, ui.perfetto.dev) in {}\n{table}",
            if steps.is_empty() { "-".to_string() } else { steps.join(", ") },
            trace.events().len(),
            self.path.display()
        )))
    }
}

/// The logs of one `magpie train` run (all off on ranks other than 0).
pub struct RunLog {
    on: bool,
    tb: Option<SummaryWriter>,
    train: Vec<(f64, f64)>,
    val: Vec<(f64, f64)>,
    prof: Option<ProfileRun>,
}

impl RunLog {
    /// Opens the TensorBoard writer and starts the profiler as asked (on the main rank only).
    pub fn start(main: bool, tensorboard: Option<&Path>, profile_to: Option<&Path>, cuda: bool) -> Result<RunLog> {
        let mut log = RunLog { on: main, tb: None, train: Vec::new(), val: Vec::new(), prof: None };
        if !main {
            return Ok(log);
        }
        if let Some(dir) = tensorboard {
            let mut w = SummaryWriter::new(dir)?;
            let cmd: Vec<String> = std::env::args().collect();
            w.add_text("command", &format!("`{}`", cmd.join(" ")), 0)?;
            log.tb = Some(w);
        }
        if let Some(path) = profile_to {
            if path.extension().is_none_or(|e| e != "json") {
                return Err(Error::value("train", format!("--profile writes a Chrome trace: give a .json file, not {}", path.display())));
            }
            let mut activities = vec![ProfilerActivity::Cpu];
            if cuda {
                activities.push(ProfilerActivity::Cuda);
            }
            let p = profile(ProfileConfig { activities, record_shapes: true, profile_memory: true, schedule: Some(PROFILE_SCHEDULE) })?;
            log.prof = Some(ProfileRun { prof: Some(p), path: path.to_path_buf(), cuda });
        }
        Ok(log)
    }

    /// After a training step: its loss (when read back) and the learning rate; returns the profile's table when
    /// the profiled steps are done.
    pub fn step(&mut self, step: usize, loss: Option<f64>, lr: f64) -> Result<Option<String>> {
        if !self.on {
            return Ok(None);
        }
        // `None`: a replayed CUDA-graph step whose loss was not read back (nothing to plot)
        if let Some(loss) = loss {
            self.train.push((step as f64, loss));
        }
        if let Some(w) = &mut self.tb {
            if let Some(loss) = loss {
                w.add_scalar("loss/train", loss, step as i64)?;
            }
            w.add_scalar("lr", lr, step as i64)?;
        }
        let Some(pr) = &mut self.prof else { return Ok(None) };
        let Some(p) = &mut pr.prof else { return Ok(None) };
        p.step()?;
        let done = p.step_num() > 0 && p.current_action() == ProfilerAction::None && PROFILE_SCHEDULE.action(p.step_num() - 1) == ProfilerAction::RecordAndSave;
        if done {
            return pr.finish();
        }
        Ok(None)
    }

    /// After an evaluation: the validation loss.
    pub fn eval(&mut self, step: usize, val_loss: f64) -> Result<()> {
        if !self.on {
            return Ok(());
        }
        self.val.push((step as f64, val_loss));
        if let Some(w) = &mut self.tb {
            w.add_scalar("loss/val", val_loss, step as i64)?;
            w.flush()?;
        }
        Ok(())
    }

    /// At the end of the run: `loss.png` in `out`, the TensorBoard files flushed, and a profile
    /// cut short by a short run written; returns the lines to print.
    pub fn finish(&mut self, out: &Path) -> Result<Vec<String>> {
        if !self.on {
            return Ok(Vec::new());
        }
        let mut lines = Vec::new();
        std::fs::create_dir_all(out).map_err(|e| Error::io("train", format!("cannot create {}: {e}", out.display())))?;
        let png = out.join("loss.png");
        loss_plot(&png, &self.train, &self.val)?;
        lines.push(format!("loss curve: {}", png.display()));
        if let Some(w) = &mut self.tb {
            w.flush()?;
            lines.push(format!("tensorboard: {} (tensorboard --logdir {})", w.file_path().display(), w.log_dir().display()));
        }
        if let Some(pr) = &mut self.prof {
            if let Some(t) = pr.finish()? {
                lines.push(t);
            }
        }
        Ok(lines)
    }
}
