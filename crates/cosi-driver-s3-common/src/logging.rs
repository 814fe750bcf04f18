//! The logging of an S3 driver binary: `RUST_LOG` (default `info`) to
//! stderr as text or JSON, with the AWS SDK's credential-bearing tracing
//! capped.

use clap::ValueEnum;

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

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
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    for directive in CREDENTIAL_SAFE_DIRECTIVES {
        if let Ok(d) = directive.parse() {
            filter = filter.add_directive(d);
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
