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

// Adam / AdamW (`decoupled`), AMSGrad when `vmax` is not null. The host passes the step's
// bias corrections: step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t),
// w1 = 1 - beta1, w2 = 1 - beta2, decay = 1 - lr * wd.
extern "C" __global__ void adam_step(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v,
                                     T* __restrict__ vmax, i64 n, double step_size_, double bc2_sqrt_, double w1_, double b2_,
                                     double w2_, double decay_, double wd_, double eps_, int decoupled, int maximize) {
    const A step_size = (A)step_size_, bc2_sqrt = (A)bc2_sqrt_, w1 = (A)w1_, b2 = (A)b2_, w2 = (A)w2_, decay = (A)decay_,
            wd = (A)wd_, eps = (A)eps_;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        A pv = p[i];
        A d = maximize ? -g[i] : g[i];
        if (decoupled) {
            pv = pv * decay;
        } else if (wd_ != 0.0) {
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
