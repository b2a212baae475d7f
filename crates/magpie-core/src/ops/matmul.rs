//! The matmul family: `matmul`, `mm`, `bmm`, `mv`, `dot`, `vdot`, `inner`, `outer`, `addmm`,
//! `addmv`, `addbmm`, `baddbmm`, `addr`, `tensordot`, `kron`, `multi_dot`, `cross`, `trace`, `vecdot`.
//! One primitive (a batched product of equal-batch operands) carries the backward rule; every
//! other op is a composition of it with views and elementwise ops, so all are twice differentiable.

mod einsum;

pub use einsum::einsum;

use crate::ops::acc;
use crate::autograd::{self, Saved};
use crate::backend::cpu::gemm::batched_matmul;
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::shape::{broadcast_shapes, wrap_dim};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `a @ b` for `a: [batch..., m, k]`, `b: [batch..., k, n]` of equal batch shape: the primitive
/// that records the backward rule `ga = g @ bᵀ`, `gb = aᵀ @ g`.
pub(crate) fn mm_prim(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    crate::ops::same_device("matmul", &[a, b])?;
    let out = match cuda_matmul(a, b)? {
        Some(o) => o,
        None if a.device().is_cuda() && a.dtype().is_integral() && !a.dtype().is_bool() => int_matmul_on_device(a, b)?,
        None => batched_matmul(a, b)?,
    };
    if out.dtype().is_float() || out.dtype().is_complex() {
        let (sa, sb) = (Saved::new("mm", a), Saved::new("mm", b));
        let name = if a.ndim() == 2 { "Mm" } else { "Bmm" };
        autograd::record(name, &[a, b], &[out.clone()], move |ctx, g| {
            // on CUDA, the gradient of a transposed contiguous operand (a `Linear` weight's `.t()`)
            // is computed transposed, so that it comes out in that operand's layout and the
            // transpose's backward hands on a contiguous tensor (as PyTorch's mm backward does)
            let ga = if !ctx.needs_input_grad(0) {
                None
            } else if transposed_contiguous(&g[0], &sa.get()?) {
                Some(mm_prim(&sb.get()?, &g[0].mt()?)?.mt()?)
            } else {
                Some(mm_prim(&g[0], &sb.get()?.mt()?)?)
            };
            let gb = if !ctx.needs_input_grad(1) {
                None
            } else if transposed_contiguous(&g[0], &sb.get()?) {
                Some(mm_prim(&g[0].mt()?, &sa.get()?)?.mt()?)
            } else {
                Some(mm_prim(&sa.get()?.mt()?, &g[0])?)
            };
            Ok(vec![ga, gb])
        });
    }
    Ok(out)
}

/// `a @ b` of integer CUDA tensors (equal batch shapes), which cuBLAS has no product for: the
/// broadcast products `[.., m, k, n]` summed over `k` with the device's elementwise and
/// reduction kernels, wrapping on overflow in the operands' dtype as the CPU kernel does.
/// (PyTorch's CUDA rejects integer matmul; this keeps the CPU's result on the device.)
fn int_matmul_on_device(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let _ng = autograd::no_grad();
    let prod = a.unsqueeze(-1)?.mul(&b.unsqueeze(-3)?)?;
    prod.sum_dims(Some(&[-2]), false, None)?.to_dtype(a.dtype())
}

/// True for a CUDA operand whose last two dims are a transposed contiguous matrix (neither of
/// size 1), where `g` is on a GPU too.
fn transposed_contiguous(g: &Tensor, t: &Tensor) -> bool {
    let nd = t.ndim();
    g.device().is_cuda() && t.device().is_cuda() && nd >= 2 && t.shape()[nd - 1] > 1 && t.shape()[nd - 2] > 1 && t.layout().transpose(nd - 2, nd - 1).is_contiguous()
}

/// The product by cuBLAS for CUDA operands of a float dtype (None: the CPU path).
fn cuda_matmul(a: &Tensor, b: &Tensor) -> Result<Option<Tensor>> {
    #[cfg(feature = "cuda")]
    if a.device().is_cuda() && b.device().is_cuda() && a.dtype() == b.dtype() && a.ndim() >= 2 && a.ndim() == b.ndim() {
        let nd = a.ndim();
        if a.shape()[..nd - 2] == b.shape()[..nd - 2] && a.shape()[nd - 1] == b.shape()[nd - 2] {
            return crate::backend::cuda::blas::batched_matmul(a, b);
        }
    }
    let _ = (a, b);
    Ok(None)
}

