//! The case manifest (`manifest.json`, described in `../shared/conformance/FORMAT.md`).

use serde::Deserialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// One folder's manifest.
#[derive(Deserialize)]
pub struct Manifest {
    pub torch_version: String,
    pub cases: Vec<Case>,
}

/// One call of one op with PyTorch's answer (or the error PyTorch raised).
#[derive(Deserialize, Clone)]
pub struct Case {
    pub id: String,
    pub op: String,
    #[serde(default)]
    pub variant: String,
    pub input: Json,
    #[serde(default)]
    pub args: Vec<Json>,
    #[serde(default)]
    pub kwargs: BTreeMap<String, Json>,
    #[serde(default)]
    pub output: Option<Json>,
    #[serde(default)]
    pub nondeterministic: bool,
    #[serde(default)]
    pub tol: Option<Tol>,
    /// The gradients' tolerance (bfloat16/float16 sets only; elsewhere gradients use `tol`).
    #[serde(default)]
    pub grad_tol: Option<Tol>,
    #[serde(default)]
    pub grad: Option<GradSpec>,
    #[serde(default)]
    pub expect_error: Option<String>,
    #[serde(default)]
    pub error_regex: Option<String>,
}

/// Per-case tolerance.
#[derive(Deserialize, Clone, Copy)]
pub struct Tol {
    pub rtol: f64,
    pub atol: f64,
}

/// The gradient part of a case.
#[derive(Deserialize, Clone)]
pub struct GradSpec {
    pub wrt: Vec<String>,
    pub output_grads: Vec<Json>,
    pub expected: Vec<Json>,
}

impl Case {
    /// True for cases where PyTorch raised an error.
    pub fn is_error_case(&self) -> bool {
        self.expect_error.is_some()
    }
    /// The OpInfo name with its variant (`max.reduction_with_dim`), as the per-op tables show it.
    pub fn full_op(&self) -> String {
        if self.variant.is_empty() {
            self.op.clone()
        } else {
            format!("{}.{}", self.op, self.variant)
        }
    }
}

/// Reads and parses a manifest, naming the file on failure.
pub fn load(path: &std::path::Path) -> Result<Manifest, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let m: Manifest = serde_json::from_str(&text).map_err(|e| format!("malformed manifest {}: {e}", path.display()))?;
    let mut seen = std::collections::HashSet::new();
    for c in &m.cases {
        if !seen.insert(c.id.as_str()) {
            return Err(format!("malformed manifest {}: duplicate case id '{}'", path.display(), c.id));
        }
        if c.expect_error.is_none() && c.output.is_none() {
            return Err(format!("malformed manifest {}: case '{}' has neither an output nor expect_error", path.display(), c.id));
        }
    }
    Ok(m)
}
