//! gradcheck (and gradgradcheck) in f64 over the differentiable ops of the registry.
//!
//! Ops with a generator in `cases()` must pass both checks (unless listed in `NO_GRADGRAD`).
//! Every other registered op is probed as a unary op on values in (0.1, 0.9); probes that run
//! and give a float result are gradchecked too and failures are reported. Ops excluded on
//! purpose are in `EXCLUDED`, with the reason.

use magpie_core::autograd::{self, GradcheckOptions};
use magpie_core::registry::{self, Value};
use magpie_core::{Result, Tensor};

/// Not gradchecked, and why.
const EXCLUDED: &[(&str, &str)] = &[
    ("item", "returns a Python number, not a tensor"),
    ("eq", "bool output"),
    ("ne", "bool output"),
    ("lt", "bool output"),
    ("le", "bool output"),
    ("gt", "bool output"),
    ("ge", "bool output"),
    ("where", "differentiable part covered by the `where` case with a bool condition (the probe passes a float)"),
    ("bernoulli", "random"),
    ("rand_like", "random"),
    ("randn_like", "random"),
    ("dropout", "random"),
    ("nn.functional.dropout", "random"),
    ("empty_like", "uninitialized values"),
    ("new_empty", "uninitialized values"),
];

/// Ops whose second derivative is not checked, and why.
const NO_GRADGRAD: &[(&str, &str)] = &[];

type Gen = Box<dyn Fn(&[Tensor]) -> (Vec<Value>, Vec<(String, Value)>)>;

