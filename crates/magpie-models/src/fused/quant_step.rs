//! The folded decode step of a quantized model (bf16 / f16 activations, RMSNorm, gated MLP):
//! per block the q|k|v GEMV (RMSNorm on the fly; rotary embedding and KV-cache write in its
//! epilogue), decode attention, the o GEMV (residual add), the gate|up GEMV (RMSNorm; SwiGLU)
//! and the down GEMV (residual add), as the dense folded step. A projection of one Q4_K segment
//! runs the folded Q4_K GEMV (`quant_fold.cu`), a dense one the dense folded GEMV; any other
//! (Q8_0, Q4_0, Q6_K, or block types mixed within q|k|v or gate|up) runs the core's quantized
//! GEMV with the small kernels around it, so every model the quantized engine takes can run here.

use super::{q, AttnOperand, AttnShape, FusedDecoder, GemvCall, GemvEpi, GemvNorm, QuantFold, WRef};
use crate::fused::prefetch::Prefetch;
use magpie_core::backend::cuda::attention;
use magpie_core::quant::QuantType;
use magpie_core::{DType, Result};

impl FusedDecoder {
    /// One decode step of `m` (1-4) rows on quantized weights with the small kernels folded in
    /// (see the module's text); then the LM head (final norm folded in where its kernel takes it)
    /// and the selection.
    pub(super) fn quant_step(&self, qf: &QuantFold, m: usize) -> Result<()> {
        let (s, d, k, b) = (&self.w.spec, &*self.dev, &self.k, &self.b);
        let (qd, kvd) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
        let norm = |n: (u64, u64)| Some(GemvNorm { rms: true, w: n.0, b: n.1, eps: s.eps });
        let wpe = self.w.wpe.as_ref().map_or(Ok(0), super::ptr)?;
        k.embed(d, m, b.tok.ptr, b.pos.ptr, super::ptr(&self.w.wte)?, wpe, b.x.ptr, s.hidden, b.kvlen.ptr, 0, 0)?;
        let cache_sh = (self.cfg.max_len * s.head_dim) as i64;
        let cache_sb = s.kv_heads as i64 * cache_sh;
        let (cos, sin) = (b.cos.as_ref().map_or(0, |x| x.ptr), b.sin.as_ref().map_or(0, |x| x.ptr));
        let p = super::decode_params(s, self.dtype, m, self.cfg.max_len);
        let shape = AttnShape { batch: m, heads: (s.heads, s.kv_heads, s.head_dim), cache_strides: (cache_sb, cache_sh), max_len: self.cfg.max_len, scale: s.scale };
        let fin = (super::ptr(&self.w.final_norm.w)?, super::opt_ptr(&self.w.final_norm.b)?);
        let none = Prefetch::default();
        for (li, l) in self.lp.iter().enumerate() {
            let (kc, vc) = (b.k_cache[li].ptr, b.v_cache[li].ptr);
            let qkv = GemvEpi::Qkv { q: b.q.ptr, kc, vc, bias: l.qkv_b, pos: b.pos.ptr, cos, sin, heads: (s.heads, s.kv_heads, s.head_dim), cache_strides: (cache_sb, cache_sh) };
            self.qproduct(qf, GemvCall { m, n: qd + 2 * kvd, k: s.hidden, x: b.x.ptr, w: l.qkv_w, norm: norm(l.n1), epi: qkv }, l.w(0, l.qkv_w), fin, &none)?;
            if self.cfg.attention_kernel && k.attn_fits(&shape, [b.q.ptr, kc, vc, b.attn.ptr]) {
                k.attn_decode(d, &shape, b.q.ptr, kc, vc, b.attn.ptr, b.kvlen.ptr, &none, false)?;
            } else {
                let qo = |ptr: u64| AttnOperand { ptr, sb: qd as i64, sh: s.head_dim as i64, ss: 0 };
                let cache = |ptr: u64| AttnOperand { ptr, sb: cache_sb, sh: cache_sh, ss: s.head_dim as i64 };
                attention::flash_decode(d, &p, qo(b.q.ptr), cache(kc), cache(vc), qo(b.attn.ptr), b.kvlen.ptr, b.ws.ptr)?;
            }
            let o = GemvCall { m, n: s.hidden, k: qd, x: b.attn.ptr, w: l.o_w, norm: None, epi: GemvEpi::Residual { res: b.x.ptr, bias: l.o_b } };
            self.qproduct(qf, o, l.w(1, l.o_w), fin, &none)?;
            let up = GemvCall { m, n: 2 * s.inter, k: s.hidden, x: b.x.ptr, w: l.up_w, norm: norm(l.n2), epi: GemvEpi::Gated { out: b.act.ptr, bias: l.up_b, kind: s.act } };
            self.qproduct(qf, up, l.w(2, l.up_w), fin, &none)?;
            let down = GemvCall { m, n: s.hidden, k: s.inter, x: b.act.ptr, w: l.down_w, norm: None, epi: GemvEpi::Residual { res: b.x.ptr, bias: l.down_b } };
            self.qproduct(qf, down, l.w(3, l.down_w), fin, &none)?;
        }
        match &self.lm_head {
            (w, None) if k.gemv_fusable(m, s.hidden, b.x.ptr, *w, fin) => {
                let amax = if self.cfg.fused_argmax { b.amax.ptr } else { 0 };
                k.gemv_fused(d, m, s.vocab, s.hidden, b.x.ptr, *w, norm(fin), GemvEpi::Store { y: b.logits.ptr, out: DType::F32, amax }, &none)?;
                return self.select(m, 0, amax != 0);
            }
            (_, Some(segs)) if one_q4k(segs).is_some() && self.lm_tmp.is_some() && qf.fits(m, s.hidden, b.x.ptr, fin.0) => {
                let (w, t) = (one_q4k(segs).unwrap_or_default(), self.lm_tmp.as_ref().map_or(0, |t| t.ptr));
                // SAFETY: x holds m rows of `hidden` values, lm_tmp m rows of vocab values of the
                // storage dtype; the blocks are the engine's.
                unsafe { qf.gemv(d, m, s.vocab, s.hidden, b.x.ptr, w, norm(fin), GemvEpi::Store { y: t, out: self.dtype, amax: 0 })? };
                k.widen(d, m * s.vocab, t, b.logits.ptr)?;
            }
            _ => {
                k.add_norm(d, m, b.x.ptr, 0, 0, fin.0, fin.1, b.h.ptr, s.hidden, s.eps, true)?;
                self.head(m, b.h.ptr, 0)?;
            }
        }
        self.select(m, 0, false)
    }

