//! Validation of custom resources against their CRD: the structural schema
//! (pruning, defaulting, type and constraint checks) in [`schema`], the
//! CEL rules in [`cel`], and on updates the ratcheting of errors about
//! unchanged values in [`ratchet`].

pub mod cel;
pub mod ratchet;
pub mod schema;
