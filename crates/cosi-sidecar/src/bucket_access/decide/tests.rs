use super::*;
use crate::bucket_access::requests::service_account;
use cosi_api::testing::AccessExt;
use cosi_api::{
    AccessedBucket, BucketAccessMode, BucketAccessStatus, BucketStatus, Condition, Protocol,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use std::sync::Arc;

use crate::test_support::{self, cond, driver};

struct A(BucketAccess);

impl A {
    fn new() -> Self {
        let mut a = test_support::access("ns", "u1", "c1", "s1");
        a.metadata.generation = Some(1);
        Self(a)
    }
    fn handed_off(mut self) -> Self {
        self.0.status = Some(BucketAccessStatus {
            accessed_buckets: vec![AccessedBucket {
                bucket_name: "bc-1".into(),
                bucket_id: String::new(),
                bucket_claim_name: "c1".into(),
            }],
            driver_name: "d.example.com".into(),
            authentication_type: Some(AuthenticationType::Key),
            ..Default::default()
        });
        self
    }
    fn finalized(mut self) -> Self {
        self.0.metadata.finalizers = Some(vec![PROTECTION_FINALIZER.into()]);
        self
    }
    fn account(mut self) -> Self {
        self.0.status.as_mut().unwrap().account_id = "acct-1".into();
        self
    }
    fn condition(mut self, c: Condition) -> Self {
        self.0.status.as_mut().unwrap().conditions.push(c);
        self
    }
    fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        self
    }
}

fn bucket(provisioned: bool) -> Bucket {
    let mut b = test_support::bucket(vec![]);
    if provisioned {
        b.status = Some(BucketStatus {
            conditions: vec![cond(condition_types::PROVISIONED, "True", "Provisioned", 1)],
            bucket_id: "id-1".into(),
            protocols: vec![Protocol::S3],
            ..Default::default()
        });
    }
    b
}

fn observed(bucket: Option<Bucket>, secret: Option<Secret>) -> Observed {
    Observed {
        buckets: vec![bucket],
        secrets: vec![secret],
    }
}

fn grant_step(a: &BucketAccess, o: &Observed) -> GrantStep {
    let t = targets(a).unwrap();
    decide_grant(a, &driver(), &t, o)
}

#[test]
fn accesses_are_ignored_until_handed_off_to_this_driver() {
    assert_eq!(decide(&A::new().0, &driver()), Step::Done);
    let mut other = A::new().handed_off();
    other.0.status.as_mut().unwrap().driver_name = "other.example.com".into();
    assert_eq!(decide(&other.0, &driver()), Step::Done);
    assert_eq!(
        decide(&A::new().handed_off().0, &driver()),
        Step::AddFinalizer
    );
    assert_eq!(
        decide(&A::new().handed_off().finalized().0, &driver()),
        Step::Provision
    );
}

#[test]
fn deletion_is_cleaned_up_once() {
    let a = A::new().handed_off().finalized().account().deleting();
    assert_eq!(decide(&a.0, &driver()), Step::Cleanup);
    // The KEP's annotation alone, as anyone who may edit the access can
    // write it, skips nothing.
    let annotated = a.0.clone().annotated_cleaned_up();
    assert_eq!(decide(&annotated, &driver()), Step::Cleanup);
    assert_eq!(
        decide_cleanup(&annotated, &[], CleanupDone::default()),
        CleanupStep::Revoke { lookup: false }
    );
    // The sidecar's record and the annotation: done.
    let done = a.0.clone().cleaned_up();
    assert_eq!(decide(&done, &driver()), Step::Done);
    // Recorded but not yet annotated (cut short in between): only the mark.
    let mut recorded = a.0.clone();
    recorded.status.as_mut().unwrap().revoked = true;
    assert_eq!(decide(&recorded, &driver()), Step::Cleanup);
    assert_eq!(
        decide_cleanup(&recorded, &[], CleanupDone::default()),
        CleanupStep::MarkCleanupFinished
    );
    assert_eq!(decide(&A::new().deleting().0, &driver()), Step::Done);
}

