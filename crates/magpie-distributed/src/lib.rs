//! Data-parallel training over NCCL (PyTorch's `torch.distributed` with the NCCL backend and
//! `DistributedDataParallel`), for several GPUs of one machine or several machines.
//!
//! - [`DistEnv`]: rank, world size and rendezvous address from torchrun's environment variables.
//! - [`Rendezvous`]: the TCP meeting point (rank 0 listens, the others connect with retries until
//!   the timeout) that checks the world size and hands out the NCCL unique id; its connections
//!   stay open to notice a rank that dies.
//! - [`ProcessGroup`]: the NCCL communicator of one rank and its collectives on CUDA tensors
//!   (`all_reduce` sum/avg/max/min/product, `broadcast`, `all_gather`, `reduce_scatter`,
//!   `barrier`), each returning a [`Work`] handle on a communication stream of its own. A
//!   watchdog ends the rank with a clear message when a collective outlives the timeout, NCCL
//!   reports an error, or a peer disappears.
//! - [`DistributedDataParallel`]: parameter broadcast, bucketed gradient averaging overlapped
//!   with backward, `no_sync`.
//! - [`BatchShard`] and [`DistributedSampler`]: each rank's share of the data.
//! - [`launch`]: the launcher behind `magpie train --nproc-per-node N`.
//!
//! NCCL is loaded at run time through cudarc: this crate builds, and its CPU parts (environment,
//! rendezvous, launcher, samplers) run, on machines without CUDA or NCCL.

pub mod ddp;
pub mod env;
mod event;
pub mod group;
pub mod launch;
pub mod nccl;
pub mod rendezvous;
pub mod sampler;
mod watchdog;

pub use ddp::{DdpConfig, DistributedDataParallel, NoSyncGuard};
pub use env::DistEnv;
pub use group::{ProcessGroup, Work};
pub use launch::LaunchConfig;
pub use nccl::ReduceOp;
pub use rendezvous::Rendezvous;
pub use sampler::{BatchShard, DistributedSampler};
pub use watchdog::FAULT_EXIT_CODE;
