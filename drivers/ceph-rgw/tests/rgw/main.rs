//! The driver against a real radosgw (Ceph from the distribution's
//! packages, started once for this test binary by scripts/rgw-cluster),
//! through real gRPC over a UNIX socket, with a real S3 client on the
//! data path. Every test checks with `radosgw-admin user list` and
//! `bucket list` that the users and buckets it made are gone at its end.
//! A cluster that cannot start fails every test with the cause.

mod accesses;
mod binary;
mod buckets;
mod common;
mod statics;