#[test]
fn a_refused_access_is_not_retried_for_the_same_generation() {
    let a = A::new().handed_off().finalized().condition(cond(
        condition_types::PROVISIONED,
        "False",
        reasons::PROVISION_REFUSED,
        1,
    ));
    assert_eq!(decide(&a.0, &driver()), Step::Done);
}

#[test]
fn grants_wait_for_provisioned_buckets() {
    let a = A::new().handed_off().finalized();
    assert!(matches!(
        grant_step(&a.0, &observed(None, None)),
        GrantStep::Wait { .. }
    ));
    assert!(matches!(
        grant_step(&a.0, &observed(Some(bucket(false)), None)),
        GrantStep::Wait { .. }
    ));
    assert_eq!(
        grant_step(&a.0, &observed(Some(bucket(true)), None)),
        GrantStep::GenerateAccountId
    );
    let a = a.account();
    assert_eq!(
        grant_step(&a.0, &observed(Some(bucket(true)), None)),
        GrantStep::Grant
    );
}

#[test]
fn a_bucket_being_deleted_is_refused() {
    for key in [
        annotations::BUCKETCLAIM_BEING_DELETED,
        annotations::BUCKETCLAIM_BEING_DELETED_UPSTREAM,
    ] {
        let a = A::new().handed_off().finalized();
        let mut b = bucket(true);
        b.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.into(), String::new());
        let GrantStep::Refuse(d) = grant_step(&a.0, &observed(Some(b), None)) else {
            panic!("expected a refusal with {key}");
        };
        assert_eq!(d[0].reason, reasons::BUCKET_BEING_DELETED);
        assert_eq!(d[1].type_, condition_types::PROVISIONED);
        assert_eq!(d[1].status, Status::False);
    }
}

#[test]
fn a_protocol_the_bucket_lacks_is_refused() {
    let mut a = A::new().handed_off().finalized();
    a.0.spec.protocol = Protocol::Azure;
    let GrantStep::Refuse(d) = grant_step(&a.0, &observed(Some(bucket(true)), None)) else {
        panic!("expected a refusal");
    };
    assert!(
        d[0].message.contains("supports S3, not Azure"),
        "{}",
        d[0].message
    );
}

/// A Secret named like the access's, owned by nobody.
fn foreign_secret() -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("s1".into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn a_secret_owned_by_someone_else_is_a_conflict() {
    let a = A::new().handed_off().finalized();
    let foreign = foreign_secret();
    let GrantStep::SecretConflict(d) =
        grant_step(&a.0, &observed(Some(bucket(true)), Some(foreign)))
    else {
        panic!("expected a conflict");
    };
    assert_eq!(d[0].status, Status::False);
    assert!(d[0].message.contains("ns/s1"), "{}", d[0].message);
}

fn provisioned(a: A) -> A {
    a.account()
        .condition(cond(condition_types::PROVISIONED, "True", "Provisioned", 1))
}

fn complete_secret(a: &BucketAccess) -> Secret {
    let data = secret::test_s3_data();
    let mut s = secret::new_secret(a, "c1", "s1", data);
    s.metadata.uid = Some("secret-uid".into());
    s
}

#[test]
fn a_provisioned_access_whose_secret_another_access_took_is_provisioned_no_more() {
    let a = provisioned(A::new().handed_off().finalized());
    let mut other = A::new();
    other.0.metadata.name = Some("ba-other".into());
    other.0.metadata.uid = Some("u-other".into());
    let taken = complete_secret(&other.0);
    let GrantStep::SecretConflict(d) = grant_step(&a.0, &observed(Some(bucket(true)), Some(taken)))
    else {
        panic!("expected a conflict");
    };
    assert_eq!(d.len(), 2);
    for c in &d {
        assert_eq!(
            (c.status, c.reason.as_str()),
            (Status::False, reasons::SECRET_NOT_OWNED)
        );
        assert!(
            c.message.contains("owned by BucketAccess ns/ba-other"),
            "{}",
            c.message
        );
    }
    assert_eq!(d[1].type_, condition_types::PROVISIONED);
}

#[test]
fn a_secret_marked_for_deletion_keeps_the_access_ready_and_is_named() {
    let a = provisioned(A::new().handed_off().finalized());
    let mut s = complete_secret(&a.0);
    s.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    let o = observed(Some(bucket(true)), Some(s));
    assert_eq!(grant_step(&a.0, &o), GrantStep::Ready);
    let t = targets(&a.0).unwrap();
    assert_eq!(
        secrets_marked_for_deletion(&a.0, &t, &o.secrets),
        [("s1", "secret-uid".to_owned())]
    );
    let kept = observed(Some(bucket(true)), Some(complete_secret(&a.0)));
    assert!(secrets_marked_for_deletion(&a.0, &t, &kept.secrets).is_empty());
    // Another access's Secret being deleted is none of this access's business.
    let mut other = complete_secret(&A::new().0);
    other.metadata.owner_references.as_mut().unwrap()[0].uid = "u-other".into();
    other.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    assert!(secrets_marked_for_deletion(&a.0, &t, &[Some(other)]).is_empty());
}

#[test]
fn a_vanished_secret_of_a_provisioned_access_is_granted_again() {
    let a = provisioned(A::new().handed_off().finalized());
    assert_eq!(
        grant_step(&a.0, &observed(Some(bucket(true)), None)),
        GrantStep::Grant
    );
}

#[test]
fn a_secret_that_cannot_be_written_invalidates_the_access() {
    let a = A::new().handed_off().finalized().account();
    let d = secret_write_conditions(&a.0, "cannot create Secret ns/s1: denied");
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].type_, condition_types::RESOURCES_VALIDATED);
    assert_eq!(d[1].type_, condition_types::PROVISIONED);
    for c in &d {
        assert_eq!(
            (c.status, c.reason.as_str()),
            (Status::False, reasons::SECRET_WRITE_FAILED)
        );
    }
    // Once provisioned, Provisioned is kept (its Secret may be in place).
    let d = secret_write_conditions(&provisioned(A::new().handed_off()).0, "m");
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].type_, condition_types::RESOURCES_VALIDATED);
}

