//! The fault suite's machinery: the whole system with fault hooks in every
//! component, seeded scenarios that crash components and inject errors
//! between any two API writes or driver calls, and the invariants checked
//! after each run (everything converges, nothing leaks, nothing is
//! duplicated).

pub mod crash;
pub mod invariants;
pub mod logs;
pub mod observe;
pub mod plan;
pub mod rng;
pub mod scenario;
pub mod system;

pub use scenario::{RunFailure, RunReport, run_seed};
