//! `magpie-conformance`: runs PyTorch's OpInfo cases against torch-magpie and reports, per op
//! and in total, what passes. Cases run in a worker process with each case behind
//! `catch_unwind`; a case that aborts or hangs the worker is recorded as crashed and the run
//! goes on in a fresh worker.

mod adapt;
mod case;
mod compare;
mod gradcheck;
mod load;
mod manifest;
mod native;
mod report;
mod sample_skip;

use case::{run_case, CaseResult, Status};
use clap::Parser;
use magpie_core::Device;
use report::{Baseline, Tally};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

#[derive(Parser)]
#[command(about = "Run PyTorch's OpInfo conformance cases against torch-magpie")]
struct Cli {
    /// A case folder (manifest.json + cases.safetensors); repeat for several.
    #[arg(long, required = true)]
    cases: Vec<PathBuf>,
    /// cpu or cuda.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Only cases of this op (OpInfo name, with or without the variant).
    #[arg(long)]
    op: Option<String>,
    /// Write per-case records as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Print the per-op table.
    #[arg(long)]
    per_op: bool,
    /// Compare per-op passed counts with this baseline file; fail on any drop.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Rewrite the baseline file with the current counts.
    #[arg(long)]
    update_baseline: bool,
    /// Rewrite the conformance section of this README.
    #[arg(long)]
    readme: Option<PathBuf>,
    /// Fail if the README's conformance section differs from the current results.
    #[arg(long)]
    readme_check: Option<PathBuf>,
    /// Seconds a single case may take before it counts as crashed.
    #[arg(long, default_value_t = 60)]
    case_timeout: u64,
    /// Run gradcheck / gradgradcheck (f64) on every case with a gradient part instead of the value run.
    #[arg(long)]
    gradcheck: bool,
    /// With --gradcheck: write the readable per-op report (passes, failures, exclusions with reasons).
    #[arg(long)]
    gradcheck_report: Option<PathBuf>,
    /// With --gradcheck: fail if a check that passed in this baseline no longer passes
    /// (with --update-baseline: rewrite it).
    #[arg(long)]
    gradcheck_baseline: Option<PathBuf>,
    /// With --device cuda: fail when an op named in this file (one per line, `#` comments)
    /// fell back to the CPU; prints the run's native / fallback totals.
    #[arg(long)]
    must_be_native: Option<PathBuf>,
    #[arg(long, hide = true)]
    worker: bool,
    #[arg(long, hide = true, default_value_t = 0)]
    start: usize,
    /// Test hook: panic inside this case (checks that a panic is contained to its case).
    #[arg(long, hide = true)]
    inject_panic: Option<String>,
    /// Test hook: abort the worker process at this case (checks that the run goes on).
    #[arg(long, hide = true)]
    inject_abort: Option<String>,
}

const TAG: &str = "@@case ";

fn selected(m: &manifest::Manifest, op: &Option<String>) -> Vec<manifest::Case> {
    m.cases
        .iter()
        .filter(|c| op.as_ref().is_none_or(|o| &c.op == o || &c.full_op() == o))
        .cloned()
        .collect()
}

fn read_folder(dir: &Path) -> Result<(manifest::Manifest, Vec<u8>), String> {
    let m = manifest::load(&dir.join("manifest.json"))?;
    let st = dir.join("cases.safetensors");
    let bytes = std::fs::read(&st).map_err(|e| format!("cannot read {}: {e}", st.display()))?;
    Ok((m, bytes))
}

fn worker(cli: &Cli, device: Device) -> Result<(), String> {
    let dir = &cli.cases[0];
    let (m, bytes) = read_folder(dir)?;
    let mut loader = load::Loader::new(&bytes)?;
    let cases = selected(&m, &cli.op);
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string().replace('\n', " ");
        LAST_PANIC.with(|p| *p.borrow_mut() = msg);
    }));
    let stdout = std::io::stdout();
    for c in cases.iter().skip(cli.start) {
        if cli.inject_abort.as_deref() == Some(c.id.as_str()) {
            std::process::abort();
        }
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if cli.inject_panic.as_deref() == Some(c.id.as_str()) {
                panic!("injected panic");
            }
            run_case(c, &mut loader, device)
        }));
        let r = res.unwrap_or_else(|_| CaseResult {
            id: c.id.clone(),
            op: c.full_op(),
            value: Status::Crashed,
            grad: c.grad.as_ref().map(|_| Status::Crashed),
            message: format!("panic: {}", LAST_PANIC.with(|p| p.borrow().clone())),
            error_case: c.is_error_case(),
            bad_data: false,
        });
        let line = serde_json::to_string(&r).map_err(|e| e.to_string())?;
        let mut out = stdout.lock();
        writeln!(out, "{TAG}{line}").and_then(|_| out.flush()).map_err(|e| e.to_string())?;
    }
    // `--device cuda`: which ops ran natively and which fell back to the CPU (one line per op)
    if let Some(path) = std::env::var_os("MAGPIE_FALLBACK_LOG") {
        let mut text = String::new();
        for (op, native, fallback) in magpie_core::backend::cuda::fallback_counts() {
            text.push_str(&format!("{op} {native} {fallback}\n"));
        }
        let f = std::fs::OpenOptions::new().create(true).append(true).open(path);
        if let Ok(mut f) = f {
            let _ = f.write_all(text.as_bytes());
        }
    }
    Ok(())
}