#[test]
fn secrets_are_read_only_when_they_can_change_the_step() {
    let a = A::new().handed_off().finalized();
    let foreign = foreign_secret();
    // Not provisioned or missing: the step is the same whatever the
    // Secret holds, so it is not read.
    for b in [None, Some(bucket(false))] {
        assert!(!needs_secrets(&a.0, std::slice::from_ref(&b)));
        assert_eq!(
            grant_step(&a.0, &observed(b.clone(), None)),
            grant_step(&a.0, &observed(b, Some(foreign.clone())))
        );
    }
    assert!(needs_secrets(&a.0, &[Some(bucket(true))]));
    let ready = A::new().handed_off().finalized().account().condition(cond(
        condition_types::PROVISIONED,
        "True",
        "Provisioned",
        1,
    ));
    assert!(needs_secrets(&ready.0, &[None]));
}

#[test]
fn a_granted_access_with_complete_secrets_is_ready() {
    let a = A::new().handed_off().finalized().account().condition(cond(
        condition_types::PROVISIONED,
        "True",
        "Provisioned",
        1,
    ));
    assert!(looks_ready(&a.0));
    let data = secret::test_s3_data();
    let s = secret::new_secret(&a.0, "c1", "s1", data);
    assert_eq!(
        grant_step(&a.0, &observed(Some(bucket(true)), Some(s))),
        GrantStep::Ready
    );
    // The Secret is gone: grant again (same account).
    assert_eq!(
        grant_step(&a.0, &observed(Some(bucket(true)), None)),
        GrantStep::Grant
    );
}

#[test]
fn service_account_auth_sends_the_workload_identity_only_then() {
    let mut a = A::new().handed_off();
    assert!(service_account(&a.0).is_none());
    a.0.status.as_mut().unwrap().authentication_type = Some(AuthenticationType::ServiceAccount);
    a.0.spec.service_account_name = "app".into();
    let sa = service_account(&a.0).unwrap();
    assert_eq!((sa.namespace.as_str(), sa.name.as_str()), ("ns", "app"));
}

#[test]
fn inconsistent_hand_off_is_named() {
    let mut a = A::new().handed_off();
    a.0.status.as_mut().unwrap().accessed_buckets[0].bucket_claim_name = "other".into();
    assert!(targets(&a.0).unwrap_err().contains("\"c1\""));
}

