//! The launcher behind `magpie train --nproc-per-node N` (torchrun's job): starts one copy of a
//! program per local GPU with `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`,
//! `GROUP_RANK`, `MASTER_ADDR` and `MASTER_PORT` set, forwards SIGINT/SIGTERM to them, and when
//! one rank fails ends the others and reports which rank failed. Several nodes: run the same
//! command on each with `--nnodes`, its `--node-rank` and node 0's `--master-addr`.

use magpie_core::{Error, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// How many processes to start, and where the job meets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Processes (GPUs) on this node.
    pub nproc_per_node: usize,
    /// Nodes in the job.
    pub nnodes: usize,
    /// This node's index, `0..nnodes`.
    pub node_rank: usize,
    /// Node 0's address (where rank 0 listens).
    pub master_addr: String,
    pub master_port: u16,
    /// How long ranks get to exit after SIGTERM before SIGKILL.
    pub grace: Duration,
}

impl Default for LaunchConfig {
    fn default() -> Self {
        LaunchConfig { nproc_per_node: 1, nnodes: 1, node_rank: 0, master_addr: "127.0.0.1".into(), master_port: 29500, grace: Duration::from_secs(10) }
    }
}

impl LaunchConfig {
    /// Checks the values; `master_addr_given` says whether `--master-addr` was passed (several
    /// nodes need it: the default 127.0.0.1 is only right on one node).
    pub fn validate(&self, master_addr_given: bool) -> Result<()> {
        let bad = |m: String| Err(Error::value("launch", m));
        if self.nproc_per_node == 0 {
            return bad("--nproc-per-node must be at least 1".into());
        }
        if self.nnodes == 0 {
            return bad("--nnodes must be at least 1".into());
        }
        if self.node_rank >= self.nnodes {
            return bad(format!("--node-rank {} must be below --nnodes {}", self.node_rank, self.nnodes));
        }
        if self.nnodes > 1 && !master_addr_given {
            return bad(format!("--nnodes {} needs --master-addr (the address of node 0, reachable from every node)", self.nnodes));
        }
        if self.master_port == 0 {
            return bad("--master-port must be in 1..=65535".into());
        }
        if self.master_addr.trim().is_empty() {
            return bad("--master-addr is empty".into());
        }
        Ok(())
    }
    /// Ranks in the whole job.
    pub fn world_size(&self) -> usize {
        self.nproc_per_node * self.nnodes
    }
    /// The environment of local rank `local`.
    pub fn env_of(&self, local: usize) -> Vec<(String, String)> {
        let rank = self.node_rank * self.nproc_per_node + local;
        vec![
            ("RANK".into(), rank.to_string()),
            ("WORLD_SIZE".into(), self.world_size().to_string()),
            ("LOCAL_RANK".into(), local.to_string()),
            ("LOCAL_WORLD_SIZE".into(), self.nproc_per_node.to_string()),
            ("GROUP_RANK".into(), self.node_rank.to_string()),
            ("MASTER_ADDR".into(), self.master_addr.clone()),
            ("MASTER_PORT".into(), self.master_port.to_string()),
        ]
    }
}

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

fn install_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

fn send(child: &Child, sig: libc::c_int) {
    // SAFETY: signals a child this launcher started and has not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "an unknown status".into(),
    }
}

/// Where `libnccl.so.2` is when cudarc cannot load NCCL by its own names: `MAGPIE_NCCL_LIB`, or
/// a `libnccl.so.2` in a folder of `LD_LIBRARY_PATH` or the system's library folders.
fn find_nccl_so2() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MAGPIE_NCCL_LIB") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH").map(|v| std::env::split_paths(&v).collect()).unwrap_or_default();
    dirs.extend(["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/lib", "/usr/lib"].map(PathBuf::from));
    dirs.into_iter().map(|d| d.join("libnccl.so.2")).find(|p| p.is_file())
}

