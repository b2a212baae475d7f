//! Pooling: max/avg pool, adaptive pools, unpooling, interpolation.
