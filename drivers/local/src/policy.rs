//! Authorization of S3 requests: which access category and direction each
//! S3 operation needs, and whether a grant allows it. Pure decisions, applied
//! by the S3 endpoint's access check.
//!
//! | category        | read                                                              | write |
//! |-----------------|-------------------------------------------------------------------|-------|
//! | object data     | GetObject, HeadObject, ListObjects(V2), ListParts, ListMultipartUploads | PutObject, CopyObject, DeleteObject(s), Create/Complete/AbortMultipartUpload, UploadPart(Copy) |
//! | object metadata | GetObjectTagging, GetObjectAcl, GetObjectAttributes                | PutObjectTagging, DeleteObjectTagging |
//! | bucket metadata | GetBucketTagging, GetBucketVersioning, GetBucketAcl, GetBucketPolicy | PutBucketTagging, DeleteBucketTagging |
//!
//! HeadBucket and GetBucketLocation need any grant on the bucket (clients
//! such as s3cmd ask for the location before anything else, and AWS
//! policies that grant objects grant `s3:GetBucketLocation` with them);
//! ListBuckets needs a valid key and lists only granted buckets.
//! CreateBucket and DeleteBucket never act (buckets are managed through
//! COSI), but CreateBucket of a bucket the key may access answers as AWS
//! answers its owner, 409 `BucketAlreadyOwnedByYou`: `aws s3 mb` and
//! rclone create their bucket first and take that answer as success.

use serde::{Deserialize, Serialize};

/// A read/write mode for one category, as stored in a grant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Not granted.
    #[default]
    None,
    /// Read and write.
    ReadWrite,
    /// Read only.
    ReadOnly,
    /// Write only.
    WriteOnly,
}

impl Mode {
    /// True when the mode allows `direction`.
    pub fn allows(self, direction: Direction) -> bool {
        match direction {
            Direction::Read => matches!(self, Mode::ReadWrite | Mode::ReadOnly),
            Direction::Write => matches!(self, Mode::ReadWrite | Mode::WriteOnly),
        }
    }

    /// The mode's name as in the Kubernetes API.
    pub fn name(self) -> &'static str {
        match self {
            Mode::None => "unspecified",
            Mode::ReadWrite => "ReadWrite",
            Mode::ReadOnly => "ReadOnly",
            Mode::WriteOnly => "WriteOnly",
        }
    }
}

/// The modes granted on one bucket, per category.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Modes {
    /// Objects' contents and existence.
    pub object_data: Mode,
    /// Objects' tags, ACLs and attributes.
    pub object_metadata: Mode,
    /// The bucket's own tags, policy, versioning, location, ACL.
    pub bucket_metadata: Mode,
}

impl Modes {
    /// The mode granted for `category`.
    pub fn of(&self, category: Category) -> Mode {
        match category {
            Category::ObjectData => self.object_data,
            Category::ObjectMetadata => self.object_metadata,
            Category::BucketMetadata => self.bucket_metadata,
        }
    }
}

/// An access category of COSI access modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// Reading/writing objects.
    ObjectData,
    /// Reading/writing metadata on objects.
    ObjectMetadata,
    /// Reading/writing metadata on the bucket.
    BucketMetadata,
}

impl Category {
    fn name(self) -> &'static str {
        match self {
            Category::ObjectData => "objectData",
            Category::ObjectMetadata => "objectMetadata",
            Category::BucketMetadata => "bucketMetadata",
        }
    }
}

/// Reading or writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Reading.
    Read,
    /// Writing.
    Write,
}

/// What an S3 operation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// `direction` access in `category` on the request's bucket.
    Access(Category, Direction),
    /// Any grant on the request's bucket.
    AnyGrant,
    /// Only a valid key (ListBuckets).
    Authenticated,
    /// Never allowed: buckets are created and deleted through COSI.
    Managed,
    /// CreateBucket: never creates; a bucket the key may access already
    /// exists and is the key's, anything else is denied.
    Create,
    /// Not served by this endpoint.
    Unsupported,
}

