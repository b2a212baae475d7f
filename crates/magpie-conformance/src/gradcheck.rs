//! `--gradcheck`: runs `autograd::gradcheck` and `gradgradcheck` (f64, PyTorch's default
//! tolerances) on every OpInfo case that has a gradient part, through the same registry call the
//! value runner makes, and reports per op: passed, failed (with the error) or excluded (with why).
//! Writes a readable report (`--gradcheck-report`) and compares with a baseline of the ops that
//! passed (`--gradcheck-baseline`), failing when one of them no longer passes.

use crate::adapt::adapt;
use crate::load::Loader;
use crate::manifest::{Case, Manifest};
use crate::sample_skip;
use magpie_core::registry::Value;
use magpie_core::{autograd, DType, Error, Tensor};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// At most this many cases per op (the cheapest ones).
const CASES_PER_OP: usize = 3;
/// Cases whose differentiated inputs plus outputs hold more elements than this are skipped:
/// the check costs a forward per input element and a backward per output element.
const MAX_ELEMENTS: usize = 1500;

/// One op's outcome for one check.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Passed,
    Failed,
    Excluded,
}

/// One op's result: gradcheck and gradgradcheck, with the reason for anything but a pass.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct OpResult {
    pub grad: Outcome,
    pub gradgrad: Outcome,
    pub cases: usize,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Samples left out by a rule of `sample_skip` ("id: check: why"); the op's other samples
    /// were checked (up to the per-op number).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// op -> "grad" / "gradgrad" names of the checks that passed.
pub type Baseline = BTreeMap<String, Vec<String>>;

fn numel(j: &Json) -> usize {
    match j {
        Json::Object(o) if o.contains_key("tensor") => {
            o.get("shape").and_then(|s| s.as_array()).map(|s| s.iter().map(|d| d.as_u64().unwrap_or(0) as usize).product()).unwrap_or(0)
        }
        Json::Array(a) => a.iter().map(numel).sum(),
        _ => 0,
    }
}

fn tensor_keys(j: &Json, out: &mut Vec<String>) {
    match j {
        Json::Object(o) => {
            if let Some(Json::String(k)) = o.get("tensor") {
                out.push(k.clone());
            }
        }
        Json::Array(a) => a.iter().for_each(|x| tensor_keys(x, out)),
        _ => {}
    }
}

fn flatten(v: &Value, out: &mut Vec<Tensor>) {
    match v {
        Value::Tensor(t) => out.push(t.clone()),
        Value::List(l) => l.iter().for_each(|x| flatten(x, out)),
        _ => {}
    }
}

/// Cost of a case: elements of the inputs gradients are taken for plus elements of the output.
fn cost(c: &Case) -> usize {
    let g = c.grad.as_ref().map(|g| g.output_grads.iter().map(numel).sum::<usize>()).unwrap_or(0);
    // the wrt tensors' sizes: read from the descriptors that name them
    let mut sizes: HashMap<String, usize> = HashMap::new();
    fn sizes_of(j: &Json, m: &mut HashMap<String, usize>) {
        match j {
            Json::Object(o) => {
                if let Some(Json::String(k)) = o.get("tensor") {
                    m.insert(k.clone(), numel(j));
                }
            }
            Json::Array(a) => a.iter().for_each(|x| sizes_of(x, m)),
            _ => {}
        }
    }
    sizes_of(&c.input, &mut sizes);
    c.args.iter().for_each(|a| sizes_of(a, &mut sizes));
    c.kwargs.values().for_each(|a| sizes_of(a, &mut sizes));
    let x: usize = c.grad.as_ref().map(|g| g.wrt.iter().map(|k| sizes.get(k).copied().unwrap_or(0)).sum()).unwrap_or(0);
    x + g
}

/// The function of the differentiated inputs that one case computes, in f64: every floating
/// tensor of the call is cast to float64; the wrt tensors are replaced by gradcheck's inputs.
struct CaseFn<'a> {
    case: &'a Case,
    /// The case's tensors as stored (float32), by key.
    orig: HashMap<String, Tensor>,
}