/// `a @ b` of CUDA bfloat16 / float16 operands (`[batch..., m, k]` and `[batch..., k, n]`, equal
/// batch shape) as a float32 product: cuBLAS accumulates in float32 and stores the accumulator
/// unrounded, so a bias or `beta * input` added to it in float32 rounds once, as the epilogue of
/// PyTorch's CUDA `addmm` does. None for other operands (the caller takes its own path).
/// Recorded by autograd: the input gradients are 16-bit products of the gradient rounded to the
/// operands' dtype.
pub(crate) fn mm_acc(a: &Tensor, b: &Tensor) -> Result<Option<Tensor>> {
    #[cfg(feature = "cuda")]
    {
        let h = a.dtype();
        let nd = a.ndim();
        let fits = a.device().is_cuda() && b.device() == a.device() && matches!(h, DType::BF16 | DType::F16) && b.dtype() == h;
        if fits && nd >= 2 && b.ndim() == nd && a.shape()[..nd - 2] == b.shape()[..nd - 2] && a.shape()[nd - 1] == b.shape()[nd - 2] {
            let Some(out) = crate::backend::cuda::blas::batched_matmul_to(a, b, DType::F32)? else { return Ok(None) };
            let (sa, sb) = (Saved::new("mm", a), Saved::new("mm", b));
            autograd::record(if nd == 2 { "Mm" } else { "Bmm" }, &[a, b], std::slice::from_ref(&out), move |ctx, g| {
                let g = g[0].to_dtype(h)?;
                let ga = if ctx.needs_input_grad(0) { Some(mm_prim(&g, &sb.get()?.mt()?)?) } else { None };
                let gb = if ctx.needs_input_grad(1) { Some(mm_prim(&sa.get()?.mt()?, &g)?) } else { None };
                Ok(vec![ga, gb])
            });
            return Ok(Some(out));
        }
    }
    let _ = (a, b);
    Ok(None)
}

fn same_dtype(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(Error::dtype(
            op,
            format!("expected m1 and m2 to have the same dtype, but got: {} != {}", a.dtype().name(), b.dtype().name()),
        ));
    }
    Ok(())
}

fn dims_str(s: &[usize]) -> String {
    s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
}

/// A scalar factor as the tensor's dtype would take it: integer tensors truncate float factors
/// (as PyTorch converts `alpha`/`beta` to the integer type).
fn factor(t: &Tensor, s: Scalar) -> Scalar {
    if t.dtype().is_integral() {
        Scalar::Int(s.to_i64())
    } else {
        s
    }
}

fn is_one(s: Scalar) -> bool {
    s.to_c128() == num_complex::Complex64::new(1.0, 0.0)
}

/// `beta * input + alpha * prod` with PyTorch's `add*` conventions: `input` is broadcast to
/// `prod`'s shape, and `beta == 0` ignores `input` entirely (NaN and inf included).
fn add_scaled(op: &str, input: &Tensor, prod: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
    if input.dtype() != prod.dtype() {
        return Err(Error::dtype(
            op,
            format!("expected self and mat2 to have the same dtype, but got: {} != {}", input.dtype().name(), prod.dtype().name()),
        ));
    }
    if input.dtype().is_integral() && (!beta.is_integral() || !alpha.is_integral()) && input.dtype().is_bool() {
        return Err(Error::dtype(op, "Boolean alpha only supported for Boolean results."));
    }
    let inp = input.broadcast_to(prod.shape()).map_err(|_| {
        Error::shape(op, format!("The expanded size of the input {:?} does not match the product's size {:?}", input.shape(), prod.shape()))
    })?;
    let (beta, alpha) = (factor(prod, beta), factor(prod, alpha));
    let p = if is_one(alpha) { prod.clone() } else { prod.mul_scalar(alpha)?.to_dtype(prod.dtype())? };
    if beta.to_c128() == num_complex::Complex64::new(0.0, 0.0) {
        return Ok(p);
    }
    let i = if is_one(beta) { inp } else { inp.mul_scalar(beta)?.to_dtype(prod.dtype())? };
    i.add(&p)
}

