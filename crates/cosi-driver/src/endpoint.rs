//! The driver endpoint: `COSI_ENDPOINT=unix:///path/to/name.sock`. Only UNIX
//! domain sockets are supported, as the COSI driver specification requires.

use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming the driver's endpoint.
pub const ENDPOINT_ENV: &str = "COSI_ENDPOINT";

/// A parsed driver endpoint: the absolute path of a UNIX socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    path: PathBuf,
}

/// Why an endpoint string was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EndpointError {
    /// The endpoint was empty or unset.
    #[error("the driver endpoint is empty: set {ENDPOINT_ENV}=unix:///path/to/driver.sock")]
    Empty,
    /// The scheme was not `unix://`.
    #[error("driver endpoint {0:?} is not a UNIX socket: use unix:///absolute/path.sock")]
    NotUnix(String),
    /// The path was relative or empty.
    #[error(
        "driver endpoint {0:?} must name an absolute socket path, e.g. unix:///var/lib/cosi/cosi.sock"
    )]
    NotAbsolute(String),
}

impl Endpoint {
    /// Parses `unix:///absolute/path.sock` (also accepted: `unix:/absolute/path.sock`).
    pub fn parse(s: &str) -> Result<Self, EndpointError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(EndpointError::Empty);
        }
        let rest = s
            .strip_prefix("unix://")
            .or_else(|| s.strip_prefix("unix:"))
            .ok_or_else(|| EndpointError::NotUnix(s.to_owned()))?;
        let path = Path::new(rest);
        if !path.is_absolute() || path.file_name().is_none() {
            return Err(EndpointError::NotAbsolute(s.to_owned()));
        }
        Ok(Self {
            path: path.to_owned(),
        })
    }

    /// Reads and parses `COSI_ENDPOINT`.
    pub fn from_env() -> Result<Self, EndpointError> {
        Self::parse(&std::env::var(ENDPOINT_ENV).unwrap_or_default())
    }

    /// An endpoint for a socket path.
    pub fn from_path(path: impl Into<PathBuf>) -> Result<Self, EndpointError> {
        let path = path.into();
        Self::parse(&format!("unix://{}", path.display()))
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unix://{}", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_unix_urls_with_absolute_paths() {
        let e = Endpoint::parse("unix:///var/lib/cosi/cosi.sock").unwrap();
        assert_eq!(e.path(), Path::new("/var/lib/cosi/cosi.sock"));
        assert_eq!(e.to_string(), "unix:///var/lib/cosi/cosi.sock");
        assert_eq!(
            Endpoint::parse("unix:/tmp/d.sock").unwrap().path(),
            Path::new("/tmp/d.sock")
        );
    }

    #[test]
    fn refuses_other_schemes_and_relative_paths() {
        assert_eq!(Endpoint::parse(""), Err(EndpointError::Empty));
        for text in ["tcp://127.0.0.1:1", "/tmp/x.sock"] {
            let parsed = Endpoint::parse(text);
            assert!(matches!(parsed, Err(EndpointError::NotUnix(_))), "{text}");
        }
        for text in ["unix://relative.sock", "unix:///"] {
            let parsed = Endpoint::parse(text);
            assert!(
                matches!(parsed, Err(EndpointError::NotAbsolute(_))),
                "{text}"
            );
        }
    }
}
