//! Access modes → IAM actions, and the inline policy of an access's user.
//!
//! Each of the three COSI access categories maps to a set of read actions
//! and a set of write actions; `ReadWrite` grants both, `ReadOnly` only the
//! read set, `WriteOnly` only the write set, unspecified none. Bucket-level
//! actions apply to `arn:<partition>:s3:::<bucket>`, object-level actions to
//! `arn:<partition>:s3:::<bucket>/*`. Buckets with identical action sets
//! share a statement, so one policy covers many buckets compactly.

use std::collections::{BTreeMap, BTreeSet};

use cosi_driver::proto::{AccessMode, AccessModes};
use cosi_driver_s3_common::policy as common;
use serde::Serialize;
use serde_json::Value;

/// Actions of one mode of one category.
#[derive(Clone, Copy, Debug)]
pub struct Actions {
    /// Actions on the bucket resource.
    pub bucket: &'static [&'static str],
    /// Actions on the objects of the bucket.
    pub object: &'static [&'static str],
}

pub use cosi_driver_s3_common::policy::ALWAYS;

/// Object data, read: get and list objects, versions and uploads.
pub const OBJECT_DATA_READ: Actions = Actions {
    bucket: &[
        "s3:ListBucket",
        "s3:ListBucketVersions",
        "s3:ListBucketMultipartUploads",
    ],
    object: &["s3:GetObject", "s3:GetObjectVersion"],
};
/// Object data, write: put (including multipart) and delete objects.
pub const OBJECT_DATA_WRITE: Actions = Actions {
    bucket: &[],
    object: common::OBJECT_DATA_WRITE,
};
/// Object metadata, read: tags, ACLs, attributes, retention and legal hold.
pub const OBJECT_METADATA_READ: Actions = Actions {
    bucket: &[],
    object: &[
        "s3:GetObjectTagging",
        "s3:GetObjectVersionTagging",
        "s3:GetObjectAcl",
        "s3:GetObjectVersionAcl",
        "s3:GetObjectAttributes",
        "s3:GetObjectRetention",
        "s3:GetObjectLegalHold",
    ],
};
/// Object metadata, write: tags, ACLs, retention and legal hold.
pub const OBJECT_METADATA_WRITE: Actions = Actions {
    bucket: &[],
    object: common::OBJECT_METADATA_WRITE,
};
/// Bucket metadata, read: tags, policy, versioning, ACL, CORS, lifecycle,
/// object lock and encryption configuration.
pub const BUCKET_METADATA_READ: Actions = Actions {
    bucket: &common::with_action::<8>(
        common::BUCKET_METADATA_READ,
        "s3:GetEncryptionConfiguration",
    ),
    object: &[],
};
/// Bucket metadata, write: the same configurations, set or deleted.
pub const BUCKET_METADATA_WRITE: Actions = Actions {
    bucket: &[
        "s3:PutBucketTagging",
        "s3:PutBucketPolicy",
        "s3:DeleteBucketPolicy",
        "s3:PutBucketVersioning",
        "s3:PutBucketAcl",
        "s3:PutBucketCORS",
        "s3:PutLifecycleConfiguration",
        "s3:PutBucketObjectLockConfiguration",
        "s3:PutEncryptionConfiguration",
    ],
    object: &[],
};

/// The action sets a mode grants for a category's read and write sets.
fn for_mode(mode: AccessMode, read: Actions, write: Actions) -> Vec<Actions> {
    common::ReadWrite { read, write }
        .by_mode(mode)
        .into_iter()
        .filter_map(|(allowed, actions)| allowed.then_some(actions))
        .collect()
}

