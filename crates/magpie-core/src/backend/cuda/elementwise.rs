//! The generic elementwise kernel: `out[i] = expr(x, y, z)` over up to three strided, broadcast
//! inputs and a strided output, for any real dtypes. The kernel source is generated from the
//! expression and the dtypes, compiled once per combination (see `compile.rs`) and launched
//! with a grid-stride loop.
//!
//! Two walks: when the output and every input are contiguous (or an input is a single element
//! read by all, or a contiguous row repeated over the leading dims, as a bias) and their
//! addresses are aligned, the **vector** kernel moves up to 16 bytes per
//! operand per access (4 f32, 8 bf16, ...), `unroll` vectors per thread in flight, and finishes
//! the last `n % vec` elements one per thread; everything else takes the **strided** kernel
//! (index arithmetic over up to 10 coalesced dims). Loaded kernels are cached by a small `Copy`
//! key, so a launch after the first formats no source and allocates nothing here.

use super::compile::{function, PREAMBLE};
use super::device::CudaDevice;
use super::launch::{launch, launch_1d, Args, BLOCK};
use crate::dtype::DType;
use crate::layout::Layout;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Dims the strided index handles after coalescing (must match `MP_MAXD` in the preamble).
pub const MAXD: usize = 10;

/// The kernel parameter that describes the iteration space (`Strided` in the preamble).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Strided {
    ndim: i32,
    size: [i64; MAXD],
    stride: [[i64; MAXD]; 4],
    offset: [i64; 4],
}

/// The CUDA C storage type of a dtype; None for complex and float8 (no native kernels).
pub fn ctype(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::Bool => "bool",
        DType::U8 => "u8",
        DType::I8 => "i8",
        DType::I16 => "i16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::F16 => "half_t",
        DType::BF16 => "bf16_t",
        DType::F32 => "float",
        DType::F64 => "double",
        _ => return None,
    })
}

/// The preamble's conversion function to a dtype (`to_f32`, ...).
pub fn conv(d: DType) -> &'static str {
    match d {
        DType::Bool => "to_bool",
        DType::U8 => "to_u8",
        DType::I8 => "to_i8",
        DType::I16 => "to_i16",
        DType::I32 => "to_i32",
        DType::I64 => "to_i64",
        DType::F16 => "to_f16",
        DType::BF16 => "to_bf16",
        DType::F64 => "to_f64",
        _ => "to_f32",
    }
}

/// True when the dtype has native elementwise kernels.
pub fn supported(d: DType) -> bool {
    ctype(d).is_some()
}

/// The device and base address of a CUDA tensor's storage.
pub fn storage_of(op: &str, t: &Tensor) -> Result<(u64, Arc<CudaDevice>)> {
    let g = t.storage().read();
    match &*g {
        Storage::Cuda(c) => Ok((c.ptr(), c.cuda_device().clone())),
        Storage::Cpu(_) => Err(Error::device(op, format!("expected a CUDA tensor, got one on {}", t.device()))),
    }
}

/// `l` viewed with `shape` (right-aligned; stretched and missing dims get stride 0).
fn broadcast(l: &Layout, shape: &[usize]) -> Vec<i64> {
    let lead = shape.len() - l.ndim();
    (0..shape.len())
        .map(|d| if d < lead || (l.shape[d - lead] == 1 && shape[d] != 1) { 0 } else { l.strides[d - lead] as i64 })
        .collect()
}

/// Coalesces the iteration space: drops size-1 dims, merges dims that are contiguous with their
/// inner neighbour in every operand. Returns (sizes, strides per operand).
fn coalesce(shape: &[usize], strides: &[Vec<i64>]) -> (Vec<i64>, Vec<Vec<i64>>) {
    let k = strides.len();
    let mut s: Vec<i64> = Vec::new();
    let mut st: Vec<Vec<i64>> = vec![Vec::new(); k];
    for d in 0..shape.len() {
        let n = shape[d] as i64;
        if n == 1 {
            continue;
        }
        if let Some(&last) = s.last() {
            let j = s.len() - 1;
            if (0..k).all(|o| st[o][j] == strides[o][d] * n) {
                s[j] = last * n;
                for o in 0..k {
                    st[o][j] = strides[o][d];
                }
                continue;
            }
        }
        s.push(n);
        for o in 0..k {
            st[o].push(strides[o][d]);
        }
    }
    (s, st)
}