impl CaseFn<'_> {
    fn call(&self, xs: &[Tensor]) -> magpie_core::Result<Vec<Tensor>> {
        let wrt = &self.case.grad.as_ref().ok_or_else(|| Error::value("gradcheck", "case has no gradient part"))?.wrt;
        let mut map: HashMap<String, Tensor> = HashMap::new();
        for (k, t) in &self.orig {
            let t = if let Some(i) = wrt.iter().position(|w| w == k) {
                if hermitian_input(self.case) {
                    // OpInfo's gradcheck_wrapper_hermitian_input: these ops read one triangle
                    xs[i].add(&xs[i].transpose(-2, -1)?)?.mul_scalar(0.5)?
                } else {
                    xs[i].clone()
                }
            } else if t.dtype().is_float() {
                t.to_dtype(DType::F64)?
            } else {
                t.copy()?
            };
            map.insert(k.clone(), t);
        }
        let conv = |j: &Json| value_of(j, &map);
        let input = conv(&self.case.input)?;
        let args = self.case.args.iter().map(conv).collect::<magpie_core::Result<Vec<_>>>()?;
        let kwargs = self.case.kwargs.iter().map(|(k, v)| Ok((k.clone(), conv(v)?))).collect::<magpie_core::Result<Vec<_>>>()?;
        let mut call = adapt(self.case, input, args, kwargs);
        if call.clone_input {
            if let Some(Value::Tensor(x)) = call.args.first() {
                call.args[0] = Value::Tensor(x.copy()?);
            }
        }
        let out = crate::adapt::invoke(call)?;
        let mut outs = Vec::new();
        flatten(&out, &mut outs);
        let floats: Vec<Tensor> = outs.into_iter().filter(|t| t.dtype().is_float()).collect();
        // PyTorch differentiates fewer outputs than the op returns (native_layer_norm's mean and
        // rstd): check the ones it does, when ours agree on which ones those are.
        let n = self.case.grad.as_ref().map_or(0, |g| g.output_grads.len());
        let with_grad: Vec<Tensor> = floats.iter().filter(|t| t.requires_grad()).cloned().collect();
        if n < floats.len() && with_grad.len() == n {
            return Ok(with_grad);
        }
        Ok(floats)
    }
}

/// Ops whose OpInfo entry checks gradients through `gradcheck_wrapper_hermitian_input`
/// (the function of `(A + A^H) / 2`): they read only one triangle of their input.
fn hermitian_input(c: &Case) -> bool {
    matches!(
        (c.op.as_str(), c.variant.as_str()),
        ("linalg.cholesky" | "linalg.cholesky_ex" | "cholesky" | "linalg.eigh" | "linalg.eigvalsh" | "linalg.matrix_sqrth" | "linalg.pinv", "hermitian" | "")
    ) && !(c.op == "linalg.pinv" && c.variant.is_empty())
}

/// Values of outputs for comparing two calls (NaN equal to NaN).
fn same_outputs(a: &[Tensor], b: &[Tensor]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x.to_vec::<f64>(), y.to_vec::<f64>()) {
            (Ok(u), Ok(v)) => u.len() == v.len() && u.iter().zip(&v).all(|(p, q)| p == q || (p.is_nan() && q.is_nan())),
            _ => false,
        })
}

fn value_of(j: &Json, map: &HashMap<String, Tensor>) -> magpie_core::Result<Value> {
    Ok(match j {
        Json::Array(a) => Value::List(a.iter().map(|x| value_of(x, map)).collect::<magpie_core::Result<_>>()?),
        Json::Object(o) if o.contains_key("tensor") => {
            let k = o.get("tensor").and_then(|k| k.as_str()).unwrap_or("");
            Value::Tensor(map.get(k).cloned().ok_or_else(|| Error::value("gradcheck", format!("tensor key '{k}' not loaded")))?)
        }
        // scalars and the other forms: the loader's conversion (no tensors inside)
        other => {
            let bytes = empty_safetensors();
            let mut l = Loader::new(&bytes).map_err(|e| Error::value("gradcheck", e))?;
            l.value(other).map_err(|e| Error::value("gradcheck", e))?
        }
    })
}

fn empty_safetensors() -> Vec<u8> {
    // an empty safetensors file: 8-byte header length, then "{}"
    let mut b = 2u64.to_le_bytes().to_vec();
    b.extend_from_slice(b"{}");
    b
}

/// What happened to one case in one check.
enum CaseOutcome {
    Passed,
    Mismatch(String),
    Excluded(String),
    /// Left out by a `sample_skip` rule: does not count as one of the op's checked samples.
    Skipped(String),
}

