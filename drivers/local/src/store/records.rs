//! The records kept in the store.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::params::BucketParams;
use crate::policy::Modes;

/// Where a bucket is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BucketState {
    /// Recorded by an earlier version of this driver, which made the
    /// directory before marking the bucket ready; a repeated
    /// DriverCreateBucket makes it `Ready`. Not served.
    Creating,
    /// Served. Its directory is made by its first object write.
    Ready,
    /// Being deleted; not served.
    Deleting,
}

/// A bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketRecord {
    /// The bucket ID, also its S3 name and directory name.
    pub id: String,
    /// Life-cycle state.
    pub state: BucketState,
    /// Settings from BucketClass parameters.
    pub params: BucketParams,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// Bytes of object data stored.
    pub used_bytes: u64,
    /// Bytes of multipart parts uploaded and not yet completed or aborted.
    /// They count against the quota with `used_bytes`. Records written
    /// before they were counted have none; opening the driver recounts.
    #[serde(default)]
    pub pending_bytes: u64,
    /// Bucket tags.
    #[serde(default)]
    pub tags: Vec<(String, String)>,
}

/// An account: one key pair and its grants.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountRecord {
    /// The account ID.
    pub id: String,
    /// The S3 access key ID.
    pub access_key_id: String,
    /// The S3 secret access key.
    pub secret_access_key: String,
    /// Bucket ID → granted modes.
    pub grants: BTreeMap<String, Modes>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

impl fmt::Debug for AccountRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccountRecord")
            .field("id", &self.id)
            .field("access_key_id", &"<redacted>")
            .field("secret_access_key", &"<redacted>")
            .field("grants", &self.grants)
            .finish()
    }
}

/// Attributes stored with an object, set when it is written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectAttrs {
    /// Content-Type.
    pub content_type: Option<String>,
    /// Content-Encoding.
    pub content_encoding: Option<String>,
    /// Content-Disposition.
    pub content_disposition: Option<String>,
    /// Content-Language.
    pub content_language: Option<String>,
    /// Cache-Control.
    pub cache_control: Option<String>,
    /// User metadata (`x-amz-meta-*`).
    pub metadata: BTreeMap<String, String>,
    /// Object tags.
    pub tags: Vec<(String, String)>,
}

/// An object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRecord {
    /// Blob file name within the bucket directory.
    pub blob: String,
    /// Size in bytes.
    pub size: u64,
    /// ETag without quotes.
    pub etag: String,
    /// Last-Modified, milliseconds since the Unix epoch.
    pub last_modified_ms: i64,
    /// Attributes.
    pub attrs: ObjectAttrs,
}

/// A multipart upload in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadRecord {
    /// Object key.
    pub key: String,
    /// The account that started it.
    pub account_id: String,
    /// Start time, milliseconds since the Unix epoch.
    pub initiated_ms: i64,
    /// Attributes of the object to be.
    pub attrs: ObjectAttrs,
}

/// An uploaded part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRecord {
    /// Blob file name within the bucket directory.
    pub blob: String,
    /// Size in bytes.
    pub size: u64,
    /// MD5 of the part, hex.
    pub md5_hex: String,
    /// Upload time, milliseconds since the Unix epoch.
    pub last_modified_ms: i64,
}
