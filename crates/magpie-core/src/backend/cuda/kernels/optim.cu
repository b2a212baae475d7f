// Fused optimizer steps over one contiguous parameter, its gradient and its state buffers, all
// of dtype T (float or double), in one grid-stride pass. The arithmetic follows magpie-optim's
// CPU update rules (PyTorch's single-tensor implementations) operation by operation, in T;
// hyperparameters arrive as doubles and are rounded to T once, like the CPU path's `T::c`.

typedef Ty<T>::acc A;

// SGD. `buf` is null when momentum is 0; `first` is 1 on the step that creates the buffer.
extern "C" __global__ void sgd_step(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, i64 n, double lr_, double mom_,
                                    double damp_, double wd_, int nesterov, int maximize, int first) {
    const A lr = (A)lr_, mom = (A)mom_, wd = (A)wd_, omd = (A)1 - (A)damp_;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        A pv = p[i];
        A d = maximize ? -g[i] : g[i];
        if (wd != (A)0) d = d + wd * pv;
        if (buf) {
            A b = first ? d : mom * buf[i] + omd * d;
            buf[i] = b;
            d = nesterov ? d + mom * b : b;
        }
        p[i] = pv - lr * d;
    }
}

// One element of Adam / AdamW (`decoupled`), AMSGrad when `vmax` is not null: the update both
// the single-tensor and the multi-tensor kernels run.
__device__ __forceinline__ void adam_elem(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v,
                                          T* __restrict__ vmax, i64 i, A step_size, A bc2_sqrt, A w1, A b2, A w2, A decay, A wd,
                                          A eps, bool l2, int decoupled, int maximize) {
    A pv = p[i];
    A d = maximize ? -g[i] : g[i];
    if (decoupled) {
        pv = pv * decay;
    } else if (l2) {
        d = d + wd * pv;
    }
    A mi = m[i], vi = v[i];
    mi = mi + w1 * (d - mi);
    vi = vi * b2 + w2 * d * d;
    m[i] = mi;
    v[i] = vi;
    A denom;
    if (vmax) {
        A vm = vmax[i];
        vm = (vm != vm || vi > vm) ? vi : vm;  // Rust's f32::max: a NaN side loses
        vmax[i] = vm;
        denom = m_sqrt(vm) / bc2_sqrt + eps;
    } else {
        denom = m_sqrt(vi) / bc2_sqrt + eps;
    }
    p[i] = pv - step_size * (mi / denom);
}

// Adam / AdamW over one tensor. The host passes the step's bias corrections:
// step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t), w1 = 1 - beta1, w2 = 1 - beta2,
// decay = 1 - lr * wd.
extern "C" __global__ void adam_step(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v,
                                     T* __restrict__ vmax, i64 n, double step_size_, double bc2_sqrt_, double w1_, double b2_,
                                     double w2_, double decay_, double wd_, double eps_, int decoupled, int maximize) {
    const A step_size = (A)step_size_, bc2_sqrt = (A)bc2_sqrt_, w1 = (A)w1_, b2 = (A)b2_, w2 = (A)w2_, decay = (A)decay_,
            wd = (A)wd_, eps = (A)eps_;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        adam_elem(p, g, m, v, vmax, i, step_size, bc2_sqrt, w1, b2, w2, decay, wd, eps, wd_ != 0.0, decoupled, maximize);
}

// The sum of squares of x (n elements, contiguous) added into acc[0] (double for float inputs
// too, so the global gradient norm does not depend on the summation order much).
extern "C" __global__ void sumsq_acc(const T* __restrict__ x, i64 n, double* acc) {
    __shared__ double sm[32];
    double s = 0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        double v = (double)Ty<T>::ld(x[i]);
        s += v * v;
    }
    s = block_reduce<OpSum<double> >(s, sm);
    if (threadIdx.x == 0) atomicAdd(acc, s);
}

// ---- multi-tensor forms: up to MT_N tensors per launch (blockIdx.y picks the tensor, blocks
// stride over its elements), so a whole parameter group takes one launch, as PyTorch's
// multi_tensor_apply does. The list travels as the kernel parameter (no device table to upload).
#define MT_N 48
struct MtList {
    u64 a[MT_N], b[MT_N], c[MT_N], d[MT_N], e[MT_N];  // per kernel: p, g, m, v, vmax (or x only)
    i64 n[MT_N];
};

struct MtAdam {
    double step_size, bc2_sqrt, w1, b2, w2, decay, wd, eps;
    int decoupled, maximize;
};

// `dyn`: null, or the step's (step_size, bc2_sqrt, decay) in device memory, which then replace
// h's: a CUDA graph replays one capture for every step while the host writes them per step.
extern "C" __global__ void adam_step_multi(const MtList l, const MtAdam h, const double* dyn) {
    const int t = blockIdx.y;
    T* __restrict__ p = (T*)l.a[t];
    const T* __restrict__ g = (const T*)l.b[t];
    T* __restrict__ m = (T*)l.c[t];
    T* __restrict__ v = (T*)l.d[t];
    T* __restrict__ vmax = (T*)l.e[t];
    const i64 n = l.n[t];
    const A step_size = (A)(dyn ? dyn[0] : h.step_size), bc2_sqrt = (A)(dyn ? dyn[1] : h.bc2_sqrt), w1 = (A)h.w1, b2 = (A)h.b2,
            w2 = (A)h.w2, decay = (A)(dyn ? dyn[2] : h.decay), wd = (A)h.wd, eps = (A)h.eps;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        adam_elem(p, g, m, v, vmax, i, step_size, bc2_sqrt, w1, b2, w2, decay, wd, eps, h.wd != 0.0, h.decoupled, h.maximize);
}

// part[blockIdx.y * gridDim.x + blockIdx.x] = this block's sum of squares of listed tensor
// blockIdx.y (l.a); every block writes its slot, so sum_partials can add them in a fixed order
// (no atomics: the norm, and so clipping, is bitwise reproducible).
extern "C" __global__ void sumsq_multi(const MtList l, double* part) {
    __shared__ double sm[32];
    const T* __restrict__ x = (const T*)l.a[blockIdx.y];
    const i64 n = l.n[blockIdx.y];
    double s = 0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        double v = (double)Ty<T>::ld(x[i]);
        s += v * v;
    }
    s = block_reduce<OpSum<double> >(s, sm);
    if (threadIdx.x == 0) part[(i64)blockIdx.y * gridDim.x + blockIdx.x] = s;
}

// acc[0] = part[0] + ... + part[n - 1] in a fixed order (one block).
extern "C" __global__ void sum_partials(const double* __restrict__ part, i64 n, double* acc) {
    __shared__ double sm[32];
    double s = 0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) s += part[i];
    s = block_reduce<OpSum<double> >(s, sm);
    if (threadIdx.x == 0) acc[0] = s;
}

// clip_grad_norm_'s scaling without a host read: coef = min(max_norm / (sqrt(acc[0]) + 1e-6), 1),
// computed by every block from the device total, multiplies every listed tensor (l.a) in place.
extern "C" __global__ void clip_scale_multi(const MtList l, const double* acc, double max_norm) {
    T* __restrict__ x = (T*)l.a[blockIdx.y];
    const i64 n = l.n[blockIdx.y];
    const double total = sqrt(acc[0]);
    double c = max_norm / (total + 1e-6);
    c = c < 1.0 ? c : 1.0;  // NaN total: NaN coefficient, as PyTorch's clamp keeps NaN
    if (total != total) c = total;
    const A coef = (A)c;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) x[i] = Ty<T>::st((A)Ty<T>::ld(x[i]) * coef);
}