fn classify(e: &Error, second: bool) -> CaseOutcome {
    let msg = e.to_string();
    if msg.contains("Jacobian mismatch") {
        CaseOutcome::Mismatch(msg)
    } else if e.is_unsupported() {
        CaseOutcome::Excluded(format!("unsupported: {msg}"))
    } else if second {
        CaseOutcome::Excluded(format!("backward not differentiable: {msg}"))
    } else {
        CaseOutcome::Mismatch(format!("error: {msg}"))
    }
}

fn check_case(case: &Case, loader: &mut Loader) -> Result<(CaseOutcome, Option<CaseOutcome>), String> {
    loader.start_case();
    let mut keys = Vec::new();
    tensor_keys(&case.input, &mut keys);
    case.args.iter().for_each(|a| tensor_keys(a, &mut keys));
    case.kwargs.values().for_each(|a| tensor_keys(a, &mut keys));
    let mut orig = HashMap::new();
    for k in keys {
        let t = loader.tensor(&k)?;
        orig.insert(k, t);
    }
    let g = case.grad.as_ref().ok_or("no gradient part")?;
    if let Some(why) = sample_skip::grad_skip(case, &orig) {
        return Ok((CaseOutcome::Skipped(why), None));
    }
    let mut xs = Vec::new();
    for k in &g.wrt {
        let t = orig.get(k).ok_or_else(|| format!("wrt key '{k}' is not an argument"))?;
        if !t.dtype().is_float() {
            return Ok((CaseOutcome::Excluded(format!("wrt tensor is {}", t.dtype())), None));
        }
        let x = t.to_dtype(DType::F64).and_then(|x| x.requires_grad_(true)).map_err(|e| e.to_string())?;
        xs.push(x);
    }
    let f = CaseFn { case, orig };
    let opts = autograd::GradcheckOptions::default();
    let fun = |x: &[Tensor]| f.call(x);
    let mut gg_skip = None;
    // random ops (dropout, rrelu, bernoulli, normal ...) give other values on every call
    if let (Ok(a), Ok(b)) = (fun(&xs), fun(&xs)) {
        gg_skip = sample_skip::gradgrad_skip(case, &a);
        if !same_outputs(&a, &b) {
            return Ok((CaseOutcome::Excluded("random op: two calls on the same input differ".into()), None));
        }
        if a.iter().any(|t| t.to_vec::<f64>().is_ok_and(|v| v.iter().any(|x| !x.is_finite()))) {
            return Ok((CaseOutcome::Excluded("non-finite outputs at the sample's inputs (outside the domain): finite differences are meaningless there".into()), None));
        }
        if let Some(t) = a.iter().find(|t| t.dtype() != DType::F64) {
            return Ok((CaseOutcome::Excluded(format!("the op returns {} for float64 inputs: finite differences need float64 outputs", t.dtype())), None));
        }
    }
    let first = match autograd::gradcheck(fun, &xs, &opts) {
        Ok(_) => CaseOutcome::Passed,
        Err(e) => return Ok((classify(&e, false), None)),
    };
    if let Some(why) = gg_skip {
        return Ok((first, Some(CaseOutcome::Skipped(why))));
    }
    let second = match autograd::gradgradcheck(fun, &xs, None, &opts) {
        Ok(_) => CaseOutcome::Passed,
        Err(e) => classify(&e, true),
    };
    Ok((first, Some(second)))
}

