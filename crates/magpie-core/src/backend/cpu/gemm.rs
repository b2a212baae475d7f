//! Batched matrix products on the CPU: the `gemm` crate for f32/f64/f16/complex (strided, so
//! transposed and broadcast views need no copies), f32 for bf16, and a blocked i64 loop for ints.

use crate::dtype::DType;
use crate::element::Element;
use crate::layout::{indices, Layout};
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::{Error, Result};
use rayon::prelude::*;

/// Below this many multiply-adds per matrix, batches are split across threads instead of
/// each product (thread wake-up costs more than a small product).
const SMALL_GEMM: usize = 64 * 64 * 64;
/// Largest right-hand side (`k * n` elements) for which `addmm_bias` splits rows into
/// independent products rather than letting the gemm crate share the packed operand.
const ROW_SPLIT_MAX_RHS: usize = 1 << 18;

/// Where one operand's matrices lie: offsets of each batch's matrix, and the row and column
/// strides of the matrix (in elements).
struct Operand {
    offsets: Vec<usize>,
    rs: isize,
    cs: isize,
}

/// Batch offsets and matrix strides of `t` (shape `[batch..., r, c]`).
fn operand(t: &Tensor) -> Operand {
    let l = t.layout();
    let nd = l.ndim();
    let batch = Layout { shape: l.shape[..nd - 2].to_vec(), strides: l.strides[..nd - 2].to_vec(), offset: l.offset };
    Operand { offsets: indices(&batch), rs: l.strides[nd - 2] as isize, cs: l.strides[nd - 1] as isize }
}

/// `a @ b` for `a: [batch..., m, k]`, `b: [batch..., k, n]` with the same batch shape and dtype
/// (any strides, including the zero strides of broadcast batches). Returns a contiguous
/// `[batch..., m, n]` tensor of that dtype. Not recorded by autograd.
pub fn batched_matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let op = "matmul";
    let (sa, sb) = (a.shape(), b.shape());
    let nd = sa.len();
    if nd < 2 || sb.len() != nd || sa[..nd - 2] != sb[..nd - 2] || sa[nd - 1] != sb[nd - 2] {
        return Err(Error::shape(op, format!("batched_matmul: shapes {sa:?} and {sb:?} cannot be multiplied")));
    }
    if a.dtype() != b.dtype() {
        return Err(Error::dtype(
            op,
            format!("expected m1 and m2 to have the same dtype, but got: {} != {}", a.dtype().name(), b.dtype().name()),
        ));
    }
    let (m, k, n) = (sa[nd - 2], sa[nd - 1], sb[nd - 1]);
    let mut out_shape = sa[..nd - 2].to_vec();
    out_shape.extend([m, n]);
    let dt = a.dtype();
    if m * n == 0 || out_shape.contains(&0) || k == 0 {
        if dt.is_bool() || dt.is_float8() {
            return Err(Error::dtype(op, format!("\"addmm_impl_cpu_\" not implemented for '{}'", dt.name())));
        }
        return Tensor::zeros_on(&out_shape, dt, a.device());
    }
    match dt {
        DType::F32 => native::<f32>(a, b, m, k, n, &out_shape),
        DType::F64 => native::<f64>(a, b, m, k, n, &out_shape),
        // float16: in f32 too; the gemm crate's f16 kernel accumulates in f16, where PyTorch's
        // CPU accumulates in f32 and rounds once
        DType::F16 => {
            let r = batched_matmul(&a.to_dtype(DType::F32)?, &b.to_dtype(DType::F32)?)?;
            let v: Vec<half::f16> = super::to_vec(&r)?;
            Tensor::from_vec(v, &out_shape)
        }
        DType::C64 => native::<num_complex::Complex32>(a, b, m, k, n, &out_shape),
        DType::C128 => native::<num_complex::Complex64>(a, b, m, k, n, &out_shape),
        DType::BF16 => {
            // No bf16 kernel: compute in f32 (as PyTorch accumulates bf16 products) and round once.
            let r = batched_matmul(&a.to_dtype(DType::F32)?, &b.to_dtype(DType::F32)?)?;
            let v: Vec<half::bf16> = super::to_vec(&r)?;
            Tensor::from_vec(v, &out_shape)
        }
        d if d.is_int() => integer(a, b, m, k, n, &out_shape, d),
        d => Err(Error::dtype(op, format!("\"addmm_impl_cpu_\" not implemented for '{}'", d.name()))),
    }
}

