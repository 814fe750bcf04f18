//! Component tests of the sidecar: kube-sim as the API server (the tests
//! play the controller's part), a fake driver over a real UNIX socket.

mod common;

mod access;
mod binary;
mod bucket;
mod faults;
mod operations;
mod rbac;
mod rotation;
mod upstream;
mod v1alpha1;