impl Tensor {
    /// `torch.matmul(a, b)` (`a @ b`): dot, matrix-vector, matrix-matrix or batched products
    /// with broadcast batch dims, by the operands' dims as in PyTorch.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let _prof = crate::profiler::op("matmul", &[self, other]);
        if let Some(c) = crate::amp::tensors("matmul", &[self, other])? {
            return c.args[0].matmul(&c.args[1]);
        }
        let (a, b) = (self, other);
        let (da, db) = (a.ndim(), b.ndim());
        if da == 0 || db == 0 {
            return Err(Error::shape(
                "matmul",
                format!("both arguments to matmul need to be at least 1D, but they are {da}D and {db}D"),
            ));
        }
        same_dtype("matmul", a, b)?;
        if da == 1 && db == 1 {
            return a.dot(b);
        }
        if da == 1 {
            return a.unsqueeze(0)?.matmul(b)?.squeeze_dims(&[-2]);
        }
        if db == 1 {
            return a.matmul(&b.unsqueeze(1)?)?.squeeze_dims(&[-1]);
        }
        let (m, k) = (a.shape()[da - 2], a.shape()[da - 1]);
        let (k2, n) = (b.shape()[db - 2], b.shape()[db - 1]);
        if k != k2 {
            return Err(Error::shape(
                "matmul",
                format!(
                    "mat1 and mat2 shapes cannot be multiplied ({}x{k} and {k2}x{n})",
                    a.shape()[..da - 1].iter().product::<usize>()
                ),
            ));
        }
        // [batch..., m, k] @ [k, n]: fold the batch into the rows, one large product.
        if db == 2 && da > 2 {
            if let Some(_) = a.layout().view(&[a.numel() / k.max(1), k]) {
                if k > 0 {
                    let flat = a.reshape(&[-1, k as i64])?;
                    let mut shape: Vec<i64> = a.shape()[..da - 1].iter().map(|&s| s as i64).collect();
                    shape.push(n as i64);
                    return mm_prim(&flat, b)?.reshape(&shape);
                }
            }
        }
        let batch = broadcast_shapes("matmul", &a.shape()[..da - 2], &b.shape()[..db - 2])?;
        let mut sa = batch.clone();
        sa.extend([m, k]);
        let mut sb = batch;
        sb.extend([k, n]);
        mm_prim(&a.broadcast_to(&sa)?, &b.broadcast_to(&sb)?)
    }
    /// `torch.mm(a, b)`: 2-d by 2-d.
    pub fn mm(&self, other: &Tensor) -> Result<Tensor> {
        let _prof = crate::profiler::op("mm", &[self, other]);
        if let Some(c) = crate::amp::tensors("mm", &[self, other])? {
            return c.args[0].mm(&c.args[1]);
        }
        if self.ndim() != 2 || other.ndim() != 2 {
            let bad = if self.ndim() != 2 { self } else { other };
            let which = if self.ndim() != 2 { "self" } else { "mat2" };
            return Err(Error::shape("mm", format!("{which} must be a matrix, got {}-D tensor", bad.ndim())));
        }
        same_dtype("mm", self, other)?;
        if self.shape()[1] != other.shape()[0] {
            return Err(Error::shape(
                "mm",
                format!("mat1 and mat2 shapes cannot be multiplied ({} and {})", dims_str(self.shape()), dims_str(other.shape())),
            ));
        }
        mm_prim(self, other)
    }
    /// `torch.bmm(a, b)`: 3-d by 3-d with equal batch sizes.
    pub fn bmm(&self, other: &Tensor) -> Result<Tensor> {
        let _prof = crate::profiler::op("bmm", &[self, other]);
        if let Some(c) = crate::amp::tensors("bmm", &[self, other])? {
            return c.args[0].bmm(&c.args[1]);
        }
        if self.ndim() != 3 || other.ndim() != 3 {
            let bad = if self.ndim() != 3 { self } else { other };
            return Err(Error::shape("bmm", format!("batch1 must be a 3D tensor, got {}-D tensor", bad.ndim())));
        }
        same_dtype("bmm", self, other)?;
        let (sa, sb) = (self.shape(), other.shape());
        if sa[0] != sb[0] || sa[2] != sb[1] {
            return Err(Error::shape(
                "bmm",
                format!("Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].", sa[0], sa[2], sb[0], sb[1]),
            ));
        }
        mm_prim(self, other)
    }
    /// `torch.mv(mat, vec)`.
    pub fn mv(&self, vec: &Tensor) -> Result<Tensor> {
        let _prof = crate::profiler::op("mv", &[self, vec]);
        if let Some(c) = crate::amp::tensors("mv", &[self, vec])? {
            return c.args[0].mv(&c.args[1]);
        }
        if self.ndim() != 2 || vec.ndim() != 1 {
            return Err(Error::shape(
                "mv",
                format!("vector + matrix @ vector expected, got {}, {}, {}", 1, self.ndim(), vec.ndim()),
            ));
        }
        same_dtype("mv", self, vec)?;
        if self.shape()[1] != vec.shape()[0] {
            return Err(Error::shape(
                "mv",
                format!("size mismatch, got input ({}), mat ({}), vec ({})", self.shape()[0], dims_str(self.shape()), vec.shape()[0]),
            ));
        }
        mm_prim(self, &vec.unsqueeze(1)?)?.squeeze_dims(&[1])
    }
    /// `torch.dot(a, b)`: 1-d tensors of equal size and dtype, a 0-d result.
    pub fn dot(&self, other: &Tensor) -> Result<Tensor> {
        let _prof = crate::profiler::op("dot", &[self, other]);
        if let Some(c) = crate::amp::tensors("dot", &[self, other])? {
            return c.args[0].dot(&c.args[1]);
        }
        dot_checks("dot", self, other)?;
        mm_prim(&self.unsqueeze(0)?, &other.unsqueeze(1)?)?.reshape(&[])
    }
    /// `torch.vdot(a, b)`: `dot` with the first argument conjugated (the same for real tensors).
    pub fn vdot(&self, other: &Tensor) -> Result<Tensor> {
        let _prof = crate::profiler::op("vdot", &[self, other]);
        if let Some(c) = crate::amp::tensors("vdot", &[self, other])? {
            return c.args[0].vdot(&c.args[1]);
        }
        dot_checks("vdot", self, other)?;
        if self.dtype().is_complex() {
            return Err(Error::unsupported("vdot", "complex inputs"));
        }
        self.dot(other)
    }
    /// `torch.inner(a, b)`: sums over the last dims (a product when either is 0-d).
    pub fn inner(&self, other: &Tensor) -> Result<Tensor> {
        if self.ndim() == 0 || other.ndim() == 0 {
            return self.mul(other);
        }
        let (ka, kb) = (self.shape()[self.ndim() - 1], other.shape()[other.ndim() - 1]);
        if ka != kb {
            return Err(Error::shape(
                "inner",
                format!("inner() the last dimension must match on both input tensors but got shapes {:?} and {:?}", self.shape(), other.shape()),
            ));
        }
        tensordot(self, other, &[self.ndim() as i64 - 1], &[other.ndim() as i64 - 1])
    }
    /// `torch.outer(a, b)` (`ger`): the outer product of two vectors.
    pub fn outer(&self, other: &Tensor) -> Result<Tensor> {
        for (t, name) in [(self, "self"), (other, "vec2")] {
            if t.ndim() != 1 {
                return Err(Error::shape("outer", format!("outer: Expected 1-D argument {name}, but got {}-D", t.ndim())));
            }
        }
        self.unsqueeze(1)?.mul(&other.unsqueeze(0)?)
    }
    /// `torch.addmm(input, mat1, mat2, beta=, alpha=)`: `beta * input + alpha * (mat1 @ mat2)`.
    pub fn addmm(&self, mat1: &Tensor, mat2: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
        let _prof = crate::profiler::op("addmm", &[self, mat1, mat2]);
        if let Some(c) = crate::amp::tensors("addmm", &[self, mat1, mat2])? {
            return c.args[0].addmm(&c.args[1], &c.args[2], beta, alpha);
        }
        if let Some(h) = acc::half_acc(&[self, mat1, mat2]) {
            // half tensors: product and sum in float32, rounded once (PyTorch's acc_type); on
            // CUDA the 16-bit product stored in float32, elsewhere float32 copies
            if mat1.ndim() == 2 {
                if let Some(p) = mm_acc(mat1, mat2)? {
                    return acc::down(add_scaled("addmm", &acc::up(self)?, &p, beta, alpha)?, h);
                }
            }
            return acc::down(acc::up(self)?.addmm(&acc::up(mat1)?, &acc::up(mat2)?, beta, alpha)?, h);
        }
        let p = mat1.mm(mat2)?;
        add_scaled("addmm", self, &p, beta, alpha)
    }
    /// `torch.addmv(input, mat, vec, beta=, alpha=)`.
    pub fn addmv(&self, mat: &Tensor, vec: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
        let _prof = crate::profiler::op("addmv", &[self, mat, vec]);
        if let Some(c) = crate::amp::tensors("addmv", &[self, mat, vec])? {
            return c.args[0].addmv(&c.args[1], &c.args[2], beta, alpha);
        }
        if let Some(h) = acc::half_acc(&[self, mat, vec]) {
            // half tensors: product and sum in float32, rounded once (PyTorch's acc_type)
            return acc::down(acc::up(self)?.addmv(&acc::up(mat)?, &acc::up(vec)?, beta, alpha)?, h);
        }
        let p = mat.mv(vec)?;
        add_scaled("addmv", self, &p, beta, alpha)
    }
    /// `torch.baddbmm(input, batch1, batch2, beta=, alpha=)`.
    pub fn baddbmm(&self, b1: &Tensor, b2: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
        let _prof = crate::profiler::op("baddbmm", &[self, b1, b2]);
        if let Some(c) = crate::amp::tensors("baddbmm", &[self, b1, b2])? {
            return c.args[0].baddbmm(&c.args[1], &c.args[2], beta, alpha);
        }
        if let Some(h) = acc::half_acc(&[self, b1, b2]) {
            // half tensors: product and sum in float32, rounded once (PyTorch's acc_type)
            if b1.ndim() == 3 {
                if let Some(p) = mm_acc(b1, b2)? {
                    return acc::down(add_scaled("baddbmm", &acc::up(self)?, &p, beta, alpha)?, h);
                }
            }
            return acc::down(acc::up(self)?.baddbmm(&acc::up(b1)?, &acc::up(b2)?, beta, alpha)?, h);
        }
        let p = b1.bmm(b2)?;
        add_scaled("baddbmm", self, &p, beta, alpha)
    }
    /// `torch.addbmm(input, batch1, batch2, beta=, alpha=)`: the batch products are summed.
    pub fn addbmm(&self, b1: &Tensor, b2: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
        let _prof = crate::profiler::op("addbmm", &[self, b1, b2]);
        if let Some(c) = crate::amp::tensors("addbmm", &[self, b1, b2])? {
            return c.args[0].addbmm(&c.args[1], &c.args[2], beta, alpha);
        }
        if let Some(h) = acc::half_cpu(&[self, b1, b2]) {
            // half CPU tensors: product and sum in float32, rounded once (PyTorch's acc_type);
            // CUDA ones below
            return acc::down(acc::up(self)?.addbmm(&acc::up(b1)?, &acc::up(b2)?, beta, alpha)?, h);
        }
        if b1.ndim() != 3 || b2.ndim() != 3 {
            return Err(Error::shape("addbmm", format!("batch1 must be a 3D tensor, got {}-D and {}-D", b1.ndim(), b2.ndim())));
        }
        same_dtype("addbmm", b1, b2)?;
        let (sa, sb) = (b1.shape(), b2.shape());
        if sa[0] != sb[0] || sa[2] != sb[1] {
            return Err(Error::shape(
                "addbmm",
                format!("Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].", sa[0], sa[2], sb[0], sb[1]),
            ));
        }
        // sum_b A_b B_b = [A_0 .. A_n] (side by side) @ [B_0; ..; B_n] (stacked): one product.
        let (bt, m, k, n) = (sa[0] as i64, sa[1] as i64, sa[2] as i64, sb[2] as i64);
        let a = b1.permute(&[1, 0, 2])?.reshape(&[m, bt * k])?;
        let b = b2.reshape(&[bt * k, n])?;
        if let Some(h) = acc::half_acc(&[self, b1, b2]) {
            // half CUDA tensors: the product stored in float32, the sum rounded once
            if let Some(p) = mm_acc(&a, &b)? {
                return acc::down(add_scaled("addbmm", &acc::up(self)?, &p, beta, alpha)?, h);
            }
        }
        let p = mm_prim(&a, &b)?;
        add_scaled("addbmm", self, &p, beta, alpha)
    }
    /// `torch.addr(input, vec1, vec2, beta=, alpha=)`: `beta * input + alpha * outer(vec1, vec2)`.
    pub fn addr(&self, v1: &Tensor, v2: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
        let _prof = crate::profiler::op("addr", &[self, v1, v2]);
        if let Some(c) = crate::amp::tensors("addr", &[self, v1, v2])? {
            return c.args[0].addr(&c.args[1], &c.args[2], beta, alpha);
        }
        if let Some(h) = acc::half_acc(&[self, v1, v2]) {
            // half tensors: product and sum in float32, rounded once (PyTorch's acc_type)
            return acc::down(acc::up(self)?.addr(&acc::up(v1)?, &acc::up(v2)?, beta, alpha)?, h);
        }
        let p = v1.outer(v2)?;
        add_scaled("addr", self, &p, beta, alpha)
    }
    /// `torch.trace(x)`: the sum of the main diagonal of a matrix (integers sum as int64).
    pub fn trace(&self) -> Result<Tensor> {
        let _prof = crate::profiler::op("trace", &[self]);
        if let Some(c) = crate::amp::tensors("trace", &[self])? {
            return c.args[0].trace();
        }
        if self.ndim() != 2 {
            return Err(Error::shape("trace", format!("trace: expected a matrix, but got tensor with dim {}", self.ndim())));
        }
        self.diagonal(0, 0, 1)?.sum()
    }
    /// `torch.kron(a, b)`: the Kronecker product (dims aligned from the right).
    pub fn kron(&self, other: &Tensor) -> Result<Tensor> {
        let nd = self.ndim().max(other.ndim());
        let pad = |t: &Tensor| -> Vec<usize> {
            let mut s = vec![1; nd - t.ndim()];
            s.extend_from_slice(t.shape());
            s
        };
        let (sa, sb) = (pad(self), pad(other));
        let mut ra = Vec::with_capacity(2 * nd);
        let mut rb = Vec::with_capacity(2 * nd);
        for i in 0..nd {
            ra.extend([sa[i] as i64, 1]);
            rb.extend([1, sb[i] as i64]);
        }
        let p = self.reshape(&ra)?.mul(&other.reshape(&rb)?)?;
        let out: Vec<i64> = (0..nd).map(|i| (sa[i] * sb[i]) as i64).collect();
        p.reshape(&out)
    }
    /// `torch.cross(a, b, dim)` / `torch.linalg.cross`: the 3-vector cross product along `dim`
    /// (broadcasting the other dims). `dim = None` takes the first dim of size 3 (`torch.cross`).
    pub fn cross(&self, other: &Tensor, dim: Option<i64>) -> Result<Tensor> {
        cross_impl("cross", self, other, dim)
    }
}

