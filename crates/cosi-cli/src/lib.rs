//! `cosi`: the composition root of cosi-rs. It runs the whole system in one
//! process on the embedded defaults (kube-sim as the API server and
//! cosi-driver-local as the object store) for the quickstart, the dev stack,
//! the end-to-end and fault suites and the benchmark.

pub mod bench;
pub mod describe;
pub mod dev;
pub mod drift;
pub mod driver_host;
pub mod logs;
pub mod manifests;
pub mod migrate;
pub mod progress;
pub mod quickstart;
pub mod s3;
pub mod stack;
pub mod wait;

pub use stack::{Part, Stack, StackError, StackOptions};
