//! The CUDA SpMM: an NVRTC kernel (`spmm.cu`) launched on magpie-core's stream with its caching
//! allocator. cuSPARSE is not used: cudarc 0.19 offers it only as raw `sys`/`result` bindings behind
//! a cargo feature that, unified across the workspace, would rebuild magpie-core and every crate.

use crate::mm::Pattern;
use magpie_core::{Error, Result, Tensor};

#[cfg(feature = "cuda")]
const SRC: &str = include_str!("spmm.cu");

/// `CSR(pat, vals) @ dense` on the GPU of `dense` (contiguous `vals [nnz]`, `dense [k, n]`).
#[cfg(feature = "cuda")]
pub(crate) fn spmm(pat: &Pattern, vals: &Tensor, dense: &Tensor) -> Result<Tensor> {
    use magpie_core::backend::cuda::{compile, elementwise::storage_of, launch, ops};
    use magpie_core::{DType, Device};
    let op = "sparse.mm";
    let Device::Cuda(ordinal) = dense.device() else {
        return Err(Error::device(op, "expected a CUDA tensor"));
    };
    let (dt, ty) = match dense.dtype() {
        DType::F32 => (DType::F32, "float"),
        DType::F64 => (DType::F64, "double"),
        d => return Err(Error::unsupported_dtype(op, d)),
    };
    let n = dense.shape()[1];
    let out = ops::empty(op, ordinal, dt, &[pat.m, n])?;
    if pat.m == 0 || n == 0 {
        return Ok(out);
    }
    if pat.col.is_empty() {
        return out.zero_();
    }
    let name = format!("magpie_sparse_spmm_{ty}");
    let (_, dev) = storage_of(op, dense)?;
    let src = format!("typedef {ty} T;\n#define SPMM_NAME {name}\n{SRC}");
    let f = compile::function(&dev, &name, &src)?;
    let addr = |t: &Tensor| -> Result<u64> { Ok(storage_of(op, t)?.0 + (t.storage_offset() * t.dtype().size()) as u64) };
    let block = 128u32;
    let col_blocks = n.div_ceil(block as usize);
    if col_blocks > 65535 || pat.m > i32::MAX as usize {
        return Err(Error::unsupported(op, format!("a product of {} x {n} elements (grid limits)", pat.m)));
    }
    let mut a = launch::Args::new();
    a.push(addr(&pat.crow_t)?).push(addr(&pat.col_t)?).push(addr(vals)?).push(addr(dense)?).push(addr(&out)?).push(pat.m as i64).push(n as i64);
    launch::launch(&dev, op, f, (pat.m as u32, col_blocks as u32, 1), (block, 1, 1), 0, &mut a)?;
    Ok(out)
}

/// Without the `cuda` feature, CUDA operands are an error.
#[cfg(not(feature = "cuda"))]
pub(crate) fn spmm(_pat: &Pattern, _vals: &Tensor, _dense: &Tensor) -> Result<Tensor> {
    Err(Error::device("sparse.mm", "magpie-sparse was built without its `cuda` feature"))
}