    /// One product of the folded step: the folded Q4_K GEMV for a single Q4_K segment, the dense
    /// folded GEMV for a dense weight, else the unfolded kernels (norm into `h`, the product, then
    /// the epilogue's own kernel). `fin`: a norm weight for the residual add's kernel, whose
    /// normalized output is not used.
    fn qproduct(&self, qf: &QuantFold, c: GemvCall, w: WRef<'_>, fin: (u64, u64), none: &Prefetch) -> Result<()> {
        let (s, d, k, b) = (&self.w.spec, &*self.dev, &self.k, &self.b);
        let nw = c.norm.map_or((0, 0), |n| (n.w, n.b));
        match w {
            WRef::Quant(segs) if one_q4k(segs).is_some() && nw.1 == 0 && qf.fits(c.m, c.k, c.x, nw.0) => {
                let wq = one_q4k(segs).unwrap_or_default();
                // SAFETY: the engine's buffers hold the call's rows (as for the dense folded GEMV);
                // the blocks are the engine's.
                return unsafe { qf.gemv(d, c.m, c.n, c.k, c.x, wq, c.norm, c.epi) };
            }
            WRef::Dense(wd) if k.gemv_fusable(c.m, c.k, c.x, wd, nw) => return k.gemv_fused(d, c.m, c.n, c.k, c.x, wd, c.norm, c.epi, none),
            _ => {}
        }
        let x = match c.norm {
            Some(n) => {
                k.add_norm(d, c.m, c.x, 0, 0, n.w, n.b, b.h.ptr, c.k, n.eps, n.rms)?;
                b.h.ptr
            }
            None => c.x,
        };
        let linear = |y: u64| match w {
            WRef::Dense(wd) => k.linear(d, c.m, c.n, c.k, x, wd, y, self.dtype, self.cfg.gemv),
            // SAFETY: x holds m rows of k values, y m rows of n (the engine's buffers).
            WRef::Quant(segs) => unsafe { q::qgemv(d, self.dtype, self.cfg.pdl, c.m, c.k, segs, x, y, c.n) },
        };
        match c.epi {
            GemvEpi::Qkv { q, kc, vc, bias, pos, cos, sin, heads, cache_strides } => {
                linear(b.qkv.ptr)?;
                k.rope_kv(d, c.m, b.qkv.ptr, bias, pos, (0, 0), q, kc, vc, cos, sin, heads, cache_strides)
            }
            GemvEpi::Residual { res, bias } => {
                linear(b.o.ptr)?;
                k.add_norm(d, c.m, res, b.o.ptr, bias, fin.0, fin.1, b.h.ptr, c.n, s.eps, true)
            }
            GemvEpi::Gated { out, bias, kind } => {
                linear(b.mlp.ptr)?;
                k.act(d, c.m, c.n / 2, b.mlp.ptr, bias, out, kind, true)
            }
            GemvEpi::Act { out, bias, kind } => {
                linear(b.mlp.ptr)?;
                k.act(d, c.m, c.n, b.mlp.ptr, bias, out, kind, false)
            }
            GemvEpi::Store { y, .. } => linear(y),
        }
    }
}

/// The device address of a weight that is one Q4_K segment.
fn one_q4k(segs: &[super::QSegP]) -> Option<u64> {
    match segs {
        [sg] if sg.ty == QuantType::Q4_K => Some(sg.w),
        _ => None,
    }
}