/// What each S3 operation needs, by its name.
pub fn need(operation: &str) -> Need {
    use Category::*;
    use Direction::*;
    match operation {
        "GetObject"
        | "HeadObject"
        | "ListObjects"
        | "ListObjectsV2"
        | "ListParts"
        | "ListMultipartUploads" => Need::Access(ObjectData, Read),
        "PutObject"
        | "CopyObject"
        | "DeleteObject"
        | "DeleteObjects"
        | "CreateMultipartUpload"
        | "UploadPart"
        | "UploadPartCopy"
        | "CompleteMultipartUpload"
        | "AbortMultipartUpload" => Need::Access(ObjectData, Write),
        "GetObjectTagging" | "GetObjectAcl" | "GetObjectAttributes" => {
            Need::Access(ObjectMetadata, Read)
        }
        "PutObjectTagging" | "DeleteObjectTagging" => Need::Access(ObjectMetadata, Write),
        "GetBucketTagging" | "GetBucketVersioning" | "GetBucketAcl" | "GetBucketPolicy" => {
            Need::Access(BucketMetadata, Read)
        }
        "PutBucketTagging" | "DeleteBucketTagging" => Need::Access(BucketMetadata, Write),
        "HeadBucket" | "GetBucketLocation" => Need::AnyGrant,
        "ListBuckets" => Need::Authenticated,
        "CreateBucket" => Need::Create,
        "DeleteBucket" => Need::Managed,
        _ => Need::Unsupported,
    }
}

/// The outcome of an access check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Go ahead.
    Allow,
    /// `AccessDenied`, with a message for the client.
    Deny(String),
    /// `NotImplemented`, with a message for the client.
    NotImplemented(String),
    /// `BucketAlreadyOwnedByYou` (409), with a message for the client.
    AlreadyOwned(String),
}

/// Decides whether `operation` on `bucket` (none for the service root) is
/// allowed to a key whose grant on that bucket is `grant`.
pub fn decide(operation: &str, bucket: Option<&str>, grant: Option<&Modes>) -> Decision {
    let need = need(operation);
    match (need, bucket) {
        (Need::Unsupported, _) => {
            Decision::NotImplemented(format!("cosi-driver-local does not support {operation}"))
        }
        (Need::Managed, _) => Decision::Deny(format!(
            "{operation} is not allowed: buckets are created and deleted through COSI (BucketClaim)"
        )),
        (Need::Authenticated, _) => Decision::Allow,
        (_, None) => Decision::Deny(format!("{operation} needs a bucket")),
        (Need::Create, Some(bucket)) => match grant {
            Some(_) => Decision::AlreadyOwned(format!(
                "bucket {bucket} already exists and this key may access it"
            )),
            None => Decision::Deny(format!(
                "{operation} is not allowed: buckets are created and deleted through COSI (BucketClaim)"
            )),
        },
        (_, Some(bucket)) => match (need, grant) {
            (Need::Access(category, direction), _) => {
                check_access(operation, bucket, grant, category, direction)
            }
            (_, Some(_)) => Decision::Allow,
            (_, None) => no_access(bucket),
        },
    }
}

fn no_access(bucket: &str) -> Decision {
    Decision::Deny(format!("this key has no access to bucket {bucket}"))
}

