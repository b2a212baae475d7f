//! `Tensor`: a cheap handle (an `Arc`) to a layout over shared storage, plus autograd metadata.

use crate::autograd::{self, Node};
use crate::device::Device;
use crate::dtype::DType;
use crate::element::Element;
use crate::layout::Layout;
use crate::storage::{CpuStorage, Storage, StorageCell};
use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// A hook run on a tensor's gradient during backward; it may replace the gradient.
pub type GradHook = Box<dyn Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync>;

/// A hook run on a leaf during backward once its gradient for this pass is complete and has been
/// accumulated into `.grad` (PyTorch's `register_post_accumulate_grad_hook`); it sees the leaf.
pub type PostAccumulateGradHook = Box<dyn Fn(&Tensor) -> Result<()> + Send + Sync>;

/// An n-dimensional array on a device, with an optional autograd history.
/// Cloning a `Tensor` clones the handle, not the data (as assigning a tensor in Python does).
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorImpl>);

/// The data behind a [`Tensor`] handle.
pub struct TensorImpl {
    pub(crate) id: usize,
    pub(crate) storage: Arc<StorageCell>,
    pub(crate) layout: Layout,
    pub(crate) dtype: DType,
    pub(crate) device: Device,
    pub(crate) requires_grad: AtomicBool,
    pub(crate) retains_grad: AtomicBool,
    pub(crate) grad: Mutex<Option<Tensor>>,
    /// The node that produced this tensor and which of its outputs it is; None for leaves.
    pub(crate) grad_fn: RwLock<Option<(Arc<Node>, usize)>>,
    pub(crate) hooks: Mutex<Vec<Arc<GradHook>>>,
    /// Leaves only: run after each backward pass has accumulated the leaf's gradient.
    pub(crate) post_accumulate_hooks: Mutex<Vec<Arc<PostAccumulateGradHook>>>,
    /// For views: the tensor this one is a view of (PyTorch's `._base`).
    pub(crate) base: Option<Tensor>,
    /// For views: the storage version when `grad_fn` was last set. A write to the storage since
    /// (through the base or any view) makes the view take its history from the base again.
    pub(crate) attr_version: AtomicU64,
    /// For views: how the view was made (`autograd::view::CREATED_*`), which decides whether
    /// in-place writes to it may be recorded.
    pub(crate) creation: AtomicU8,
}

impl Tensor {
    /// A tensor over `storage` with `layout` (no autograd history).
    pub(crate) fn from_parts(storage: Arc<StorageCell>, layout: Layout, base: Option<Tensor>) -> Tensor {
        let (dtype, device) = {
            let s = storage.read();
            (s.dtype(), s.device())
        };
        let version = storage.version();
        Tensor(Arc::new(TensorImpl {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            storage,
            layout,
            dtype,
            device,
            requires_grad: AtomicBool::new(false),
            retains_grad: AtomicBool::new(false),
            grad: Mutex::new(None),
            grad_fn: RwLock::new(None),
            hooks: Mutex::new(Vec::new()),
            post_accumulate_hooks: Mutex::new(Vec::new()),
            attr_version: AtomicU64::new(version),
            creation: AtomicU8::new(autograd::view::creation_of(base.as_ref())),
            base,
        }))
    }

    /// A new contiguous CPU tensor owning `storage`, which must hold exactly `numel(shape)` elements.
    pub fn from_cpu_storage(storage: CpuStorage, shape: &[usize]) -> Result<Tensor> {
        let n = crate::shape::numel(shape);
        if storage.len() != n {
            return Err(Error::shape("tensor", format!("{} elements cannot fill shape {shape:?} ({n} elements)", storage.len())));
        }
        Ok(Self::from_parts(Arc::new(StorageCell::new(Storage::Cpu(storage))), Layout::contiguous(shape), None))
    }

    /// A CPU tensor owning `data` viewed through `layout` (a dense layout over exactly `data`),
    /// for kernels that keep their input's memory order (PyTorch's TensorIterator does the same).
    pub(crate) fn from_vec_layout<T: Element>(data: Vec<T>, layout: Layout) -> Result<Tensor> {
        let (lo, hi) = layout.storage_span();
        if lo != 0 || hi != data.len() || layout.numel() != data.len() {
            return Err(Error::shape("tensor", format!("layout {layout:?} does not cover {} elements densely", data.len())));
        }
        Ok(Self::from_parts(Arc::new(StorageCell::new(Storage::Cpu(T::into_storage(data)))), layout, None))
    }