thread_local! {
    static LAST_PANIC: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Runs one folder through workers, restarting after a crash or a hang.
fn run_folder(cli: &Cli, dir: &Path, cases: &[manifest::Case]) -> Result<Vec<CaseResult>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut results: Vec<CaseResult> = Vec::with_capacity(cases.len());
    while results.len() < cases.len() {
        let mut cmd = Command::new(&exe);
        cmd.arg("--worker").arg("--cases").arg(dir).arg("--device").arg(&cli.device);
        cmd.arg("--start").arg(results.len().to_string());
        if let Some(op) = &cli.op {
            cmd.arg("--op").arg(op);
        }
        for (flag, v) in [("--inject-panic", &cli.inject_panic), ("--inject-abort", &cli.inject_abort)] {
            if let Some(v) = v {
                cmd.arg(flag).arg(v);
            }
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().map_err(|e| format!("cannot start worker: {e}"))?;
        let stdout = child.stdout.take().ok_or("worker has no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(j) = line.strip_prefix(TAG) {
                    if tx.send(j.to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        loop {
            if results.len() == cases.len() {
                let _ = child.wait();
                break;
            }
            match rx.recv_timeout(Duration::from_secs(cli.case_timeout)) {
                Ok(j) => results.push(serde_json::from_str(&j).map_err(|e| format!("bad worker record: {e}"))?),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    results.push(crashed(&cases[results.len()], format!("timed out after {} s", cli.case_timeout)));
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait().map_err(|e| e.to_string())?;
                    if results.len() < cases.len() {
                        results.push(crashed(&cases[results.len()], format!("worker process died ({status})")));
                    }
                    break;
                }
            }
        }
        eprint!("\r{}: {}/{} cases", dir.display(), results.len(), cases.len());
    }
    eprintln!();
    Ok(results)
}

fn crashed(c: &manifest::Case, msg: String) -> CaseResult {
    CaseResult {
        id: c.id.clone(),
        op: c.full_op(),
        value: Status::Crashed,
        grad: c.grad.as_ref().map(|_| Status::Crashed),
        message: msg,
        error_case: c.is_error_case(),
        bad_data: false,
    }
}

fn folder_name(dir: &Path) -> String {
    dir.file_name().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| dir.display().to_string())
}

fn main() {
    let cli = Cli::parse();
    match real_main(&cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("magpie-conformance: {e}");
            std::process::exit(2);
        }
    }
}