/// Decides whether a key whose grant on `bucket` is `grant` may do
/// `operation`, which needs `direction` access in `category`.
pub fn check_access(
    operation: &str,
    bucket: &str,
    grant: Option<&Modes>,
    category: Category,
    direction: Direction,
) -> Decision {
    let Some(modes) = grant else {
        return no_access(bucket);
    };
    let mode = modes.of(category);
    if mode.allows(direction) {
        return Decision::Allow;
    }
    Decision::Deny(format!(
        "{operation} needs {} {} access to bucket {bucket}; this key has {}",
        category.name(),
        match direction {
            Direction::Read => "read",
            Direction::Write => "write",
        },
        mode.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modes(d: Mode, om: Mode, bm: Mode) -> Modes {
        Modes {
            object_data: d,
            object_metadata: om,
            bucket_metadata: bm,
        }
    }

    /// The decision on `op` on bucket `b` for a key granted `m` on it.
    fn decide_b(op: &str, m: &Modes) -> Decision {
        decide(op, Some("b"), Some(m))
    }

    fn allowed(op: &str, m: &Modes) -> bool {
        decide_b(op, m) == Decision::Allow
    }

    /// Asserts that a key granted `m` may do each of `ops` when `allow`,
    /// else may do none of them.
    fn assert_allows(m: &Modes, ops: &[&str], allow: bool) {
        for op in ops {
            assert_eq!(allowed(op, m), allow, "{op}");
        }
    }

    #[test]
    fn read_write_object_data_reads_and_writes_objects_only() {
        let m = modes(Mode::ReadWrite, Mode::None, Mode::None);
        let objects = [
            "GetObject",
            "PutObject",
            "ListObjectsV2",
            "DeleteObject",
            "HeadObject",
            "UploadPart",
        ];
        assert_allows(&m, &objects, true);
        let metadata = ["GetObjectTagging", "PutObjectTagging", "GetBucketTagging"];
        assert_allows(&m, &metadata, false);
    }

    #[test]
    fn read_only_cannot_write_and_write_only_cannot_read() {
        let ro = modes(Mode::ReadOnly, Mode::ReadOnly, Mode::ReadOnly);
        let wo = modes(Mode::WriteOnly, Mode::WriteOnly, Mode::WriteOnly);
        let writes = [
            "PutObject",
            "DeleteObjects",
            "CompleteMultipartUpload",
            "PutObjectTagging",
            "PutBucketTagging",
        ];
        let reads = [
            "GetObject",
            "ListObjects",
            "GetObjectTagging",
            "GetBucketVersioning",
        ];
        // (operations, allowed read-only, allowed write-only)
        for (ops, read_only, write_only) in [(&writes[..], false, true), (&reads[..], true, false)]
        {
            assert_allows(&ro, ops, read_only);
            assert_allows(&wo, ops, write_only);
        }
    }

    #[test]
    fn head_bucket_needs_any_grant_and_list_buckets_only_a_key() {
        let m = modes(Mode::None, Mode::ReadOnly, Mode::None);
        assert!(allowed("HeadBucket", &m));
        assert_eq!(decide("ListBuckets", None, None), Decision::Allow);
    }

    #[test]
    fn any_grant_may_ask_for_the_bucket_location() {
        for m in [
            modes(Mode::ReadWrite, Mode::None, Mode::None),
            modes(Mode::WriteOnly, Mode::None, Mode::None),
            modes(Mode::None, Mode::ReadOnly, Mode::None),
            modes(Mode::None, Mode::None, Mode::WriteOnly),
        ] {
            assert!(allowed("GetBucketLocation", &m), "{m:?}");
        }
        assert_eq!(
            decide("GetBucketLocation", Some("other"), None),
            Decision::Deny("this key has no access to bucket other".into())
        );
    }

    #[test]
    fn buckets_without_a_grant_are_denied() {
        let d = decide("GetObject", Some("other"), None);
        assert_eq!(
            d,
            Decision::Deny("this key has no access to bucket other".into())
        );
        assert!(matches!(
            decide("HeadBucket", Some("other"), None),
            Decision::Deny(_)
        ));
    }

    #[test]
    fn bucket_lifecycle_is_managed_through_cosi() {
        let all = modes(Mode::ReadWrite, Mode::ReadWrite, Mode::ReadWrite);
        assert!(
            matches!(decide("CreateBucket", Some("other"), None), Decision::Deny(m) if m.contains("COSI"))
        );
        assert!(matches!(decide_b("DeleteBucket", &all), Decision::Deny(_)));
    }

    #[test]
    fn creating_a_bucket_the_key_may_access_finds_it_already_owned() {
        let read_only = modes(Mode::ReadOnly, Mode::None, Mode::None);
        assert_eq!(
            decide_b("CreateBucket", &read_only),
            Decision::AlreadyOwned("bucket b already exists and this key may access it".into())
        );
    }

    #[test]
    fn unknown_operations_are_not_implemented() {
        let all = modes(Mode::ReadWrite, Mode::ReadWrite, Mode::ReadWrite);
        assert!(matches!(
            decide_b("PutBucketLifecycleConfiguration", &all),
            Decision::NotImplemented(_)
        ));
    }

    #[test]
    fn denial_messages_say_what_is_missing() {
        let m = modes(Mode::ReadOnly, Mode::None, Mode::None);
        let Decision::Deny(msg) = decide_b("PutObject", &m) else {
            panic!("must deny")
        };
        assert_eq!(
            msg,
            "PutObject needs objectData write access to bucket b; this key has ReadOnly"
        );
    }
}
