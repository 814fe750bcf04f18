//! Log set-up for the in-process stack: every component logs through one
//! subscriber on stderr, filtered by `RUST_LOG` or the given level, always
//! with the local driver's secret-safe directive (the S3 protocol library
//! would otherwise log request signatures).

use tracing_subscriber::EnvFilter;

use crate::progress::LogWriter;

/// The filter: `RUST_LOG` when set, else `level`, plus the secret-safe
/// directive, which no setting can override.
pub fn filter(rust_log: Option<&str>, level: &str) -> EnvFilter {
    let base = rust_log
        .filter(|s| !s.trim().is_empty())
        .and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| EnvFilter::new(level));
    base.add_directive(
        cosi_driver_local::SECRET_SAFE_LOG_DIRECTIVE
            .parse()
            .expect("the secret-safe directive is valid"),
    )
}

/// Installs the global subscriber (a second call is a no-op): `level`
/// (`warn`, `info`, ...) unless `RUST_LOG` says otherwise. Colours only
/// when stderr is a terminal, so piped or redirected logs stay plain text.
pub fn init(level: &str) {
    use std::io::IsTerminal as _;
    let rust_log = std::env::var("RUST_LOG").ok();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(rust_log.as_deref(), level))
        .with_writer(LogWriter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(true)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_uses_the_level_when_rust_log_is_unset_or_empty() {
        assert_eq!(filter(None, "warn").to_string(), "s3s=off,warn");
        assert_eq!(filter(Some(" "), "info").to_string(), "s3s=off,info");
    }

    #[test]
    fn s3_protocol_logs_stay_off_whatever_rust_log_says() {
        let f = filter(Some("debug,s3s=trace"), "warn").to_string();
        assert!(f.contains("s3s=off"), "{f}");
        assert!(!f.contains("s3s=trace"), "{f}");
    }
}
