//! Padded copies of GEMM operands (host side of `kernels/gemm_pad.cu`), on raw device buffers.
//!
//! cuBLAS's fast f16/bf16 kernels need 16-byte aligned addresses, leading dimensions and
//! contiguous extents; a product with one odd extent (a 50257-token vocabulary) otherwise falls
//! back to kernels that load one element at a time and run an order of magnitude slower (measured
//! in `benchmark/NOTES.md`, issue 14). Copying the misaligned operand into a zero-padded buffer
//! of aligned extents costs one pass over it, far less than the slow product.

use super::device::CudaDevice;
use super::kern::{kfunc, KFile};
use super::launch::{launch, Args};
use crate::{DType, Error, Result};

/// One batch of row-major matrices in device memory: element (b, r, c) at
/// `ptr + (b * bs + r * ld + c) * elem_size` (strides in elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mat {
    pub ptr: u64,
    pub bs: i64,
    pub ld: i64,
    pub rows: usize,
    pub cols: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct KParams {
    src: u64,
    dst: u64,
    src_bs: i64,
    src_ld: i64,
    dst_bs: i64,
    dst_ld: i64,
    batch: i32,
    src_rows: i32,
    src_cols: i32,
    dst_rows: i32,
    dst_cols: i32,
    segs: i32,
}

/// Copies `batch` matrices `src` into `dst`: `dst[b, r, c] = src[b, r, c]` where the source has
/// that element, zero (all-zero bits) where `r >= src.rows` or `c >= src.cols`. Elements are
/// `elem_size` bytes (2, 4 or 8; only their bits are moved). Asynchronous on `dev`'s stream.
pub fn pad_copy(dev: &CudaDevice, elem_size: usize, batch: usize, src: &Mat, dst: &Mat) -> Result<()> {
    let op = "matmul";
    let raw = match elem_size {
        2 => DType::I16,
        4 => DType::I32,
        8 => DType::I64,
        _ => return Err(Error::value(op, format!("padded copies of {elem_size}-byte elements are not supported"))),
    };
    if batch == 0 || dst.rows == 0 || dst.cols == 0 {
        return Ok(());
    }
    if src.ptr == 0 || dst.ptr == 0 {
        return Err(Error::value(op, "padded copy of a null device pointer"));
    }
    let big = |v: usize| v > i32::MAX as usize;
    if [batch, src.rows, src.cols, dst.rows, dst.cols].into_iter().any(big) {
        return Err(Error::value(op, "padded copy extents above 2^31 - 1"));
    }
    let segs = dst.cols.div_ceil(256);
    let warps = batch * dst.rows * segs;
    let kp = KParams {
        src: src.ptr,
        dst: dst.ptr,
        src_bs: src.bs,
        src_ld: src.ld,
        dst_bs: dst.bs,
        dst_ld: dst.ld,
        batch: batch as i32,
        src_rows: src.rows as i32,
        src_cols: src.cols as i32,
        dst_rows: dst.rows as i32,
        dst_cols: dst.cols as i32,
        segs: segs as i32,
    };
    let f = kfunc(dev, KFile::GemmPad, raw, "gemm_pad_copy")?;
    // 8 warps per block; enough blocks for every segment up to 16 per multiprocessor
    let blocks = warps.div_ceil(8).clamp(1, dev.sm_count as usize * 16);
    let mut a = Args::new();
    a.push(kp);
    launch(dev, op, f, (blocks as u32, 1, 1), (256, 1, 1), 0, &mut a)
}
