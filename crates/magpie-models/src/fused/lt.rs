//! The prefill passes' products through cuBLASLt: per shape, the fastest of the library's candidate
//! algorithms and the legacy cuBLAS call (timed once, then cached), with the bias and activation
//! of an MLP's input projection in the product's epilogue.

use super::buffers::Buf;
use cudarc::cublaslt::sys as lt;
use cudarc::driver::{result as dres, sys as dsys};
use magpie_core::backend::cuda::alloc::is_capturing;
use magpie_core::backend::cuda::blas;
use magpie_core::backend::cuda::device::CudaDevice;
use magpie_core::{DType, Error, Result};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// What a [`LtGemm`] product does with its sums `y [m, n]` before storing them. Bias addresses hold
/// `n` values of the output dtype; 0 means no bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LtEpi {
    /// `y` (plus the bias, if any).
    Bias(u64),
    /// `gelu(y + bias)` with the tanh approximation (GPT-2's `gelu_new`, PyTorch's
    /// `gelu(approximate='tanh')`): cuBLASLt's GELU epilogue computes this one.
    GeluTanhBias(u64),
    /// `relu(y + bias)`.
    ReluBias(u64),
}

impl LtEpi {
    fn bias(self) -> u64 {
        match self {
            LtEpi::Bias(b) | LtEpi::GeluTanhBias(b) | LtEpi::ReluBias(b) => b,
        }
    }
    fn code(self) -> lt::cublasLtEpilogue_t {
        use lt::cublasLtEpilogue_t as E;
        match (self, self.bias() != 0) {
            (LtEpi::Bias(_), false) => E::CUBLASLT_EPILOGUE_DEFAULT,
            (LtEpi::Bias(_), true) => E::CUBLASLT_EPILOGUE_BIAS,
            (LtEpi::GeluTanhBias(_), false) => E::CUBLASLT_EPILOGUE_GELU,
            (LtEpi::GeluTanhBias(_), true) => E::CUBLASLT_EPILOGUE_GELU_BIAS,
            (LtEpi::ReluBias(_), false) => E::CUBLASLT_EPILOGUE_RELU,
            (LtEpi::ReluBias(_), true) => E::CUBLASLT_EPILOGUE_RELU_BIAS,
        }
    }
}

/// One way to run a product: the legacy cuBLAS call (plain products only) or a cuBLASLt algorithm.
#[derive(Clone, Copy)]
enum Algo {
    Legacy,
    Lt { algo: lt::cublasLtMatmulAlgo_t },
}

/// The descriptors of one (shape, dtypes, epilogue, alignment) and its chosen algorithm.
struct Plan {
    desc: lt::cublasLtMatmulDesc_t,
    /// w (A), x (B), y (C and D) in cuBLASLt's column-major view.
    lay: [lt::cublasLtMatrixLayout_t; 3],
    cands: Vec<Algo>,
    /// Index into `cands` once timed (None: not timed yet, the heuristic's first is used).
    best: Option<usize>,
    /// Microseconds per candidate from the timing run.
    times: Vec<f32>,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: created in `LtGemm::plan`, destroyed once.
        unsafe {
            lt::cublasLtMatmulDescDestroy(self.desc);
            for l in self.lay {
                lt::cublasLtMatrixLayoutDestroy(l);
            }
        }
    }
}

#[derive(Clone, Copy, Hash, PartialEq, Eq, Debug)]
struct Key {
    ab: DType,
    out: DType,
    m: usize,
    n: usize,
    k: usize,
    epi: u32,
    /// Byte alignments of w, x, y (and the bias).
    align: [u32; 4],
}

struct State {
    handle: lt::cublasLtHandle_t,
    plans: HashMap<Key, Plan>,
    /// Keys with no algorithm, and why (so a caller's fallback does not ask the heuristic again).
    none: HashMap<Key, String>,
}

// SAFETY: the handle and descriptors are used only under the mutex, one call at a time.
unsafe impl Send for State {}

