//! What must hold after a run, checked on the API's objects and the
//! backend's state: every pair converged (ready, or gone when deleted),
//! nothing leaked and nothing was duplicated. Pure functions.

use std::collections::{BTreeMap, BTreeSet};

use cosi_api::conditions;
use cosi_api::constants::condition_types::{PROVISION_FAILED, PROVISIONED};
use cosi_api::constants::{PROTECTION_FINALIZER, annotations, secret_keys};
use cosi_api::reasons;
use cosi_api::{Bucket, BucketAccess, BucketClaim, Condition};
use cosi_driver::DriverApi;
use cosi_driver_local::{BackendState, BucketState};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;

use super::observe::ApiSnapshot;
use super::plan::Policy;

/// A pair deleted by the scenario, with what it was bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletedPair {
    /// Name of the claim, the access and the Secret.
    pub name: String,
    /// The claim's deletion policy.
    pub policy: Policy,
    /// The Bucket it was bound to, if any yet.
    pub bucket: Option<String>,
    /// The backend bucket ID that Bucket had, if any yet.
    pub bucket_id: Option<String>,
}

/// Where a pair stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PairState {
    /// Claim and access Provisioned=True, the Secret holds data.
    Ready,
    /// The driver refused a request for it: terminal until it changes.
    Refused(String),
    /// Still on its way (why).
    Pending(String),
}

fn find<'a, K: kube::Resource>(items: &'a [K], ns: &str, name: &str) -> Option<&'a K> {
    items.iter().find(|k| {
        k.meta().name.as_deref() == Some(name) && k.meta().namespace.as_deref().unwrap_or("") == ns
    })
}

fn refused(c: &[Condition]) -> bool {
    conditions::is_true(c, PROVISION_FAILED)
        && conditions::find(c, PROVISIONED).is_some_and(|p| p.status == "False")
}

/// The Bucket a claim is bound to, or the one created for it (bound or not yet).
pub fn bucket_of<'a>(s: &'a ApiSnapshot, claim: &BucketClaim) -> Option<&'a Bucket> {
    if let Some(name) = claim.bound_bucket_name() {
        return s.buckets.iter().find(|b| b.name_any() == name);
    }
    let uid = claim.uid()?;
    s.buckets
        .iter()
        .find(|b| b.spec.bucket_claim_ref.uid == uid)
}

/// Where pair `name` stands.
pub fn pair_state(s: &ApiSnapshot, ns: &str, name: &str) -> PairState {
    let Some(claim) = find(&s.claims, ns, name) else {
        return PairState::Pending(format!("claim {name} does not exist"));
    };
    let Some(access) = find(&s.accesses, ns, name) else {
        return PairState::Pending(format!("access {name} does not exist"));
    };
    let bucket = bucket_of(s, claim);
    for (what, c) in [
        ("claim", claim.conditions()),
        ("access", access.conditions()),
        ("bucket", bucket.map(Bucket::conditions).unwrap_or_default()),
    ] {
        if refused(c) {
            return PairState::Refused(format!("{what} of pair {name} refused by the driver"));
        }
    }
    if !conditions::is_true(claim.conditions(), PROVISIONED) {
        return PairState::Pending(format!("claim {name} not provisioned"));
    }
    if !conditions::is_true(access.conditions(), PROVISIONED) {
        return PairState::Pending(format!("access {name} not provisioned"));
    }
    match find(&s.secrets, ns, name) {
        Some(secret) if secret.data.as_ref().is_some_and(|d| !d.is_empty()) => PairState::Ready,
        _ => PairState::Pending(format!("Secret {name} missing or empty")),
    }
}

fn conditions_line(c: &[Condition]) -> String {
    c.iter()
        .map(|c| format!("{}={}({})", c.type_, c.status, c.reason))
        .collect::<Vec<_>>()
        .join(",")
}