/// Runs the `gemm` crate on each batch, reading the operands in place.
fn native<T: Element>(a: &Tensor, b: &Tensor, m: usize, k: usize, n: usize, out_shape: &[usize]) -> Result<Tensor> {
    let (oa, ob) = (operand(a), operand(b));
    let batch = oa.offsets.len();
    let len = batch * m * n;
    if k == 0 || len == 0 {
        // nothing to multiply: the product is zeros
        return Tensor::from_vec(vec![T::default(); len], out_shape);
    }
    // Uninitialised output (no memset of a buffer gemm overwrites anyway): written through
    // raw pointers only, and its length set once every product has run.
    let mut out: Vec<T> = Vec::with_capacity(len);
    crate::storage::advise_huge_pages(&mut out);
    let po = out.as_mut_ptr() as usize;
    let ga = a.storage().read();
    // One read guard when both operands share storage (`x @ x.mT`).
    let gb = if a.shares_storage(b) { None } else { Some(b.storage().read()) };
    let sa: &[T] = slice_of(&ga)?;
    let sb: &[T] = match &gb {
        Some(g) => slice_of(g)?,
        None => sa,
    };
    let (pa, pb) = (sa.as_ptr() as usize, sb.as_ptr() as usize);
    let run = |i: usize, par: gemm::Parallelism| {
        // SAFETY: the layouts lie within their storages (checked when the views were made), the
        // destination is block `i` (m×n, row-major) of the `len`-element allocation, written
        // (not read: `read_dst` is false) by this call only, and T is one of gemm's types.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                (po as *mut T).add(i * m * n),
                1,
                n as isize,
                false,
                (pa as *const T).add(oa.offsets[i]),
                oa.cs,
                oa.rs,
                (pb as *const T).add(ob.offsets[i]),
                ob.cs,
                ob.rs,
                T::default(),
                T::from_f64(1.0),
                false,
                false,
                false,
                par,
            )
        }
    };
    let threads = rayon::current_num_threads();
    // Many products (attention's [B*H, T, hd] batches): one thread per product, no
    // synchronisation inside; few large ones: each product split over the threads.
    if batch == 1 || (m * n * k >= SMALL_GEMM && batch < 2 * threads) {
        for i in 0..batch {
            run(i, gemm::Parallelism::Rayon(threads));
        }
    } else {
        (0..batch).into_par_iter().for_each(|i| run(i, gemm::Parallelism::None));
    }
    // SAFETY: with k > 0 and `read_dst` false each product wrote every element of its block,
    // and the blocks tile the allocation.
    unsafe { out.set_len(len) };
    drop(gb);
    drop(ga);
    Tensor::from_vec(out, out_shape)
}

fn slice_of<T: Element>(s: &Storage) -> Result<&[T]> {
    match s {
        Storage::Cpu(c) => T::slice(c).ok_or_else(|| Error::dtype("matmul", "storage dtype mismatch")),
        Storage::Cuda(_) => Err(crate::backend::cuda::cpu_only("matmul")),
    }
}

/// Integer products in i64 with wrapping (as PyTorch's integer kernels), cast back to `dt`.
fn integer(a: &Tensor, b: &Tensor, m: usize, k: usize, n: usize, out_shape: &[usize], dt: DType) -> Result<Tensor> {
    let av: Vec<i64> = super::to_vec(a)?;
    let bv: Vec<i64> = super::to_vec(b)?;
    let batch = av.len() / (m * k);
    let mut out = vec![0i64; batch * m * n];
    let row = |(r, dst): (usize, &mut [i64])| {
        let (bi, i) = (r / m, r % m);
        let arow = &av[bi * m * k + i * k..bi * m * k + (i + 1) * k];
        let bm = &bv[bi * k * n..(bi + 1) * k * n];
        for (p, &x) in arow.iter().enumerate() {
            if x == 0 {
                continue;
            }
            for (d, &y) in dst.iter_mut().zip(&bm[p * n..(p + 1) * n]) {
                *d = d.wrapping_add(x.wrapping_mul(y));
            }
        }
    };
    if batch * m * n * k >= SMALL_GEMM {
        out.par_chunks_mut(n).enumerate().for_each(row);
    } else {
        out.chunks_mut(n).enumerate().for_each(row);
    }
    crate::with_dtype!(dt, T, { Tensor::from_vec(out.into_iter().map(T::from_i64).collect::<Vec<T>>(), out_shape) })
}

/// `bias + x @ w` for a 2-d `x: [m, k]` and `w: [k, n]` of dtype f32 or f64 (any strides: a
/// transposed weight is read in place), with `bias: [n]` (any stride) broadcast over the rows.
/// The bias is written into the output first and the product accumulated onto it, so the
/// bias costs no extra pass or temporary (PyTorch's `addmm` for `linear`). The result is a new
/// tensor of `out_shape` (`m * n` elements; given so that callers need no reshaped view, which
/// would keep a second handle on the storage). Not recorded.
pub fn addmm_bias(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, out_shape: &[usize]) -> Result<Tensor> {
    addmm_bias_on(x, w, bias, out_shape, true)
}

