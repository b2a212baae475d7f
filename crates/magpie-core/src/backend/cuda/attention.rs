//! PLACEHOLDER (replaced by the flash attention kernels): the API the fused engine builds against.
use super::device::CudaDevice;
use crate::{DType, Error, Result};

#[derive(Clone, Copy, Debug)]
pub struct AttnOperand { pub ptr: u64, pub sb: i64, pub sh: i64, pub ss: i64 }
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Causal { None, TopLeft, BottomRight }
#[derive(Clone, Copy, Debug)]
pub struct FlashParams { pub dtype: DType, pub batch: usize, pub n_heads: usize, pub n_kv_heads: usize, pub head_dim: usize, pub q_len: usize, pub kv_len: usize, pub scale: f32, pub causal: Causal }
pub fn flash_forward(_dev: &CudaDevice, _p: &FlashParams, _q: AttnOperand, _k: AttnOperand, _v: AttnOperand, _o: AttnOperand, _kv_lens: Option<u64>) -> Result<()> { Err(Error::unsupported("flash_attention", "placeholder")) }
#[derive(Clone, Copy, Debug)]
pub struct DecodeParams { pub dtype: DType, pub batch: usize, pub n_heads: usize, pub n_kv_heads: usize, pub head_dim: usize, pub max_kv_len: usize, pub scale: f32 }
pub fn decode_workspace_bytes(_p: &DecodeParams) -> usize { 0 }
pub fn flash_decode(_dev: &CudaDevice, _p: &DecodeParams, _q: AttnOperand, _k: AttnOperand, _v: AttnOperand, _o: AttnOperand, _kv_lens: u64, _workspace: u64) -> Result<()> { Err(Error::unsupported("flash_decode", "placeholder")) }
