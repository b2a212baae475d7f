//! The handle table: every object crossing the boundary is an `int64_t` made of a slot index and
//! the slot's generation, so 0 is never valid and a released (stale) handle is detected, never
//! dereferenced. Objects sit behind their own lock: threads can use different handles at once.

use crate::error::{arg, FfiResult};
use magpie_core::Tensor;
use magpie_models::auto::AutoModel;
use magpie_models::embed::SentenceEncoder;
use magpie_optim::scheduler::LrScheduler;
use magpie_optim::Optimizer;
use std::sync::{Arc, Mutex, MutexGuard};

/// What a handle refers to.
pub enum Object {
    Tensor(Tensor),
    Model(Box<AutoModel>),
    Optimizer(Box<dyn Optimizer + Send>),
    Scheduler(Box<dyn LrScheduler + Send>),
    Embedder(Box<SentenceEncoder>),
    Module(Box<dyn magpie_nn::Module>),
}

impl Object {
    fn kind(&self) -> &'static str {
        match self {
            Object::Tensor(_) => "tensor",
            Object::Model(_) => "model",
            Object::Optimizer(_) => "optimizer",
            Object::Scheduler(_) => "scheduler",
            Object::Embedder(_) => "embedder",
            Object::Module(_) => "module",
        }
    }
}

struct Slot {
    generation: u32,
    refs: u32,
    obj: Option<Arc<Mutex<Object>>>,
}

struct Table {
    slots: Vec<Slot>,
    free: Vec<usize>,
}

static TABLE: Mutex<Table> = Mutex::new(Table { slots: Vec::new(), free: Vec::new() });

fn table() -> MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

fn split(h: i64) -> FfiResult<(usize, u32)> {
    let idx = (h & 0xffff_ffff) as usize;
    let generation = (h >> 32) as u32;
    if h <= 0 || idx == 0 || generation == 0 {
        return Err(arg(format!("{h} is not a handle")));
    }
    Ok((idx - 1, generation))
}

/// Registers `obj`; returns its handle (reference count 1).
pub fn insert(obj: Object) -> i64 {
    let mut t = table();
    let idx = match t.free.pop() {
        Some(i) => i,
        None => {
            t.slots.push(Slot { generation: 0, refs: 0, obj: None });
            t.slots.len() - 1
        }
    };
    let s = &mut t.slots[idx];
    // generations start at 1 and skip 0 when they wrap, so no handle is ever 0
    s.generation = s.generation.wrapping_add(1).max(1);
    s.refs = 1;
    s.obj = Some(Arc::new(Mutex::new(obj)));
    ((s.generation as i64) << 32) | (idx as i64 + 1)
}

/// How many handles are live (made and not yet released).
pub fn live() -> usize {
    table().slots.iter().filter(|s| s.obj.is_some()).count()
}

/// The object behind `h`.
pub fn get(h: i64) -> FfiResult<Arc<Mutex<Object>>> {
    let (idx, generation) = split(h)?;
    let t = table();
    match t.slots.get(idx) {
        Some(s) if s.generation == generation => s.obj.clone().ok_or_else(|| arg(format!("handle {h} is stale (it was released)"))),
        Some(_) => Err(arg(format!("handle {h} is stale (it was released)"))),
        None => Err(arg(format!("{h} is not a handle"))),
    }
}

/// Adds a reference to `h` (each reference is given back by one release).
pub fn retain(h: i64) -> FfiResult<()> {
    let (idx, generation) = split(h)?;
    let mut t = table();
    match t.slots.get_mut(idx) {
        Some(s) if s.generation == generation && s.obj.is_some() => {
            s.refs = s.refs.checked_add(1).ok_or_else(|| arg("too many references"))?;
            Ok(())
        }
        _ => Err(arg(format!("handle {h} is stale or not a handle"))),
    }
}

/// Drops one reference to `h`; the object goes with the last one and the handle becomes stale.
pub fn release(h: i64) -> FfiResult<()> {
    let (idx, generation) = split(h)?;
    let dropped = {
        let mut t = table();
        let s = match t.slots.get_mut(idx) {
            Some(s) if s.generation == generation && s.obj.is_some() => s,
            _ => return Err(arg(format!("handle {h} is stale (released twice?) or not a handle"))),
        };
        s.refs -= 1;
        if s.refs > 0 {
            None
        } else {
            let obj = s.obj.take();
            t.free.push(idx);
            obj
        }
    };
    // the object (maybe large, maybe a model) is dropped outside the table lock
    drop(dropped);
    Ok(())
}

fn lock(o: &Arc<Mutex<Object>>) -> MutexGuard<'_, Object> {
    o.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tensor behind `h` (tensors are cheap handles to shared storage).
pub fn tensor(h: i64) -> FfiResult<Tensor> {
    let o = get(h)?;
    let g = lock(&o);
    match &*g {
        Object::Tensor(t) => Ok(t.clone()),
        other => Err(arg(format!("handle {h} is a {}, not a tensor", other.kind()))),
    }
}

/// `with_<kind>(h, f)`: runs `f` on the object behind `h`, locked, or errors when `h` holds
/// another kind of object.
macro_rules! with_kind {
    ($($(#[$doc:meta])* $fname:ident, $variant:ident, $ty:ty, $what:literal;)*) => {$(
        $(#[$doc])*
        pub fn $fname<R>(h: i64, f: impl FnOnce(&mut $ty) -> FfiResult<R>) -> FfiResult<R> {
            let o = get(h)?;
            let mut g = lock(&o);
            match &mut *g {
                Object::$variant(x) => f(x.as_mut()),
                other => Err(arg(format!("handle {h} is a {}, not {}", other.kind(), $what))),
            }
        }
    )*};
}

with_kind! {
    /// Runs `f` on the model behind `h`.
    with_model, Model, AutoModel, "a model";
    /// Runs `f` on the optimizer behind `h`.
    with_optimizer, Optimizer, dyn Optimizer + Send, "an optimizer";
    /// Runs `f` on the scheduler behind `h`.
    with_scheduler, Scheduler, dyn LrScheduler + Send, "a scheduler";
    /// Runs `f` on the sentence embedder behind `h`.
    with_embedder, Embedder, SentenceEncoder, "an embedder";
    /// Runs `f` on the nn module behind `h`.
    with_module, Module, dyn magpie_nn::Module + 'static, "a module";
}
