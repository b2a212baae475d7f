//! Run-time compilation of the CUDA C kernels with NVRTC, cached per (source, architecture) in
//! memory (loaded functions, per device) and on disk (cubins, so that a second process start
//! compiles nothing).
//!
//! The disk cache lives in `$MAGPIE_CUDA_CACHE`, else `$XDG_CACHE_HOME/magpie/cuda`, else
//! `~/.cache/magpie/cuda`; a file is named by a hash of the source, the architecture and the
//! NVRTC version. A cache that cannot be written is skipped silently (compiling still works).

use super::device::{drv, CudaDevice, Func};
use crate::{Error, Result};
use cudarc::driver::result as dres;
use cudarc::nvrtc::{result as nres, sys as nsys};
use std::ffi::{c_char, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// The preamble every kernel source starts with: f16/bf16 storage types and conversions, and
/// the cast functions between all dtypes (no toolkit headers are needed).
pub const PREAMBLE: &str = concat!(include_str!("kernels/preamble.cu"), include_str!("kernels/scalar_ops.cu"), include_str!("kernels/special_fns.cu"));

static COMPILES: AtomicU64 = AtomicU64::new(0);
static DISK_HITS: AtomicU64 = AtomicU64::new(0);

/// Kernel cache counters: NVRTC compilations and cubins loaded from the disk cache in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelCacheStats {
    pub compiles: u64,
    pub disk_hits: u64,
}

/// The counters of the kernel cache.
pub fn kernel_cache_stats() -> KernelCacheStats {
    KernelCacheStats { compiles: COMPILES.load(Ordering::Relaxed), disk_hits: DISK_HITS.load(Ordering::Relaxed) }
}

/// Forgets the loaded kernels of every opened device (as a new process would start), keeping the
/// disk cache; for tests of the disk cache.
#[doc(hidden)]
pub fn clear_memory_cache() {
    for d in super::device::opened() {
        d.funcs.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
    super::elementwise::clear_cache();
}

/// FNV-1a, 64 bit: a hash that is stable across processes and Rust versions (for file names).
pub(crate) fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("MAGPIE_CUDA_CACHE") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("magpie/cuda"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/magpie/cuda"))
}

fn nvrtc_version() -> (i32, i32) {
    let (mut a, mut b) = (0, 0);
    // SAFETY: writes two ints.
    unsafe { nsys::nvrtcVersion(&mut a, &mut b) };
    (a, b)
}

/// The loaded kernel `name` defined in `source` (which must include [`PREAMBLE`] itself if it
/// uses it), compiled for `dev`'s architecture on first use. `name` must be unique per source:
/// the in-memory cache is keyed by it.
pub fn function(dev: &CudaDevice, name: &str, source: &str) -> Result<Func> {
    if let Some(f) = dev.funcs.lock().unwrap_or_else(|e| e.into_inner()).get(name) {
        return Ok(*f);
    }
    let cubin = cubin(dev, name, source)?;
    dev.bind()?;
    // SAFETY: `cubin` is a complete cubin image produced by NVRTC for this device.
    let module = unsafe { dres::module::load_data(cubin.as_ptr() as *const _) }.map_err(|e| drv(name, format!("loading the kernel: {e}")))?;
    let cname = CString::new(name).map_err(|_| Error::value(name, "kernel name contains NUL"))?;
    // SAFETY: the module was just loaded and is never unloaded.
    let f = unsafe { dres::module::get_function(module, cname) }.map_err(|e| drv(name, format!("kernel not found in its module: {e}")))?;
    let f = Func(f);
    dev.funcs.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), f);
    Ok(f)
}

/// The loaded kernels `names` of `source`, compiled once as one module named `module` (the disk
/// cache's name) on first use: a source that defines many kernels costs one NVRTC compilation, not
/// one per kernel as with [`function`]. Each name must be unique per source (the in-memory cache is
/// keyed by it, shared with [`function`]).
pub fn functions(dev: &CudaDevice, module: &str, source: &str, names: &[String]) -> Result<Vec<Func>> {
    {
        let funcs = dev.funcs.lock().unwrap_or_else(|e| e.into_inner());
        let hit: Option<Vec<Func>> = names.iter().map(|n| funcs.get(n).copied()).collect();
        if let Some(v) = hit {
            return Ok(v);
        }
    }
    let cubin = cubin(dev, module, source)?;
    dev.bind()?;
    // SAFETY: `cubin` is a complete cubin image produced by NVRTC for this device.
    let m = unsafe { dres::module::load_data(cubin.as_ptr() as *const _) }.map_err(|e| drv(module, format!("loading the kernels: {e}")))?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let cname = CString::new(name.as_str()).map_err(|_| Error::value(module, "kernel name contains NUL"))?;
        // SAFETY: the module was just loaded and is never unloaded.
        let f = Func(unsafe { dres::module::get_function(m, cname) }.map_err(|e| drv(name, format!("kernel not found in its module: {e}")))?);
        out.push(f);
    }
    let mut funcs = dev.funcs.lock().unwrap_or_else(|e| e.into_inner());
    for (n, f) in names.iter().zip(&out) {
        funcs.insert(n.clone(), *f);
    }
    Ok(out)
}