/// Runs the checks over one folder's manifest; returns op -> result.
pub fn run(m: &Manifest, bytes: &[u8], op: &Option<String>) -> Result<BTreeMap<String, OpResult>, String> {
    let mut loader = Loader::new(bytes)?;
    let mut by_op: BTreeMap<String, Vec<&Case>> = BTreeMap::new();
    for c in &m.cases {
        if op.as_ref().is_some_and(|o| &c.op != o && &c.full_op() != o) || c.is_error_case() {
            continue;
        }
        by_op.entry(c.full_op()).or_default().push(c);
    }
    let mut results = BTreeMap::new();
    std::panic::set_hook(Box::new(|_| {}));
    for (name, cases) in by_op {
        let excluded = |reason: &str| OpResult { grad: Outcome::Excluded, gradgrad: Outcome::Excluded, cases: 0, reason: reason.to_string(), skipped: Vec::new() };
        let with_grad: Vec<&Case> = cases.iter().copied().filter(|c| c.grad.is_some()).collect();
        if with_grad.is_empty() {
            results.insert(name, excluded("no gradient case: PyTorch does not differentiate this op (integer/bool outputs or not differentiable)"));
            continue;
        }
        if with_grad.iter().all(|c| c.nondeterministic) {
            results.insert(name, excluded("random op: outputs differ between calls"));
            continue;
        }
        let mut pick: Vec<&Case> = with_grad.into_iter().filter(|c| !c.nondeterministic && cost(c) <= MAX_ELEMENTS).collect();
        if pick.is_empty() {
            results.insert(name, excluded(&format!("every gradient case has more than {MAX_ELEMENTS} input+output elements")));
            continue;
        }
        pick.sort_by_key(|c| cost(c));
        let t0 = Instant::now();
        let mut r = OpResult { grad: Outcome::Passed, gradgrad: Outcome::Passed, cases: 0, reason: String::new(), skipped: Vec::new() };
        let mut grad_excl = 0;
        let mut gg_excl = 0;
        // the cheapest CASES_PER_OP samples that no rule leaves out of gradcheck
        for c in &pick {
            if r.cases == CASES_PER_OP {
                break;
            }
            let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_case(c, &mut loader)));
            let (a, b) = match res {
                Ok(Ok(x)) => x,
                Ok(Err(e)) => return Err(format!("{}: malformed case data: {e}", c.id)),
                Err(_) => (CaseOutcome::Mismatch("panic".into()), None),
            };
            if let CaseOutcome::Skipped(m) = &a {
                r.skipped.push(format!("{}: gradcheck and gradgradcheck: {m}", c.id));
                continue;
            }
            r.cases += 1;
            match a {
                CaseOutcome::Passed | CaseOutcome::Skipped(_) => {}
                CaseOutcome::Mismatch(m) => {
                    r.grad = Outcome::Failed;
                    r.reason = format!("{}: gradcheck: {m}", c.id);
                }
                CaseOutcome::Excluded(m) => {
                    grad_excl += 1;
                    if r.reason.is_empty() {
                        r.reason = format!("{}: gradcheck: {m}", c.id);
                    }
                }
            }
            match b {
                None => gg_excl += 1,
                Some(CaseOutcome::Passed) => {}
                Some(CaseOutcome::Skipped(m)) => {
                    gg_excl += 1;
                    r.skipped.push(format!("{}: gradgradcheck: {m}", c.id));
                }
                Some(CaseOutcome::Mismatch(m)) => {
                    r.gradgrad = Outcome::Failed;
                    if r.grad == Outcome::Passed {
                        r.reason = format!("{}: gradgradcheck: {m}", c.id);
                    }
                }
                Some(CaseOutcome::Excluded(m)) => {
                    gg_excl += 1;
                    if r.reason.is_empty() {
                        r.reason = format!("{}: gradgradcheck: {m}", c.id);
                    }
                }
            }
        }
        if r.grad == Outcome::Passed && grad_excl == r.cases {
            r.grad = Outcome::Excluded;
        }
        if r.grad != Outcome::Passed {
            r.gradgrad = if r.grad == Outcome::Failed { Outcome::Failed } else { Outcome::Excluded };
        } else if r.gradgrad == Outcome::Passed && gg_excl == r.cases {
            r.gradgrad = Outcome::Excluded;
        }
        if r.reason.is_empty() && (r.grad == Outcome::Excluded || r.gradgrad == Outcome::Excluded) {
            if let Some(s) = r.skipped.first() {
                r.reason = s.clone();
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        if secs > 2.0 {
            eprintln!("gradcheck: {name} took {secs:.1} s");
        }
        results.insert(name, r);
    }
    let _ = std::panic::take_hook();
    Ok(results)
}

fn word(o: &Outcome) -> &'static str {
    match o {
        Outcome::Passed => "passed",
        Outcome::Failed => "FAILED",
        Outcome::Excluded => "excluded",
    }
}