#[test]
fn only_waiting_accesses_of_this_driver_are_mapped_from_a_bucket() {
    let waiting = Arc::new(A::new().handed_off().finalized().0);
    let ready = Arc::new(
        A::new()
            .handed_off()
            .finalized()
            .account()
            .condition(cond(condition_types::PROVISIONED, "True", "Provisioned", 1))
            .0,
    );
    for a in [&waiting, &ready] {
        let named = buckets_named(a);
        assert_eq!(named.len(), 1);
        assert_eq!(named[0], (String::new(), bucket(true).name_any()));
    }
    assert!(buckets_named(&A::new().0).is_empty());
    let refs = waiting_on(&bucket(true), &[waiting, ready], "d.example.com");
    assert_eq!(refs.len(), 1);
    assert!(waiting_on(&bucket(true), &[Arc::new(A::new().handed_off().0)], "x").is_empty());
}

fn cleanup_step(a: &BucketAccess, secret: Option<Secret>, done: CleanupDone) -> CleanupStep {
    decide_cleanup(a, &[secret], done)
}

#[test]
fn cleanup_deletes_the_own_secret_before_revoking() {
    let a = A::new().handed_off().finalized().account().deleting().0;
    let own = complete_secret(&a);
    assert_eq!(
        cleanup_step(&a, Some(own), CleanupDone::default()),
        CleanupStep::DeleteSecret("s1".into())
    );
    // Even once revoked (a cleanup starting again), a Secret left is deleted first.
    let revoked = CleanupDone {
        revoked: true,
        rotated_revoked: true,
    };
    assert_eq!(
        cleanup_step(&a, Some(complete_secret(&a)), revoked),
        CleanupStep::DeleteSecret("s1".into())
    );
}

#[test]
fn cleanup_never_touches_a_secret_it_does_not_own() {
    let a = A::new().handed_off().finalized().account().deleting().0;
    assert_eq!(
        cleanup_step(&a, Some(foreign_secret()), CleanupDone::default()),
        CleanupStep::Revoke { lookup: false }
    );
}

#[test]
fn cleanup_revokes_the_live_account_then_the_rotated_ones_then_tells_the_controller() {
    let a = A::new().handed_off().finalized().account().deleting().0;
    let mut done = CleanupDone::default();
    assert_eq!(
        cleanup_step(&a, None, done),
        CleanupStep::Revoke { lookup: false }
    );
    done.revoked = true;
    assert_eq!(cleanup_step(&a, None, done), CleanupStep::RevokeRotated);
    done.rotated_revoked = true;
    assert_eq!(cleanup_step(&a, None, done), CleanupStep::RecordRevoked);
}

#[test]
fn cleanup_looks_up_an_account_whose_grant_started_before_its_id_was_persisted() {
    let a = A::new().handed_off().finalized().deleting().0;
    assert_eq!(
        cleanup_step(&a, None, CleanupDone::default()),
        CleanupStep::RevokeRotated,
        "no account ID and no grant started: nothing to revoke"
    );
    // The annotation earlier versions wrote is anyone's: not read.
    let mut annotated = a.clone();
    annotated.metadata.annotations = Some(
        [(
            annotations::SIDECAR_GRANT_STARTED.to_owned(),
            "true".to_owned(),
        )]
        .into_iter()
        .collect(),
    );
    assert_eq!(
        cleanup_step(&annotated, None, CleanupDone::default()),
        CleanupStep::RevokeRotated
    );
    let a = a.grant_started();
    assert_eq!(
        cleanup_step(&a, None, CleanupDone::default()),
        CleanupStep::Revoke { lookup: true }
    );
}

#[test]
fn cleanup_of_several_secrets_deletes_each_owned_one_in_turn() {
    let mut a = A::new().handed_off().finalized().account().deleting().0;
    a.spec.bucket_claims.push(BucketAccessClaim::new(
        "c2",
        "s2",
        BucketAccessMode::ReadWrite,
    ));
    let second = secret::new_secret(&a, "c2", "s2", secret::test_s3_data());
    assert_eq!(
        decide_cleanup(
            &a,
            &[Some(foreign_secret()), Some(second)],
            CleanupDone::default()
        ),
        CleanupStep::DeleteSecret("s2".into())
    );
}