pub(crate) fn cubin(dev: &CudaDevice, name: &str, source: &str) -> Result<Vec<u8>> {
    cubin_arch(name, source, &format!("sm_{}{}", dev.arch.0, dev.arch.1))
}

/// [`cubin`] for a named target (`sm_90a`: the arch-specific features such as wgmma, which a
/// plain `sm_90` compilation rejects); the caller checks that the device runs it.
pub(crate) fn cubin_arch(name: &str, source: &str, arch: &str) -> Result<Vec<u8>> {
    // SAFETY: a pure query; the caller made sure NVRTC loads (below) before the first use.
    if !unsafe { nsys::is_culib_present() } {
        return Err(Error::device(name, "CUDA kernels need NVRTC (libnvrtc), which was not found; add the CUDA toolkit's lib64 to LD_LIBRARY_PATH"));
    }
    let ver = nvrtc_version();
    let key = fnv1a(&[source.as_bytes(), arch.as_bytes(), format!("{}.{}", ver.0, ver.1).as_bytes()]);
    let file = cache_dir().map(|d| d.join(format!("{name}-{key:016x}.cubin")));
    if let Some(f) = &file {
        if let Ok(b) = std::fs::read(f) {
            if !b.is_empty() {
                DISK_HITS.fetch_add(1, Ordering::Relaxed);
                return Ok(b);
            }
        }
    }
    let bin = compile(name, source, arch)?;
    COMPILES.fetch_add(1, Ordering::Relaxed);
    if let Some(f) = &file {
        // write to a temporary name and rename, so that a concurrent reader never sees half a file
        if let Some(dir) = f.parent() {
            let _ = std::fs::create_dir_all(dir);
            let tmp = dir.join(format!(".{}.{}.tmp", std::process::id(), key));
            if std::fs::write(&tmp, &bin).is_ok() {
                let _ = std::fs::rename(&tmp, f);
            }
        }
    }
    Ok(bin)
}

fn compile(name: &str, source: &str, arch: &str) -> Result<Vec<u8>> {
    let src = CString::new(source).map_err(|_| Error::value(name, "kernel source contains NUL"))?;
    let pname = CString::new(format!("{name}.cu")).map_err(|_| Error::value(name, "bad kernel name"))?;
    let prog = nres::create_program(&src, Some(&pname)).map_err(|e| drv(name, format!("nvrtcCreateProgram: {e:?}")))?;
    let opts = [format!("--gpu-architecture={arch}"), "--std=c++17".to_string(), "-default-device".to_string()];
    // SAFETY: `prog` is a live program; destroyed below on every path.
    let res = unsafe { nres::compile_program(prog, &opts) };
    let out = match res {
        Ok(()) => unsafe {
            let mut n = 0usize;
            let r = nsys::nvrtcGetCUBINSize(prog, &mut n);
            if r != nsys::nvrtcResult::NVRTC_SUCCESS || n == 0 {
                Err(drv(name, format!("nvrtcGetCUBINSize: {r:?}")))
            } else {
                let mut buf = vec![0u8; n];
                let r = nsys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut c_char);
                if r == nsys::nvrtcResult::NVRTC_SUCCESS {
                    Ok(buf)
                } else {
                    Err(drv(name, format!("nvrtcGetCUBIN: {r:?}")))
                }
            }
        },
        Err(e) => {
            let log = unsafe { nres::get_program_log(prog) }
                .map(|v| v.iter().map(|&c| c as u8 as char).collect::<String>())
                .unwrap_or_default();
            Err(Error::device(name, format!("NVRTC could not compile the kernel ({e:?}):\n{log}")))
        }
    };
    let _ = unsafe { nres::destroy_program(prog) };
    out
}
