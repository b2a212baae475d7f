//! Convolutions (1d/2d/3d, transposed) with stride, padding, dilation and groups.
