//! Quickselect with a median-of-three pivot: the selection `kthvalue` runs on the CPU. Among
//! equal values it reports the index PyTorch's CPU kernel reports, because it visits and swaps
//! elements in the same order (Sedgewick's partitioning, pivot from the middle element).

use super::nan_lt;

/// The position in `line` of its `k`-th smallest element (0-based; NaN sorts last).
pub(crate) fn select_index<K: PartialOrd + Copy>(line: &[K], k: usize) -> usize {
    let mut v: Vec<K> = line.to_vec();
    let mut ix: Vec<usize> = (0..line.len()).collect();
    // a > b, NaN above every number
    let gt = |a: K, b: K| nan_lt(b, a);
    let swap = |v: &mut Vec<K>, ix: &mut Vec<usize>, i: usize, j: usize| {
        v.swap(i, j);
        ix.swap(i, j);
    };
    let (mut l, mut r) = (0usize, line.len().saturating_sub(1));
    loop {
        if r <= l {
            break;
        }
        if r == l + 1 {
            if gt(v[l], v[r]) {
                swap(&mut v, &mut ix, l, r);
            }
            break;
        }
        // median of v[l], v[mid], v[r] ends in v[l], with v[l + 1] <= v[l] <= v[r]
        let p = l + (r - l) / 2;
        swap(&mut v, &mut ix, p, l + 1);
        if gt(v[l + 1], v[r]) {
            swap(&mut v, &mut ix, l + 1, r);
        }
        if gt(v[l], v[r]) {
            swap(&mut v, &mut ix, l, r);
        }
        if gt(v[l + 1], v[l]) {
            swap(&mut v, &mut ix, l + 1, l);
        }
        let piv = v[l];
        let (mut i, mut j) = (l + 1, r);
        loop {
            i += 1;
            while gt(piv, v[i]) {
                i += 1;
            }
            j -= 1;
            while gt(v[j], piv) {
                j -= 1;
            }
            if j < i {
                break;
            }
            swap(&mut v, &mut ix, i, j);
        }
        swap(&mut v, &mut ix, l, j);
        if j <= k {
            l = i;
        }
        if j >= k {
            // j >= k >= l here, and j > l after the partition, so this does not underflow
            r = j - 1;
        }
    }
    ix[k]
}