fn dot_checks(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.ndim() != 1 || b.ndim() != 1 {
        return Err(Error::shape(op, format!("1D tensors expected, but got {}D and {}D tensors", a.ndim(), b.ndim())));
    }
    if a.dtype() != b.dtype() {
        return Err(Error::dtype(
            op,
            format!("{op} : expected both vectors to have same dtype, but found {} and {}", a.dtype().name(), b.dtype().name()),
        ));
    }
    if a.numel() != b.numel() {
        return Err(Error::shape(
            op,
            format!("inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but got {} and {} elements respectively", a.numel(), b.numel(), a.numel(), b.numel()),
        ));
    }
    Ok(())
}

/// The cross product as a contraction with the Levi-Civita tensor: `out_i = Σ ε_ijk a_j b_k`,
/// so it works for every dtype the matmul kernel takes and differentiates through `mul`/`mm`.
pub(crate) fn cross_impl(op: &str, a: &Tensor, b: &Tensor, dim: Option<i64>) -> Result<Tensor> {
    let _prof = crate::profiler::op_named(|| op.to_string(), &[a, b]);
    // torch.cross is autocast's `cross`; linalg.cross is in no list
    let name = if op == "cross" { "cross" } else { "linalg_cross" };
    if let Some(c) = crate::amp::tensors(name, &[a, b])? {
        return cross_impl(op, &c.args[0], &c.args[1], dim);
    }
    if op == "linalg.cross" && a.ndim() != b.ndim() {
        return Err(Error::shape(
            op,
            format!("linalg.cross: inputs must have the same number of dimensions. Got {} and {}", a.ndim(), b.ndim()),
        ));
    }
    let shape = broadcast_shapes(op, a.shape(), b.shape())?;
    let d = match dim {
        Some(d) => wrap_dim(op, d, shape.len())?,
        None => shape.iter().position(|&s| s == 3).ok_or_else(|| Error::shape(op, "no dimension of size 3 in input"))?,
    };
    if shape.is_empty() {
        return Err(Error::shape(op, format!("{op}: inputs dimension {d} must have length 3")));
    }
    let sa = a.ndim() as isize - shape.len() as isize + d as isize;
    let sb = b.ndim() as isize - shape.len() as isize + d as isize;
    for (t, s) in [(a, sa), (b, sb)] {
        if s < 0 || t.shape()[s as usize] != 3 {
            return Err(Error::shape(
                op,
                format!("{op}: inputs dimension {} must have length 3. Got {} and {}", dim.unwrap_or(d as i64), size_at(a, sa), size_at(b, sb)),
            ));
        }
    }
    let dt = crate::dtype::promote_types(a.dtype(), b.dtype())?;
    let (a, b) = (a.to_dtype(dt)?, b.to_dtype(dt)?);
    let a = a.broadcast_to(&shape)?.movedim(&[d as i64], &[-1])?;
    let b = b.broadcast_to(&shape)?.movedim(&[d as i64], &[-1])?;
    let p = a.unsqueeze(-1)?.mul(&b.unsqueeze(-2)?)?; // [..., 3(j), 3(k)]
    let mut flat: Vec<i64> = p.shape()[..p.ndim() - 2].iter().map(|&s| s as i64).collect();
    flat.push(9);
    let mut eps = vec![0i64; 27];
    for (i, j, k, s) in [(0, 1, 2, 1), (1, 2, 0, 1), (2, 0, 1, 1), (0, 2, 1, -1), (2, 1, 0, -1), (1, 0, 2, -1)] {
        eps[(j * 3 + k) * 3 + i] = s;
    }
    let e = Tensor::from_vec(eps, &[9, 3])?.to_device(p.device())?.to_dtype(dt)?;
    let out = p.reshape(&flat)?.matmul(&e)?;
    out.movedim(&[-1], &[d as i64])
}

