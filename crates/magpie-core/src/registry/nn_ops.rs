//! Registry entries for the nn op family.

use super::Registry;

/// Registers this family's ops.
pub(crate) fn register(_r: &mut Registry) {}
