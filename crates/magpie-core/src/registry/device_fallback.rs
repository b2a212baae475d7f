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

fn to_cpu(v: &Value) -> Result<Value> {
    Ok(match v {
        Value::Tensor(t) if t.device().is_cuda() => Value::Tensor(t.to_device(Device::Cpu)?),
        Value::List(l) => Value::List(l.iter().map(to_cpu).collect::<Result<_>>()?),
        v => v.clone(),
    })
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
    cuda::note_fallback(name, true);
    let cargs: Vec<Value> = args.iter().map(to_cpu).collect::<Result<_>>()?;
    let ckw: Vec<(String, Value)> = kwargs.iter().map(|(k, v)| Ok((k.clone(), to_cpu(v)?))).collect::<Result<_>>()?;
    // a `device=` argument naming the GPU would put new tensors there: the CPU run makes them on the CPU
    let ckw = ckw.into_iter().map(|(k, v)| if k == "device" { (k, Value::Device(Device::Cpu)) } else { (k, v) }).collect();
    let out = run(f, name, cargs.clone(), ckw)?;
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
