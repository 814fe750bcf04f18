//! The driver against a real moto server (S3 and IAM, authentication and
//! IAM policies enforced), through real gRPC over a UNIX socket, with a real
//! S3 client on the data path. One shared moto server serves most tests,
//! each with its own buckets and IAM user path; the TLS tests and the
//! conformance run start their own, the latter so it can check that it
//! leaves the whole store empty.

mod accesses;
mod binary;
mod buckets;
mod common;
mod errors;
mod sanity;
mod tls;
