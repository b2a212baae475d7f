//! The decode step's L2 prefetch plan: which weight bytes each kernel asks the L2 cache for,
//! ahead of the kernel that reads them, so the HBM keeps streaming through kernel tails, launch
//! gaps and the attention kernel (see `pf_share` in kernels.cu).
//!
//! The step's products read their weights in a fixed order, a stream of bytes that repeats every
//! step. Each kernel moves a prefetch cursor along it, up to `window` bytes past what has been
//! read once it ends (past the LM head the stream wraps to the next step's first products). A
//! product whose weights the cursor has already passed is in L2 and issues its prefetch when its
//! blocks start (the HBM would otherwise idle while it runs); one still streaming from the HBM
//! issues it as each block finishes its rows.

/// Address ranges per kernel at most (`MP_PF` in kernels.cu).
pub const PF_SEGS: usize = 4;

/// What one kernel prefetches: up to [`PF_SEGS`] `(address, bytes)` ranges (16-byte aligned
/// multiples of 16 bytes; unused ones are `(0, 0)`), and whether it issues them when its blocks
/// start (`early`) or when they are done with their own rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prefetch {
    pub segs: [(u64, u64); PF_SEGS],
    pub early: bool,
}

#[cfg(test)]
impl Prefetch {
    /// Bytes asked for.
    pub fn bytes(&self) -> u64 {
        self.segs.iter().map(|s| s.1).sum()
    }
}

/// One product's weight as its kernel reads it: `parts` ranges of `part_bytes` each, read side by
/// side (the gate and up halves of a gated MLP are read row pair by row pair; others are one part).
#[derive(Clone, Debug)]
pub struct Read {
    pub parts: Vec<u64>,
    pub part_bytes: u64,
}

impl Read {
    fn bytes(&self) -> u64 {
        self.parts.len() as u64 * self.part_bytes
    }
}

/// The prefetches of a step's kernels, in launch order: `Some(read)` for a product, `None` for a
/// kernel between products (attention), which always prefetches early. With `window == 0`, none.
/// For example, with q|k|v (2 MiB), the attention, o (1 MiB), gate|up and down, and a 1 MiB
/// window: the q|k|v kernel, as its blocks finish their rows, asks for all of o; the attention
/// asks for nothing more; o, whose rows are then in L2, asks for the first 1 MiB of gate|up when
/// its blocks start (see the tests below).
pub fn plan(reads: &[Option<Read>], window: u64) -> Vec<Prefetch> {
    let starts: Vec<u64> = reads
        .iter()
        .scan(0u64, |acc, r| {
            let s = *acc;
            *acc += r.as_ref().map_or(0, Read::bytes);
            Some(s)
        })
        .collect();
    let total: u64 = reads.iter().flatten().map(Read::bytes).sum();
    if window == 0 || total == 0 {
        return vec![Prefetch::default(); reads.len()];
    }
    let window = window.min(total);
    // the step repeats: the cursor starts where the previous step's last kernel left it
    let (_, end) = walk(reads, &starts, total, window, 0);
    walk(reads, &starts, total, window, end.saturating_sub(total).min(window)).0
}

