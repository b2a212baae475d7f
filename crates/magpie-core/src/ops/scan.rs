//! Scans along a dim: `cumsum`, `cumprod`, `cummax`, `cummin`, `logcumsumexp`.