/// The state of every object of the pairs `names`, one line each, for
/// failure messages.
pub fn describe(s: &ApiSnapshot, ns: &str, names: &[String]) -> String {
    let mut out = Vec::new();
    for name in names {
        let claim = find(&s.claims, ns, name);
        let bucket = claim.and_then(|c| bucket_of(s, c));
        let access = find(&s.accesses, ns, name);
        let secret = find(&s.secrets, ns, name);
        let deleting = |m: &kube::api::ObjectMeta| {
            if m.deletion_timestamp.is_some() {
                " deleting"
            } else {
                ""
            }
        };
        out.push(format!(
            "{name}: claim {} | bucket {} | access {} | secret {}",
            claim.map_or("-".into(), |c| format!(
                "[{}]{} fin={:?} ann={:?}",
                conditions_line(c.conditions()),
                deleting(&c.metadata),
                c.finalizers(),
                c.annotations().keys().collect::<Vec<_>>()
            )),
            bucket.map_or("-".into(), |b| format!(
                "{} [{}]{} id={:?} fin={:?}",
                b.name_any(),
                conditions_line(b.conditions()),
                deleting(&b.metadata),
                b.status.as_ref().map(|st| st.bucket_id.as_str()),
                b.finalizers()
            )),
            access.map_or("-".into(), |a| format!(
                "[{}]{} account={:?} handed-off={} fin={:?}",
                conditions_line(a.conditions()),
                deleting(&a.metadata),
                a.account_id(),
                a.is_handed_to_sidecar(),
                a.finalizers()
            )),
            secret.map_or("-".into(), |x| format!(
                "data={}",
                x.data.as_ref().is_some_and(|d| !d.is_empty())
            )),
        ));
    }
    out.join("\n      ")
}

/// Ok when every pair of `names` is ready or refused.
pub fn settled(s: &ApiSnapshot, ns: &str, names: &[String]) -> Result<(), String> {
    for name in names {
        if let PairState::Pending(why) = pair_state(s, ns, name) {
            return Err(why);
        }
    }
    Ok(())
}