/// cudarc loads NCCL as `libnccl.so` (or `libnccl.so.<CUDA major>`), which pip's NCCL wheels do
/// not ship (they have `libnccl.so.2`). If cudarc cannot find it but a `libnccl.so.2` is found
/// (see `MAGPIE_NCCL_LIB`), makes a folder with a `libnccl.so` link to it and returns the folder,
/// for the children's `LD_LIBRARY_PATH` (the loader reads that variable only at process start).
pub fn prepare_nccl_library_path() -> Option<PathBuf> {
    if crate::nccl::is_available() {
        return None;
    }
    let so2 = find_nccl_so2()?;
    let dir = std::env::temp_dir().join(format!("magpie-nccl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let link = dir.join("libnccl.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&so2, &link).ok()?;
    Some(dir)
}

/// Starts `program args` once per local rank with the rank environment, waits for all of them
/// and returns Ok when every rank exits 0. The first rank to fail (or be killed) ends the others
/// (SIGTERM, then SIGKILL after the grace period), and the error names it. SIGINT/SIGTERM sent to
/// the launcher are forwarded to every rank.
pub fn launch(cfg: &LaunchConfig, program: &Path, args: &[OsString]) -> Result<()> {
    let op = "launch";
    let nccl_dir = prepare_nccl_library_path();
    install_handlers();
    let mut children: Vec<(usize, Option<Child>)> = Vec::with_capacity(cfg.nproc_per_node);
    for local in 0..cfg.nproc_per_node {
        let mut cmd = Command::new(program);
        cmd.args(args);
        for (k, v) in cfg.env_of(local) {
            cmd.env(k, v);
        }
        if let Some(d) = &nccl_dir {
            let mut paths = vec![d.clone()];
            if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
                paths.extend(std::env::split_paths(&old));
            }
            if let Ok(joined) = std::env::join_paths(paths) {
                cmd.env("LD_LIBRARY_PATH", joined);
            }
        }
        match cmd.spawn() {
            Ok(c) => children.push((local, Some(c))),
            Err(e) => {
                for (_, c) in children.iter_mut() {
                    if let Some(c) = c {
                        send(c, libc::SIGKILL);
                        let _ = c.wait();
                    }
                }
                return Err(Error::io(op, format!("cannot start {} for local rank {local}: {e}", program.display())));
            }
        }
    }
    let rank_of = |local: usize| cfg.node_rank * cfg.nproc_per_node + local;
    let mut failure: Option<String> = None;
    let mut stop_deadline: Option<Instant> = None;
    let mut forwarded = 0;
    let mut term_sent = false;
    loop {
        let sig = SIGNAL.swap(0, Ordering::SeqCst);
        if sig != 0 {
            forwarded = sig;
            for (_, c) in children.iter().filter_map(|(l, c)| c.as_ref().map(|c| (l, c))) {
                send(c, sig);
            }
            stop_deadline.get_or_insert(Instant::now() + cfg.grace);
        }
        let mut alive = 0;
        // failures seen in this round: the rank whose own error started it is preferred over
        // ranks the watchdog ended because of it (their exit status is FAULT_EXIT_CODE)
        let mut round: Vec<(bool, String)> = Vec::new();
        for (local, slot) in children.iter_mut() {
            let Some(c) = slot else { continue };
            match c.try_wait() {
                Ok(Some(status)) => {
                    let pid = c.id();
                    *slot = None;
                    if !status.success() {
                        let follower = status.code() == Some(crate::watchdog::FAULT_EXIT_CODE);
                        round.push((follower, format!("rank {} (local rank {local}, pid {pid}) failed with {}", rank_of(*local), describe(status))));
                    }
                }
                Ok(None) => alive += 1,
                Err(e) => {
                    *slot = None;
                    failure.get_or_insert(format!("waiting for rank {} failed: {e}", rank_of(*local)));
                }
            }
        }
        if failure.is_none() && !round.is_empty() {
            round.sort_by_key(|(follower, _)| *follower);
            failure = round.into_iter().next().map(|(_, m)| m);
            stop_deadline.get_or_insert(Instant::now() + cfg.grace);
        }
        if alive == 0 {
            break;
        }
        if failure.is_some() && !term_sent {
            // a rank failed: ask the others to stop
            term_sent = true;
            for (_, c) in children.iter().filter_map(|(l, c)| c.as_ref().map(|c| (l, c))) {
                send(c, libc::SIGTERM);
            }
        }
        if stop_deadline.is_some_and(|d| Instant::now() > d) {
            for (_, c) in children.iter_mut() {
                if let Some(c) = c {
                    send(c, libc::SIGKILL);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(d) = nccl_dir {
        let _ = std::fs::remove_dir_all(d);
    }
    match failure {
        Some(f) => Err(Error::value(op, format!("{f}; the other ranks were ended"))),
        None if forwarded != 0 => Err(Error::value(op, format!("stopped by signal {forwarded} (forwarded to every rank)"))),
        None => Ok(()),
    }
}
