//! The driver against a real moto server (S3 and IAM, authentication and
//! IAM policies enforced), through real gRPC over a UNIX socket, with a real
//! S3 client on the data path. One moto server serves the whole binary;
//! every test uses its own buckets and IAM user path.

mod accesses;
mod binary;
mod buckets;
mod common;
mod errors;
mod tls;
