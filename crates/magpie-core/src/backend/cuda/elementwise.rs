//! The generic elementwise kernel: `out[i] = expr(x, y, z)` over up to three strided, broadcast
//! inputs and a strided output, for any real dtypes. The kernel source is generated from the
//! expression and the dtypes, compiled once per combination (see `compile.rs`) and launched
//! with a grid-stride loop; contiguous operands skip the index arithmetic.

use super::compile::{function, PREAMBLE};
use super::device::CudaDevice;
use super::launch::{launch_1d, Args};
use crate::dtype::DType;
use crate::layout::Layout;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

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

/// `out[i] = expr(x, y, z)` where `x, y, z` are the inputs' elements converted to their
/// `load_as` dtypes, and `expr` (CUDA C over the preamble; `C` names `compute`'s C type) gives a
/// value converted to `out`'s dtype. `out` may be any strided view (it is written through its
/// layout); inputs broadcast to `out`'s shape. `name` identifies `expr` (the kernel's cache key).
pub fn map(op: &str, name: &str, expr: &str, compute: DType, out: &Tensor, inputs: &[Opnd]) -> Result<()> {
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    let (optr, dev) = storage_of(op, out)?;
    let mut ptrs = vec![optr];
    let mut strides = vec![broadcast(out.layout(), out.shape())];
    let mut offsets = vec![out.storage_offset() as i64];
    for i in inputs {
        let (p, d) = storage_of(op, i.t)?;
        if d.ordinal != dev.ordinal {
            return Err(Error::device(op, format!("Expected all tensors to be on the same device, but found cuda:{} and cuda:{}", dev.ordinal, d.ordinal)));
        }
        let bl = i.t.layout().broadcast_to(op, out.shape())?;
        ptrs.push(p);
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
    let ty = |d: DType| ctype(d).ok_or_else(|| Error::unsupported(op, format!("CUDA kernels for {d}")));
    let out_ty = ty(out.dtype())?;
    let cty = ty(compute)?;
    let mut kname = format!("ew_{name}_{}_c{}", out.dtype().name(), compute.name());
    let mut params = format!("i64 n, int contig, Strided s, {out_ty}* __restrict__ out");
    let mut loads = String::new();
    let vars = ["x", "y", "z"];
    for (k, i) in inputs.iter().enumerate() {
        let it = ty(i.t.dtype())?;
        ty(i.load_as)?;
        kname.push_str(&format!("_{}{}", i.t.dtype().name(), i.load_as.name()));
        params.push_str(&format!(", const {it}* __restrict__ in{k}"));
        loads.push_str(&format!("        auto {} = {}(in{k}[p[{}]]);\n", vars[k], conv(i.load_as), k + 1));
    }
    let nops = inputs.len() + 1;
    let src = format!(
        "{PREAMBLE}\ntypedef {cty} C;\nextern \"C\" __global__ void {kname}({params}) {{\n    \
         for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {{\n        \
         i64 p[{nops}];\n        \
         if (contig) {{\n#pragma unroll\n            for (int k = 0; k < {nops}; k++) p[k] = s.offset[k] + i;\n        }} else {{\n            mp_offsets<{nops}>(s, i, p);\n        }}\n\
         {loads}        out[p[0]] = {}({expr});\n    }}\n}}\n",
        conv(out.dtype())
    );
    let f = function(&dev, &kname, &src)?;
    let mut args = Args::new();
    args.push(n as i64).push(contig as i32).push(p);
    for ptr in ptrs {
        args.push(ptr);
    }
    launch_1d(&dev, op, f, n, &mut args)
}
