//! Host side of kernels/amp.cu: the inf/NaN check with unscaling of one gradient buffer and the
//! loss-scale update, on raw device buffers (storage, layout, dtype), and autocast's weight casts
//! as one multi-tensor launch. All only queue kernels: the flag and the scale stay on the GPU, so
//! no call here synchronizes the host.

/// One device buffer a kernel reads or writes: its storage, the layout of the elements used
/// (contiguous; only its offset and element count matter) and its dtype.
pub type Buffer<'a> = (&'a crate::storage::Storage, &'a crate::layout::Layout, crate::dtype::DType);

#[cfg(feature = "cuda")]
pub use imp::{cast_multi, non_finite_check_and_unscale, update_scale};

#[cfg(feature = "cuda")]
mod imp {
    use super::super::device::CudaDevice;
    use super::super::kern::{grid_stride_blocks, kfunc, KFile};
    use super::super::launch::{launch, Args};
    use super::Buffer;
    use crate::dtype::DType;
    use crate::storage::Storage;
    use crate::{Error, Result};
    use std::sync::Arc;

    /// The device address of the buffer's first element and its device; checks the dtype, that the
    /// elements are contiguous and, for scalars, that there is one.
    fn addr(op: &str, what: &str, b: Buffer, want: Option<DType>, scalar: bool) -> Result<(u64, Arc<CudaDevice>)> {
        let (st, l, dt) = b;
        if want.is_some_and(|w| w != dt) {
            return Err(Error::dtype(op, format!("{what} must be {}, got {dt}", want.map_or("", |w| w.name()))));
        }
        if !l.is_contiguous() || (scalar && l.numel() != 1) {
            return Err(Error::value(op, format!("{what} must be {} contiguous elements, got shape {:?}", if scalar { "1" } else { "its" }, l.shape)));
        }
        match st {
            Storage::Cuda(c) => Ok((c.ptr() + (l.offset * dt.size()) as u64, c.cuda_device().clone())),
            Storage::Cpu(_) => Err(Error::device(op, format!("{what} must be on a CUDA device"))),
        }
    }

    fn same_device(op: &str, a: &CudaDevice, b: &CudaDevice) -> Result<()> {
        if a.ordinal != b.ordinal {
            return Err(Error::device(op, format!("buffers on cuda:{} and cuda:{}", a.ordinal, b.ordinal)));
        }
        Ok(())
    }

    /// `grad *= inv_scale` in place (grad: float32/float64/float16/bfloat16, contiguous); sets the
    /// float32 scalar `found_inf` to 1 if any element is inf or NaN. `inv_scale` is a float32 scalar.
    pub fn non_finite_check_and_unscale(grad: Buffer, found_inf: Buffer, inv_scale: Buffer) -> Result<()> {
        let op = "_amp_foreach_non_finite_check_and_unscale_";
        let dt = grad.2;
        if !matches!(dt, DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
            return Err(Error::dtype(op, format!("gradients must be floating point, got {dt}")));
        }
        let (gp, dev) = addr(op, "the gradient", grad, None, false)?;
        let (fp, fdev) = addr(op, "found_inf", found_inf, Some(DType::F32), true)?;
        let (ip, idev) = addr(op, "inv_scale", inv_scale, Some(DType::F32), true)?;
        same_device(op, &dev, &fdev)?;
        same_device(op, &dev, &idev)?;
        let n = grad.1.numel();
        if n == 0 {
            return Ok(());
        }
        let f = kfunc(&dev, KFile::Amp, dt, "amp_unscale")?;
        let mut a = Args::new();
        a.push(gp).push(n as i64).push(fp).push(ip);
        launch(&dev, op, f, (grid_stride_blocks(&dev, n), 1, 1), (256, 1, 1), 0, &mut a)
    }

    /// Buffers per multi-tensor cast launch (`MP_CAST_N` in amp.cu).
    const CAST_N: usize = 48;

