//! Validation of custom resources against their CRD: the structural schema
//! (pruning, defaulting, type and constraint checks) in [`schema`] and the
//! CEL rules in [`cel`].

pub mod cel;
pub mod schema;
