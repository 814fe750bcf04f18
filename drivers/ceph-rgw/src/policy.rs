//! Access modes → bucket policy statements, and the edit of one account's
//! statements in a bucket's policy.
//!
//! A bucket's policy is the only place RGW (Pacific) lets the driver say
//! what another user may do in a bucket, and it is one document that
//! PutBucketPolicy replaces whole. So every access owns its own statements,
//! found by their `Sid`: `<uid>` for what it may do and `<uid>.deny` for
//! what it must not (RGW user IDs this driver makes never hold a `.`, see
//! [`crate::names`]). A grant or revoke edits only those statements and
//! keeps every other statement, ours or not, in place; the caller
//! serializes the read-modify-write per bucket ([`cosi_driver::locks`]).
//!
//! Each of the KEP's three categories (object data, object metadata,
//! bucket metadata) has a read set and a write set of S3 actions.
//! `ReadWrite` allows both, `ReadOnly` the read set, `WriteOnly` the write
//! set, unspecified neither. RGW gives the owner of an object every right
//! on it whatever the bucket policy says, and a key owns what it writes:
//! a WriteOnly key could read back its objects, a key with ReadOnly object
//! metadata could retag them. So every action of the three categories
//! that the modes do not allow is denied explicitly; an explicit Deny
//! wins over ownership.

use std::collections::BTreeSet;

use cosi_driver::proto::AccessModes;
use cosi_driver_s3_common::policy as common;
use serde_json::{Value, json};

/// One category's actions; a set the mode does not allow is denied.
pub type Actions = common::ReadWrite<&'static [&'static str]>;

pub use cosi_driver_s3_common::policy::ALWAYS;

/// Object data: get and list objects, versions and uploads; put (also
/// multipart) and delete objects.
pub const OBJECT_DATA: Actions = Actions {
    read: &[
        "s3:GetObject",
        "s3:GetObjectVersion",
        "s3:ListBucket",
        "s3:ListBucketVersions",
        "s3:ListBucketMultipartUploads",
    ],
    write: common::OBJECT_DATA_WRITE,
};

/// Object metadata: tags, ACLs, retention and legal hold of objects.
pub const OBJECT_METADATA: Actions = Actions {
    read: &[
        "s3:GetObjectTagging",
        "s3:GetObjectVersionTagging",
        "s3:GetObjectAcl",
        "s3:GetObjectVersionAcl",
        "s3:GetObjectRetention",
        "s3:GetObjectLegalHold",
    ],
    write: common::OBJECT_METADATA_WRITE,
};

/// Bucket metadata: tags, versioning, ACL, CORS, lifecycle and Object Lock
/// configuration (RGW Pacific knows no policy action for the encryption
/// configuration). The bucket policy can be read but not written: it is
/// how the driver grants access, and a workload allowed to rewrite it
/// could drop every other access or open the bucket to anyone.
pub const BUCKET_METADATA: Actions = Actions {
    read: common::BUCKET_METADATA_READ,
    write: &[
        "s3:PutBucketTagging",
        "s3:PutBucketVersioning",
        "s3:PutBucketAcl",
        "s3:PutBucketCORS",
        "s3:PutLifecycleConfiguration",
        "s3:PutBucketObjectLockConfiguration",
    ],
};

/// What one access may and must not do in one bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grant {
    /// Actions allowed.
    pub allow: BTreeSet<&'static str>,
    /// Actions denied explicitly: every action of the categories that is
    /// not allowed.
    pub deny: BTreeSet<&'static str>,
}

impl Grant {
    /// The grant for `modes`; empty when every category is unspecified.
    pub fn for_modes(modes: &AccessModes) -> Grant {
        let mut grant = Grant::default();
        let [object_data, object_metadata, bucket_metadata] = common::category_modes(modes);
        let categories = [
            (object_data, OBJECT_DATA),
            (object_metadata, OBJECT_METADATA),
            (bucket_metadata, BUCKET_METADATA),
        ];
        for (m, actions) in categories {
            for (allowed, set) in actions.by_mode(m) {
                if allowed {
                    grant.allow.extend(set);
                } else {
                    grant.deny.extend(set);
                }
            }
        }
        if grant.allow.is_empty() {
            return Grant::default();
        }
        grant.allow.insert(ALWAYS);
        grant
    }

    /// True when the grant allows nothing.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty()
    }
}

/// The `Sid` of the statement allowing `uid`'s actions.
pub fn allow_sid(uid: &str) -> String {
    uid.to_owned()
}

/// The `Sid` of the statement denying `uid` what its modes do not allow.
pub fn deny_sid(uid: &str) -> String {
    format!("{uid}.deny")
}

/// The principal naming the RGW user `uid` (of the default tenant).
pub fn principal(uid: &str) -> String {
    format!("arn:aws:iam:::user/{uid}")
}