/// Values in (lo, hi), deterministic, distinct (no ties for max/min/sort).
fn sample(shape: &[usize], lo: f64, hi: f64, seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| {
            let u = (((i as u64 + 1) * 2654435761 + seed * 40503) % 1000) as f64 / 1000.0;
            lo + (hi - lo) * (0.05 + 0.9 * u) + i as f64 * 1e-4
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn tv(t: &Tensor) -> Value {
    Value::Tensor(t.clone())
}
fn ints(v: &[i64]) -> Value {
    Value::List(v.iter().map(|&i| Value::Int(i)).collect())
}

struct Case {
    name: &'static str,
    inputs: Vec<Tensor>,
    args: Gen,
}

fn case(name: &'static str, inputs: Vec<Tensor>, args: impl Fn(&[Tensor]) -> Vec<Value> + 'static) -> Case {
    Case { name, inputs, args: Box::new(move |t| (args(t), vec![])) }
}
fn case_kw(name: &'static str, inputs: Vec<Tensor>, args: impl Fn(&[Tensor]) -> (Vec<Value>, Vec<(String, Value)>) + 'static) -> Case {
    Case { name, inputs, args: Box::new(args) }
}

const UNARY_01: &[&str] = &[
    "neg", "exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "sigmoid", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "atanh", "expm1", "log1p", "log2", "log10", "exp2", "rsqrt", "reciprocal", "erf", "erfc", "erfinv",
    "abs", "square", "logit", "lgamma", "digamma", "sinc", "deg2rad", "rad2deg", "positive", "clone", "contiguous",
    "relu", "nn.functional.relu", "nn.functional.silu", "nn.functional.gelu", "nn.functional.softplus",
    "nn.functional.elu", "nn.functional.selu", "nn.functional.celu", "nn.functional.mish", "nn.functional.logsigmoid",
    "nn.functional.tanhshrink", "nn.functional.softsign", "nn.functional.leaky_relu", "nn.functional.relu6",
    "nn.functional.hardswish", "nn.functional.hardsigmoid", "nn.functional.hardtanh", "nn.functional.silu",
    "special.expit", "special.erfcx", "special.log_ndtr", "special.ndtr", "special.ndtri", "special.entr",
    "special.i0e", "special.i1", "special.i1e", "i0", "special.i0", "mvlgamma_p1", "polygamma_0", "frac",
    "sum", "mean", "prod", "amax", "amin", "max", "min", "logsumexp_all", "std", "var", "norm", "nansum", "nanmean",
    "t", "mT", "squeeze", "flatten", "ravel", "trace", "tril", "triu", "fliplr", "flipud",
];

fn cases() -> Vec<Case> {
    let x = || sample(&[2, 3], 0.1, 0.9, 1);
    let y = || sample(&[2, 3], 0.2, 1.1, 2);
    let row = || sample(&[3], 0.3, 0.8, 3);
    let mut v: Vec<Case> = UNARY_01.iter().map(|&n| case(n, vec![x()], |t| vec![tv(&t[0])])).collect();
    // binary, same shape and broadcast
    for n in ["add", "sub", "mul", "multiply", "div", "divide", "true_divide", "pow", "atan2", "hypot", "maximum", "minimum", "fmax", "fmin", "xlogy", "logaddexp", "logaddexp2", "special.xlog1py", "rsub", "float_power", "nextafter_x"] {
        v.push(case(n, vec![x(), y()], |t| vec![tv(&t[0]), tv(&t[1])]));
        v.push(case(n, vec![x(), row()], |t| vec![tv(&t[0]), tv(&t[1])]));
    }
    for n in ["add", "sub", "mul", "div", "pow", "rsub"] {
        v.push(case(n, vec![x()], |t| vec![tv(&t[0]), Value::Float(1.7)]));
    }
    v.push(case_kw("add", vec![x(), y()], |t| (vec![tv(&t[0]), tv(&t[1])], vec![("alpha".into(), Value::Float(-2.5))])));
    v.push(case("lerp", vec![x(), y(), row()], |t| vec![tv(&t[0]), tv(&t[1]), tv(&t[2])]));
    v.push(case("addcmul", vec![x(), y(), row()], |t| vec![tv(&t[0]), tv(&t[1]), tv(&t[2])]));
    v.push(case("addcdiv", vec![x(), y(), row()], |t| vec![tv(&t[0]), tv(&t[1]), tv(&t[2])]));
    v.push(case("clamp", vec![x()], |t| vec![tv(&t[0]), Value::Float(0.3), Value::Float(0.7)]));
    v.push(case("where", vec![x(), y()], |t| vec![tv(&t[0].gt_scalar(0.5).unwrap()), tv(&t[0]), tv(&t[1])]));
    // reductions over a dim
    for n in ["sum", "mean", "prod", "amax", "amin", "logsumexp", "std", "var", "nansum", "nanmean", "cumsum", "cumprod", "logcumsumexp", "softmax", "log_softmax", "nn.functional.softmax", "nn.functional.log_softmax", "norm_dim"] {
        v.push(case(n, vec![x()], |t| vec![tv(&t[0]), Value::Int(1)]));
    }
    v.push(case_kw("sum", vec![x()], |t| (vec![tv(&t[0]), ints(&[0])], vec![("keepdim".into(), Value::Bool(true))])));
    // views and shape ops
    v.push(case("view", vec![x()], |t| vec![tv(&t[0]), ints(&[3, 2])]));
    v.push(case("reshape", vec![x()], |t| vec![tv(&t[0]), ints(&[6])]));
    v.push(case("transpose", vec![x()], |t| vec![tv(&t[0]), Value::Int(0), Value::Int(1)]));
    v.push(case("permute", vec![x()], |t| vec![tv(&t[0]), ints(&[1, 0])]));
    v.push(case("narrow", vec![x()], |t| vec![tv(&t[0]), Value::Int(1), Value::Int(1), Value::Int(2)]));
    v.push(case("select", vec![x()], |t| vec![tv(&t[0]), Value::Int(1), Value::Int(-1)]));
    v.push(case("expand", vec![row()], |t| vec![tv(&t[0]), ints(&[2, 3])]));
    v.push(case("broadcast_to", vec![row()], |t| vec![tv(&t[0]), ints(&[2, 3])]));
    v.push(case("expand_as", vec![row(), x()], |t| vec![tv(&t[0]), tv(&t[1].detach())]));
    v.push(case("unsqueeze", vec![x()], |t| vec![tv(&t[0]), Value::Int(1)]));
    v.push(case("unflatten", vec![x()], |t| vec![tv(&t[0]), Value::Int(1), ints(&[3, 1])]));
    v.push(case("unfold", vec![x()], |t| vec![tv(&t[0]), Value::Int(1), Value::Int(2), Value::Int(1)]));
    v.push(case("diagonal", vec![x()], |t| vec![tv(&t[0])]));
    v.push(case("as_strided", vec![x()], |t| vec![tv(&t[0]), ints(&[2, 2]), ints(&[1, 2])]));
    v.push(case("movedim", vec![x()], |t| vec![tv(&t[0]), Value::Int(0), Value::Int(1)]));
    v.push(case("swapaxes", vec![x()], |t| vec![tv(&t[0]), Value::Int(0), Value::Int(1)]));
    v.push(case("flip", vec![x()], |t| vec![tv(&t[0]), ints(&[1])]));
    v.push(case("roll", vec![x()], |t| vec![tv(&t[0]), ints(&[1]), ints(&[1])]));
    v.push(case("repeat", vec![x()], |t| vec![tv(&t[0]), ints(&[2, 1])]));
    // multi-output views (one node joins the pieces' gradients)
    v.push(case("split", vec![x()], |t| vec![tv(&t[0]), Value::Int(2), Value::Int(1)]));
    v.push(case("split", vec![x()], |t| vec![tv(&t[0]), ints(&[1, 2]), Value::Int(1)]));
    v.push(case("split_with_sizes", vec![x()], |t| vec![tv(&t[0]), ints(&[2, 0, 1]), Value::Int(1)]));
    v.push(case("chunk", vec![x()], |t| vec![tv(&t[0]), Value::Int(2), Value::Int(0)]));
    v.push(case("unbind", vec![x()], |t| vec![tv(&t[0]), Value::Int(1)]));
    v.push(case("unsafe_split", vec![x()], |t| vec![tv(&t[0]), Value::Int(2), Value::Int(1)]));
    v.push(case("tensor_split", vec![x()], |t| vec![tv(&t[0]), Value::Int(2), Value::Int(1)]));
    v.push(case("cat", vec![x(), y()], |t| vec![Value::List(vec![tv(&t[0]), tv(&t[1])]), Value::Int(1)]));
    v.push(case("stack", vec![x(), y()], |t| vec![Value::List(vec![tv(&t[0]), tv(&t[1])])]));
    // linear algebra
    let m = || sample(&[3, 4], -1.0, 1.0, 5);
    v.push(case("matmul", vec![x(), m()], |t| vec![tv(&t[0]), tv(&t[1])]));
    v.push(case("mm", vec![x(), m()], |t| vec![tv(&t[0]), tv(&t[1])]));
    v.push(case("mv", vec![x(), row()], |t| vec![tv(&t[0]), tv(&t[1])]));
    v.push(case("dot", vec![row(), row()], |t| vec![tv(&t[0]), tv(&t[1])]));
    v.push(case("outer", vec![row(), row()], |t| vec![tv(&t[0]), tv(&t[1])]));
    v.push(case("bmm", vec![sample(&[2, 2, 3], -1., 1., 7), sample(&[2, 3, 2], -1., 1., 8)], |t| vec![tv(&t[0]), tv(&t[1])]));
    v.push(case("nn.functional.linear", vec![x(), sample(&[4, 3], -1., 1., 9), sample(&[4], -1., 1., 10)], |t| vec![tv(&t[0]), tv(&t[1]), tv(&t[2])]));
    v
}

fn outputs(v: Value) -> Vec<Tensor> {
    match v {
        Value::Tensor(t) => vec![t],
        Value::List(l) => l.into_iter().flat_map(outputs).collect(),
        _ => vec![],
    }
}

/// Runs gradcheck (and gradgradcheck) of one registry call; None when the call itself is unsupported.
fn check(name: &str, inputs: &[Tensor], args: &Gen, second: bool) -> Option<Result<()>> {
    let f = |ts: &[Tensor]| -> Result<Vec<Tensor>> {
        let (a, k) = args(ts);
        let outs = outputs(registry::call(name, a, k)?);
        Ok(outs.into_iter().filter(|o| o.dtype().is_float()).collect())
    };
    let inputs: Vec<Tensor> = inputs.iter().map(|t| t.detach().requires_grad_(true).unwrap()).collect();
    match f(&inputs) {
        Err(e) if e.is_unsupported() => return None,
        Err(e) => return Some(Err(e)),
        Ok(o) if o.iter().all(|t| !t.requires_grad()) => return None,
        Ok(_) => {}
    }
    let opts = GradcheckOptions::default();
    Some((|| {
        autograd::gradcheck(f, &inputs, &opts)?;
        if second {
            autograd::gradgradcheck(f, &inputs, None, &opts)?;
        }
        Ok(())
    })())
}

#[test]
fn gradcheck_registry_ops() {
    let names = registry::op_names();
    let excluded: std::collections::HashSet<&str> = EXCLUDED.iter().map(|e| e.0).collect();
    let no_gg: std::collections::HashSet<&str> = NO_GRADGRAD.iter().map(|e| e.0).collect();
    let mut covered = std::collections::HashSet::new();
    let mut failures = Vec::new();
    let mut passed = 0;
    for c in cases() {
        if !registry::has_op(c.name) {
            continue;
        }
        covered.insert(c.name);
        match check(c.name, &c.inputs, &c.args, !no_gg.contains(c.name)) {
            None => println!("unsupported form: {}", c.name),
            Some(Ok(())) => passed += 1,
            Some(Err(e)) => failures.push(format!("{}: {e}", c.name)),
        }
    }
    // everything else: probe as a unary op
    let mut probed = Vec::new();
    let mut probe_failures = Vec::new();
    let x = sample(&[2, 3], 0.1, 0.9, 11);
    let unary: Gen = Box::new(|t| (vec![tv(&t[0])], vec![]));
    for n in names.iter().copied().filter(|n| !covered.contains(n) && !excluded.contains(n) && !n.ends_with('_')) {
        match check(n, &[x.clone()], &unary, true) {
            None => {}
            Some(Ok(())) => probed.push(n),
            Some(Err(e)) => probe_failures.push(format!("{n}: {e}")),
        }
    }
    println!("gradcheck: {passed} table cases passed; {} ops covered; {} more passed as unary probes: {probed:?}", covered.len(), probed.len());
    for f in &probe_failures {
        println!("probe failed (not an error of the table): {f}");
    }
    let uncovered: Vec<_> = names.iter().filter(|n| !covered.contains(*n) && !excluded.contains(*n) && !probed.contains(n)).collect();
    println!("not gradchecked (no generator, or not differentiable): {uncovered:?}");
    assert!(failures.is_empty(), "gradcheck failures:\n{}", failures.join("\n"));
    assert!(passed > 10);
}
