//! Starting and stopping a profile: its options (`activities`, `record_shapes`, `profile_memory`),
//! and PyTorch's `schedule(wait, warmup, active, repeat, skip_first)` driven by `step()`.

use super::state::{self, RangeGuard, CUDA, MEMORY, SHAPES};
use super::{finish, record_function_with, Trace};
use crate::{Error, Result};

/// `torch.profiler.ProfilerActivity`: what to time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfilerActivity {
    /// Host time of every op.
    Cpu,
    /// Device time of ops on CUDA tensors (events on the stream).
    Cuda,
}

/// `torch.profiler.ProfilerAction`: what the profiler does during a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfilerAction {
    /// Not recording.
    None,
    /// Recording, to be thrown away (the first steps are slower: caches, kernel compilation).
    Warmup,
    /// Recording.
    Record,
    /// Recording; the last step of an active window.
    RecordAndSave,
}

/// `torch.profiler.schedule(wait, warmup, active, repeat=0, skip_first=0)`: after `skip_first`
/// steps, cycles of `wait` idle steps, `warmup` steps recorded and discarded, then `active`
/// steps kept; `repeat` cycles (0: no limit).
///
/// ```
/// use magpie_core::profiler::{ProfilerAction, Schedule};
/// let s = Schedule { wait: 1, warmup: 1, active: 2, repeat: 1, skip_first: 0 };
/// let acts: Vec<_> = (0..5).map(|i| s.action(i)).collect();
/// assert_eq!(acts, [ProfilerAction::None, ProfilerAction::Warmup, ProfilerAction::Record, ProfilerAction::RecordAndSave, ProfilerAction::None]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub wait: usize,
    pub warmup: usize,
    pub active: usize,
    pub repeat: usize,
    pub skip_first: usize,
}

impl Schedule {
    /// The action of step `step` (counted from 0), as PyTorch's schedule function returns it.
    pub fn action(&self, step: usize) -> ProfilerAction {
        if step < self.skip_first {
            return ProfilerAction::None;
        }
        let s = step - self.skip_first;
        let n = self.wait + self.warmup + self.active;
        if n == 0 || (self.repeat > 0 && s / n >= self.repeat) {
            return ProfilerAction::None;
        }
        let m = s % n;
        if m < self.wait {
            ProfilerAction::None
        } else if m < self.wait + self.warmup {
            ProfilerAction::Warmup
        } else if m < n - 1 {
            ProfilerAction::Record
        } else {
            ProfilerAction::RecordAndSave
        }
    }
}

/// `torch.profiler.profile(...)`'s options.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileConfig {
    /// CPU is always timed; `Cuda` adds device time for ops on CUDA tensors.
    pub activities: Vec<ProfilerActivity>,
    pub record_shapes: bool,
    pub profile_memory: bool,
    /// None: record from start to stop.
    pub schedule: Option<Schedule>,
}

impl Default for ProfileConfig {
    /// CPU and CUDA, no shapes, no memory, no schedule (PyTorch's defaults).
    fn default() -> Self {
        ProfileConfig { activities: vec![ProfilerActivity::Cpu, ProfilerActivity::Cuda], record_shapes: false, profile_memory: false, schedule: None }
    }
}

/// A running profile (what `with torch.profiler.profile(...) as prof:` holds). Call
/// [`Profiler::step`] at the end of each step when it has a schedule, then [`Profiler::stop`].
pub struct Profiler {
    bits: u8,
    schedule: Option<Schedule>,
    step: usize,
    running: bool,
    kept: Vec<super::Event>,
    step_range: Option<RangeGuard>,
}

/// `torch.profiler.profile(...)`, entered: starts recording now, or at the schedule's first
/// recorded step. Only one profile runs at a time in a process.
pub fn profile(config: ProfileConfig) -> Result<Profiler> {
    let mut bits = 0;
    if config.record_shapes {
        bits |= SHAPES;
    }
    if config.profile_memory {
        bits |= MEMORY;
    }
    if config.activities.contains(&ProfilerActivity::Cuda) {
        bits |= CUDA;
    }
    let mut p = Profiler { bits, schedule: config.schedule, step: 0, running: false, kept: Vec::new(), step_range: None };
    if p.action() != ProfilerAction::None {
        p.begin()?;
    }
    Ok(p)
}

impl Profiler {
    fn action(&self) -> ProfilerAction {
        match &self.schedule {
            Some(s) => s.action(self.step),
            None => ProfilerAction::Record,
        }
    }

    fn begin(&mut self) -> Result<()> {
        if !state::start(self.bits) {
            return Err(Error::value("profile", "Profiler is already enabled: only one profile can record at a time"));
        }
        self.running = true;
        self.open_step();
        Ok(())
    }

    /// PyTorch's `ProfilerStep#N` range around each scheduled step.
    fn open_step(&mut self) {
        if self.schedule.is_some() {
            let n = self.step;
            self.step_range = record_function_with(|| format!("ProfilerStep#{n}"));
        }
    }

    fn end(&mut self) -> Trace {
        self.step_range = None;
        self.running = false;
        state::stop().map(finish).unwrap_or_default()
    }

    /// `prof.step()`: the end of a step; moves along the schedule (a no-op without one).
    pub fn step(&mut self) -> Result<()> {
        if self.schedule.is_none() {
            return Ok(());
        }
        use ProfilerAction as A;
        let before = self.action();
        self.step_range = Option::None;
        self.step += 1;
        let after = self.action();
        match (before, after) {
            (A::RecordAndSave, _) => {
                let t = self.end();
                self.kept.extend(t.events);
                if after != A::None {
                    self.begin()?;
                }
            }
            (A::Warmup, A::Record | A::RecordAndSave) => {
                state::clear();
                self.open_step();
            }
            (A::None, A::Warmup | A::Record | A::RecordAndSave) => self.begin()?,
            (A::Warmup | A::Record, A::None) => {
                self.end();
            }
            _ if self.running => self.open_step(),
            _ => {}
        }
        Ok(())
    }

    /// The step count (`prof.step_num`).
    pub fn step_num(&self) -> usize {
        self.step
    }

    /// The current action of the schedule.
    pub fn current_action(&self) -> ProfilerAction {
        self.action()
    }

    /// Leaves the profile: stops recording and returns every kept window (with a schedule, the
    /// active steps; a window cut short by `stop` is kept unless it was still warming up).
    pub fn stop(mut self) -> Result<Trace> {
        let warming = self.action() == ProfilerAction::Warmup;
        if self.running {
            let t = self.end();
            if !warming {
                self.kept.extend(t.events);
            }
        }
        Ok(Trace::from_events(std::mem::take(&mut self.kept)))
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        if self.running {
            self.step_range = None;
            state::stop();
        }
    }
}
