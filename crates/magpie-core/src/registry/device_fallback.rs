//! The CPU fallback for CUDA tensors: a registry call with CUDA tensors first runs natively; if
//! it reaches a CPU-only kernel (the error `backend::cuda::cpu_only`), it reruns with every
//! tensor argument moved to the CPU by the differentiable `to_device`, and moves the results
//! back. Autograd stays correct (the moves are recorded), and an in-place op's result is written
//! back into its CUDA `self` (with `assign_`, which also rebases its history). The counters in
//! `backend::cuda::fallback_counts` record which ops ran natively and which fell back.
//!
//! Running natively first is safe because CPU kernels reject CUDA tensors before writing
//! anything; ops are pure apart from in-place writes, which happen last.

use super::{Args, OpFn, Value};
use crate::backend::cuda;
use crate::tensor::Tensor;
use crate::{Device, Result};

/// The first CUDA device among the tensors of a call (in lists too), if any.
pub(super) fn cuda_device(args: &[Value], kwargs: &[(String, Value)]) -> Option<Device> {
    fn find(v: &Value) -> Option<Device> {
        match v {
            Value::Tensor(t) if t.device().is_cuda() => Some(t.device()),
            Value::List(l) => l.iter().find_map(find),
            _ => None,
        }
    }
    args.iter().find_map(find).or_else(|| kwargs.iter().find_map(|(_, v)| find(v)))
}

/// Moves a call's CUDA tensors to the CPU. Tensors of one storage that appear more than once
/// (an `out=` aliasing an input, `x.op_(x[1:])`) become views of one host copy of that storage,
/// so the CPU run sees the same aliasing (and rejects or handles it like the native run); the
/// others move one by one with the differentiable `to_device`.
struct Mover {
    /// CUDA storages seen more than once among tensors that do not require grad
    shared: Vec<std::sync::Arc<crate::storage::StorageCell>>,
    /// host copies of those storages (a 1-d tensor over the whole storage)
    hosts: Vec<(std::sync::Arc<crate::storage::StorageCell>, Tensor)>,
}

impl Mover {
    fn new(args: &[Value], kwargs: &[(String, Value)]) -> Mover {
        fn walk(v: &Value, out: &mut Vec<Tensor>) {
            match v {
                Value::Tensor(t) if t.device().is_cuda() => out.push(t.clone()),
                Value::List(l) => l.iter().for_each(|x| walk(x, out)),
                _ => {}
            }
        }
        let mut ts = Vec::new();
        args.iter().chain(kwargs.iter().map(|(_, v)| v)).for_each(|v| walk(v, &mut ts));
        let mut shared: Vec<std::sync::Arc<crate::storage::StorageCell>> = Vec::new();
        for (i, t) in ts.iter().enumerate() {
            let st = t.storage();
            let dup = ts[..i].iter().any(|u| u.shares_storage(t));
            if dup && !shared.iter().any(|s| std::sync::Arc::ptr_eq(s, st)) {
                let group: Vec<&Tensor> = ts.iter().filter(|u| u.shares_storage(t)).collect();
                if group.iter().all(|u| !u.requires_grad()) {
                    shared.push(st.clone());
                }
            }
        }
        Mover { shared, hosts: Vec::new() }
    }

    fn tensor(&mut self, t: &Tensor) -> Result<Tensor> {
        let st = t.storage().clone();
        if !self.shared.iter().any(|s| std::sync::Arc::ptr_eq(s, &st)) {
            return t.to_device(Device::Cpu);
        }
        let _ng = crate::autograd::no_grad();
        let host = match self.hosts.iter().find(|(s, _)| std::sync::Arc::ptr_eq(s, &st)) {
            Some((_, h)) => h.clone(),
            None => {
                let len = st.read().len();
                let h = t.with_layout(crate::layout::Layout::contiguous(&[len])).to_device(Device::Cpu)?;
                self.hosts.push((st, h.clone()));
                h
            }
        };
        Ok(host.with_layout(t.layout().clone()))
    }

    fn value(&mut self, v: &Value) -> Result<Value> {
        Ok(match v {
            Value::Tensor(t) if t.device().is_cuda() => Value::Tensor(self.tensor(t)?),
            Value::List(l) => Value::List(l.iter().map(|x| self.value(x)).collect::<Result<_>>()?),
            v => v.clone(),
        })
    }
}

fn to_dev(v: Value, dev: Device) -> Result<Value> {
    Ok(match v {
        Value::Tensor(t) => Value::Tensor(t.to_device(dev)?),
        Value::List(l) => Value::List(l.into_iter().map(|x| to_dev(x, dev)).collect::<Result<_>>()?),
        v => v,
    })
}

fn run(f: OpFn, name: &str, args: Vec<Value>, kwargs: Vec<(String, Value)>) -> Result<Value> {
    let mut a = Args::new(name, args, kwargs);
    let out = f(&mut a)?;
    a.finish()?;
    Ok(out)
}

/// Calls `f` for a call that has CUDA tensors on `dev` (see the module docs).
pub(super) fn call_on_cuda(f: OpFn, name: &str, dev: Device, args: Vec<Value>, kwargs: Vec<(String, Value)>) -> Result<Value> {
    match run(f, name, args.clone(), kwargs.clone()) {
        Err(e) if cuda::is_cpu_only_error(&e) => {}
        r => {
            cuda::note_fallback(name, false);
            return r;
        }
    }
    cuda::forbid_in_capture(name, dev, "a CPU fallback (this op has no CUDA kernel)")?;
    cuda::note_fallback(name, true);
    let mut mv = Mover::new(&args, &kwargs);
    let cargs: Vec<Value> = args.iter().map(|v| mv.value(v)).collect::<Result<_>>()?;
    let ckw: Vec<(String, Value)> = kwargs.iter().map(|(k, v)| Ok((k.clone(), mv.value(v)?))).collect::<Result<_>>()?;
    // a `device=` argument naming the GPU would put new tensors there: the CPU run makes them on the CPU
    let ckw: Vec<(String, Value)> = ckw.into_iter().map(|(k, v)| if k == "device" { (k, Value::Device(Device::Cpu)) } else { (k, v) }).collect();
    let out = {
        // CUDA autocast applies to the op's host copies as it would on the GPU
        let _ac = crate::amp::cpu_as_cuda();
        run(f, name, cargs.clone(), ckw.clone())?
    };
    // `out=`: the CPU run wrote the host copy of `out`; write it into the CUDA `out` too
    let find_out = |kw: &[(String, Value)]| kw.iter().find(|(k, _)| k == "out").map(|(_, v)| v.clone());
    if let (Some(Value::Tensor(orig)), Some(Value::Tensor(cout)), Value::Tensor(res)) = (find_out(&kwargs), find_out(&ckw), &out) {
        if orig.device().is_cuda() && res.is_same(&cout) {
            let _ng = crate::autograd::no_grad();
            orig.copy_(res)?;
            return Ok(Value::Tensor(orig));
        }
    }
    // in-place ops: write the CPU result back into the CUDA `self`
    let inplace = name.ends_with('_') && !name.ends_with("__");
    if inplace {
        if let (Some(Value::Tensor(orig)), Some(Value::Tensor(cself)), Value::Tensor(res)) = (args.first(), cargs.first(), &out) {
            if orig.device().is_cuda() && res.is_same(cself) {
                let back: Tensor = res.to_device(orig.device())?;
                orig.assign_(name, &back)?;
                return Ok(Value::Tensor(orig.clone()));
            }
        }
    }
    to_dev(out, dev)
}
