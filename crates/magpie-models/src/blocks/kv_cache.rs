//! The key/value cache of a decoder on the module path: per layer one preallocated `[B, H_kv, capacity, D]`
//! buffer pair on the model's device, written in place as tokens arrive and grown by whole chunks
//! (so a long generation reallocates a few times, not once per token).

use magpie_core::{DType, Device, Error, Result, Tensor};

/// How many positions a cache grows by when it is full.
pub const GROW_CHUNK: usize = 256;

/// Keys and values of every layer for a batch of sequences that advance together.
pub struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
    batch: usize,
    n_kv_heads: usize,
    head_dim: usize,
    capacity: usize,
    len: usize,
    dtype: DType,
    device: Device,
}

impl KvCache {
    /// An empty cache for `n_layers` layers, `batch` sequences of `n_kv_heads` heads of size `head_dim`,
    /// with room for `capacity` positions before it grows. Buffers are allocated on first use.
    pub fn new(n_layers: usize, batch: usize, n_kv_heads: usize, head_dim: usize, capacity: usize, dtype: DType, device: Device) -> Result<KvCache> {
        if n_layers == 0 || batch == 0 || n_kv_heads == 0 || head_dim == 0 {
            return Err(Error::value("KvCache", format!("layers ({n_layers}), batch ({batch}), kv heads ({n_kv_heads}) and head_dim ({head_dim}) must be at least 1")));
        }
        Ok(KvCache { layers: (0..n_layers).map(|_| None).collect(), batch, n_kv_heads, head_dim, capacity: capacity.max(1), len: 0, dtype, device })
    }

    /// Positions cached so far (the same for every sequence of the batch).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True before the first token.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The batch size the cache was made for.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Positions the buffers hold before the next growth.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Writes `k`, `v` (`[B, H_kv, T, D]`) of `layer` at positions `len..len + T` and returns views of
    /// all cached keys and values of that layer (`[B, H_kv, len + T, D]`). Every layer of a step calls
    /// this once with the same `T`; [`KvCache::advance`] then moves `len` on by `T`.
    pub fn append(&mut self, layer: usize, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        let op = "KvCache";
        let n_layers = self.layers.len();
        if layer >= n_layers {
            return Err(Error::value(op, format!("layer {layer} is out of range for a cache of {n_layers} layers")));
        }
        let &[b, h, t, d] = k.shape() else {
            return Err(Error::shape(op, format!("keys must be [B, H_kv, T, D], got {:?}", k.shape())));
        };
        if (b, h, d) != (self.batch, self.n_kv_heads, self.head_dim) || v.shape() != k.shape() {
            return Err(Error::shape(
                op,
                format!("keys {:?} / values {:?} do not fit a cache of batch {}, {} kv heads, head_dim {}", k.shape(), v.shape(), self.batch, self.n_kv_heads, self.head_dim),
            ));
        }
        let end = self.len + t;
        if end > self.capacity {
            self.capacity = end.div_ceil(GROW_CHUNK) * GROW_CHUNK;
        }
        let shape = [self.batch, self.n_kv_heads, self.capacity, self.head_dim];
        let (kb, vb) = match self.layers[layer].take() {
            Some((kb, vb)) if kb.shape()[2] == self.capacity => (kb, vb),
            old => {
                // first use, or grown: a new buffer with the cached prefix copied over
                let kb = Tensor::zeros_on(&shape, self.dtype, self.device)?;
                let vb = Tensor::zeros_on(&shape, self.dtype, self.device)?;
                if let Some((ok, ov)) = old {
                    if self.len > 0 {
                        kb.narrow(2, 0, self.len as i64)?.copy_(&ok.narrow(2, 0, self.len as i64)?)?;
                        vb.narrow(2, 0, self.len as i64)?.copy_(&ov.narrow(2, 0, self.len as i64)?)?;
                    }
                }
                (kb, vb)
            }
        };
        kb.narrow(2, self.len as i64, t as i64)?.copy_(k)?;
        vb.narrow(2, self.len as i64, t as i64)?.copy_(v)?;
        let out = (kb.narrow(2, 0, end as i64)?, vb.narrow(2, 0, end as i64)?);
        self.layers[layer] = Some((kb, vb));
        Ok(out)
    }

    /// Moves the cached length on by `t` positions, after every layer has appended them.
    pub fn advance(&mut self, t: usize) {
        self.len += t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(b: usize, h: usize, t: usize, d: usize, start: f32) -> Tensor {
        let n = b * h * t * d;
        Tensor::from_vec((0..n).map(|i| start + i as f32).collect::<Vec<_>>(), &[b, h, t, d]).unwrap()
    }

    #[test]
    fn grows_by_chunks_and_keeps_what_it_held() {
        let mut c = KvCache::new(2, 1, 2, 4, 3, DType::F32, Device::Cpu).unwrap();
        let (k1, v1) = (seq(1, 2, 3, 4, 0.0), seq(1, 2, 3, 4, 100.0));
        for layer in 0..2 {
            c.append(layer, &k1, &v1).unwrap();
        }
        c.advance(3);
        assert_eq!((c.len(), c.capacity()), (3, 3));
        // one more position: the buffers grow to a whole chunk, the first three positions survive
        let (k2, v2) = (seq(1, 2, 1, 4, 500.0), seq(1, 2, 1, 4, 600.0));
        let (k, v) = c.append(0, &k2, &v2).unwrap();
        assert_eq!(c.capacity(), GROW_CHUNK);
        assert_eq!(k.shape(), [1, 2, 4, 4]);
        assert_eq!(k.narrow(2, 0, 3).unwrap().contiguous().unwrap().to_vec::<f32>().unwrap(), k1.to_vec::<f32>().unwrap());
        assert_eq!(v.narrow(2, 3, 1).unwrap().contiguous().unwrap().to_vec::<f32>().unwrap(), v2.to_vec::<f32>().unwrap());
        // layer 1 grows on its own first append after the growth and keeps its prefix too
        let (k, _) = c.append(1, &k2, &v2).unwrap();
        assert_eq!(k.narrow(2, 0, 3).unwrap().contiguous().unwrap().to_vec::<f32>().unwrap(), k1.to_vec::<f32>().unwrap());
        c.advance(1);
        assert_eq!(c.len(), 4);
    }

    #[test]
    fn rejects_misfits() {
        let mut c = KvCache::new(1, 1, 2, 4, 8, DType::F32, Device::Cpu).unwrap();
        assert!(c.append(1, &seq(1, 2, 1, 4, 0.0), &seq(1, 2, 1, 4, 0.0)).is_err());
        assert!(c.append(0, &seq(1, 3, 1, 4, 0.0), &seq(1, 3, 1, 4, 0.0)).is_err());
        assert!(KvCache::new(0, 1, 1, 1, 1, DType::F32, Device::Cpu).is_err());
    }
}
