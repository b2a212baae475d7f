//! `torch.stft`: the short-time Fourier transform as a composite: centre padding, overlapping
//! frames (`unfold`, a view), the window, then one transform per frame. `return_complex=True`
//! ends in `fft_rfft` / `fft_fft`; `return_complex=False` (PyTorch's real view of the same
//! numbers) multiplies the frames by the cosine and sine bases in float64, so every piece is a
//! real op with autograd.

use crate::dtype::DType;
use crate::ops::pad::PadMode;
use crate::ops::shape_ops::stack;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.stft`'s arguments after `input` and `n_fft`.
#[derive(Clone, Debug, Default)]
pub struct StftOpts {
    /// Frame step; `n_fft / 4` when `None`.
    pub hop_length: Option<i64>,
    /// Window length (the window is zero-padded to `n_fft`, centred); `n_fft` when `None`.
    pub win_length: Option<i64>,
    /// The window (1-d, `win_length` long); all ones when `None`.
    pub window: Option<Tensor>,
    /// Pad `n_fft / 2` on both sides (with `pad_mode`) so frame `t` is centred at `t * hop`.
    pub center: bool,
    /// `"reflect"` (PyTorch's default), `"constant"`, `"replicate"` or `"circular"`.
    pub pad_mode: String,
    /// Multiply by `n_fft^-1/2`.
    pub normalized: bool,
    /// Only the `n_fft / 2 + 1` non-negative frequencies; `true` for real inputs when `None`.
    pub onesided: Option<bool>,
    /// Complex output, or its real view with a trailing dim of 2; required for real inputs.
    pub return_complex: Option<bool>,
}

/// `torch.stft(input, n_fft, ...)` of a real 1-d `(L)` or batched `(B, L)` signal: `(B?, freq,
/// frames)` complex, or `(B?, freq, frames, 2)` real with `return_complex=False`.
///
/// ```
/// use magpie_core::ops::fft::StftOpts;
/// # use magpie_core::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32; 16], &[16])?;
/// let opts = StftOpts { center: false, pad_mode: "reflect".into(), return_complex: Some(false), ..Default::default() };
/// let s = magpie_core::ops::fft::stft(&x, 8, &opts)?; // frames of 8 every 2 samples: 5 frames, 5 frequencies
/// assert_eq!(s.shape(), &[5, 5, 2]);
/// assert!((s.to_vec::<f32>()?[0] - 8.0).abs() < 1e-6); // the constant's energy sits at f = 0
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn stft(x: &Tensor, n_fft: i64, o: &StftOpts) -> Result<Tensor> {
    x.stft(n_fft, o)
}

impl Tensor {
    /// `torch.stft(input, n_fft, ...)`; see [`stft`].
    pub fn stft(&self, n_fft: i64, o: &StftOpts) -> Result<Tensor> {
        let op = "stft";
        let Some(return_complex) = o.return_complex else {
            return Err(Error::value(op, "stft requires the return_complex parameter be given for real inputs, and will further require that return_complex=True in a future PyTorch release."));
        };
        if self.dtype().is_complex() {
            return Err(Error::unsupported(op, "complex inputs"));
        }
        if !self.dtype().is_float() {
            return Err(Error::dtype(op, format!("stft: expected a tensor of floating point or complex values, got {}", self.dtype())));
        }
        if self.ndim() != 1 && self.ndim() != 2 {
            return Err(Error::shape(op, format!("stft: expected a 1D or 2D tensor, but got {}D", self.ndim())));
        }
        let batched = self.ndim() == 2;
        let mut x = if batched { self.clone() } else { self.unsqueeze(0)? };
        if o.center {
            let mode = PadMode::parse(&o.pad_mode)?;
            let p = n_fft / 2;
            x = x.unsqueeze(1)?.pad(&[p, p], mode, None)?.squeeze_dims(&[1])?;
        }
        let len = x.shape()[1] as i64;
        if n_fft <= 0 || n_fft > len {
            return Err(Error::value(op, format!("stft: expected 0 < n_fft < {len}, but got n_fft={n_fft}")));
        }
        let hop = o.hop_length.unwrap_or(n_fft / 4);
        if hop <= 0 {
            return Err(Error::value(op, format!("stft: expected hop_length > 0, but got hop_length={hop}")));
        }
        let win = o.win_length.unwrap_or(n_fft);
        if win <= 0 || win > n_fft {
            return Err(Error::value(op, format!("stft: expected 0 < win_length <= n_fft, but got win_length={win}")));
        }
        let frames = x.unfold(1, n_fft, hop)?; // [B, T, n_fft]
        let frames = match &o.window {
            Some(w) => {
                if w.ndim() != 1 || w.shape()[0] as i64 != win {
                    return Err(Error::shape(op, format!("stft: expected a 1D window tensor of size equal to win_length={win}, but got window with size {:?}", w.shape())));
                }
                let left = (n_fft - win) / 2;
                let w = if win < n_fft { w.unsqueeze(0)?.unsqueeze(0)?.pad(&[left, n_fft - win - left], PadMode::Constant, Some(0.0))?.reshape(&[n_fft])? } else { w.clone() };
                frames.mul(&w)?
            }
            None if win < n_fft => {
                let left = (n_fft - win) / 2;
                let w: Vec<f64> = (0..n_fft).map(|i| if i >= left && i < left + win { 1.0 } else { 0.0 }).collect();
                frames.mul(&Tensor::from_vec(w, &[n_fft as usize])?.to_dtype(self.dtype())?.to_device(self.device())?)?
            }
            None => frames,
        };
        let onesided = o.onesided.unwrap_or(true);
        let norm = if o.normalized { Some("ortho") } else { None };
        let out = if return_complex {
            let s = if onesided { frames.fft_rfft(None, -1, norm)? } else { frames.fft_fft(None, -1, norm)? };
            s.transpose(-1, -2)?
        } else {
            let nf = if onesided { n_fft / 2 + 1 } else { n_fft } as usize;
            let n = n_fft as usize;
            // angles reduced mod n_fft first, so large f * t products stay exact
            let ang = |t: usize, f: usize| 2.0 * std::f64::consts::PI * ((t * f) % n) as f64 / n as f64;
            let mut cos = Vec::with_capacity(n * nf);
            let mut sin = Vec::with_capacity(n * nf);
            for t in 0..n {
                for f in 0..nf {
                    cos.push(ang(t, f).cos());
                    sin.push(-ang(t, f).sin());
                }
            }
            let dev = self.device();
            let scale = if o.normalized { 1.0 / (n as f64).sqrt() } else { 1.0 };
            let (c, s) = (Tensor::from_vec(cos, &[n, nf])?.to_device(dev)?, Tensor::from_vec(sin, &[n, nf])?.to_device(dev)?);
            let f64s = frames.to_dtype(DType::F64)?;
            let re = f64s.matmul(&c)?.mul_scalar(scale)?;
            let im = f64s.matmul(&s)?.mul_scalar(scale)?;
            stack(&[re, im], -1)?.transpose(1, 2)?.to_dtype(self.dtype())?
        };
        if batched {
            Ok(out)
        } else {
            out.squeeze_dims(&[0])
        }
    }
}
