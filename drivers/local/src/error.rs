//! The library's error type.

use std::io;
use std::path::PathBuf;

use crate::store::StoreError;

/// Why the driver could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The state store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A file-system or socket operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path or address.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The gRPC server failed.
    #[error(transparent)]
    Serve(#[from] cosi_driver::ServeError),
}

impl Error {
    pub(crate) fn io(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| Error::Io { what, path, source }
    }
}