fn keep_dtype(t: Tensor, d: DType) -> Result<Tensor> {
    if t.dtype() != d {
        t.to_dtype(d)
    } else {
        Ok(t)
    }
}

fn size_at(t: &Tensor, s: isize) -> usize {
    if s < 0 {
        1
    } else {
        t.shape()[s as usize]
    }
}

/// `torch.tensordot(a, b, dims=(dims_a, dims_b))`: contracts `dims_a` of `a` with `dims_b` of `b`.
pub fn tensordot(a: &Tensor, b: &Tensor, dims_a: &[i64], dims_b: &[i64]) -> Result<Tensor> {
    let _prof = crate::profiler::op("tensordot", &[a, b]);
    if let Some(c) = crate::amp::tensors("tensordot", &[a, b])? {
        return tensordot(&c.args[0], &c.args[1], dims_a, dims_b);
    }
    let op = "tensordot";
    if dims_a.len() != dims_b.len() {
        return Err(Error::shape(op, "both dimension lists should have same length"));
    }
    same_dtype(op, a, b)?;
    let da = crate::shape::wrap_dims(op, dims_a, a.ndim())?;
    let db = crate::shape::wrap_dims(op, dims_b, b.ndim())?;
    // A size-1 contracted dim broadcasts: sum the other side's dim first (as PyTorch does).
    let (mut a, mut b) = (a.clone(), b.clone());
    for (&x, &y) in da.iter().zip(&db) {
        let (sx, sy) = (a.shape()[x], b.shape()[y]);
        if sx != sy && sx == 1 {
            b = keep_dtype(b.sum_dims(Some(&[y as i64]), true, None)?, a.dtype())?;
        } else if sx != sy && sy == 1 {
            a = keep_dtype(a.sum_dims(Some(&[x as i64]), true, None)?, b.dtype())?;
        }
    }
    let (a, b) = (&a, &b);
    for (&x, &y) in da.iter().zip(&db) {
        if a.shape()[x] != b.shape()[y] {
            return Err(Error::shape(
                op,
                format!("contracted dimensions need to match, but first has size {} in dim {x} and second has size {} in dim {y}", a.shape()[x], b.shape()[y]),
            ));
        }
    }
    let fa: Vec<usize> = (0..a.ndim()).filter(|d| !da.contains(d)).collect();
    let fb: Vec<usize> = (0..b.ndim()).filter(|d| !db.contains(d)).collect();
    let k: usize = da.iter().map(|&d| a.shape()[d]).product();
    let ma: usize = fa.iter().map(|&d| a.shape()[d]).product();
    let nb: usize = fb.iter().map(|&d| b.shape()[d]).product();
    let pa: Vec<i64> = fa.iter().chain(&da).map(|&d| d as i64).collect();
    let pb: Vec<i64> = db.iter().chain(&fb).map(|&d| d as i64).collect();
    let am = a.permute(&pa)?.reshape(&[ma as i64, k as i64])?;
    let bm = b.permute(&pb)?.reshape(&[k as i64, nb as i64])?;
    let mut out: Vec<i64> = fa.iter().map(|&d| a.shape()[d] as i64).collect();
    out.extend(fb.iter().map(|&d| b.shape()[d] as i64));
    mm_prim(&am, &bm)?.reshape(&out)
}

