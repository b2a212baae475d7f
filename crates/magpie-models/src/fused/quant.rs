//! Quantized projections of the fused decoder: a linear weight kept in its GGUF blocks (Q8_0,
//! Q4_0, Q4_K, Q6_K) on the device, with no dequantized copy. Decode rows (up to
//! [`MAX_ROWS`]) run the core's quantized GEMV on the raw blocks; wider products (prefill)
//! dequantize the weight into a scratch buffer the engine reuses and multiply it with cuBLAS.

use super::buffers::ptr;
use magpie_core::backend::cuda::device::CudaDevice;
use magpie_core::backend::cuda::quant::{dequantize_raw, quant_gemv_parts_raw, QuantGemv, QuantPart};
use magpie_core::quant::{QuantMatrix, QuantType};
use magpie_core::{DType, Device, Error, Result, Tensor};

pub use magpie_core::backend::cuda::quant::MAX_ROWS;

/// Rows of one block type in a [`QuantProj`]: `rows x cols` weights as blocks (a u8 tensor on
/// the device).
pub struct QuantSeg {
    pub ty: QuantType,
    pub rows: usize,
    pub blocks: Tensor,
}

/// A projection `[rows, cols]` whose weight stays quantized: the rows of its parts (q|k|v,
/// gate|up, or one matrix) in order, adjacent parts of one block type joined into one segment, so
/// that q|k|v and gate|up of one type are one GEMV launch.
pub struct QuantProj {
    pub cols: usize,
    pub segs: Vec<QuantSeg>,
}

impl QuantProj {
    /// The parts' blocks stacked by rows on `device` (a CUDA device); an error when the parts
    /// differ in columns. Whole rows of blocks move, so the values are the parts' exactly.
    pub fn from_parts(parts: &[&QuantMatrix], device: Device) -> Result<QuantProj> {
        let op = "fused";
        let cols = parts.first().map_or(0, |p| p.shape()[1]);
        if parts.is_empty() || parts.iter().any(|p| p.shape()[1] != cols) {
            return Err(Error::shape(op, "quantized projections fused into one must share their input features"));
        }
        let mut segs = Vec::new();
        let mut i = 0;
        while i < parts.len() {
            let ty = parts[i].ty();
            let run: Vec<&QuantMatrix> = parts[i..].iter().take_while(|p| p.ty() == ty).copied().collect();
            i += run.len();
            let rows = run.iter().map(|p| p.shape()[0]).sum();
            let bytes: Vec<u8> = run.iter().flat_map(|p| p.bytes().iter().copied()).collect();
            let len = bytes.len();
            segs.push(QuantSeg { ty, rows, blocks: Tensor::from_vec(bytes, &[len])?.to_device(device)? });
        }
        Ok(QuantProj { cols, segs })
    }

    /// Output features (rows of every segment).
    pub fn rows(&self) -> usize {
        self.segs.iter().map(|s| s.rows).sum()
    }

    /// Bytes of the blocks.
    pub fn nbytes(&self) -> usize {
        self.segs.iter().map(|s| s.blocks.numel()).sum()
    }

    /// The raw view the engine launches on.
    pub(crate) fn raw(&self) -> Result<Vec<QSegP>> {
        self.segs.iter().map(|s| Ok(QSegP { ty: s.ty, rows: s.rows, w: ptr(&s.blocks)? })).collect()
    }
}

/// One segment's block type, rows and device address.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QSegP {
    pub ty: QuantType,
    pub rows: usize,
    pub w: u64,
}

/// `y[m, n] = x[m, k] · Wᵀ` over the segments of a quantized weight (`n` their rows), x and y of
/// `dtype`, y's rows `ldy` apart: one quantized GEMV per segment for `m <= MAX_ROWS`, in chunks
/// of `MAX_ROWS` rows above (the engine dequantizes instead where its scratch holds the weight).
///
/// # Safety
/// x must hold `m` rows of `k` values (16-byte aligned, `k` a multiple of 8), y `m` rows of
/// `ldy >= n` values, the segments' blocks live: all device memory of `dev`, y apart from x.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn qgemv(dev: &CudaDevice, dtype: DType, pdl: bool, m: usize, k: usize, segs: &[QSegP], x: u64, y: u64, ldy: usize) -> Result<()> {
    let es = dtype.size() as u64;
    for r0 in (0..m).step_by(MAX_ROWS) {
        let rows = MAX_ROWS.min(m - r0);
        let (xr, yr) = (x + (r0 * k) as u64 * es, y + (r0 * ldy) as u64 * es);
        let mut off = 0;
        for s in segs {
            let g = QuantGemv { ty: s.ty, dtype, m: rows, n: s.rows, k };
            let part = QuantPart { w: s.w, n: s.rows, y: yr + off as u64 * es };
            // SAFETY: the caller's contract; the segment's rows land in their columns of y.
            unsafe { quant_gemv_parts_raw(dev, &g, &[part], xr, k, ldy, None, pdl)? };
            off += s.rows;
        }
    }
    Ok(())
}

/// The weight `[n, k]` of the segments dequantized to `dtype` into `out` (rows in order).
///
/// # Safety
/// `out` must hold `n * k` values of `dtype` of live device memory of `dev`; the blocks live.
pub(crate) unsafe fn dequantize_into(dev: &CudaDevice, dtype: DType, k: usize, segs: &[QSegP], out: u64) -> Result<()> {
    let mut off = 0usize;
    for s in segs {
        // SAFETY: the caller's contract; segment s fills rows off..off + s.rows of out.
        unsafe { dequantize_raw(dev, s.ty, dtype, s.rows, k, s.w, out + (off * k * dtype.size()) as u64)? };
        off += s.rows;
    }
    Ok(())
}
