//! The logging of an S3 driver binary: `cosi_driver::logging` (`RUST_LOG`,
//! default `info`, to stderr as text or JSON) with the AWS SDK's
//! credential-bearing tracing capped.

pub use cosi_driver::logging::LogFormat;

/// The AWS SDK's request tracing (debug and below) prints the resolved
/// identity, signing input and parsed responses (IAM's hold access key
/// IDs): it is capped at `info` whatever RUST_LOG asks.
pub const CREDENTIAL_SAFE_DIRECTIVES: [&str; 4] = [
    "aws_smithy_runtime=info",
    "aws_smithy_runtime::client::orchestrator=info",
    "aws_sigv4=info",
    "aws_sigv4::http_request=info",
];

/// Installs the global subscriber: `RUST_LOG` (default `info`) plus
/// [`CREDENTIAL_SAFE_DIRECTIVES`], to stderr in `format`.
pub fn init(format: LogFormat) {
    cosi_driver::logging::init(format, &CREDENTIAL_SAFE_DIRECTIVES);
}