    /// `CastList` of amp.cu.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct CastList {
        src: [u64; CAST_N],
        dst: [u64; CAST_N],
        n: [i64; CAST_N],
    }

    /// Casts float32 device buffers to `to` (bfloat16 or float16) on `dev`'s stream, one launch
    /// per 48 buffers: `items` are (source address, destination address, element count), each
    /// buffer contiguous; the bits are those of the single cast kernel (round to nearest even).
    /// Autocast fills its weight-cast cache with it (`amp::cache_casts`).
    pub fn cast_multi(dev: &CudaDevice, to: DType, items: &[(u64, u64, usize)]) -> Result<()> {
        let op = "to";
        let bf = match to {
            DType::BF16 => 1i32,
            DType::F16 => 0,
            _ => return Err(Error::dtype(op, format!("a multi-tensor cast from float32 goes to bfloat16 or float16, got {to}"))),
        };
        // the kernel sits in the float32 module (its sources are float32)
        let f = kfunc(dev, KFile::Amp, DType::F32, "amp_cast_multi")?;
        let live: Vec<&(u64, u64, usize)> = items.iter().filter(|it| it.2 > 0).collect();
        for chunk in live.chunks(CAST_N) {
            let mut l = CastList { src: [0; CAST_N], dst: [0; CAST_N], n: [0; CAST_N] };
            let mut max_n = 0;
            for (j, &&(s, d, n)) in chunk.iter().enumerate() {
                l.src[j] = s;
                l.dst[j] = d;
                l.n[j] = n as i64;
                max_n = max_n.max(n);
            }
            // blocks for the largest buffer (1024 elements a block a pass), at most 4 per SM;
            // the blocks past a small buffer's end exit at once
            let blocks = max_n.div_ceil(1024).clamp(1, dev.sm_count as usize * 4) as u32;
            let mut a = Args::new();
            a.push(l).push(bf);
            launch(dev, op, f, (blocks, chunk.len() as u32, 1), (256, 1, 1), 0, &mut a)?;
        }
        Ok(())
    }

    /// PyTorch's `_amp_update_scale_` on device scalars: `scale` (float32) and `growth_tracker`
    /// (int32) updated in place from `found_inf` (float32).
    pub fn update_scale(scale: Buffer, growth_tracker: Buffer, found_inf: Buffer, growth_factor: f64, backoff_factor: f64, growth_interval: i64) -> Result<()> {
        let op = "_amp_update_scale_";
        let (sp, dev) = addr(op, "scale", scale, Some(DType::F32), true)?;
        let (tp, tdev) = addr(op, "growth_tracker", growth_tracker, Some(DType::I32), true)?;
        let (fp, fdev) = addr(op, "found_inf", found_inf, Some(DType::F32), true)?;
        same_device(op, &dev, &tdev)?;
        same_device(op, &dev, &fdev)?;
        let interval = i32::try_from(growth_interval).map_err(|_| Error::value(op, format!("growth_interval {growth_interval} does not fit in int32")))?;
        // one module per dtype: the scalar kernel lives in the float32 one
        let f = kfunc(&dev, KFile::Amp, DType::F32, "amp_update_scale")?;
        let mut a = Args::new();
        a.push(sp).push(tp).push(fp).push(growth_factor).push(backoff_factor).push(interval);
        launch(&dev, op, f, (1, 1, 1), (1, 1, 1), 0, &mut a)
    }
}

#[cfg(not(feature = "cuda"))]
pub use no_cuda::{non_finite_check_and_unscale, update_scale};

#[cfg(not(feature = "cuda"))]
mod no_cuda {
    use super::Buffer;
    use crate::{Error, Result};

    /// Without the `cuda` feature there are no CUDA buffers to work on.
    pub fn non_finite_check_and_unscale(_grad: Buffer, _found_inf: Buffer, _inv_scale: Buffer) -> Result<()> {
        Err(Error::device("_amp_foreach_non_finite_check_and_unscale_", "built without the cuda feature"))
    }
    /// Without the `cuda` feature there are no CUDA buffers to work on.
    pub fn update_scale(_scale: Buffer, _growth_tracker: Buffer, _found_inf: Buffer, _growth_factor: f64, _backoff_factor: f64, _growth_interval: i64) -> Result<()> {
        Err(Error::device("_amp_update_scale_", "built without the cuda feature"))
    }
}
