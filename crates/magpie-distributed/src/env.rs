//! The rank, world and rendezvous address of this process, read from torchrun's environment
//! variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`),
//! plus the collective timeout (`MAGPIE_DIST_TIMEOUT`, seconds).

use magpie_core::{Error, Result};
use std::time::Duration;

/// The default time a rendezvous or a collective may take before the process group gives up
/// (PyTorch's NCCL default is 10 minutes; a shorter one surfaces a dead peer sooner).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Where this process sits in the job, as torchrun describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistEnv {
    /// This process's rank, `0..world_size`.
    pub rank: usize,
    /// Number of processes in the job.
    pub world_size: usize,
    /// This process's rank on its node: the GPU it uses (`cuda:LOCAL_RANK`).
    pub local_rank: usize,
    /// Processes on this node.
    pub local_world_size: usize,
    /// Host of rank 0's rendezvous listener.
    pub master_addr: String,
    /// Port of rank 0's rendezvous listener.
    pub master_port: u16,
    /// How long the rendezvous and each collective may take.
    pub timeout: Duration,
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T> {
    v.trim().parse::<T>().map_err(|_| Error::value("init_process_group", format!("environment variable {name}={v:?} is not a valid number")))
}

impl DistEnv {
    /// Reads the process environment (see [`DistEnv::from_lookup`]).
    pub fn from_env() -> Result<DistEnv> {
        DistEnv::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the variables through `get` (the environment, or a map in tests). `RANK` and
    /// `WORLD_SIZE` are required; `LOCAL_RANK` defaults to `RANK`, `LOCAL_WORLD_SIZE` to
    /// `WORLD_SIZE`, `MASTER_ADDR` to 127.0.0.1 and `MASTER_PORT` to 29500 (torchrun's default).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<DistEnv> {
        let op = "init_process_group";
        let need = |k: &str| {
            get(k).ok_or_else(|| {
                Error::value(op, format!("environment variable {k} is not set (start the processes with `magpie train --nproc-per-node N` or torchrun, which set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT)"))
            })
        };
        let rank: usize = parse_num("RANK", &need("RANK")?)?;
        let world_size: usize = parse_num("WORLD_SIZE", &need("WORLD_SIZE")?)?;
        if world_size == 0 {
            return Err(Error::value(op, "WORLD_SIZE must be at least 1"));
        }
        if rank >= world_size {
            return Err(Error::value(op, format!("RANK={rank} is not below WORLD_SIZE={world_size}")));
        }
        let local_rank: usize = match get("LOCAL_RANK") {
            Some(v) => parse_num("LOCAL_RANK", &v)?,
            None => rank,
        };
        let local_world_size: usize = match get("LOCAL_WORLD_SIZE") {
            Some(v) => parse_num("LOCAL_WORLD_SIZE", &v)?,
            None => world_size,
        };
        if local_world_size == 0 || local_world_size > world_size {
            return Err(Error::value(op, format!("LOCAL_WORLD_SIZE={local_world_size} must lie in 1..=WORLD_SIZE ({world_size})")));
        }
        if local_rank >= local_world_size {
            return Err(Error::value(op, format!("LOCAL_RANK={local_rank} is not below LOCAL_WORLD_SIZE={local_world_size}")));
        }
        let master_addr = get("MASTER_ADDR").unwrap_or_else(|| "127.0.0.1".into());
        if master_addr.trim().is_empty() {
            return Err(Error::value(op, "MASTER_ADDR is empty"));
        }
        let master_port: u16 = match get("MASTER_PORT") {
            Some(v) => parse_num("MASTER_PORT", &v)?,
            None => 29500,
        };
        if master_port == 0 {
            return Err(Error::value(op, "MASTER_PORT must be a port number in 1..=65535, got 0"));
        }
        let timeout = match get("MAGPIE_DIST_TIMEOUT") {
            Some(v) => {
                let s: f64 = parse_num("MAGPIE_DIST_TIMEOUT", &v)?;
                if !(s > 0.0 && s.is_finite()) {
                    return Err(Error::value(op, format!("MAGPIE_DIST_TIMEOUT must be a positive number of seconds, got {v:?}")));
                }
                Duration::from_secs_f64(s)
            }
            None => DEFAULT_TIMEOUT,
        };
        Ok(DistEnv { rank, world_size, local_rank, local_world_size, master_addr: master_addr.trim().to_string(), master_port, timeout })
    }

    /// A single-process job (rank 0 of 1) on `cuda:0`, for code that runs with or without a launcher.
    pub fn single() -> DistEnv {
        DistEnv { rank: 0, world_size: 1, local_rank: 0, local_world_size: 1, master_addr: "127.0.0.1".into(), master_port: 29500, timeout: DEFAULT_TIMEOUT }
    }

    /// True when `RANK` is set: this process was started by a launcher.
    pub fn is_launched() -> bool {
        std::env::var_os("RANK").is_some()
    }
}