/// Ok when the access of every pair of `names` has answered its rotation
/// request and revoked the account it replaced.
pub fn rotated(s: &ApiSnapshot, ns: &str, names: &[String]) -> Result<(), String> {
    for name in names {
        let Some(a) = find(&s.accesses, ns, name) else {
            return Err(format!("rotated access {name} is gone"));
        };
        if let Some(request) = cosi_api::rotation::unanswered_request(a) {
            return Err(format!(
                "access {name} has not answered rotation request {request:?}"
            ));
        }
        match cosi_api::rotation::RotationState::of(a) {
            None => return Err(format!("access {name} has no rotation state")),
            Some(state) if state.in_progress() => {
                return Err(format!("access {name} is still rotating: {state:?}"));
            }
            Some(state) if state.previous.is_some() => {
                return Err(format!("access {name} has not revoked its old account yet"));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Ok when every `live` pair is ready and every deleted pair is gone (its
/// Bucket too under the Delete policy; kept under Retain).
pub fn converged(
    s: &ApiSnapshot,
    ns: &str,
    live: &[String],
    deleted: &[DeletedPair],
) -> Result<(), String> {
    for name in live {
        match pair_state(s, ns, name) {
            PairState::Ready => {}
            PairState::Refused(why) | PairState::Pending(why) => return Err(why),
        }
    }
    for d in deleted {
        let name = &d.name;
        if find(&s.claims, ns, name).is_some() {
            return Err(format!("deleted claim {name} still exists"));
        }
        if find(&s.accesses, ns, name).is_some() {
            return Err(format!("deleted access {name} still exists"));
        }
        if find(&s.secrets, ns, name).is_some() {
            return Err(format!("Secret {name} of a deleted access still exists"));
        }
        if let Some(bucket) = &d.bucket {
            let exists = s.buckets.iter().any(|b| &b.name_any() == bucket);
            match d.policy {
                Policy::Delete if exists => {
                    return Err(format!(
                        "Bucket {bucket} of deleted claim {name} (Delete policy) still exists"
                    ));
                }
                Policy::Retain if !exists => {
                    return Err(format!(
                        "Bucket {bucket} of deleted claim {name} (Retain policy) is gone"
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Ok when the sidecar has recorded what each deleted `Retain` pair's
/// Bucket keeps. On a driver API whose phase 1 creates the bucket
/// (v1alpha1), a Bucket refused before its ID was persisted may still have
/// a backend bucket: once its claim is gone the sidecar looks it up by name
/// and records its ID with the Released condition, in one write. Until a
/// Bucket with no ID shows Released, that lookup may be in flight, and the
/// backend bucket it is about to record would look leaked.
pub fn retained_recorded(
    s: &ApiSnapshot,
    deleted: &[DeletedPair],
    api: DriverApi,
) -> Result<(), String> {
    if !api.phase_one_creates() {
        return Ok(());
    }
    for d in deleted.iter().filter(|d| d.policy == Policy::Retain) {
        let Some(name) = &d.bucket else { continue };
        let Some(bucket) = s.buckets.iter().find(|b| &b.name_any() == name) else {
            continue;
        };
        let has_id = bucket
            .status
            .as_ref()
            .is_some_and(|st| !st.bucket_id.is_empty());
        let released = conditions::find(bucket.conditions(), PROVISIONED)
            .is_some_and(|c| c.reason == reasons::RELEASED);
        if !has_id && !released {
            return Err(format!(
                "retained Bucket {name} of deleted claim {} has no bucket ID and is not released yet",
                d.name
            ));
        }
    }
    Ok(())
}

fn bucket_ids(s: &ApiSnapshot) -> BTreeMap<String, Vec<String>> {
    let mut ids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for b in &s.buckets {
        if let Some(id) = b
            .status
            .as_ref()
            .map(|st| st.bucket_id.clone())
            .filter(|i| !i.is_empty())
        {
            ids.entry(id).or_default().push(b.name_any());
        }
    }
    ids
}

/// Every violation of the no-leak / no-duplicate invariants between the
/// API and the backend, and every orphaned or stuck object.
pub fn violations(
    s: &ApiSnapshot,
    ns: &str,
    backend: &BackendState,
    deleted: &[DeletedPair],
) -> Vec<String> {
    let mut v = Vec::new();
    let api_buckets = bucket_ids(s);
    for (id, names) in &api_buckets {
        if names.len() > 1 {
            v.push(format!(
                "bucket ID {id} is claimed by several Buckets: {names:?}"
            ));
        }
    }
    let backend_buckets: BTreeMap<&str, _> =
        backend.buckets.iter().map(|b| (b.id.as_str(), b)).collect();
    for b in &backend.buckets {
        if !api_buckets.contains_key(&b.id) {
            v.push(format!(
                "backend bucket {} ({:?}) has no Bucket: leaked",
                b.id, b.state
            ));
        }
    }
    for bucket in &s.buckets {
        let Some(id) = bucket
            .status
            .as_ref()
            .map(|st| st.bucket_id.as_str())
            .filter(|i| !i.is_empty())
        else {
            continue;
        };
        if !conditions::is_true(bucket.conditions(), PROVISIONED) {
            continue;
        }
        match backend_buckets.get(id) {
            None => v.push(format!(
                "Bucket {} is provisioned with bucket ID {id} but the backend has no such bucket",
                bucket.name_any()
            )),
            Some(b) if b.state != BucketState::Ready => v.push(format!(
                "backend bucket {id} of provisioned Bucket {} is {:?}",
                bucket.name_any(),
                b.state,
            )),
            Some(_) => {}
        }
    }
    if !backend.stray_directories.is_empty() {
        v.push(format!(
            "bucket directories without a bucket record: {:?}",
            backend.stray_directories
        ));
    }
    for d in deleted {
        if d.policy == Policy::Delete
            && let Some(id) = &d.bucket_id
            && backend_buckets.contains_key(id.as_str())
        {
            v.push(format!(
                "backend bucket {id} of deleted claim {} (Delete policy) still exists",
                d.name
            ));
        }
    }

    // Accounts.
    // The account an access holds is its live one: the first
    // (`status.accountID`) until a rotation replaces it.
    let live: Vec<(&BucketAccess, Option<String>)> = s
        .accesses
        .iter()
        .map(|a| (a, cosi_api::rotation::live_account(a).1))
        .collect();
    let mut api_accounts: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (a, id) in &live {
        if let Some(id) = id {
            api_accounts.entry(id).or_default().push(a.name_any());
        }
    }
    for (id, names) in &api_accounts {
        if names.len() > 1 {
            v.push(format!(
                "account ID {id} is claimed by several accesses: {names:?}"
            ));
        }
    }
    let backend_accounts: BTreeSet<&str> = backend.accounts.iter().map(|a| a.id.as_str()).collect();
    for a in &backend.accounts {
        if !api_accounts.contains_key(a.id.as_str()) {
            v.push(format!(
                "backend account {} has no BucketAccess: leaked",
                a.id
            ));
        }
        for b in &a.buckets {
            if !backend_buckets.contains_key(b.as_str()) {
                v.push(format!(
                    "backend account {} grants missing bucket {b}",
                    a.id
                ));
            }
        }
    }
    for (a, id) in &live {
        if conditions::is_true(a.conditions(), PROVISIONED) {
            match id.as_deref() {
                Some(id) if backend_accounts.contains(id) => {}
                Some(id) => v.push(format!(
                    "access {} is provisioned with account {id} but the backend has no such account",
                    a.name_any()
                )),
                None => v.push(format!("access {} is provisioned without an account ID", a.name_any())),
            }
        }
    }
    if backend.access_keys != backend.accounts.len() as u64 {
        v.push(format!(
            "{} access keys for {} accounts",
            backend.access_keys,
            backend.accounts.len()
        ));
    }

    // Secrets.
    for secret in &s.secrets {
        if let Some(problem) = orphan(secret, s, ns) {
            v.push(problem);
        }
    }
    for a in &s.accesses {
        if conditions::is_true(a.conditions(), PROVISIONED) {
            v.extend(secret_problems(a, s, ns));
        }
    }

    // Buckets of the Delete policy live exactly as long as their claims.
    for b in &s.buckets {
        let r = &b.spec.bucket_claim_ref;
        let claim_exists = s.claims.iter().any(|c| {
            c.name_any() == r.name
                && c.namespace().as_deref() == Some(r.namespace.as_str())
                && (r.uid.is_empty() || c.uid().as_deref() == Some(r.uid.as_str()))
        });
        if b.spec.deletion_policy == cosi_api::DeletionPolicy::Delete && !claim_exists {
            v.push(format!(
                "Bucket {} (Delete policy) outlived its claim {}/{}",
                b.name_any(),
                r.namespace,
                r.name
            ));
        }
    }

    // Nothing stuck half-deleted.
    let stuck = s
        .claims
        .iter()
        .map(|c| {
            (
                "claim",
                c.name_any(),
                c.metadata.deletion_timestamp.is_some(),
            )
        })
        .chain(s.accesses.iter().map(|a| {
            (
                "access",
                a.name_any(),
                a.metadata.deletion_timestamp.is_some(),
            )
        }))
        .chain(s.buckets.iter().map(|b| {
            (
                "Bucket",
                b.name_any(),
                b.metadata.deletion_timestamp.is_some(),
            )
        }));
    for (kind, name, deleting) in stuck {
        if deleting {
            v.push(format!("{kind} {name} is stuck being deleted"));
        }
    }
    v
}

/// A COSI Secret (finalizer or access annotation) with no live access owning it.
fn orphan(secret: &Secret, s: &ApiSnapshot, ns: &str) -> Option<String> {
    let is_cosi = secret
        .finalizers()
        .iter()
        .any(|f| f == PROTECTION_FINALIZER)
        || secret
            .annotations()
            .contains_key(annotations::BUCKETACCESS_REFERENCE);
    if !is_cosi {
        return None;
    }
    let owned = secret.owner_references().iter().any(|r| {
        r.kind == "BucketAccess"
            && s.accesses.iter().any(|a| {
                a.uid().as_deref() == Some(r.uid.as_str())
                    && a.namespace().as_deref() == Some(ns)
                    && a.spec
                        .bucket_claims
                        .iter()
                        .any(|c| c.access_secret_name == secret.name_any())
            })
    });
    (!owned).then(|| {
        format!(
            "Secret {} is orphaned (no live BucketAccess owns it)",
            secret.name_any()
        )
    })
}

/// Problems with the Secrets of a provisioned access.
fn secret_problems(a: &BucketAccess, s: &ApiSnapshot, ns: &str) -> Vec<String> {
    let mut v = Vec::new();
    for c in &a.spec.bucket_claims {
        let Some(secret) = find(&s.secrets, ns, &c.access_secret_name) else {
            v.push(format!(
                "provisioned access {} lacks its Secret {}",
                a.name_any(),
                c.access_secret_name
            ));
            continue;
        };
        let bucket_id = find(&s.claims, ns, &c.bucket_claim_name)
            .and_then(|claim| bucket_of(s, claim))
            .and_then(|b| b.status.as_ref())
            .map(|st| st.bucket_id.clone());
        let in_secret = secret
            .data
            .as_ref()
            .and_then(|d| d.get(secret_keys::s3::BUCKET_NAME))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned());
        if bucket_id.is_none() || in_secret != bucket_id {
            v.push(format!(
                "Secret {} names bucket {:?}, its claim's Bucket has ID {:?}",
                secret.name_any(),
                in_secret,
                bucket_id
            ));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_api::{BucketAccessStatus, BucketClaimStatus, BucketStatus};
    use cosi_driver_local::{BackendAccount, BackendBucket};
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    const NS: &str = "ns";

    fn cond(type_: &str, status: &str) -> Condition {
        serde_json::from_value(serde_json::json!({
            "type": type_, "status": status, "reason": "R", "message": "m",
            "lastTransitionTime": "2024-01-01T00:00:00Z"
        }))
        .unwrap()
    }

    /// A snapshot with pair `p0` fully ready on bucket `id0` and account `acc0`.
    fn ready() -> (ApiSnapshot, BackendState) {
        let mut claim = cosi_cli::manifests::claim(NS, "p0", "c");
        claim.metadata.uid = Some("u0".into());
        claim.status = Some(BucketClaimStatus {
            conditions: vec![cond(PROVISIONED, "True")],
            bound_bucket_name: "bc-u0".into(),
            ..Default::default()
        });
        let mut bucket: Bucket = serde_json::from_value(serde_json::json!({
            "apiVersion": "objectstorage.k8s.io/v1alpha2", "kind": "Bucket",
            "metadata": {"name": "bc-u0"},
            "spec": {"driverName": "d", "deletionPolicy": "Delete",
                     "bucketClaimRef": {"name": "p0", "namespace": NS, "uid": "u0"}}
        }))
        .unwrap();
        bucket.status = Some(BucketStatus {
            conditions: vec![cond(PROVISIONED, "True")],
            bucket_id: "id0".into(),
            ..Default::default()
        });
        let mut access = cosi_cli::manifests::access(
            NS,
            "p0",
            "c",
            &[("p0", "p0")],
            cosi_api::BucketAccessMode::ReadWrite,
        );
        access.metadata.uid = Some("a0".into());
        access.status = Some(BucketAccessStatus {
            conditions: vec![cond(PROVISIONED, "True")],
            account_id: "acc0".into(),
            ..Default::default()
        });
        let mut secret = Secret::default();
        secret.metadata.name = Some("p0".into());
        secret.metadata.namespace = Some(NS.into());
        secret.metadata.finalizers = Some(vec![PROTECTION_FINALIZER.into()]);
        secret.metadata.owner_references = Some(vec![OwnerReference {
            kind: "BucketAccess".into(),
            uid: "a0".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        secret.data = Some(BTreeMap::from([(
            secret_keys::s3::BUCKET_NAME.to_owned(),
            ByteString(b"id0".to_vec()),
        )]));
        let snapshot = ApiSnapshot {
            claims: vec![claim],
            buckets: vec![bucket],
            accesses: vec![access],
            secrets: vec![secret],
        };
        let backend = BackendState {
            buckets: vec![BackendBucket {
                id: "id0".into(),
                state: BucketState::Ready,
                objects: 0,
                used_bytes: 0,
                max_size_bytes: None,
                directory_exists: true,
            }],
            accounts: vec![BackendAccount {
                id: "acc0".into(),
                buckets: vec!["id0".into()],
            }],
            access_keys: 1,
            stray_directories: vec![],
        };
        (snapshot, backend)
    }

    #[test]
    fn a_consistent_system_has_no_violations() {
        let (s, b) = ready();
        assert_eq!(pair_state(&s, NS, "p0"), PairState::Ready);
        assert_eq!(converged(&s, NS, &["p0".into()], &[]), Ok(()));
        assert_eq!(violations(&s, NS, &b, &[]), Vec::<String>::new());
    }

    #[test]
    fn a_backend_bucket_without_a_bucket_is_a_leak() {
        let (s, mut b) = ready();
        b.buckets.push(BackendBucket {
            id: "id9".into(),
            ..b.buckets[0].clone()
        });
        let v = violations(&s, NS, &b, &[]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("id9") && v[0].contains("leaked"));
    }

    #[test]
    fn a_provisioned_bucket_missing_from_the_backend_is_reported() {
        let (s, mut b) = ready();
        b.buckets.clear();
        b.accounts[0].buckets.clear();
        let v = violations(&s, NS, &b, &[]);
        assert!(v.iter().any(|x| x.contains("has no such bucket")), "{v:?}");
    }

    #[test]
    fn two_buckets_with_one_id_are_a_duplicate() {
        let (mut s, b) = ready();
        let mut twin = s.buckets[0].clone();
        twin.metadata.name = Some("bc-u1".into());
        s.buckets.push(twin);
        let v = violations(&s, NS, &b, &[]);
        assert!(v.iter().any(|x| x.contains("several Buckets")), "{v:?}");
    }

    #[test]
    fn leaked_accounts_and_orphaned_secrets_are_reported() {
        let (mut s, mut b) = ready();
        s.accesses.clear();
        b.accounts.push(BackendAccount {
            id: "acc1".into(),
            buckets: vec![],
        });
        b.access_keys = 2;
        let v = violations(&s, NS, &b, &[]);
        assert!(
            v.iter().any(|x| x.contains("acc0") && x.contains("leaked")),
            "{v:?}"
        );
        assert!(
            v.iter().any(|x| x.contains("acc1") && x.contains("leaked")),
            "{v:?}"
        );
        assert!(v.iter().any(|x| x.contains("orphaned")), "{v:?}");
    }

    #[test]
    fn a_deleted_delete_policy_claim_must_leave_no_backend_bucket() {
        let (mut s, b) = ready();
        s.claims.clear();
        s.accesses.clear();
        s.secrets.clear();
        let gone = DeletedPair {
            name: "p0".into(),
            policy: Policy::Delete,
            bucket: Some("bc-u0".into()),
            bucket_id: Some("id0".into()),
        };
        assert!(
            converged(&s, NS, &[], std::slice::from_ref(&gone))
                .unwrap_err()
                .contains("still exists")
        );
        s.buckets.clear();
        assert_eq!(converged(&s, NS, &[], std::slice::from_ref(&gone)), Ok(()));
        let v = violations(&s, NS, &b, &[gone]);
        assert!(v.iter().any(|x| x.contains("Delete policy")), "{v:?}");
    }

    #[test]
    fn a_retained_bucket_without_an_id_converges_once_released_on_v1alpha1() {
        let (mut s, _) = ready();
        s.claims.clear();
        s.accesses.clear();
        s.secrets.clear();
        let bucket = &mut s.buckets[0];
        bucket.spec.deletion_policy = cosi_api::DeletionPolicy::Retain;
        bucket.status = Some(BucketStatus {
            conditions: vec![cond(PROVISIONED, "False")],
            ..Default::default()
        });
        let gone = DeletedPair {
            name: "p0".into(),
            policy: Policy::Retain,
            bucket: Some("bc-u0".into()),
            bucket_id: None,
        };
        let deleted = std::slice::from_ref(&gone);
        assert_eq!(converged(&s, NS, &[], deleted), Ok(()));
        assert!(
            retained_recorded(&s, deleted, DriverApi::V1alpha1)
                .unwrap_err()
                .contains("not released yet")
        );
        assert_eq!(retained_recorded(&s, deleted, DriverApi::V1alpha2), Ok(()));
        let mut released = cond(PROVISIONED, "False");
        released.reason = reasons::RELEASED.into();
        s.buckets[0].status.as_mut().unwrap().conditions = vec![released];
        assert_eq!(retained_recorded(&s, deleted, DriverApi::V1alpha1), Ok(()));
        s.buckets[0].status = Some(BucketStatus {
            bucket_id: "id0".into(),
            ..Default::default()
        });
        assert_eq!(retained_recorded(&s, deleted, DriverApi::V1alpha1), Ok(()));
    }

    #[test]
    fn refusals_settle_a_pair_without_making_it_ready() {
        let (mut s, _) = ready();
        s.buckets[0].status.as_mut().unwrap().conditions =
            vec![cond(PROVISIONED, "False"), cond(PROVISION_FAILED, "True")];
        assert!(matches!(pair_state(&s, NS, "p0"), PairState::Refused(_)));
        assert_eq!(settled(&s, NS, &["p0".into()]), Ok(()));
        assert!(converged(&s, NS, &["p0".into()], &[]).is_err());
    }

    #[test]
    fn a_secret_naming_another_bucket_is_reported() {
        let (mut s, b) = ready();
        s.secrets[0].data = Some(BTreeMap::from([(
            secret_keys::s3::BUCKET_NAME.to_owned(),
            ByteString(b"other".to_vec()),
        )]));
        let v = violations(&s, NS, &b, &[]);
        assert!(v.iter().any(|x| x.contains("names bucket")), "{v:?}");
    }
}