/// [`addmm_bias`] on the calling thread only when `split` is false: for products that run
/// side by side (a linear layer's two gradients), where one thread per product beats both
/// threads on each (no synchronisation inside the product).
pub fn addmm_bias_on(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, out_shape: &[usize], split: bool) -> Result<Tensor> {
    match x.dtype() {
        DType::F32 => addmm_bias_t::<f32>(x, w, bias, out_shape, split),
        DType::F64 => addmm_bias_t::<f64>(x, w, bias, out_shape, split),
        d => Err(Error::dtype("linear", format!("addmm_bias: unsupported dtype {}", d.name()))),
    }
}

fn addmm_bias_t<T: Element>(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, out_shape: &[usize], split: bool) -> Result<Tensor> {
    if x.ndim() != 2 || w.ndim() != 2 || w.shape()[0] != x.shape()[1] || x.dtype() != w.dtype() {
        return Err(Error::shape("linear", format!("addmm_bias: shapes {:?} and {:?} cannot be multiplied", x.shape(), w.shape())));
    }
    let (m, k, n) = (x.shape()[0], x.shape()[1], w.shape()[1]);
    if out_shape.iter().product::<usize>() != m * n {
        return Err(Error::shape("linear", format!("addmm_bias: output shape {out_shape:?} for a {m}x{n} product")));
    }
    let mut out: Vec<T> = match bias {
        Some(b) => {
            let bv: Vec<T> = super::to_vec(b)?;
            if bv.len() != n {
                return Err(Error::shape("linear", format!("bias of {} elements for {n} outputs", bv.len())));
            }
            let mut o = Vec::with_capacity(m * n);
            for _ in 0..m {
                o.extend_from_slice(&bv);
            }
            o
        }
        // zeros only when no product will overwrite them; otherwise left uninitialised below
        None if k == 0 => vec![T::default(); m * n],
        None => Vec::with_capacity(m * n),
    };
    if m * n == 0 {
        return Tensor::from_vec(out, out_shape);
    }
    if k > 0 {
        let ga = x.storage().read();
        let gb = if x.shares_storage(w) { None } else { Some(w.storage().read()) };
        let sa: &[T] = slice_of(&ga)?;
        let sb: &[T] = match &gb {
            Some(g) => slice_of(g)?,
            None => sa,
        };
        let (lx, lw) = (x.layout(), w.layout());
        let threads = rayon::current_num_threads();
        let (po, pa, pb) = (out.as_mut_ptr() as usize, sa.as_ptr() as usize, sb.as_ptr() as usize);
        // rows r0..r1 of the product, on `par`
        let rows = |r0: usize, r1: usize, par: gemm::Parallelism| {
            // SAFETY: both layouts lie within their storages (checked when the views were made),
            // rows r0..r1 of x and of the row-major m×n `out` are in bounds, each call writes only
            // its own rows (read first only with a bias, when they are initialised); T is f32 or f64.
            unsafe {
                gemm::gemm(
                    r1 - r0,
                    n,
                    k,
                    (po as *mut T).add(r0 * n),
                    1,
                    n as isize,
                    bias.is_some(),
                    (pa as *const T).add(lx.offset + r0 * lx.strides[0]),
                    lx.strides[1] as isize,
                    lx.strides[0] as isize,
                    (pb as *const T).add(lw.offset),
                    lw.strides[1] as isize,
                    lw.strides[0] as isize,
                    T::from_f64(1.0),
                    T::from_f64(1.0),
                    false,
                    false,
                    false,
                    par,
                )
            }
        };
        if !split || m * n * k < SMALL_GEMM || threads == 1 {
            rows(0, m, gemm::Parallelism::None);
        } else if k * n <= ROW_SPLIT_MAX_RHS && m >= 128 * threads {
            // a small right-hand side: one independent product per block of rows (each packs the
            // whole, small, weight itself; no synchronisation inside), measured faster than the
            // crate's own split at a GPT's shapes (`gemm-threads`, benchmark/NOTES.md)
            let per = m.div_ceil(threads);
            (0..threads).into_par_iter().for_each(|t| {
                let (r0, r1) = (t * per, ((t + 1) * per).min(m));
                if r0 < r1 {
                    rows(r0, r1, gemm::Parallelism::None);
                }
            });
        } else {
            rows(0, m, gemm::Parallelism::Rayon(threads));
        }
        unsafe {
            // SAFETY: the product (k > 0) wrote all m×n elements.
            out.set_len(m * n);
        }
    }
    Tensor::from_vec(out, out_shape)
}