/// One operand of [`map`]: a CUDA tensor read (or, for the output, written) through its layout,
/// broadcast to the iteration shape.
pub struct Opnd<'a> {
    pub t: &'a Tensor,
    /// The dtype the kernel converts the loaded value to before `expr` sees it.
    pub load_as: DType,
}

// ---- tuning of the vector kernel ----

/// Vectors each thread has in flight per loop iteration (1..=8; 0 turns the vector walk off,
/// for comparisons).
static UNROLL: AtomicU32 = AtomicU32::new(DEFAULT_UNROLL);
/// Resident blocks per multiprocessor the vector kernel's grid is capped at (0: no cap, one
/// pass over the data).
static BLOCKS_PER_SM: AtomicU32 = AtomicU32::new(DEFAULT_BLOCKS_PER_SM);
// Measured on an H200 (benchmark/NOTES.md, CUDA v3): one vector per thread over a grid that
// covers the data in one pass (PyTorch's shape) beat every grid-stride variant capped at 4-16
// blocks per SM (add bf16 64M: 0.096 ms against 0.100-0.105 ms); unroll 2-4 changed < 2%.
const DEFAULT_UNROLL: u32 = 1;
const DEFAULT_BLOCKS_PER_SM: u32 = 0;

/// Sets the vector kernel's unroll (vectors in flight per thread, 1..=8; 0: every launch takes
/// the strided walk) and its grid cap in blocks per multiprocessor (0: no cap). For benchmarks
/// and tests; the defaults were measured best.
#[doc(hidden)]
pub fn set_tuning(unroll: u32, blocks_per_sm: u32) {
    UNROLL.store(unroll.min(8), Ordering::Relaxed);
    BLOCKS_PER_SM.store(blocks_per_sm, Ordering::Relaxed);
}

/// The current (unroll, blocks per SM) of the vector kernel.
#[doc(hidden)]
pub fn tuning() -> (u32, u32) {
    (UNROLL.load(Ordering::Relaxed), BLOCKS_PER_SM.load(Ordering::Relaxed))
}

// ---- the kernel cache ----

/// How a kernel walks memory.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Walk {
    /// Index arithmetic over the `Strided` parameter (a `contig` flag skips it).
    Strided,
    /// Contiguous operands, `vec` elements per access, `unroll` accesses in flight per thread;
    /// bit k of `bcast`: input k is one element read by every thread; bit k of `rows`: input k
    /// is a contiguous row repeated along the leading dims (a bias: element `i % row_len`).
    Vec { vec: u8, unroll: u8, bcast: u8, rows: u8 },
}

/// Everything the generated source depends on; `Copy` and cheap to hash (the hot path).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Key {
    ordinal: usize,
    name: &'static str,
    expr: &'static str,
    out: DType,
    compute: DType,
    nin: u8,
    /// (storage dtype, load_as) per input.
    ins: [(DType, DType); 3],
    walk: Walk,
}

/// FxHash (rustc's): a few multiply-rotates per word, plenty for a table of kernels.
#[derive(Default)]
struct Fx(u64);
impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

type Cache = HashMap<Key, super::device::Func, BuildHasherDefault<Fx>>;
static KERNELS: Mutex<Option<Cache>> = Mutex::new(None);

/// Forgets the loaded elementwise kernels (with `compile::clear_memory_cache`).
pub(crate) fn clear_cache() {
    if let Some(m) = KERNELS.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        m.clear();
    }
}

/// The kernel of `key`, generating and compiling its source on the first use only.
fn kernel(dev: &CudaDevice, key: &Key) -> Result<super::device::Func> {
    if let Some(f) = KERNELS.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(key)) {
        return Ok(*f);
    }
    let (kname, src) = source(key)?;
    let f = function(dev, &kname, &src)?;
    KERNELS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(Cache::default).insert(*key, f);
    Ok(f)
}

fn ty(op: &str, d: DType) -> Result<&'static str> {
    ctype(d).ok_or_else(|| Error::unsupported(op, format!("CUDA kernels for {d}")))
}