    /// A CPU tensor from a vector and a shape: `Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2])`.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        Self::from_cpu_storage(T::into_storage(data), shape)
    }

    /// A 1-d CPU tensor copied from a slice.
    pub fn from_slice<T: Element>(data: &[T]) -> Tensor {
        let n = data.len();
        Self::from_parts(
            Arc::new(StorageCell::new(Storage::Cpu(T::into_storage(data.to_vec())))),
            Layout::contiguous(&[n]),
            None,
        )
    }

    /// A 0-d CPU tensor holding `v`.
    pub fn scalar<T: Element>(v: T) -> Tensor {
        Self::from_parts(Arc::new(StorageCell::new(Storage::Cpu(T::into_storage(vec![v])))), Layout::contiguous(&[]), None)
    }

    /// A view of this tensor with another layout over the same storage (no autograd record).
    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        let base = Some(self.0.base.clone().unwrap_or_else(|| self.clone()));
        let view = Self::from_parts(self.0.storage.clone(), layout, base);
        // a view of an output of a multi-output view function inherits its restriction
        let multi = autograd::view::CREATED_MULTI_OUTPUT;
        if self.0.creation.load(Ordering::Relaxed) == multi {
            let _ = view.0.creation.compare_exchange(autograd::view::CREATED_DEFAULT, multi, Ordering::Relaxed, Ordering::Relaxed);
        }
        view
    }

    /// A unique id of this tensor handle's data (views have their own ids).
    pub fn id(&self) -> usize {
        self.0.id
    }
    /// The shape (`tensor.shape`).
    pub fn shape(&self) -> &[usize] {
        &self.0.layout.shape
    }
    /// `tensor.size(dim)` with negative dims allowed.
    pub fn size(&self, dim: i64) -> Result<usize> {
        let d = crate::shape::wrap_dim("size", dim, self.ndim())?;
        Ok(if self.ndim() == 0 { 1 } else { self.shape()[d] })
    }
    /// The strides, in elements (`tensor.stride()`).
    pub fn strides(&self) -> &[usize] {
        &self.0.layout.strides
    }
    /// Offset of the first element in the storage (`tensor.storage_offset()`).
    pub fn storage_offset(&self) -> usize {
        self.0.layout.offset
    }
    /// The layout value.
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }
    /// Number of dims (`tensor.dim()`).
    pub fn ndim(&self) -> usize {
        self.0.layout.ndim()
    }
    /// Number of elements (`tensor.numel()`).
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }
    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }
    /// The device.
    pub fn device(&self) -> Device {
        self.0.device
    }
    /// `tensor.is_contiguous()`.
    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous()
    }
    /// The shared storage cell (for kernels and views).
    pub fn storage(&self) -> &Arc<StorageCell> {
        &self.0.storage
    }
    /// True when both handles view the same storage.
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0.storage, &other.0.storage)
    }
    /// True when both are the same handle's data (same id).
    pub fn is_same(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// The tensor this one views, if it is a view (`tensor._base`).
    pub fn base(&self) -> Option<&Tensor> {
        self.0.base.as_ref()
    }
    /// The version counter of the storage (bumped by in-place writes).
    pub fn version(&self) -> u64 {
        self.0.storage.version()
    }

    // ---- autograd metadata ----

    /// `tensor.requires_grad`.
    pub fn requires_grad(&self) -> bool {
        self.refresh_view();
        self.0.requires_grad.load(Ordering::Relaxed)
    }
    /// A view whose storage was written since its history was set takes its history from its
    /// base again (PyTorch regenerates a view's `grad_fn` when the version counter moved).
    #[inline]
    fn refresh_view(&self) {
        if let Some(b) = &self.0.base {
            let v = self.0.storage.version();
            if self.0.attr_version.load(Ordering::Acquire) != v {
                autograd::view::regenerate(self, b, v);
            }
        }
    }
    /// `tensor.requires_grad_(flag)`: only leaves, and only floating or complex dtypes.
    pub fn requires_grad_(&self, flag: bool) -> Result<Tensor> {
        if !self.is_leaf() && !flag {
            return Err(Error::autograd(
                "requires_grad_",
                "you can only change requires_grad flags of leaf variables; use detach() for a non-leaf",
            ));
        }
        if flag && !(self.dtype().is_float() || self.dtype().is_complex()) {
            return Err(Error::autograd(
                "requires_grad_",
                format!("only Tensors of floating point and complex dtype can require gradients, got {}", self.dtype()),
            ));
        }
        self.0.requires_grad.store(flag, Ordering::Relaxed);
        Ok(self.clone())
    }
    /// Builder form of [`Tensor::requires_grad_`].
    pub fn with_requires_grad(self) -> Result<Tensor> {
        self.requires_grad_(true)
    }
    /// `tensor.is_leaf`: no history (created by the user, or not requiring grad).
    pub fn is_leaf(&self) -> bool {
        self.grad_fn().is_none()
    }
    /// `tensor.grad_fn`: the node that produced this tensor, if any.
    pub fn grad_fn(&self) -> Option<Arc<Node>> {
        self.refresh_view();
        self.0.grad_fn.read().unwrap_or_else(|e| e.into_inner()).as_ref().map(|(n, _)| n.clone())
    }
    pub(crate) fn grad_edge(&self) -> Option<(Arc<Node>, usize)> {
        self.refresh_view();
        self.0.grad_fn.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub(crate) fn set_grad_fn(&self, edge: Option<(Arc<Node>, usize)>) {
        let rg = edge.is_some();
        *self.0.grad_fn.write().unwrap_or_else(|e| e.into_inner()) = edge;
        self.0.attr_version.store(self.0.storage.version(), Ordering::Release);
        if rg {
            self.0.requires_grad.store(true, Ordering::Relaxed);
            // a view that got history from an op is an ordinary differentiable view
            let (ng, d) = (autograd::view::CREATED_NO_GRAD, autograd::view::CREATED_DEFAULT);
            let _ = self.0.creation.compare_exchange(ng, d, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
    /// `tensor.grad`: the accumulated gradient of a leaf (or a non-leaf with `retain_grad`).
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// Replaces `tensor.grad` (None clears it, as `tensor.grad = None`).
    pub fn set_grad(&self, g: Option<Tensor>) {
        *self.0.grad.lock().unwrap_or_else(|e| e.into_inner()) = g;
    }
    /// `tensor.retain_grad()`: keep the gradient of a non-leaf in `.grad` after backward.
    pub fn retain_grad(&self) -> Result<()> {
        if !self.requires_grad() {
            return Err(Error::autograd("retain_grad", "can't retain_grad on Tensor that has requires_grad=False"));
        }
        self.0.retains_grad.store(true, Ordering::Relaxed);
        self.watch();
        Ok(())
    }
    /// Lets the engine find this non-leaf tensor from its node (for hooks and retain_grad).
    fn watch(&self) {
        if let Some((n, k)) = self.grad_edge() {
            let mut w = n.watchers.lock().unwrap_or_else(|e| e.into_inner());
            if !w.iter().any(|(i, t)| *i == k && std::ptr::eq(t.as_ptr(), Arc::as_ptr(&self.0))) {
                w.push((k, Arc::downgrade(&self.0)));
            }
        }
    }
    /// `tensor.retains_grad`.
    pub fn retains_grad(&self) -> bool {
        self.0.retains_grad.load(Ordering::Relaxed)
    }
    /// `tensor.register_hook(f)`: `f` sees the gradient during backward and may return a replacement.
    pub fn register_hook(&self, f: impl Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync + 'static) -> Result<()> {
        if !self.requires_grad() {
            return Err(Error::autograd("register_hook", "cannot register a hook on a tensor that doesn't require gradient"));
        }
        self.0.hooks.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::new(Box::new(f)));
        self.watch();
        Ok(())
    }
    pub(crate) fn hooks(&self) -> Vec<Arc<GradHook>> {
        self.0.hooks.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// `tensor.register_post_accumulate_grad_hook(f)`: on a leaf that requires grad, `f` runs
    /// during `backward` as soon as this pass's gradient of the leaf is complete and accumulated
    /// into `.grad` (before the rest of the backward pass has run), in registration order. Data
    /// parallelism starts each gradient's all-reduce from here. `autograd::grad` does not run it.
    pub fn register_post_accumulate_grad_hook(&self, f: impl Fn(&Tensor) -> Result<()> + Send + Sync + 'static) -> Result<()> {
        if !self.requires_grad() {
            return Err(Error::autograd("register_post_accumulate_grad_hook", "cannot register a hook on a tensor that doesn't require gradient"));
        }
        if !self.is_leaf() {
            return Err(Error::autograd("register_post_accumulate_grad_hook", "post accumulate grad hooks cannot be registered on non-leaf tensors"));
        }
        self.0.post_accumulate_hooks.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::new(Box::new(f)));
        Ok(())
    }
    pub(crate) fn post_accumulate_hooks(&self) -> Vec<Arc<PostAccumulateGradHook>> {
        self.0.post_accumulate_hooks.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// `tensor.detach()`: the same data with no history.
    /// It shares the storage and version counter but is not a view for autograd (`._base` is None).
    pub fn detach(&self) -> Tensor {
        Self::from_parts(self.0.storage.clone(), self.0.layout.clone(), None)
    }
    /// `detach()` when `flag`, else the same handle.
    pub fn detach_if(&self, flag: bool) -> Tensor {
        if flag {
            self.detach()
        } else {
            self.clone()
        }
    }
    /// `tensor.detach_()`: drops this handle's history in place; it becomes a leaf.
    pub fn detach_(&self) -> Tensor {
        self.set_grad_fn(None);
        self.0.requires_grad.store(false, Ordering::Relaxed);
        self.clone()
    }
    /// `tensor.backward()` on a scalar (gradient 1), or with an explicit gradient.
    pub fn backward(&self) -> Result<()> {
        autograd::backward(&[self.clone()], &[], false, false)
    }
    /// `tensor.backward(gradient, retain_graph, create_graph)`.
    pub fn backward_with(&self, gradient: Option<&Tensor>, retain_graph: bool, create_graph: bool) -> Result<()> {
        let g: Vec<Tensor> = gradient.into_iter().cloned().collect();
        autograd::backward(&[self.clone()], &g, retain_graph, create_graph)
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", crate::format::format_tensor(self))
    }
}

impl std::fmt::Display for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", crate::format::format_tensor(self))
    }
}