/// The bucket-level and object-level actions `modes` grant on one bucket.
pub fn actions_for(modes: &AccessModes) -> (BTreeSet<&'static str>, BTreeSet<&'static str>) {
    let [object_data, object_metadata, bucket_metadata] = common::category_modes(modes);
    let sets = [
        for_mode(object_data, OBJECT_DATA_READ, OBJECT_DATA_WRITE),
        for_mode(object_metadata, OBJECT_METADATA_READ, OBJECT_METADATA_WRITE),
        for_mode(bucket_metadata, BUCKET_METADATA_READ, BUCKET_METADATA_WRITE),
    ];
    let mut bucket = BTreeSet::new();
    let mut object = BTreeSet::new();
    for a in sets.iter().flatten() {
        bucket.extend(a.bucket.iter().copied());
        object.extend(a.object.iter().copied());
    }
    if !bucket.is_empty() || !object.is_empty() {
        bucket.insert(ALWAYS);
    }
    (bucket, object)
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Document {
    version: &'static str,
    statement: Vec<Statement>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Statement {
    effect: &'static str,
    action: Vec<&'static str>,
    resource: Vec<String>,
}

/// The compact JSON policy document granting each `(bucket name, modes)`.
/// `None` when nothing is granted.
pub fn document(partition: &str, grants: &[(String, AccessModes)]) -> Option<String> {
    let mut by_bucket_actions: BTreeMap<Vec<&'static str>, BTreeSet<String>> = BTreeMap::new();
    let mut by_object_actions: BTreeMap<Vec<&'static str>, BTreeSet<String>> = BTreeMap::new();
    for (bucket, modes) in grants {
        let (b, o) = actions_for(modes);
        if !b.is_empty() {
            by_bucket_actions
                .entry(b.into_iter().collect())
                .or_default()
                .insert(format!("arn:{partition}:s3:::{bucket}"));
        }
        if !o.is_empty() {
            by_object_actions
                .entry(o.into_iter().collect())
                .or_default()
                .insert(format!("arn:{partition}:s3:::{bucket}/*"));
        }
    }
    let statement: Vec<Statement> = by_bucket_actions
        .into_iter()
        .chain(by_object_actions)
        .map(|(action, resources)| Statement {
            effect: "Allow",
            action,
            resource: resources.into_iter().collect(),
        })
        .collect();
    if statement.is_empty() {
        return None;
    }
    let doc = Document {
        version: "2012-10-17",
        statement,
    };
    Some(serde_json::to_string(&doc).expect("a policy document always serializes"))
}

/// The buckets a policy [`document`] grants something on, read back as
/// IAM GetUserPolicy returns it (URL-encoded, or plain as some stores
/// send it); `None` when it is no policy document.
pub fn buckets(doc: &str) -> Option<BTreeSet<String>> {
    let plain = if doc.trim_start().starts_with('{') {
        doc.to_owned()
    } else {
        percent_encoding::percent_decode_str(doc)
            .decode_utf8()
            .ok()?
            .into_owned()
    };
    let parsed: Value = serde_json::from_str(&plain).ok()?;
    let statements = match parsed.get("Statement")? {
        Value::Array(list) => list.clone(),
        one @ Value::Object(_) => vec![one.clone()],
        _ => return None,
    };
    let resources = statements.iter().flat_map(|s| match s.get("Resource") {
        Some(Value::Array(list)) => list.clone(),
        Some(one @ Value::String(_)) => vec![one.clone()],
        _ => Vec::new(),
    });
    Some(
        resources
            .filter_map(|r| {
                let (_, path) = r.as_str()?.split_once(":s3:::")?;
                path.split('/').next().map(str::to_owned)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::access_modes as modes;

    const U: AccessMode = AccessMode::Unspecified;

    /// `mode` in every category.
    fn modes_all(mode: AccessMode) -> AccessModes {
        modes(mode, mode, mode)
    }

    #[test]
    fn read_only_grants_no_write_action() {
        let (b, o) = actions_for(&modes_all(AccessMode::ReadOnly));
        assert!(o.contains("s3:GetObject") && b.contains("s3:ListBucket"));
        let writes = ["Put", "Delete", "Abort"];
        for a in b.iter().chain(&o) {
            assert!(
                !writes.iter().any(|w| a.contains(w)),
                "{a} is a write action"
            );
        }
    }

    #[test]
    fn write_only_grants_no_read_action_but_the_bucket_location() {
        let (b, o) = actions_for(&modes_all(AccessMode::WriteOnly));
        assert!(o.contains("s3:PutObject") && b.contains("s3:PutBucketTagging"));
        for a in b.iter().chain(&o).filter(|a| **a != ALWAYS) {
            assert!(
                !a.contains("Get") && !a.contains("s3:ListBucket"),
                "{a} is a read action"
            );
        }
    }

    #[test]
    fn unspecified_categories_grant_nothing() {
        let (b, o) = actions_for(&modes(AccessMode::ReadWrite, U, U));
        assert!(!o.contains("s3:GetObjectTagging"));
        assert!(!b.contains("s3:GetBucketPolicy"));
        assert_eq!(
            actions_for(&modes(U, U, U)),
            (BTreeSet::new(), BTreeSet::new())
        );
        assert!(document("aws", &[("b".into(), modes(U, U, U))]).is_none());
    }

    #[test]
    fn buckets_with_the_same_modes_share_statements() {
        let rw = modes(AccessMode::ReadWrite, U, U);
        let doc = document("aws", &[("bkt-a".into(), rw), ("bkt-b".into(), rw)]).unwrap();
        let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        let statements = v["Statement"].as_array().unwrap();
        assert_eq!(statements.len(), 2, "{doc}");
        assert_eq!(
            statements[0]["Resource"],
            serde_json::json!(["arn:aws:s3:::bkt-a", "arn:aws:s3:::bkt-b"])
        );
        assert_eq!(
            statements[1]["Resource"],
            serde_json::json!(["arn:aws:s3:::bkt-a/*", "arn:aws:s3:::bkt-b/*"])
        );
    }

    #[test]
    fn different_modes_get_separate_statements() {
        let doc = document(
            "aws-cn",
            &[
                ("bkt-a".into(), modes(AccessMode::ReadWrite, U, U)),
                ("bkt-b".into(), modes(AccessMode::ReadOnly, U, U)),
            ],
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(v["Statement"].as_array().unwrap().len(), 3, "{doc}");
        assert!(doc.contains("arn:aws-cn:s3:::bkt-b/*"));
    }

    #[test]
    fn the_buckets_of_a_policy_are_read_back_plain_or_url_encoded() {
        let doc = document(
            "aws",
            &[
                ("bkt-a".into(), modes(AccessMode::ReadWrite, U, U)),
                ("bkt-b".into(), modes(AccessMode::ReadOnly, U, U)),
            ],
        )
        .unwrap();
        let both = BTreeSet::from(["bkt-a".to_owned(), "bkt-b".to_owned()]);
        assert_eq!(buckets(&doc), Some(both.clone()));
        let encoded: String =
            percent_encoding::utf8_percent_encode(&doc, percent_encoding::NON_ALPHANUMERIC)
                .collect();
        assert_eq!(buckets(&encoded), Some(both));
        assert_eq!(buckets("not a policy"), None);
        assert_eq!(buckets("{\"Statement\": 1}"), None);
    }

    #[test]
    fn a_full_access_to_several_buckets_fits_the_aws_inline_policy_limit() {
        let rw = modes(
            AccessMode::ReadWrite,
            AccessMode::ReadWrite,
            AccessMode::ReadWrite,
        );
        let bucket = |i: usize| format!("bc-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f6{i}");
        let one = document("aws", &[(bucket(0), rw)]).unwrap();
        let three: Vec<_> = (0..3).map(|i| (bucket(i), rw)).collect();
        let three = document("aws", &three).unwrap();
        println!(
            "full access policy: 1 bucket {} chars, 3 buckets {} chars",
            one.len(),
            three.len()
        );
        assert!(
            three.len() <= crate::config::AWS_INLINE_POLICY_LIMIT,
            "{}",
            three.len()
        );
    }
}