/// `torch.linalg.multi_dot(tensors)`: a chain of products; the first and last may be vectors.
pub fn multi_dot(ts: &[Tensor]) -> Result<Tensor> {
    let _prof = crate::profiler::op_list("linalg_multi_dot", ts);
    if crate::amp::any_active() {
        let refs: Vec<&Tensor> = ts.iter().collect();
        if let Some(c) = crate::amp::tensors("linalg_multi_dot", &refs)? {
            return multi_dot(&c.args);
        }
    }
    let op = "linalg.multi_dot";
    if ts.len() < 2 {
        return Err(Error::value(op, format!("multi_dot(): expected at least 2 tensors but got {}", ts.len())));
    }
    let n = ts.len();
    let first_vec = ts[0].ndim() == 1;
    let last_vec = ts[n - 1].ndim() == 1;
    let mut ms = Vec::with_capacity(n);
    for (i, t) in ts.iter().enumerate() {
        let ok = if i == 0 || i == n - 1 { t.ndim() == 1 || t.ndim() == 2 } else { t.ndim() == 2 };
        if !ok {
            return Err(Error::shape(op, format!("multi_dot(): tensor {i} must be 2D (or 1D if first or last) but got {}D", t.ndim())));
        }
        if t.dtype() != ts[0].dtype() {
            return Err(Error::dtype(op, format!("multi_dot(): all tensors must have the same dtype, got {} and {}", ts[0].dtype().name(), t.dtype().name())));
        }
        ms.push(if i == 0 && first_vec {
            t.unsqueeze(0)?
        } else if i == n - 1 && last_vec {
            t.unsqueeze(1)?
        } else {
            t.clone()
        });
    }
    for i in 0..n - 1 {
        if ms[i].shape()[1] != ms[i + 1].shape()[0] {
            return Err(Error::shape(
                op,
                format!("multi_dot(): tensors {i} and {} with shapes {:?} and {:?} cannot be multiplied", i + 1, ts[i].shape(), ts[i + 1].shape()),
            ));
        }
    }
    let mut acc = ms[0].clone();
    for m in &ms[1..] {
        acc = mm_prim(&acc, m)?;
    }
    match (first_vec, last_vec) {
        (true, true) => acc.reshape(&[]),
        (true, false) => acc.squeeze_dims(&[0]),
        (false, true) => acc.squeeze_dims(&[1]),
        _ => Ok(acc),
    }
}

