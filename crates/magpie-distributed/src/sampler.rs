//! Splitting data between ranks: [`DistributedSampler`] and [`BatchShard`] live in `magpie-data`
//! (the one `torch.utils.data`) and are re-exported here, where PyTorch users of
//! `torch.distributed` also look for them.

pub use magpie_data::{BatchShard, DistributedSampler};
