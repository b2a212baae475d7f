//! Saved-tensor hooks (`torch.autograd.graph.saved_tensors_hooks`): while the guard lives, every
//! tensor an op saves for backward ([`super::Saved`], and `FunctionCtx::save_for_backward`) is
//! passed to `pack`, and only what `pack` returns is kept; backward gets the tensor back from
//! `unpack`. The usual uses: offloading saved activations to another device or to disk,
//! compressing them, or recomputing them.
//!
//! ```
//! use magpie_core::{autograd, Tensor};
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//!
//! // keep saved tensors as plain vectors (as if offloaded), count the packs
//! let packed = Arc::new(AtomicUsize::new(0));
//! let p = packed.clone();
//! let x = Tensor::from_vec(vec![1f64, 2., 3.], &[3])?.with_requires_grad()?;
//! let y = {
//!     let _hooks = autograd::saved_tensors_hooks(
//!         move |t: &Tensor| {
//!             p.fetch_add(1, Ordering::Relaxed);
//!             Ok((t.to_vec::<f64>()?, t.shape().to_vec()))
//!         },
//!         |(v, shape): &(Vec<f64>, Vec<usize>)| Tensor::from_vec(v.clone(), shape),
//!     );
//!     x.sin()?.sum()?
//! };
//! y.backward()?;
//! assert!(packed.load(Ordering::Relaxed) >= 1);
//! let want: Vec<f64> = [1f64, 2., 3.].iter().map(|v| v.cos()).collect();
//! assert_eq!(x.grad().unwrap().to_vec::<f64>()?, want);
//! # Ok::<(), magpie_core::Error>(())
//! ```
//!
//! As in PyTorch, the innermost guard's hooks apply; pack and unpack run without these hooks
//! (a tensor saved inside `pack` is kept as it is) and in `no_grad` mode. A tensor handed to
//! `pack` is not version-checked at unpack time (its storage may be gone): modifying it in place
//! before backward is the user's responsibility, as in PyTorch.

use super::no_grad;
use crate::tensor::Tensor;
use crate::Result;
use std::any::Any;
use std::cell::RefCell;
use std::sync::Arc;

/// A packed saved tensor: what `pack` returned, and the hooks' `unpack`.
pub(crate) struct Packed {
    value: Box<dyn Any + Send + Sync>,
    hooks: Arc<dyn Hooks>,
}

impl Packed {
    /// The tensor back, through `unpack` (run without hooks, in `no_grad` mode).
    pub(crate) fn unpack(&self) -> Result<Tensor> {
        let _off = disable_saved_tensors_hooks();
        let _ng = no_grad();
        self.hooks.unpack(&*self.value)
    }
}

trait Hooks: Send + Sync {
    fn pack(&self, t: &Tensor) -> Result<Box<dyn Any + Send + Sync>>;
    fn unpack(&self, v: &(dyn Any + Send + Sync)) -> Result<Tensor>;
}

struct TypedHooks<P, F, G> {
    pack: F,
    unpack: G,
    _p: std::marker::PhantomData<fn() -> P>,
}

impl<P, F, G> Hooks for TypedHooks<P, F, G>
where
    P: Send + Sync + 'static,
    F: Fn(&Tensor) -> Result<P> + Send + Sync,
    G: Fn(&P) -> Result<Tensor> + Send + Sync,
{
    fn pack(&self, t: &Tensor) -> Result<Box<dyn Any + Send + Sync>> {
        Ok(Box::new((self.pack)(t)?))
    }
    fn unpack(&self, v: &(dyn Any + Send + Sync)) -> Result<Tensor> {
        match v.downcast_ref::<P>() {
            Some(p) => (self.unpack)(p),
            None => Err(crate::Error::autograd("saved_tensors_hooks", "packed value of an unexpected type")),
        }
    }
}

thread_local! {
    static STACK: RefCell<Vec<Option<Arc<dyn Hooks>>>> = const { RefCell::new(Vec::new()) };
}

/// Pops its hooks (or its suspension) when dropped.
#[must_use = "the hooks are removed when the guard is dropped"]
pub struct SavedTensorsHooksGuard {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for SavedTensorsHooksGuard {
    fn drop(&mut self) {
        STACK.with(|s| {
            s.borrow_mut().pop();
        });
    }
}

/// `with torch.autograd.graph.saved_tensors_hooks(pack, unpack):` as a guard. `pack` turns a
/// tensor saved for backward into any value `P`; `unpack` turns it back into a tensor (same
/// shape, dtype and values) when backward needs it.
pub fn saved_tensors_hooks<P, F, G>(pack: F, unpack: G) -> SavedTensorsHooksGuard
where
    P: Send + Sync + 'static,
    F: Fn(&Tensor) -> Result<P> + Send + Sync + 'static,
    G: Fn(&P) -> Result<Tensor> + Send + Sync + 'static,
{
    let h: Arc<dyn Hooks> = Arc::new(TypedHooks { pack, unpack, _p: std::marker::PhantomData });
    STACK.with(|s| s.borrow_mut().push(Some(h)));
    SavedTensorsHooksGuard { _not_send: std::marker::PhantomData }
}

/// `torch.autograd.graph.disable_saved_tensors_hooks()`: saved tensors are kept as they are
/// while the guard lives (hooks of outer guards do not apply).
pub fn disable_saved_tensors_hooks() -> SavedTensorsHooksGuard {
    STACK.with(|s| s.borrow_mut().push(None));
    SavedTensorsHooksGuard { _not_send: std::marker::PhantomData }
}

/// Packs `t` with the innermost hooks, if any are active: `None` means keep the tensor itself.
pub(crate) fn pack(t: &Tensor) -> Option<Result<Packed>> {
    let hooks = STACK.with(|s| s.borrow().last().cloned().flatten())?;
    let _off = disable_saved_tensors_hooks();
    let _ng = no_grad();
    Some(hooks.pack(t).map(|value| Packed { value, hooks: hooks.clone() }))
}