fn real_main(cli: &Cli) -> Result<i32, String> {
    let device = Device::parse(&cli.device).map_err(|e| e.to_string())?;
    if device.is_cuda() && !magpie_core::backend::cuda::is_available() {
        return Err(format!("--device {}: CUDA is not available here (no CUDA backend in this build, or no GPU/driver)", cli.device));
    }
    if cli.worker {
        worker(cli, device)?;
        return Ok(0);
    }
    if cli.gradcheck {
        return gradcheck_main(cli);
    }
    // the workers append their fallback counts to this log; read back from its current end
    let native_check = match &cli.must_be_native {
        Some(list) => {
            if !device.is_cuda() {
                return Err("--must-be-native needs --device cuda".into());
            }
            let list = native::read_list(list)?;
            let log = match std::env::var_os("MAGPIE_FALLBACK_LOG") {
                Some(p) => PathBuf::from(p),
                None => {
                    let p = std::env::temp_dir().join(format!("magpie-fallback-{}.txt", std::process::id()));
                    std::env::set_var("MAGPIE_FALLBACK_LOG", &p);
                    p
                }
            };
            let start = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
            Some((list, log, start))
        }
        None => None,
    };
    let mut code = 0;
    let mut folders: Vec<(String, Tally)> = Vec::new();
    let mut all: Vec<CaseResult> = Vec::new();
    let mut current: Baseline = Baseline::new();
    let mut torch_version = String::new();
    let mut passed = 0;
    let mut total = 0;
    for dir in &cli.cases {
        let (m, bytes) = read_folder(dir)?;
        load::Loader::new(&bytes)?; // fail early on an unreadable tensor file
        torch_version = m.torch_version.clone();
        let cases = selected(&m, &cli.op);
        let results = run_folder(cli, dir, &cases)?;
        let name = folder_name(dir);
        let t = Tally::of(&results);
        report::print_folder(&name, &results, &t, cli.per_op);
        let bad: Vec<&CaseResult> = results.iter().filter(|r| r.bad_data).collect();
        if !bad.is_empty() {
            for r in &bad {
                eprintln!("bad case data in {}: {}: {}", name, r.id, r.message);
            }
            code = 2;
        }
        for r in &results {
            // A case passes when its value (or error check) and its gradient part pass.
            total += 1;
            if r.value == Status::Passed && r.grad.is_none_or(|g| g == Status::Passed) {
                passed += 1;
            }
        }
        current.insert(name.clone(), t.passed_per_op());
        folders.push((name, t));
        all.extend(results);
    }
    if let Some(path) = &cli.json {
        let j = serde_json::json!({ "cases": all });
        std::fs::write(path, serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &cli.baseline {
        if cli.update_baseline {
            let text = serde_json::to_string_pretty(&current).map_err(|e| e.to_string())?;
            std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            println!("baseline written to {}", path.display());
        } else if cli.op.is_none() {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read baseline {}: {e}", path.display()))?;
            let base: Baseline = serde_json::from_str(&text).map_err(|e| format!("malformed baseline {}: {e}", path.display()))?;
            let (drops, rose) = report::check_baseline(&base, &current);
            if !drops.is_empty() {
                println!("conformance dropped below the baseline:");
                for d in &drops {
                    println!("  {d}");
                }
                code = 1;
            } else if rose {
                println!("conformance rose above the baseline: commit the new counts with --update-baseline");
            } else {
                println!("conformance matches the baseline");
            }
        }
    }
    let section = report::readme_section(&folders, &torch_version);
    if let Some(path) = &cli.readme {
        let doc = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        std::fs::write(path, report::splice(&doc, &section)?).map_err(|e| e.to_string())?;
        println!("conformance table written to {}", path.display());
    }
    if let Some(path) = &cli.readme_check {
        let doc = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if report::splice(&doc, &section)? != doc {
            println!("{}'s conformance table is stale: rerun with --readme {}", path.display(), path.display());
            code = code.max(1);
        }
    }
    println!("{passed} passed, {} failed", total - passed);
    if let Some((list, log, start)) = native_check {
        let bytes = std::fs::read(&log).map_err(|e| format!("cannot read the fallback log {}: {e}", log.display()))?;
        let text = String::from_utf8_lossy(bytes.get(start as usize..).unwrap_or(&[]));
        code = code.max(native::report(&list, &native::parse_counts(&text)?));
    }
    Ok(code)
}

/// `--gradcheck`: gradcheck / gradgradcheck per op, report, baseline.
fn gradcheck_main(cli: &Cli) -> Result<i32, String> {
    let t0 = std::time::Instant::now();
    let mut all = std::collections::BTreeMap::new();
    for dir in &cli.cases {
        let (m, bytes) = read_folder(dir)?;
        all.extend(gradcheck::run(&m, &bytes, &cli.op)?);
    }
    let (gp, gf, ge) = gradcheck::counts(&all, false);
    let (hp, hf, he) = gradcheck::counts(&all, true);
    if cli.per_op {
        for (op, r) in &all {
            let skipped = if r.skipped.is_empty() { String::new() } else { format!(" ({} samples left out)", r.skipped.len()) };
            println!("{op:40} grad {:?} gradgrad {:?}{skipped} {}", r.grad, r.gradgrad, r.reason.chars().take(160).collect::<String>());
        }
    }
    println!("gradcheck: {gp} ops passed, {gf} failed, {ge} excluded");
    println!("gradgradcheck: {hp} ops passed, {hf} failed, {he} excluded");
    let skipped: usize = all.values().map(|r| r.skipped.len()).sum();
    println!("samples left out by a rule (listed in the report): {skipped}");
    println!("({:.1} s)", t0.elapsed().as_secs_f64());
    if let Some(path) = &cli.gradcheck_report {
        std::fs::write(path, gradcheck::report(&all)).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let mut code = 0;
    if let Some(path) = &cli.gradcheck_baseline {
        let now = gradcheck::baseline_of(&all);
        if cli.update_baseline {
            let text = serde_json::to_string_pretty(&now).map_err(|e| e.to_string())?;
            std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            println!("gradcheck baseline written to {}", path.display());
        } else if cli.op.is_none() {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let base: gradcheck::Baseline = serde_json::from_str(&text).map_err(|e| format!("malformed {}: {e}", path.display()))?;
            let d = gradcheck::drops(&base, &now);
            if d.is_empty() {
                println!("gradcheck matches the baseline");
            } else {
                println!("gradcheck dropped below the baseline:");
                for x in &d {
                    println!("  {x}");
                }
                code = 1;
            }
        }
    }
    Ok(code)
}
