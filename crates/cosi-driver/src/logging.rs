//! The logging of a driver binary (feature `logging`): `RUST_LOG` (default
//! `info`) to stderr as text or JSON, plus directives a driver adds to cap
//! libraries whose tracing would print credentials.

use clap::ValueEnum;

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber: `RUST_LOG` (default `info`) plus
/// `directives` (which win over it), to stderr in `format`.
pub fn init(format: LogFormat, directives: &[&str]) {
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    for directive in directives {
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