/// The kernel's name (unique per source: it keys `compile::function`'s cache) and its source.
fn source(key: &Key) -> Result<(String, String)> {
    let op = key.name;
    let out_ty = ty(op, key.out)?;
    let cty = ty(op, key.compute)?;
    let mut kname = format!("ew_{}_{}_c{}", key.name, key.out.name(), key.compute.name());
    let ins = &key.ins[..key.nin as usize];
    for (d, l) in ins {
        ty(op, *l)?;
        kname.push_str(&format!("_{}{}", d.name(), l.name()));
    }
    // different expressions under one name must not share a cached kernel
    kname.push_str(&format!("_e{:08x}", super::compile::fnv1a(&[key.expr.as_bytes()]) as u32));
    let vars = ["x", "y", "z"];
    let conv_out = conv(key.out);
    let src = match key.walk {
        Walk::Strided => {
            let mut params = format!("i64 n, int contig, Strided s, {out_ty}* __restrict__ out");
            let mut loads = String::new();
            for (k, (d, l)) in ins.iter().enumerate() {
                params.push_str(&format!(", const {}* __restrict__ in{k}", ty(op, *d)?));
                loads.push_str(&format!("        auto {} = {}(in{k}[p[{}]]);\n", vars[k], conv(*l), k + 1));
            }
            let nops = ins.len() + 1;
            format!(
                "{PREAMBLE}\ntypedef {cty} C;\nextern \"C\" __global__ void {kname}({params}) {{\n    \
                 for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {{\n        \
                 i64 p[{nops}];\n        \
                 if (contig) {{\n#pragma unroll\n            for (int k = 0; k < {nops}; k++) p[k] = s.offset[k] + i;\n        }} else {{\n            mp_offsets<{nops}>(s, i, p);\n        }}\n\
                 {loads}        out[p[0]] = {conv_out}({expr});\n    }}\n}}\n",
                expr = key.expr
            )
        }
        Walk::Vec { vec, unroll, bcast, rows } => {
            kname.push_str(&format!("_v{vec}u{unroll}b{bcast}"));
            if rows != 0 {
                kname.push_str(&format!("r{rows}"));
            }
            let mut params = format!("i64 n, {out_ty}* __restrict__ out");
            // per input: the hoisted value of a broadcast element, or the vector loads
            let (mut hoist, mut vload, mut velem, mut tail) = (String::new(), String::new(), String::new(), String::new());
            for (k, (d, l)) in ins.iter().enumerate() {
                let it = ty(op, *d)?;
                params.push_str(&format!(", const {it}* __restrict__ in{k}"));
                let (v, c) = (vars[k], conv(*l));
                if bcast & (1 << k) != 0 {
                    hoist.push_str(&format!("    const auto {v} = {c}(in{k}[0]);\n"));
                } else if rows & (1 << k) != 0 {
                    // a row of rv{k} vectors repeated: vector j of the output reads vector j % rv{k}
                    vload.push_str(&format!("            MpVec<{it}, {vec}> a{k}[{unroll}];\n#pragma unroll\n            for (int u = 0; u < {unroll}; u++) if (j + u * step < nv) a{k}[u] = mp_ldv<{it}, {vec}>(in{k}, (j + u * step) % rv{k});\n"));
                    velem.push_str(&format!("                    const auto {v} = {c}(a{k}[u].v[e]);\n"));
                    tail.push_str(&format!("        const auto {v} = {c}(in{k}[t % (rv{k} * {vec})]);\n"));
                } else {
                    vload.push_str(&format!("            MpVec<{it}, {vec}> a{k}[{unroll}];\n#pragma unroll\n            for (int u = 0; u < {unroll}; u++) if (j + u * step < nv) a{k}[u] = mp_ldv<{it}, {vec}>(in{k}, j + u * step);\n"));
                    velem.push_str(&format!("                    const auto {v} = {c}(a{k}[u].v[e]);\n"));
                    tail.push_str(&format!("        const auto {v} = {c}(in{k}[t]);\n"));
                }
            }
            for k in 0..ins.len() {
                if rows & (1 << k) != 0 {
                    params.push_str(&format!(", i64 rv{k}"));
                }
            }
            // the hoisted values are visible in the tail too
            format!(
                "{PREAMBLE}\ntypedef {cty} C;\nextern \"C\" __global__ void __launch_bounds__({BLOCK}) {kname}({params}) {{\n\
                 {hoist}    const i64 nv = n / {vec};\n    const i64 step = (i64)gridDim.x * blockDim.x;\n\
                 \x20   for (i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x; j < nv; j += {unroll} * step) {{\n\
                 {vload}#pragma unroll\n            for (int u = 0; u < {unroll}; u++) {{\n                if (j + u * step < nv) {{\n\
                 \x20                   MpVec<{out_ty}, {vec}> r;\n#pragma unroll\n                    for (int e = 0; e < {vec}; e++) {{\n\
                 {velem}                        r.v[e] = {conv_out}({expr});\n                    }}\n\
                 \x20                   mp_stv<{out_ty}, {vec}>(out, j + u * step, r);\n                }}\n            }}\n    }}\n\
                 \x20   const i64 t = nv * {vec} + (i64)blockIdx.x * blockDim.x + threadIdx.x;\n\
                 \x20   if (t < n) {{\n{tail}        out[t] = {conv_out}({expr});\n    }}\n}}\n",
                expr = key.expr
            )
        }
    };
    Ok((kname, src))
}

