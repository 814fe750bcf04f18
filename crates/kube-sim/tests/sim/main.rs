//! Integration tests driving kube-sim with kube-rs, one module per area.
#![recursion_limit = "256"]

mod admission;
mod common;
mod crd;
mod crud;
mod gc;
mod patch;
mod rbac_faults;
mod watch;