/// One pass over the step from cursor `c0`: each kernel's prefetch and the final cursor.
fn walk(reads: &[Option<Read>], starts: &[u64], total: u64, window: u64, c0: u64) -> (Vec<Prefetch>, u64) {
    let mut cursor = c0;
    let mut out = Vec::with_capacity(reads.len());
    for (i, r) in reads.iter().enumerate() {
        let (early, done) = match r {
            Some(r) => {
                let end = starts[i] + r.bytes();
                let early = cursor >= end;
                cursor = cursor.max(end);
                (early, end)
            }
            None => (true, starts[i]),
        };
        let target = done + window;
        let mut pf = Prefetch { early, ..Prefetch::default() };
        let mut n = 0;
        while cursor < target && n < PF_SEGS {
            // the product holding stream position `cursor` (wrapping into the next step)
            let pos = cursor % total;
            let Some(j) = (0..reads.len()).rev().find(|&j| reads[j].is_some() && starts[j] <= pos) else { break };
            let Some(rj) = &reads[j] else { break };
            let np = rj.parts.len() as u64;
            let hi = (starts[j] + rj.bytes()).min(pos + (target - cursor));
            if np as usize + n > PF_SEGS {
                break;
            }
            // the same share of each part (256-byte boundaries; the part's end is a multiple of 16)
            let cut = |x: u64| (((x - starts[j]) / np) & !255).min(rj.part_bytes);
            let (a, b) = (cut(pos), if hi == starts[j] + rj.bytes() { rj.part_bytes } else { cut(hi) });
            if b > a {
                for &p in &rj.parts {
                    pf.segs[n] = (p + a, b - a);
                    n += 1;
                }
            }
            cursor += hi - pos;
        }
        out.push(pf);
    }
    (out, cursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(p: u64, n: u64) -> Option<Read> {
        Some(Read { parts: vec![p], part_bytes: n })
    }

    #[test]
    fn a_window_ahead_of_what_has_been_read_wrapping_into_the_next_step() {
        const M: u64 = 1 << 20;
        // q|k|v 2 MiB, attention, o 1 MiB, gate|up 2 x 4 MiB, down 4 MiB, head 16 MiB
        let reads = vec![one(0x1000_0000, 2 * M), None, one(0x2000_0000, M), Some(Read { parts: vec![0x3000_0000, 0x4000_0000], part_bytes: 4 * M }), one(0x5000_0000, 4 * M), one(0x6000_0000, 16 * M)];
        let pf = plan(&reads, 6 * M);
        // the head prefetches the next step's first 6 MiB: q|k|v, o and 1.5 MiB of each gate|up half
        assert_eq!(pf[5].segs, [(0x1000_0000, 2 * M), (0x2000_0000, M), (0x3000_0000, 3 * M / 2), (0x4000_0000, 3 * M / 2)]);
        assert!(!pf[5].early);
        // so q|k|v is in L2 and prefetches early, up to 6 MiB past its end
        assert!(pf[0].early);
        assert_eq!(pf[0].segs[..2], [(0x3000_0000 + 3 * M / 2, M), (0x4000_0000 + 3 * M / 2, M)]);
        // the attention adds nothing (the window ahead of q|k|v's end is already asked for)
        assert_eq!(pf[1].bytes(), 0);
        assert!(pf[2].early);
        assert_eq!(pf[2].segs[..2], [(0x3000_0000 + 5 * M / 2, M / 2), (0x4000_0000 + 5 * M / 2, M / 2)]);
        // gate|up still streams (it ends past the window): it prefetches when its blocks finish
        assert!(!pf[3].early);
        assert_eq!(pf[3].segs[0], (0x5000_0000, 4 * M));
        assert_eq!(pf[3].segs[1], (0x6000_0000, 2 * M));
        // every range 16-byte aligned, a multiple of 16
        for p in &pf {
            assert!(p.segs.iter().all(|s| s.0 % 16 == 0 && s.1 % 16 == 0));
        }
        assert!(plan(&reads, 0).iter().all(|p| p.bytes() == 0));
    }

    #[test]
    fn odd_sizes_and_a_window_larger_than_the_step() {
        // parts of 16-byte multiples that are not 256-byte multiples
        let reads = vec![one(0x1000, 4112), None, Some(Read { parts: vec![0x9000, 0xa000], part_bytes: 1040 }), one(0xc000, 48)];
        let pf = plan(&reads, 1 << 30);
        let total: u64 = pf.iter().map(Prefetch::bytes).sum();
        assert!(total <= 4112 + 2 * 1040 + 48, "asked for {total} bytes, more than the step reads");
        for p in &pf {
            for s in p.segs.iter().filter(|s| s.1 > 0) {
                assert!(s.0 % 16 == 0 && s.1 % 16 == 0, "{s:?}");
                let inside = [(0x1000u64, 4112u64), (0x9000, 1040), (0xa000, 1040), (0xc000, 48)].iter().any(|&(a, n)| s.0 >= a && s.0 + s.1 <= a + n);
                assert!(inside, "{s:?} is outside every weight");
            }
        }
    }
}