// ---- the launch ----

/// The vector walk of `out = f(inputs)`, if it applies. `base` holds the storages' base addresses.
fn vec_plan(out: &Tensor, inputs: &[Opnd], base: &[u64; 4]) -> Option<VecPlan> {
    if !out.is_contiguous() {
        return None;
    }
    let osz = out.dtype().size();
    let mut addr = [0u64; 4];
    addr[0] = base[0] + (out.storage_offset() * osz) as u64;
    let mut widest = osz;
    let mut bcast = 0u8;
    let mut rows = 0u8;
    let mut row_len = [0i64; 3];
    for (k, i) in inputs.iter().enumerate() {
        let t = i.t;
        let sz = t.dtype().size();
        addr[k + 1] = base[k + 1] + (t.storage_offset() * sz) as u64;
        if t.shape() == out.shape() && t.is_contiguous() {
            widest = widest.max(sz);
        } else if t.numel() == 1 && t.ndim() <= out.ndim() {
            // all its dims are 1: it broadcasts to any shape of at least its rank
            bcast |= 1 << k;
        } else if let Some(r) = row_of(t, out.shape()) {
            widest = widest.max(sz);
            rows |= 1 << k;
            row_len[k] = r as i64;
        } else {
            return None;
        }
    }
    let vec = (16 / widest).max(1);
    let aligned = |a: u64, sz: usize| a % (vec * sz) as u64 == 0;
    if !aligned(addr[0], osz) {
        return None;
    }
    for (k, i) in inputs.iter().enumerate() {
        if bcast & (1 << k) == 0 && !aligned(addr[k + 1], i.t.dtype().size()) {
            return None;
        }
        if rows & (1 << k) != 0 {
            // whole vectors per row; the kernel takes the row length in vectors
            if row_len[k] % vec as i64 != 0 {
                return None;
            }
            row_len[k] /= vec as i64;
        }
    }
    Some(VecPlan { vec: vec as u8, bcast, rows, addr, row_len })
}

/// A vector walk: elements per access, the single-element and repeated-row input masks, the
/// operands' element-0 addresses and each repeated row's length in vectors.
struct VecPlan {
    vec: u8,
    bcast: u8,
    rows: u8,
    addr: [u64; 4],
    row_len: [i64; 3],
}

/// The length of the row `t` repeats when broadcast to `shape`: `t` contiguous, its shape (leading
/// 1s aside) the trailing dims of `shape`, fewer elements than `shape` (a bias over the last dim
/// of an activation, say). None otherwise.
fn row_of(t: &Tensor, shape: &[usize]) -> Option<usize> {
    if !t.is_contiguous() || t.numel() == 0 {
        return None;
    }
    let own: Vec<usize> = t.shape().iter().copied().skip_while(|&d| d == 1).collect();
    if own.len() > shape.len() || own[..] != shape[shape.len() - own.len()..] {
        return None;
    }
    let n: usize = shape.iter().product();
    (t.numel() < n).then_some(t.numel())
}

