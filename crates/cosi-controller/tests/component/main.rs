//! Component tests: the controller against kube-sim, with the test playing
//! the user, the admin and the sidecar.

mod accesses;
mod claims;
mod common;
mod operations;
mod scale;
