//! Sorting and selection: `sort`, `argsort`, `topk`, `kthvalue`, `unique`, `searchsorted`, `bucketize`, `histc`.
