//! The matmul family: `matmul`, `mm`, `bmm`, `addmm`, `baddbmm`, `outer`, `dot`, `einsum`, `tensordot`, `kron`.