/// `torch.linalg.vecdot(x, y, dim=-1)`: `Σ x * y` over `dim` with broadcasting.
pub fn vecdot(x: &Tensor, y: &Tensor, dim: i64) -> Result<Tensor> {
    let _prof = crate::profiler::op("linalg_vecdot", &[x, y]);
    if let Some(c) = crate::amp::tensors("linalg_vecdot", &[x, y])? {
        return vecdot(&c.args[0], &c.args[1], dim);
    }
    if x.dtype() != y.dtype() {
        return Err(Error::dtype(
            "linalg.vecdot",
            format!("linalg.vecdot: Expected x and y to have the same dtype, but found x of type {} and y of type {} instead", x.dtype().name(), y.dtype().name()),
        ));
    }
    if x.dtype().is_complex() {
        return Err(Error::unsupported("linalg.vecdot", "complex inputs"));
    }
    let p = x.mul(y)?;
    let d = wrap_dim("linalg.vecdot", dim, p.ndim())?;
    let out = p.sum_dims(Some(&[d as i64]), false, None)?;
    if x.dtype().is_integral() && out.dtype() != x.dtype() {
        return out.to_dtype(x.dtype());
    }
    Ok(out)
}

/// True for dtypes the matmul kernels take.
pub fn matmul_dtype_ok(d: DType) -> bool {
    !(d.is_bool() || d.is_float8())
}
