//! End-to-end tests of the whole system in one process: kube-sim as the API
//! server with the CRDs and the deploy/ RBAC, cosi-controller, cosi-sidecar
//! and cosi-driver-local, driven the way a user and an admin drive a
//! cluster, with the data path checked through a real S3 client and the
//! backend checked for leaks after every deletion. Each test runs its own
//! stack, so they run in parallel. The `cosi` binary itself is tested too:
//! `cosi quickstart` as the README runs it, and `cosi dev` with kubectl.

mod access_modes;
mod access_secrets;
mod azure;
mod ceph_rgw;
mod chart;
mod cli_bench;
mod cli_dev;
mod cli_quickstart;
mod common;
mod crd_validation;
mod deletion;
mod deploy;
mod dynamic;
// Shared with the container suite, which alone uses `relative_to`.
#[allow(dead_code)]
mod host;
mod leases;
mod lost_claims;
mod migrate_common;
mod migrate_obc;
mod migrate_rook;
mod migrate_scale;
mod migrate_upstream;
mod migrate_upstream_fixtures;
mod migrate_v1alpha1;
mod migrate_v1alpha1_fixtures;
mod monitoring;
mod multi_bucket;
mod readme_driver;
mod real_clients;
mod real_faults;
mod real_install;
mod restarts;
mod rotation;
mod static_provisioning;
mod tenant_admission;
mod tenant_isolation;
mod upstream_interop;
mod v1alpha1;
mod version;
