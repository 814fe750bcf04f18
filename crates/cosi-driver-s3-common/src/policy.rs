//! What the S3 drivers' access policies share: the action granted with any
//! access, the write actions both drivers grant for object data and object
//! metadata, the bucket metadata read actions, and how a category's access
//! mode selects its read and write sets ([`ReadWrite`]).

use cosi_driver::proto::{AccessMode, AccessModes};

/// Granted with any access: SDKs and tools ask for a bucket's region before
/// using it, and the region is all it reveals.
pub const ALWAYS: &str = "s3:GetBucketLocation";

/// Object data, write: put (also multipart) and delete objects.
pub const OBJECT_DATA_WRITE: &[&str] = &[
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
];

/// Object metadata, write: tags, ACLs, retention and legal hold of objects.
pub const OBJECT_METADATA_WRITE: &[&str] = &[
    "s3:PutObjectTagging",
    "s3:PutObjectVersionTagging",
    "s3:DeleteObjectTagging",
    "s3:DeleteObjectVersionTagging",
    "s3:PutObjectAcl",
    "s3:PutObjectVersionAcl",
    "s3:PutObjectRetention",
    "s3:PutObjectLegalHold",
];

/// Bucket metadata, read, as every S3 store knows it: tags, policy,
/// versioning, ACL, CORS, lifecycle and Object Lock configuration.
pub const BUCKET_METADATA_READ: &[&str] = &[
    "s3:GetBucketTagging",
    "s3:GetBucketPolicy",
    "s3:GetBucketVersioning",
    "s3:GetBucketAcl",
    "s3:GetBucketCORS",
    "s3:GetLifecycleConfiguration",
    "s3:GetBucketObjectLockConfiguration",
];

/// The actions of `base` followed by `extra`, for a constant that adds a
/// store's own action to a shared set; `N` is one more than `base` holds.
pub const fn with_action<const N: usize>(
    base: &[&'static str],
    extra: &'static str,
) -> [&'static str; N] {
    assert!(base.len() + 1 == N, "N must be one more than base holds");
    let mut out = [extra; N];
    let mut i = 0;
    while i < base.len() {
        out[i] = base[i];
        i += 1;
    }
    out
}

/// Whether `mode` allows a category's read set and its write set:
/// `ReadWrite` both, `ReadOnly` the read set, `WriteOnly` the write set,
/// unspecified neither.
fn allows(mode: AccessMode) -> (bool, bool) {
    match mode {
        AccessMode::ReadWrite => (true, true),
        AccessMode::ReadOnly => (true, false),
        AccessMode::WriteOnly => (false, true),
        AccessMode::Unspecified => (false, false),
    }
}

/// One category's two sets (of actions, or of what a driver groups them
/// in): `ReadOnly` allows the read set, `WriteOnly` the write set,
/// `ReadWrite` both.
#[derive(Clone, Copy, Debug)]
pub struct ReadWrite<T> {
    /// The set `ReadOnly` and `ReadWrite` allow.
    pub read: T,
    /// The set `WriteOnly` and `ReadWrite` allow.
    pub write: T,
}

impl<T: Copy> ReadWrite<T> {
    /// The read set and the write set, each with whether `mode` allows it.
    pub fn by_mode(&self, mode: AccessMode) -> [(bool, T); 2] {
        let (read, write) = allows(mode);
        [(read, self.read), (write, self.write)]
    }
}

/// The modes of the three categories of `modes`, in the order object data,
/// object metadata, bucket metadata; a value that is no mode is unspecified.
pub fn category_modes(modes: &AccessModes) -> [AccessMode; 3] {
    let mode = |v: i32| AccessMode::try_from(v).unwrap_or(AccessMode::Unspecified);
    [
        mode(modes.object_data),
        mode(modes.object_metadata),
        mode(modes.bucket_metadata),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_allows_its_sets() {
        assert_eq!(allows(AccessMode::ReadWrite), (true, true));
        assert_eq!(allows(AccessMode::ReadOnly), (true, false));
        assert_eq!(allows(AccessMode::WriteOnly), (false, true));
        assert_eq!(allows(AccessMode::Unspecified), (false, false));
    }

    #[test]
    fn an_action_is_added_after_the_shared_set() {
        let all: [&str; 3] = with_action(&["s3:A", "s3:B"], "s3:C");
        assert_eq!(all, ["s3:A", "s3:B", "s3:C"]);
    }

    #[test]
    fn a_mode_selects_its_sets() {
        let sets = ReadWrite {
            read: "read",
            write: "write",
        };
        assert_eq!(
            sets.by_mode(AccessMode::WriteOnly),
            [(false, "read"), (true, "write")]
        );
    }

    #[test]
    fn categories_come_in_order_and_unknown_values_are_unspecified() {
        let modes = AccessModes {
            object_data: AccessMode::ReadOnly as i32,
            object_metadata: 99,
            bucket_metadata: AccessMode::WriteOnly as i32,
        };
        assert_eq!(
            category_modes(&modes),
            [
                AccessMode::ReadOnly,
                AccessMode::Unspecified,
                AccessMode::WriteOnly
            ]
        );
    }
}