/// The statements giving `uid` `grant` on `bucket`: an Allow, and a Deny
/// unless the grant allows everything. Empty for an empty grant.
pub fn statements(bucket: &str, uid: &str, grant: &Grant) -> Vec<Value> {
    let resource = json!([
        format!("arn:aws:s3:::{bucket}"),
        format!("arn:aws:s3:::{bucket}/*")
    ]);
    let statement = |sid: String, effect: &str, actions: &BTreeSet<&str>| {
        json!({
            "Sid": sid,
            "Effect": effect,
            "Principal": {"AWS": [principal(uid)]},
            "Action": actions.iter().collect::<Vec<_>>(),
            "Resource": resource,
        })
    };
    let mut out = Vec::new();
    if !grant.allow.is_empty() {
        out.push(statement(allow_sid(uid), "Allow", &grant.allow));
        if !grant.deny.is_empty() {
            out.push(statement(deny_sid(uid), "Deny", &grant.deny));
        }
    }
    out
}

/// What a bucket's policy must become.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The policy already says it: nothing to write.
    Unchanged,
    /// Write this policy (compact JSON).
    Put(String),
    /// No statement remains: delete the policy.
    Delete,
}

/// The policy `existing` (none when the bucket has none) with `uid`'s
/// statements replaced by `wanted` (empty to remove them). Statements of
/// other accounts and statements the driver did not write keep their
/// place; `uid`'s new statements take the place of its old ones, or come
/// last.
pub fn with_account(
    existing: Option<&str>,
    uid: &str,
    wanted: Vec<Value>,
) -> Result<Change, String> {
    let mut doc = match existing {
        Some(text) => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object)
            .ok_or("the bucket's policy is not a JSON object")?,
        None => json!({"Version": "2012-10-17", "Statement": []}),
    };
    let current: Vec<Value> = match doc.get("Statement") {
        None => Vec::new(),
        Some(Value::Array(list)) => list.clone(),
        Some(one @ Value::Object(_)) => vec![one.clone()],
        Some(_) => {
            return Err("the bucket policy's Statement is neither a list nor an object".into());
        }
    };
    let sids = [allow_sid(uid), deny_sid(uid)];
    let owned = |s: &Value| {
        s.get("Sid")
            .and_then(Value::as_str)
            .is_some_and(|sid| sids.iter().any(|o| o == sid))
    };
    let mine: Vec<&Value> = current.iter().filter(|s| owned(s)).collect();
    if mine.len() == wanted.len() && mine.iter().zip(&wanted).all(|(a, b)| *a == b) {
        return Ok(Change::Unchanged);
    }
    let at = current.iter().position(owned).unwrap_or(current.len());
    let mut next: Vec<Value> = Vec::with_capacity(current.len() + wanted.len());
    let mut wanted = Some(wanted);
    for (i, s) in current.into_iter().enumerate() {
        if i == at {
            next.extend(wanted.take().unwrap_or_default());
        }
        if !owned(&s) {
            next.push(s);
        }
    }
    next.extend(wanted.take().unwrap_or_default());
    if next.is_empty() {
        return Ok(Change::Delete);
    }
    doc["Statement"] = Value::Array(next);
    if doc.get("Version").is_none() {
        doc["Version"] = json!("2012-10-17");
    }
    Ok(Change::Put(doc.to_string()))
}

