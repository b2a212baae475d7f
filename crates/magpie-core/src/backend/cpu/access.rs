//! Reading and writing strided CPU tensors as typed slices.

use crate::element::Element;
use crate::layout::{for_each_run, Layout};
use crate::storage::{CpuStorage, Storage};
use crate::tensor::Tensor;
use crate::{Error, Result};

fn cpu<'a>(op: &str, s: &'a Storage) -> Result<&'a CpuStorage> {
    match s {
        Storage::Cpu(c) => Ok(c),
        Storage::Cuda(_) => Err(crate::backend::cuda::cpu_only(op)),
    }
}

/// The elements of `src` at the positions of `layout`, in row-major order, cast to `T`.
pub fn gather<S: Element, T: Element>(src: &[S], layout: &Layout) -> Vec<T> {
    let mut out = Vec::with_capacity(layout.numel());
    // runs of contiguous elements copy as slices (a plain copy when the cast is the identity)
    for_each_run(layout, |start, len, stride| {
        if stride == 1 {
            out.extend(src[start..start + len].iter().map(|&x| T::cast_from(x)));
        } else {
            out.extend((0..len).map(|j| T::cast_from(src[start + j * stride])));
        }
    });
    out
}

/// Runs `f` on the elements of `t` as a row-major `&[T]`: borrowed when `t` is contiguous and
/// already of type `T`, otherwise gathered and cast first.
pub fn read<T: Element, R>(t: &Tensor, f: impl FnOnce(&[T]) -> R) -> Result<R> {
    let guard = t.storage().read();
    let s = cpu("read", &guard)?;
    let l = t.layout();
    if l.numel() == 0 {
        // an empty view may carry an offset past the end of an empty storage
        return Ok(f(&[]));
    }
    if let Some(v) = T::slice(s) {
        if l.is_contiguous() {
            let n = l.numel();
            return Ok(f(&v[l.offset..l.offset + n]));
        }
    }
    let data: Vec<T> = crate::with_dtype!(s.dtype(), S, {
        let src = S::slice(s).ok_or_else(|| Error::dtype("read", "storage dtype mismatch"))?;
        gather::<S, T>(src, l)
    });
    drop(guard);
    Ok(f(&data))
}

/// The elements of `t` as a row-major `Vec<T>` (cast with PyTorch's rules).
pub fn to_vec<T: Element>(t: &Tensor) -> Result<Vec<T>> {
    if t.is_contiguous() && t.numel() >= PAR_COPY_MIN {
        let guard = t.storage().read();
        let s = cpu("read", &guard)?;
        let (lo, n) = (t.layout().offset, t.numel());
        return crate::with_dtype!(s.dtype(), S, {
            let src = S::slice(s).ok_or_else(|| Error::dtype("read", "storage dtype mismatch"))?;
            let src = src.get(lo..lo + n).ok_or_else(|| Error::shape("read", "view past the end of its storage"))?;
            Ok(par_cast::<S, T>(src))
        });
    }
    read(t, |s: &[T]| s.to_vec())
}

/// Elements from which a contiguous copy or cast runs on the thread pool: a large tensor's copy
/// is bound by page faults on the fresh output and by memory bandwidth, which one core does not
/// saturate (a model's bf16 -> f32 load, benchmark/NOTES.md "Open to first forward").
const PAR_COPY_MIN: usize = 1 << 18;

/// `src` cast to `T` (a copy when `S` is `T`), written in parallel chunks straight into the
/// output's memory (rayon's indexed collect), so its pages are first touched in parallel too.
fn par_cast<S: Element, T: Element>(src: &[S]) -> Vec<T> {
    use rayon::prelude::*;
    src.par_iter().with_min_len(1 << 15).map(|&x| T::cast_from(x)).collect()
}

/// Writes `values` (row-major over `t`'s shape, already `t`'s dtype or cast to it) through `t`'s layout.
pub fn scatter_into<T: Element>(t: &Tensor, values: &[T]) -> Result<()> {
    if values.len() != t.numel() {
        return Err(Error::shape("copy_", format!("{} values for a tensor of {} elements", values.len(), t.numel())));
    }
    let layout = t.layout().clone();
    let mut guard = t.storage().write();
    let s = match &mut *guard {
        Storage::Cpu(c) => c,
        Storage::Cuda(_) => return Err(crate::backend::cuda::cpu_only("copy_")),
    };
    crate::with_dtype!(s.dtype(), D, {
        let dst = D::slice_mut(s).ok_or_else(|| Error::dtype("copy_", "storage dtype mismatch"))?;
        let mut k = 0;
        for_each_run(&layout, |start, len, stride| {
            let vals = &values[k..k + len];
            if stride == 1 {
                for (d, &v) in dst[start..start + len].iter_mut().zip(vals) {
                    *d = D::cast_from(v);
                }
            } else {
                for (j, &v) in vals.iter().enumerate() {
                    dst[start + j * stride] = D::cast_from(v);
                }
            }
            k += len;
        });
    });
    Ok(())
}

/// Runs `f` on the elements of a contiguous tensor of type `T` for an in-place update
/// (optimizer steps, cache writes). Bumps the version counter like every in-place write.
pub fn write<T: Element, R>(t: &Tensor, f: impl FnOnce(&mut [T]) -> R) -> Result<R> {
    if !t.is_contiguous() {
        return Err(Error::value("write", "in-place element access needs a contiguous tensor"));
    }
    if t.dtype() != T::DTYPE {
        return Err(Error::dtype("write", format!("tensor is {}, accessed as {}", t.dtype(), T::DTYPE)));
    }
    let l = t.layout().clone();
    let mut guard = t.storage().write();
    let s = match &mut *guard {
        Storage::Cpu(c) => c,
        Storage::Cuda(_) => return Err(crate::backend::cuda::cpu_only("write")),
    };
    let v = T::slice_mut(s).ok_or_else(|| Error::dtype("write", "storage dtype mismatch"))?;
    Ok(f(&mut v[l.offset..l.offset + l.numel()]))
}
