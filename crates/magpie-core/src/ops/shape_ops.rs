//! Shape ops that copy: `cat`, `stack`, `split`, `chunk`, `flip`, `roll`, `repeat`, `tril`/`triu`,
//! the `*_scatter` ops that write a view of a copy, and the `*_copy` variants of views.

mod copies;
mod join;
mod reorder;
mod scatter_view;
mod split;

pub use join::{block_diag, broadcast_shapes, broadcast_tensors, cartesian_prod, cat, cat_dtype, column_stack, dstack, hstack, meshgrid, stack, vstack};
pub use reorder::repeat_counts;
pub use split::Sections;
pub(crate) use scatter_view::{view_scatter, ViewFn};