/// `out[i] = expr(x, y, z)` where `x, y, z` are the inputs' elements converted to their
/// `load_as` dtypes, and `expr` (CUDA C over the preamble; `C` names `compute`'s C type) gives a
/// value converted to `out`'s dtype. `out` may be any strided view (it is written through its
/// layout); inputs broadcast to `out`'s shape. `name` identifies `expr` in kernel names.
pub fn map(op: &str, name: &'static str, expr: &'static str, compute: DType, out: &Tensor, inputs: &[Opnd]) -> Result<()> {
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    if inputs.len() > 3 {
        return Err(Error::unsupported(op, "CUDA elementwise kernels over more than 3 inputs"));
    }
    ty(op, out.dtype())?;
    ty(op, compute)?;
    let (optr, dev) = storage_of(op, out)?;
    let mut base = [optr, 0, 0, 0];
    let mut ins = [(DType::F32, DType::F32); 3];
    for (k, i) in inputs.iter().enumerate() {
        let (p, d) = storage_of(op, i.t)?;
        if d.ordinal != dev.ordinal {
            return Err(Error::device(op, format!("Expected all tensors to be on the same device, but found cuda:{} and cuda:{}", dev.ordinal, d.ordinal)));
        }
        ty(op, i.t.dtype())?;
        ty(op, i.load_as)?;
        base[k + 1] = p;
        ins[k] = (i.t.dtype(), i.load_as);
    }
    let mut key = Key { ordinal: dev.ordinal, name, expr, out: out.dtype(), compute, nin: inputs.len() as u8, ins, walk: Walk::Strided };
    let (unroll, bps) = tuning();
    if let Some(VecPlan { vec, bcast, rows, addr, row_len }) = if unroll > 0 { vec_plan(out, inputs, &base) } else { None } {
        key.walk = Walk::Vec { vec, unroll: unroll as u8, bcast, rows };
        let f = kernel(&dev, &key)?;
        let mut args = Args::new();
        args.push(n as i64);
        for a in &addr[..inputs.len() + 1] {
            args.push(*a);
        }
        for (k, &r) in row_len[..inputs.len()].iter().enumerate() {
            if rows & (1 << k) != 0 {
                args.push(r);
            }
        }
        // threads: one per `unroll` vectors (at least one block, for the tail)
        let threads = (n / vec as usize).div_ceil(unroll as usize).max(1);
        let mut blocks = threads.div_ceil(BLOCK as usize);
        if bps > 0 {
            blocks = blocks.min(dev.sm_count as usize * bps as usize);
        }
        return launch(&dev, op, f, (blocks.clamp(1, i32::MAX as usize) as u32, 1, 1), (BLOCK, 1, 1), 0, &mut args);
    }
    strided(op, &dev, &key, out, inputs, &base)
}

/// The strided walk (views, broadcasts, misaligned operands).
fn strided(op: &str, dev: &Arc<CudaDevice>, key: &Key, out: &Tensor, inputs: &[Opnd], base: &[u64; 4]) -> Result<()> {
    let mut strides = vec![broadcast(out.layout(), out.shape())];
    let mut offsets = vec![out.storage_offset() as i64];
    for i in inputs {
        let bl = i.t.layout().broadcast_to(op, out.shape())?;
        strides.push(broadcast(&bl, out.shape()));
        offsets.push(i.t.storage_offset() as i64);
    }
    let (size, st) = coalesce(out.shape(), &strides);
    if size.len() > MAXD {
        return Err(Error::unsupported(op, format!("CUDA elementwise kernels over more than {MAXD} non-mergeable dims")));
    }
    let contig = size.len() <= 1 && st.iter().all(|s| s.first().is_none_or(|&x| x == 1));
    let mut p = Strided { ndim: size.len() as i32, size: [1; MAXD], stride: [[0; MAXD]; 4], offset: [0; 4] };
    for (d, &s) in size.iter().enumerate() {
        p.size[d] = s;
        for o in 0..st.len() {
            p.stride[o][d] = st[o][d];
        }
    }
    for (o, &off) in offsets.iter().enumerate() {
        p.offset[o] = off;
    }
    let f = kernel(dev, key)?;
    let mut args = Args::new();
    args.push(out.numel() as i64).push(contig as i32).push(p);
    for ptr in &base[..inputs.len() + 1] {
        args.push(*ptr);
    }
    launch_1d(dev, op, f, out.numel(), &mut args)
}

/// The (kernel name, CUDA source) the vector walk generates for these dtypes (`ins`: storage
/// dtype and load dtype per input), for inspecting the generated code without a GPU.
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn vector_source(name: &'static str, expr: &'static str, compute: DType, out: DType, ins: &[(DType, DType)], vec: u8, unroll: u8, bcast: u8) -> Result<(String, String)> {
    let mut k = [(DType::F32, DType::F32); 3];
    for (i, d) in ins.iter().take(3).enumerate() {
        k[i] = *d;
    }
    source(&Key { ordinal: 0, name, expr, out, compute, nin: ins.len().min(3) as u8, ins: k, walk: Walk::Vec { vec, unroll, bcast, rows: 0 } })
}