/// The accounts (`Sid`s of Allow statements) a policy grants something,
/// in the policy's order.
pub fn accounts(policy: &str) -> Vec<String> {
    let Ok(doc) = serde_json::from_str::<Value>(policy) else {
        return Vec::new();
    };
    let list = match doc.get("Statement") {
        Some(Value::Array(list)) => list.clone(),
        Some(one @ Value::Object(_)) => vec![one.clone()],
        _ => Vec::new(),
    };
    list.iter()
        .filter(|s| s.get("Effect").and_then(Value::as_str) == Some("Allow"))
        .filter_map(|s| s.get("Sid").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use cosi_driver::proto::AccessMode;
    use cosi_driver::testing::access_modes as modes;

    const U: AccessMode = AccessMode::Unspecified;

    /// Full access: one Allow statement, no Deny.
    fn rw(uid: &str) -> Vec<Value> {
        let full = AccessMode::ReadWrite;
        statements("bkt", uid, &Grant::for_modes(&modes(full, full, full)))
    }

    fn put(change: Change) -> Value {
        match change {
            Change::Put(text) => serde_json::from_str(&text).unwrap(),
            other => panic!("expected a policy to write, got {other:?}"),
        }
    }

    fn sids(doc: &Value) -> Vec<&str> {
        doc["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["Sid"].as_str().unwrap())
            .collect()
    }

    fn all_actions() -> BTreeSet<&'static str> {
        [OBJECT_DATA, OBJECT_METADATA, BUCKET_METADATA]
            .iter()
            .flat_map(|a| a.read.iter().chain(a.write))
            .copied()
            .collect()
    }

    #[test]
    fn read_only_allows_no_write_and_denies_every_write() {
        let all = AccessMode::ReadOnly;
        let g = Grant::for_modes(&modes(all, all, all));
        assert!(g.allow.contains("s3:GetObject") && g.allow.contains("s3:ListBucket"));
        for a in &g.allow {
            assert!(
                !["Put", "Delete", "Abort"].iter().any(|w| a.contains(w)),
                "{a} is a write action"
            );
        }
        assert!(g.deny.contains("s3:PutObject") && g.deny.contains("s3:PutObjectTagging"));
    }

    #[test]
    fn write_only_allows_no_read_and_denies_every_read_explicitly() {
        let all = AccessMode::WriteOnly;
        let g = Grant::for_modes(&modes(all, all, all));
        assert!(g.allow.contains("s3:PutObject") && g.allow.contains("s3:PutBucketTagging"));
        let writes: BTreeSet<&str> = OBJECT_DATA
            .write
            .iter()
            .chain(OBJECT_METADATA.write)
            .chain(BUCKET_METADATA.write)
            .copied()
            .collect();
        for a in g.allow.iter().filter(|a| **a != ALWAYS) {
            assert!(writes.contains(a), "{a} is not a write action");
        }
        for read in OBJECT_DATA
            .read
            .iter()
            .chain(OBJECT_METADATA.read)
            .chain(BUCKET_METADATA.read)
        {
            assert!(g.deny.contains(read), "{read} is not denied");
        }
    }

    #[test]
    fn every_action_not_allowed_is_denied_and_none_both() {
        for data in [
            AccessMode::ReadWrite,
            AccessMode::ReadOnly,
            AccessMode::WriteOnly,
            U,
        ] {
            for meta in [AccessMode::ReadWrite, AccessMode::ReadOnly, U] {
                let g = Grant::for_modes(&modes(data, meta, AccessMode::ReadOnly));
                assert!(g.allow.is_disjoint(&g.deny), "{data:?} {meta:?}");
                let mut covered: BTreeSet<&str> = g.allow.union(&g.deny).copied().collect();
                covered.remove(ALWAYS);
                assert_eq!(covered, all_actions(), "{data:?} {meta:?}");
            }
        }
        let full = AccessMode::ReadWrite;
        assert!(Grant::for_modes(&modes(full, full, full)).deny.is_empty());
    }

    #[test]
    fn a_key_that_writes_objects_cannot_retag_them_with_read_only_object_metadata() {
        let g = Grant::for_modes(&modes(AccessMode::ReadWrite, AccessMode::ReadOnly, U));
        assert!(g.allow.contains("s3:PutObject") && g.allow.contains("s3:GetObjectTagging"));
        assert!(g.deny.contains("s3:PutObjectTagging") && g.deny.contains("s3:PutObjectAcl"));
        assert!(g.deny.contains("s3:GetBucketTagging"));
    }

    #[test]
    fn no_access_mode_writes_the_bucket_policy() {
        let all = AccessMode::ReadWrite;
        let g = Grant::for_modes(&modes(all, all, all));
        assert!(
            !g.allow
                .iter()
                .any(|a| a.contains("BucketPolicy") && !a.starts_with("s3:Get"))
        );
    }

    #[test]
    fn unspecified_categories_grant_nothing() {
        let g = Grant::for_modes(&modes(U, U, U));
        assert!(g.is_empty());
        assert!(statements("bkt", "ba-1", &g).is_empty());
        let g = Grant::for_modes(&modes(AccessMode::ReadWrite, U, U));
        assert!(
            !g.allow.contains("s3:GetObjectTagging") && !g.allow.contains("s3:GetBucketPolicy")
        );
    }

    #[test]
    fn statements_name_the_user_and_both_resources() {
        let s = statements(
            "bkt",
            "ba-1",
            &Grant::for_modes(&modes(AccessMode::WriteOnly, U, U)),
        );
        assert_eq!(s.len(), 2);
        assert_eq!(s[0]["Sid"], "ba-1");
        assert_eq!(s[0]["Effect"], "Allow");
        assert_eq!(s[0]["Principal"]["AWS"][0], "arn:aws:iam:::user/ba-1");
        assert_eq!(
            s[0]["Resource"],
            json!(["arn:aws:s3:::bkt", "arn:aws:s3:::bkt/*"])
        );
        assert_eq!(s[1]["Sid"], "ba-1.deny");
        assert_eq!(s[1]["Effect"], "Deny");
    }

    #[test]
    fn a_grant_on_a_bucket_without_policy_writes_one() {
        let doc = put(with_account(None, "ba-1", rw("ba-1")).unwrap());
        assert_eq!(doc["Version"], "2012-10-17");
        assert_eq!(sids(&doc), ["ba-1"]);
    }

    #[test]
    fn a_repeated_grant_changes_nothing() {
        let Change::Put(text) = with_account(None, "ba-1", rw("ba-1")).unwrap() else {
            panic!()
        };
        assert_eq!(
            with_account(Some(&text), "ba-1", rw("ba-1")).unwrap(),
            Change::Unchanged
        );
    }

    #[test]
    fn other_statements_keep_their_place_and_ours_are_replaced_in_place() {
        let foreign = json!({"Sid": "admin-rule", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::bkt/public/*"});
        let mut list = vec![foreign.clone()];
        list.extend(rw("ba-1"));
        list.extend(rw("ba-2"));
        let existing =
            json!({"Version": "2012-10-17", "Id": "kept", "Statement": list}).to_string();
        let read_only = statements(
            "bkt",
            "ba-1",
            &Grant::for_modes(&modes(AccessMode::WriteOnly, U, U)),
        );
        let doc = put(with_account(Some(&existing), "ba-1", read_only).unwrap());
        assert_eq!(sids(&doc), ["admin-rule", "ba-1", "ba-1.deny", "ba-2"]);
        assert_eq!(doc["Statement"][0], foreign);
        assert_eq!(doc["Id"], "kept");
        let doc = put(with_account(Some(&doc.to_string()), "ba-3", rw("ba-3")).unwrap());
        assert_eq!(
            sids(&doc),
            ["admin-rule", "ba-1", "ba-1.deny", "ba-2", "ba-3"]
        );
    }

    #[test]
    fn revoking_removes_only_that_accounts_statements() {
        let mut list = rw("ba-1");
        list.extend(statements(
            "bkt",
            "ba-2",
            &Grant::for_modes(&modes(AccessMode::WriteOnly, U, U)),
        ));
        list.extend(rw("ba-2-deny"));
        let existing = json!({"Version": "2012-10-17", "Statement": list}).to_string();
        let doc = put(with_account(Some(&existing), "ba-2", Vec::new()).unwrap());
        assert_eq!(sids(&doc), ["ba-1", "ba-2-deny"]);
        let last = json!({"Version": "2012-10-17", "Statement": rw("ba-1")}).to_string();
        assert_eq!(
            with_account(Some(&last), "ba-1", Vec::new()).unwrap(),
            Change::Delete
        );
        assert_eq!(
            with_account(Some(&last), "ba-9", Vec::new()).unwrap(),
            Change::Unchanged
        );
        assert_eq!(
            with_account(None, "ba-9", Vec::new()).unwrap(),
            Change::Unchanged
        );
    }

    #[test]
    fn ten_accounts_granted_one_after_the_other_all_hold() {
        let mut text: Option<String> = None;
        for i in 0..10 {
            let uid = format!("ba-{i}");
            if let Change::Put(next) = with_account(text.as_deref(), &uid, rw(&uid)).unwrap() {
                text = Some(next);
            }
        }
        let names: Vec<String> = (0..10).map(|i| format!("ba-{i}")).collect();
        assert_eq!(accounts(text.as_deref().unwrap()), names);
    }

    #[test]
    fn a_single_statement_object_is_understood() {
        let existing = json!({"Version": "2012-10-17", "Statement": rw("ba-1")[0]}).to_string();
        assert_eq!(
            with_account(Some(&existing), "ba-1", rw("ba-1")).unwrap(),
            Change::Unchanged
        );
        assert_eq!(accounts(&existing), ["ba-1"]);
    }

    #[test]
    fn a_policy_that_is_not_a_document_is_refused() {
        assert!(with_account(Some("[]"), "ba-1", rw("ba-1")).is_err());
        assert!(with_account(Some(r#"{"Statement": 3}"#), "ba-1", rw("ba-1")).is_err());
    }

    #[test]
    fn one_accesss_statements_take_at_most_1500_bytes_so_a_bucket_holds_hundreds_of_accesses() {
        let uid = "ba-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60";
        let bucket = "bc-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60";
        let all = [
            AccessMode::ReadWrite,
            AccessMode::ReadOnly,
            AccessMode::WriteOnly,
            U,
        ];
        let mut largest = 0;
        for a in all {
            for b in all {
                for c in all {
                    let s = statements(bucket, uid, &Grant::for_modes(&modes(a, b, c)));
                    largest = largest.max(Value::Array(s).to_string().len());
                }
            }
        }
        println!("largest statement pair: {largest} bytes");
        assert!(largest < 2500, "{largest}");
        assert!(
            crate::config::RGW_MAX_POLICY_SIZE / largest > 400,
            "{largest}"
        );
    }
}
