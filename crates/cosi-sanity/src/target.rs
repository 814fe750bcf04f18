//! One bucket reached with one set of granted credentials, whatever the
//! protocol: the data-plane cases write, read and delete through it.

use crate::azure::AzureTarget;
use crate::s3::{Access, S3Target};

/// An S3 client or an Azure SAS client for one bucket.
#[derive(Clone, Debug)]
pub enum Target {
    /// S3 credentials.
    S3(S3Target),
    /// An Azure SAS URL.
    Azure(AzureTarget),
}

impl Target {
    /// The bucket (or container) this target writes to.
    pub fn bucket(&self) -> &str {
        match self {
            Target::S3(t) => t.bucket(),
            Target::Azure(t) => t.bucket(),
        }
    }

    /// Writes `body` at `key`.
    pub async fn put(&self, key: &str, body: &[u8]) -> Access<()> {
        match self {
            Target::S3(t) => t.put(key, body).await,
            Target::Azure(t) => t.put(key, body).await,
        }
    }

    /// Reads the object at `key`.
    pub async fn get(&self, key: &str) -> Access<Vec<u8>> {
        match self {
            Target::S3(t) => t.get(key).await,
            Target::Azure(t) => t.get(key).await,
        }
    }

    /// Deletes the object at `key`.
    pub async fn delete(&self, key: &str) -> Access<()> {
        match self {
            Target::S3(t) => t.delete(key).await,
            Target::Azure(t) => t.delete(key).await,
        }
    }
}