/// `y [m, n] = epi(x [m, k] · w [n, k]ᵀ)` on raw device buffers, one product a call on the
/// device's stream, with the algorithm chosen per shape by timing: the first call of a shape
/// (outside a CUDA graph capture) runs each candidate a few times — up to 16 of cuBLASLt's
/// heuristic picks for the shape, its epilogue and its operands' alignment, plus the legacy
/// cuBLAS call for plain products — and keeps the fastest. Writes `y` while it times, so call it
/// where `y` is scratch until the product lands (the engines' activation buffers). f32 products
/// use full f32 arithmetic (no TF32, PyTorch's default; [`blas::allow_tf32`] is followed).
///
/// ```no_run
/// # fn main() -> magpie_core::Result<()> {
/// use magpie_core::backend::cuda::device;
/// use magpie_models::fused::{LtEpi, LtGemm};
/// let dev = device::device("example", 0)?;
/// let lt = LtGemm::new(&dev, 32 << 20)?;
/// # let (x, w, y, bias) = (0u64, 0u64, 0u64, 0u64);
/// // x [128, 768], w [3072, 768], y [128, 3072] = gelu(x wᵀ + bias), all f32
/// lt.linear(&dev, magpie_core::DType::F32, magpie_core::DType::F32, 128, 3072, 768, x, w, y, LtEpi::GeluTanhBias(bias))?;
/// # Ok(()) }
/// ```
pub struct LtGemm {
    state: Mutex<State>,
    ws: Buf,
    ws_bytes: usize,
    log: bool,
}

impl std::fmt::Debug for LtGemm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LtGemm(workspace {} bytes)", self.ws_bytes)
    }
}

impl Drop for LtGemm {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        st.plans.clear();
        // SAFETY: created in `new`, destroyed once, after its plans.
        unsafe { lt::cublasLtDestroy(st.handle) };
    }
}

fn lterr(op: &str, what: &str, s: lt::cublasStatus_t) -> Error {
    Error::device(op, format!("{what}: {s:?}"))
}

fn ck(op: &str, what: &str, s: lt::cublasStatus_t) -> Result<()> {
    if s == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(lterr(op, what, s))
    }
}

fn cuda_type(d: DType) -> Option<lt::cudaDataType> {
    match d {
        DType::F32 => Some(lt::cudaDataType::CUDA_R_32F),
        DType::F16 => Some(lt::cudaDataType::CUDA_R_16F),
        DType::BF16 => Some(lt::cudaDataType::CUDA_R_16BF),
        _ => None,
    }
}

/// The largest power of two up to 256 dividing every value.
fn alignment(vals: &[u64]) -> u32 {
    vals.iter().fold(256u32, |a, &v| if v == 0 { a } else { a.min(1 << v.trailing_zeros().min(8)) })
}

const OP: &str = "linear";

impl LtGemm {
    /// A cuBLASLt handle for `dev` and a workspace of `ws_bytes` (algorithms that need more are
    /// not considered).
    pub fn new(dev: &Arc<CudaDevice>, ws_bytes: usize) -> Result<LtGemm> {
        // SAFETY: only tries to open the library.
        let present = std::panic::catch_unwind(|| unsafe { lt::is_culib_present() }).unwrap_or(false);
        if !present {
            return Err(Error::device(OP, "cuBLASLt (libcublasLt) was not found; add the CUDA toolkit's lib64 to LD_LIBRARY_PATH"));
        }
        dev.bind()?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: writes a fresh handle.
        ck(OP, "cublasLtCreate", unsafe { lt::cublasLtCreate(&mut handle) })?;
        let ws = Buf::new(dev, DType::U8, ws_bytes, "cuBLASLt workspace")?;
        let log = std::env::var("MAGPIE_FUSED_LT_LOG").is_ok_and(|v| v != "0");
        Ok(LtGemm { state: Mutex::new(State { handle, plans: HashMap::new(), none: HashMap::new() }), ws, ws_bytes, log })
    }

    /// `y [m, n] = epi(x [m, k] · w [n, k]ᵀ)` (row-major, contiguous rows): `ab` is the dtype of x
    /// and w (f32, f16, bf16), `out` that of y and the bias (`ab`, or f32 for 16-bit inputs with no
    /// bias). Asynchronous, except the first call of a shape, which times its candidates.
    #[allow(clippy::too_many_arguments)]
    pub fn linear(&self, dev: &CudaDevice, ab: DType, out: DType, m: usize, n: usize, k: usize, x: u64, w: u64, y: u64, epi: LtEpi) -> Result<()> {
        if m == 0 || n == 0 {
            return Ok(());
        }
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let key = self.key(ab, out, m, n, k, x, w, y, epi)?;
        let st = &mut *g;
        self.ensure_plan(st, &key)?;
        let handle = st.handle;
        let Some(plan) = st.plans.get_mut(&key) else {
            return Err(Error::device(OP, "no cuBLASLt plan"));
        };
        if plan.best.is_none() && !is_capturing(dev) {
            self.tune(dev, handle, &key, plan, (x, w, y, epi.bias()))?;
        }
        let algo = plan.cands[plan.best.unwrap_or(0)];
        self.run(dev, handle, &key, plan, algo, (x, w, y, epi.bias()))
    }

