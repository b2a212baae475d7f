//! The packed int8 weight: panels of 16 output columns, each holding, for every group of 4
//! consecutive `k`, the 16 columns' 4 bytes side by side (`[panel][k / 4][16][4]`), so that one
//! 64-byte load feeds a VNNI `vpdpbusd` (or two AVX2 `vpmaddubsw`) against 4 broadcast bytes of A.

use magpie_core::{Error, Result};

/// Columns per panel.
pub(crate) const PANEL: usize = 16;

/// A `[n, k]` int8 matrix (row j = output column j) packed for the int8 kernels, with its row sums.
#[derive(Debug, Clone)]
pub struct PackedB {
    n: usize,
    k: usize,
    kp: usize,
    data: Vec<i8>,
    row_sums: Vec<i32>,
}

impl PackedB {
    /// Packs `w` (`n * k` values, row-major `[n, k]`); `k` is padded to a multiple of 4 and `n`
    /// to a multiple of 16 with zeros.
    pub fn pack(w: &[i8], n: usize, k: usize) -> Result<PackedB> {
        if w.len() != n * k {
            return Err(Error::shape("PackedB::pack", format!("{} values for a [{n}, {k}] matrix", w.len())));
        }
        let kp = k.div_ceil(4) * 4;
        let panels = n.div_ceil(PANEL);
        let mut data = vec![0i8; panels * kp * PANEL];
        for j in 0..n {
            let (p, c) = (j / PANEL, j % PANEL);
            for kk in 0..k {
                data[p * kp * PANEL + (kk / 4) * PANEL * 4 + c * 4 + kk % 4] = w[j * k + kk];
            }
        }
        let row_sums = (0..n).map(|j| w[j * k..(j + 1) * k].iter().map(|&v| v as i32).sum()).collect();
        Ok(PackedB { n, k, kp, data, row_sums })
    }
    /// Output columns.
    pub fn n(&self) -> usize {
        self.n
    }
    /// The reduction length.
    pub fn k(&self) -> usize {
        self.k
    }
    /// `k` rounded up to a multiple of 4: the row length A must have.
    pub fn k_padded(&self) -> usize {
        self.kp
    }
    /// Panels of 16 columns.
    pub fn panels(&self) -> usize {
        self.n.div_ceil(PANEL)
    }
    /// `Σ_k w[j, k]` per column (for zero-point corrections).
    pub fn row_sums(&self) -> &[i32] {
        &self.row_sums
    }
    /// Panel `p`'s bytes (`kp * 16`).
    pub(crate) fn panel(&self, p: usize) -> &[i8] {
        &self.data[p * self.kp * PANEL..(p + 1) * self.kp * PANEL]
    }
}