/// Counts (passed, failed, excluded) of one check.
pub fn counts(res: &BTreeMap<String, OpResult>, second: bool) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for r in res.values() {
        match if second { &r.gradgrad } else { &r.grad } {
            Outcome::Passed => c.0 += 1,
            Outcome::Failed => c.1 += 1,
            Outcome::Excluded => c.2 += 1,
        }
    }
    c
}

/// The readable report: totals, then every op that did not pass both checks, with the reason.
pub fn report(res: &BTreeMap<String, OpResult>) -> String {
    let (gp, gf, ge) = counts(res, false);
    let (hp, hf, he) = counts(res, true);
    let mut s = String::new();
    s.push_str("# gradcheck / gradgradcheck over the OpInfo cases\n\n");
    s.push_str("Generated by `magpie-conformance --gradcheck --cases tests/conformance/opinfo-float32 --gradcheck-report tests/conformance/gradcheck_report.md`.\n");
    s.push_str(&format!(
        "Every OpInfo op (float32 folder), its gradient cases cast to float64, at most {CASES_PER_OP} cases per op (the smallest, at most {MAX_ELEMENTS} input+output elements),\n\
         `autograd::gradcheck` and `gradgradcheck` with PyTorch's defaults (eps 1e-6, atol 1e-5, rtol 1e-3) on the inputs PyTorch differentiates.\n\n"
    ));
    s.push_str(&format!("- gradcheck: {gp} ops passed, {gf} failed, {ge} excluded\n"));
    s.push_str(&format!("- gradgradcheck: {hp} ops passed, {hf} failed, {he} excluded\n"));
    let skipped: usize = res.values().map(|r| r.skipped.len()).sum();
    s.push_str(&format!("- samples left out of a check by a rule (listed below the table): {skipped}\n\n"));
    s.push_str("Ops listed FAILED are real disagreements (or forward errors) at the sample points, with the worst entry.\n\n");
    s.push_str("| op | gradcheck | gradgradcheck | cases | reason |\n| --- | --- | --- | --- | --- |\n");
    for (op, r) in res {
        if r.grad == Outcome::Passed && r.gradgrad == Outcome::Passed {
            continue;
        }
        let reason = r.reason.replace('|', "\\|").replace('\n', " ");
        let reason: String = reason.chars().take(300).collect();
        s.push_str(&format!("| {op} | {} | {} | {} | {reason} |\n", word(&r.grad), word(&r.gradgrad), r.cases));
    }
    s.push_str("\nSamples left out by a rule for their op family (crates/magpie-conformance/src/sample_skip.rs); the op's other samples were checked:\n\n");
    for (op, r) in res.iter().filter(|(_, r)| !r.skipped.is_empty()) {
        // "id: checks: why" -> the ids per (checks, why)
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for x in &r.skipped {
            let (id, rest) = x.split_once(": ").unwrap_or((x.as_str(), ""));
            match groups.iter_mut().find(|(w, _)| w == rest) {
                Some((_, ids)) => ids.push(id.to_string()),
                None => groups.push((rest.to_string(), vec![id.to_string()])),
            }
        }
        for (why, ids) in groups {
            s.push_str(&format!("- {op} ({}): {why}\n", ids.join(", ")));
        }
    }
    s.push_str("\nOps that passed both checks:\n\n");
    let ok: Vec<&str> = res.iter().filter(|(_, r)| r.grad == Outcome::Passed && r.gradgrad == Outcome::Passed).map(|(k, _)| k.as_str()).collect();
    s.push_str(&ok.join(", "));
    s.push('\n');
    s
}

/// The baseline of a result: the checks each op passed.
pub fn baseline_of(res: &BTreeMap<String, OpResult>) -> Baseline {
    let mut b = Baseline::new();
    for (op, r) in res {
        let mut v = Vec::new();
        if r.grad == Outcome::Passed {
            v.push("grad".to_string());
        }
        if r.gradgrad == Outcome::Passed {
            v.push("gradgrad".to_string());
        }
        if !v.is_empty() {
            b.insert(op.clone(), v);
        }
    }
    b
}

/// Checks that passed in the baseline and no longer pass.
pub fn drops(base: &Baseline, now: &Baseline) -> Vec<String> {
    let mut d = Vec::new();
    for (op, checks) in base {
        for c in checks {
            if !now.get(op).is_some_and(|v| v.contains(c)) {
                d.push(format!("{op}: {c}check no longer passes"));
            }
        }
    }
    d
}