    /// The number of candidate algorithms for a product (what [`linear`](Self::linear) times).
    #[allow(clippy::too_many_arguments)]
    pub fn candidates(&self, ab: DType, out: DType, m: usize, n: usize, k: usize, x: u64, w: u64, y: u64, epi: LtEpi) -> Result<usize> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let key = self.key(ab, out, m, n, k, x, w, y, epi)?;
        let st = &mut *g;
        self.ensure_plan(st, &key)?;
        Ok(st.plans.get(&key).map_or(0, |p| p.cands.len()))
    }

    /// [`linear`](Self::linear) with candidate `i` (below [`candidates`](Self::candidates)), not
    /// the timed choice: so each candidate can be checked.
    #[allow(clippy::too_many_arguments)]
    pub fn linear_with(&self, dev: &CudaDevice, i: usize, ab: DType, out: DType, m: usize, n: usize, k: usize, x: u64, w: u64, y: u64, epi: LtEpi) -> Result<()> {
        let count = self.candidates(ab, out, m, n, k, x, w, y, epi)?;
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let key = self.key(ab, out, m, n, k, x, w, y, epi)?;
        let handle = g.handle;
        let plan = g.plans.get_mut(&key).ok_or_else(|| Error::device(OP, "no cuBLASLt plan"))?;
        if i >= count {
            return Err(Error::index(OP, format!("candidate {i} of {count}")));
        }
        let algo = plan.cands[i];
        self.run(dev, handle, &key, plan, algo, (x, w, y, epi.bias()))
    }

    /// Per shape timed so far: `(m, n, k, epilogue code, microseconds per candidate, chosen
    /// candidate)`, the legacy cuBLAS call last where it took part.
    pub fn report(&self) -> Vec<(usize, usize, usize, u32, Vec<f32>, usize)> {
        let g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = g.plans.iter().filter_map(|(key, p)| p.best.map(|b| (key.m, key.n, key.k, key.epi, p.times.clone(), b))).collect();
        v.sort_by_key(|r| (r.0, r.1, r.2, r.3));
        v
    }

    /// Makes `key`'s plan unless it exists; remembers a key without algorithms.
    fn ensure_plan(&self, st: &mut State, key: &Key) -> Result<()> {
        if st.plans.contains_key(key) {
            return Ok(());
        }
        if let Some(msg) = st.none.get(key) {
            return Err(Error::unsupported(OP, msg.clone()));
        }
        match self.plan(st.handle, key) {
            Ok(p) => {
                st.plans.insert(*key, p);
                Ok(())
            }
            Err(e) => {
                if e.is_unsupported() {
                    st.none.insert(*key, e.to_string());
                }
                Err(e)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn key(&self, ab: DType, out: DType, m: usize, n: usize, k: usize, x: u64, w: u64, y: u64, epi: LtEpi) -> Result<Key> {
        let (Some(_), Some(_)) = (cuda_type(ab), cuda_type(out)) else {
            return Err(Error::dtype(OP, format!("no cuBLASLt product of {ab} into {out}")));
        };
        if out != ab && !(out == DType::F32 && matches!(ab, DType::F16 | DType::BF16) && epi.bias() == 0) {
            return Err(Error::dtype(OP, format!("no cuBLASLt product of {ab} into {out} with this epilogue")));
        }
        if k == 0 || [m, n, k].iter().any(|&v| v > i32::MAX as usize) {
            return Err(Error::value(OP, format!("unsupported GEMM size {m}x{n}x{k}")));
        }
        let (ea, eo) = (ab.size() as u64, out.size() as u64);
        let align = [alignment(&[w, k as u64 * ea]), alignment(&[x, k as u64 * ea]), alignment(&[y, n as u64 * eo]), alignment(&[epi.bias()])];
        Ok(Key { ab, out, m, n, k, epi: epi.code() as u32, align })
    }

    /// Descriptors and the candidate list for `key`.
    fn plan(&self, handle: lt::cublasLtHandle_t, key: &Key) -> Result<Plan> {
        let (Some(tab), Some(tout)) = (cuda_type(key.ab), cuda_type(key.out)) else {
            return Err(Error::dtype(OP, "no cuBLASLt type"));
        };
        let compute = if key.ab == DType::F32 && blas::allow_tf32() {
            lt::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        } else {
            lt::cublasComputeType_t::CUBLAS_COMPUTE_32F
        };
        let mut plan = Plan { desc: std::ptr::null_mut(), lay: [std::ptr::null_mut(); 3], cands: Vec::new(), best: None, times: Vec::new() };
        // SAFETY: descriptors created here are owned by `plan` (destroyed by its Drop, also on
        // the error returns); attribute buffers are locals of the stated sizes.
        let heur_err = unsafe {
            ck(OP, "cublasLtMatmulDescCreate", lt::cublasLtMatmulDescCreate(&mut plan.desc, compute, lt::cudaDataType::CUDA_R_32F))?;
            let set = |attr: lt::cublasLtMatmulDescAttributes_t, v: *const c_void, size: usize| ck(OP, "cublasLtMatmulDescSetAttribute", lt::cublasLtMatmulDescSetAttribute(plan.desc, attr, v, size));
            // Row-major y = x wᵀ is column-major yᵀ [n, m] = (w as [k, n])ᵀ · (x as [k, m]).
            let (ta, tb) = (1i32, 0i32);
            set(lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA, &ta as *const i32 as _, 4)?;
            set(lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB, &tb as *const i32 as _, 4)?;
            let epi = key.epi;
            set(lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE, &epi as *const u32 as _, 4)?;
            let dims = [(tab, key.k, key.n), (tab, key.k, key.m), (tout, key.n, key.m)];
            for (i, (t, r, c)) in dims.into_iter().enumerate() {
                ck(OP, "cublasLtMatrixLayoutCreate", lt::cublasLtMatrixLayoutCreate(&mut plan.lay[i], t, r as u64, c as u64, r as i64))?;
            }
            let mut pref = std::ptr::null_mut();
            ck(OP, "cublasLtMatmulPreferenceCreate", lt::cublasLtMatmulPreferenceCreate(&mut pref))?;
            let heur = (|| -> Result<Vec<lt::cublasLtMatmulHeuristicResult_t>> {
                use lt::cublasLtMatmulPreferenceAttributes_t as P;
                let pset = |attr: P, v: *const c_void, size: usize| ck(OP, "cublasLtMatmulPreferenceSetAttribute", lt::cublasLtMatmulPreferenceSetAttribute(pref, attr, v, size));
                let wsb = self.ws_bytes as u64;
                pset(P::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb as *const u64 as _, 8)?;
                for (attr, a) in [(P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align[0]), (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align[1]), (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align[2]), (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align[2])] {
                    pset(attr, &a as *const u32 as _, 4)?;
                }
                let mut res: Vec<lt::cublasLtMatmulHeuristicResult_t> = vec![std::mem::zeroed(); 16];
                let mut got = 0i32;
                ck(OP, "cublasLtMatmulAlgoGetHeuristic", lt::cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.lay[0], plan.lay[1], plan.lay[2], plan.lay[2], pref, res.len() as i32, res.as_mut_ptr(), &mut got))?;
                res.truncate(got.max(0) as usize);
                Ok(res)
            })();
            lt::cublasLtMatmulPreferenceDestroy(pref);
            // No candidate from the heuristic is not an error by itself: the legacy call may
            // still serve; the message says why if nothing does.
            let (found, heur_err) = match heur {
                Ok(v) => (v, None),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
            for r in found {
                if r.state == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS && r.workspaceSize <= self.ws_bytes {
                    plan.cands.push(Algo::Lt { algo: r.algo });
                }
            }
            heur_err
        };
        // The legacy call (its own heuristic and workspace) competes for plain products.
        if key.epi == lt::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT as u32 {
            plan.cands.push(Algo::Legacy);
        }
        if plan.cands.is_empty() {
            return Err(Error::unsupported(OP, format!("cuBLASLt has no algorithm for a {}x{}x{} {} product with epilogue {} ({})", key.m, key.n, key.k, key.ab, key.epi, heur_err.unwrap_or_default())));
        }
        Ok(plan)
    }

    /// Times every candidate of `plan` on the live buffers (one warm-up, then `REPS` launches
    /// between two events each) and keeps the fastest.
    fn tune(&self, dev: &CudaDevice, handle: lt::cublasLtHandle_t, key: &Key, plan: &mut Plan, bufs: (u64, u64, u64, u64)) -> Result<()> {
        const REPS: usize = 5;
        dev.bind()?;
        let ev = |flags| dres::event::create(flags).map_err(|e| Error::device(OP, format!("cuEventCreate: {e}")));
        let (e0, e1) = (ev(dsys::CUevent_flags::CU_EVENT_DEFAULT)?, ev(dsys::CUevent_flags::CU_EVENT_DEFAULT)?);
        let mut times = Vec::with_capacity(plan.cands.len());
        let res = (|| {
            for i in 0..plan.cands.len() {
                let algo = plan.cands[i];
                // A candidate that fails to launch (the heuristic can offer one the shape then
                // rejects) is not chosen.
                if self.run(dev, handle, key, plan, algo, bufs).is_err() {
                    times.push(f32::INFINITY);
                    continue;
                }
                // SAFETY: live events on the device's live stream.
                unsafe { dres::event::record(e0, dev.cu_stream()) }.map_err(|e| Error::device(OP, format!("cuEventRecord: {e}")))?;
                for _ in 0..REPS {
                    self.run(dev, handle, key, plan, algo, bufs)?;
                }
                // SAFETY: as above; the elapsed time is read after the end event completed.
                let ms = unsafe {
                    dres::event::record(e1, dev.cu_stream()).and_then(|_| dres::event::synchronize(e1)).and_then(|_| dres::event::elapsed(e0, e1))
                }
                .map_err(|e| Error::device(OP, format!("timing the candidates: {e}")))?;
                times.push(ms * 1000.0 / REPS as f32);
            }
            Ok(())
        })();
        // SAFETY: created above, destroyed once.
        unsafe {
            dres::event::destroy(e0).ok();
            dres::event::destroy(e1).ok();
        }
        res?;
        let best = times.iter().enumerate().filter(|t| t.1.is_finite()).min_by(|a, b| a.1.total_cmp(b.1)).map(|t| t.0);
        let Some(best) = best else {
            return Err(Error::device(OP, format!("no cuBLASLt candidate ran a {}x{}x{} product", key.m, key.n, key.k)));
        };
        if self.log {
            let legacy = matches!(plan.cands.last(), Some(Algo::Legacy));
            eprintln!("lt {}x{}x{} {}->{} epi {}: {} candidates{}, us {:?}, chose {best}", key.m, key.n, key.k, key.ab, key.out, key.epi, times.len(), if legacy { " (last: legacy cuBLAS)" } else { "" }, times.iter().map(|t| (t * 10.0).round() / 10.0).collect::<Vec<_>>());
        }
        plan.best = Some(best);
        plan.times = times;
        Ok(())
    }

    fn run(&self, dev: &CudaDevice, handle: lt::cublasLtHandle_t, key: &Key, plan: &Plan, algo: Algo, (x, w, y, bias): (u64, u64, u64, u64)) -> Result<()> {
        match algo {
            Algo::Legacy => blas::gemm_nt(dev, key.ab, key.out, key.m, key.n, key.k, x, w, y),
            Algo::Lt { algo } => {
                dev.bind()?;
                let (one, zero) = (1f32, 0f32);
                // SAFETY: the plan's live descriptors; the caller passes device buffers of m*k,
                // n*k, m*n elements and n bias values; the workspace holds `ws_bytes` >= ws.
                unsafe {
                    if bias != 0 {
                        ck(OP, "cublasLtMatmulDescSetAttribute", lt::cublasLtMatmulDescSetAttribute(plan.desc, lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias as *const u64 as _, 8))?;
                    }
                    ck(
                        OP,
                        "cublasLtMatmul",
                        lt::cublasLtMatmul(
                            handle,
                            plan.desc,
                            &one as *const f32 as _,
                            w as *const c_void,
                            plan.lay[0],
                            x as *const c_void,
                            plan.lay[1],
                            &zero as *const f32 as _,
                            y as *const c_void,
                            plan.lay[2],
                            y as *mut c_void,
                            plan.lay[2],
                            &algo,
                            self.ws.ptr as *mut c_void,
                            self.ws_bytes,
                            dev.cu_stream() as lt::cudaStream_t,
                        ),
                    )
                }
            }
        }
    }
}
