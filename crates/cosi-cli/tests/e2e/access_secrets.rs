//! BucketAccess Secrets that users touch: a Secret name two accesses ask
//! for, a Secret deleted by hand (kept while its access lives), a Secret
//! whose finalizer is forced off (written again), a Secret taken over by
//! another access, and a Secret the sidecar may not write.

use std::time::Duration;

use cosi_api::constants::annotations;
use cosi_api::constants::condition_types::{PROVISIONED, RESOURCES_VALIDATED};
use cosi_api::*;
use cosi_cli::manifests;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{PostParams, Resource as _};
use serde_json::Value;

use crate::common::*;

/// Checks of the access Secrets this often, so a test sees them.
const CHECK_INTERVAL: Duration = Duration::from_millis(200);

async fn env() -> Env {
    Env::start_with(|opts| opts.secret_check_interval = Some(CHECK_INTERVAL)).await
}

fn controller_uid(secret: &Secret) -> Option<&str> {
    secret
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

fn message(conds: &[Condition], type_: &str) -> String {
    cosi_api::conditions::find(conds, type_)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Waits until the access `name` is refused for `reason` (both
/// `ResourcesValidated` and `Provisioned` False) and a Warning Event with
/// that reason is out; the access, the refusal's message and the Event's note.
async fn refused_for(env: &Env, name: &str, reason: &str) -> (BucketAccess, String, String) {
    let access = env.wait_refused::<BucketAccess>(name).await;
    for type_ in [RESOURCES_VALIDATED, PROVISIONED] {
        assert_eq!(
            condition(access.conditions(), type_),
            Some(("False".into(), reason.into())),
            "{type_}"
        );
    }
    let why = message(access.conditions(), RESOURCES_VALIDATED);
    let note = env.warning("BucketAccess", name, reason).await;
    (access, why, note)
}

#[tokio::test]
async fn a_second_access_naming_the_same_secret_is_refused_until_the_first_is_gone() {
    let env = env().await;
    let first = env.claim_and_rw_access("shared", "first").await;
    let first_uid = first.uid().unwrap();

    // A later access asks for the same Secret name.
    env.accesses()
        .create(
            &PostParams::default(),
            &manifests::access(
                NS,
                "second",
                SINGLE,
                &[("shared", "first")],
                BucketAccessMode::ReadOnly,
            ),
        )
        .await
        .unwrap();
    let (second, why, _) = refused_for(&env, "second", "AccessSecretNameInUse").await;
    assert!(why.contains("BucketAccess default/first"), "{why}");
    assert!(why.contains("\"first\""), "{why}");
    // Refused before any grant: never handed to the sidecar.
    assert!(!second.is_handed_to_sidecar());
    assert!(second.account_id().is_none());
    assert_eq!(env.backend().accounts.len(), 1);

    // The Secret's finalizer is forced off and the Secret deleted: the
    // first access writes it again, and the second does not take it.
    let gone = env.force_delete_secret("first").await;
    let back = env
        .wait_for_object("first", "to be written again", move |s: Option<&Secret>| {
            s.is_some_and(|s| s.uid().as_ref() != Some(&gone))
        })
        .await;
    assert_eq!(controller_uid(&back), Some(first_uid.as_str()));
    env.event("BucketAccess", "first", "SecretRecreated").await;
    tokio::time::sleep(SETTLE).await;
    let second = env.accesses().get("second").await.unwrap();
    assert!(!second.is_handed_to_sidecar());
    let first = env.accesses().get("first").await.unwrap();
    assert_eq!(
        condition(first.conditions(), PROVISIONED),
        Some(("True".into(), "Provisioned".into()))
    );
    let s = env.secrets().get("first").await.unwrap();
    assert_eq!(controller_uid(&s), Some(first_uid.as_str()));
    assert_eq!(env.backend().accounts.len(), 1);

    // The first access gone, the second proceeds and gets the name.
    env.remove_access("first").await;
    let second = env.wait_provisioned::<BucketAccess>("second").await;
    let s = env.secrets().get("first").await.unwrap();
    assert_eq!(controller_uid(&s), second.uid().as_deref());
    let (s3c, bucket) = env.s3("first").await;
    assert_eq!(
        put(&s3c, &bucket, "k", b"v").await,
        Err("AccessDenied".into())
    );

    env.remove_access_and_claim("second", "shared").await;
    env.stop_empty().await;
}

#[tokio::test]
async fn a_provisioned_access_whose_secret_another_access_took_reports_it_and_writes_nothing() {
    let env = env().await;
    env.claim_and_rw_access("photos", "owner").await;
    let intruder = env
        .provisioned_access("intruder", SINGLE, "photos", BucketAccessMode::ReadOnly)
        .await;

    // As a sidecar of an older release could have done after the Secret's
    // finalizer was stripped: the Secret now names the other access.
    let mut taken = env.secrets().get("owner").await.unwrap();
    taken.metadata.owner_references = Some(vec![cosi_sidecar_owner(&intruder)]);
    let taken = env
        .secrets()
        .replace("owner", &PostParams::default(), &taken)
        .await
        .unwrap();

    let owner = env
        .wait_for_object(
            "owner",
            "to report its Secret taken",
            has_condition(BucketAccess::conditions, PROVISIONED, "False"),
        )
        .await;
    for type_ in [PROVISIONED, RESOURCES_VALIDATED] {
        assert_eq!(
            condition(owner.conditions(), type_),
            Some(("False".into(), "SecretNotOwned".into()))
        );
        let why = message(owner.conditions(), type_);
        assert!(why.contains("BucketAccess default/intruder"), "{why}");
    }
    env.warning("BucketAccess", "owner", "SecretNotOwned").await;
    tokio::time::sleep(SETTLE).await;
    let after = env.secrets().get("owner").await.unwrap();
    assert_eq!(after.resource_version(), taken.resource_version());

    // Cleanup: the Secret is the intruder's now, as far as COSI can tell.
    env.strip_secret_finalizers("owner").await;
    env.remove_access("owner").await;
    env.remove_access_and_claim("intruder", "photos").await;
    env.stop_empty().await;
}

/// A controller ownerReference to `access`, as the sidecar writes it.
fn cosi_sidecar_owner(
    access: &BucketAccess,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    access.controller_owner_ref(&()).expect("a stored object")
}

#[tokio::test]
async fn a_secret_deleted_by_hand_is_kept_while_its_access_lives_and_one_forced_away_comes_back() {
    let env = env().await;
    let access = env.claim_and_rw_access("photos", "app").await;
    let before = env.secrets().get("app").await.unwrap();
    let keys_before = env.secret("app").await;

    // A user deletes the Secret: COSI's finalizer keeps it, and the access
    // tells how to remove it properly.
    env.delete_secret("app").await;
    let note = env.warning("BucketAccess", "app", "SecretProtected").await;
    assert!(note.contains("Secret default/app"), "{note}");
    assert!(
        note.contains("kubectl delete bucketaccess app -n default"),
        "{note}"
    );
    tokio::time::sleep(SETTLE).await;
    let kept = env.secrets().get("app").await.unwrap();
    assert!(kept.meta().deletion_timestamp.is_some());
    assert!(is_protected(&kept));
    assert_eq!(kept.data, before.data);
    let (s3c, bucket) = env.s3("app").await;
    put(&s3c, &bucket, "still", b"works").await.unwrap();
    assert_eq!(
        env.events("BucketAccess", "app", "SecretProtected")
            .await
            .len(),
        1
    );
    let a = env.accesses().get("app").await.unwrap();
    assert!(provisioned(a.conditions()));

    // The finalizer forced off, the Secret vanishes; the next check writes
    // it again from a repeat grant (the local driver repeats the same key).
    let gone = env.force_delete_secret("app").await;
    let back = env
        .wait_for_object("app", "to be written again", move |s: Option<&Secret>| {
            s.is_some_and(|s| s.uid().as_ref() != Some(&gone))
        })
        .await;
    assert!(back.meta().deletion_timestamp.is_none());
    assert!(is_protected(&back));
    assert_eq!(controller_uid(&back), access.uid().as_deref());
    assert_eq!(
        annotation(&back, annotations::BUCKETACCESS_REFERENCE),
        Some("default/app")
    );
    assert_eq!(env.secret("app").await, keys_before);
    env.warning("BucketAccess", "app", "SecretRecreated").await;
    let (s3c, bucket) = env.s3("app").await;
    assert_eq!(get(&s3c, &bucket, "still").await.unwrap(), b"works");

    env.remove_access("app").await;
    assert!(!env.secret_exists("app").await);
    env.remove_claim("photos").await;
    env.stop_empty().await;
}

#[tokio::test]
async fn a_secret_the_sidecar_may_not_write_is_reported_on_the_access() {
    let env = env().await;
    // The sidecar's ClusterRole without `create` on Secrets.
    let role: Vec<Value> =
        serde_saphyr::from_multiple(include_str!("../../../../deploy/sidecar/clusterrole.yaml"))
            .unwrap();
    let mut role = role.into_iter().find(Value::is_object).unwrap();
    let apply = async |role: &Value| {
        env.stack
            .api_server()
            .apply(&role.to_string())
            .await
            .expect("apply the ClusterRole")
    };
    let full = role.clone();
    for rule in role["rules"].as_array_mut().unwrap() {
        if rule["resources"] == serde_json::json!(["secrets"]) {
            rule["verbs"] = serde_json::json!(["get", "update", "patch", "delete"]);
        }
    }
    apply(&role).await;

    env.provisioned_claim("photos", DELETE).await;
    env.rw_access("app", "photos").await;
    let (_, why, note) = refused_for(&env, "app", "SecretWriteFailed").await;
    assert!(
        why.starts_with("cannot create Secret default/app:"),
        "{why}"
    );
    assert!(
        why.contains("ClusterRole must allow create on secrets"),
        "{why}"
    );

    // Allowed again, the retry writes the Secret.
    apply(&full).await;
    env.wait_provisioned::<BucketAccess>("app").await;
    let (s3c, bucket) = env.s3("app").await;
    put(&s3c, &bucket, "k", b"v").await.unwrap();
    // The grant that could not be written returned these same keys (the
    // local driver repeats them): they are in no message.
    let data = env.secret("app").await;
    for key in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        let value = &data[key];
        assert!(!why.contains(value.as_str()) && !note.contains(value.as_str()));
    }

    env.remove_access_and_claim("app", "photos").await;
    env.stop_empty().await;
}
