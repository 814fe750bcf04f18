//! `cosi migrate upstream-v1alpha2` over an install of upstream COSI's own
//! v1alpha2: upstream's CRDs, and objects as its controller and sidecar
//! leave them (see [`crate::migrate_upstream_fixtures`]) for a real bucket
//! and account of cosi-driver-local. After `apply`, cosi-rs's controller
//! and sidecar take every claim and access over with the same bucket and
//! the same credentials and make no driver call that creates anything; a
//! claim caught mid-deletion, its Bucket marked in upstream's spelling, is
//! finished by them.

use std::time::Duration;

use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::{BucketAccess, BucketClaim, conditions};
use cosi_cli::migrate::{MigrateError, Outcome, Source, Step};
use cosi_cli::{Stack, StackOptions};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};

use crate::common::*;
use crate::migrate_common as mc;
use crate::migrate_rook::Backend;
use crate::migrate_upstream_fixtures as up;

/// The count of `method` calls the sidecar made to the driver.
fn calls(stack: &Stack, method: &str) -> u64 {
    stack
        .sidecar_registry()
        .gather()
        .iter()
        .filter(|f| f.name() == "cosi_sidecar_operation_duration_seconds")
        .flat_map(|f| f.get_metric())
        .filter(|m| {
            m.get_label()
                .iter()
                .any(|l| l.name() == "method_name" && l.value() == method)
        })
        .map(|m| m.get_histogram().get_sample_count())
        .sum()
}

/// A bucket and an account on the stack's driver, as upstream's sidecar
/// made them: the bucket's info and the credentials.
async fn backend_bucket(
    backend: &Backend,
    stack: &Stack,
    name: &str,
) -> (String, up::S3BucketInfo, String, up::S3Credentials) {
    let (account, bucket, keys) = backend
        .provision(&format!("ba-{name}"), &format!("bc-{name}"))
        .await
        .expect("the driver makes a bucket and an account");
    let info = up::S3BucketInfo {
        bucket_id: bucket.clone(),
        endpoint: stack.s3_endpoint_url().to_owned(),
        region: "us-east-1".into(),
        addressing_style: "path".into(),
    };
    let creds = up::S3Credentials {
        access_key_id: keys.access_key_id,
        secret_access_key: keys.secret_access_key,
    };
    (bucket, info, account, creds)
}

fn s3_of(info: &up::S3BucketInfo, creds: &up::S3Credentials) -> aws_sdk_s3::Client {
    cosi_driver_ceph_rgw::testing::s3_client(
        &info.endpoint,
        &cosi_driver_ceph_rgw::AdminKeys {
            access_key_id: creds.access_key_id.clone(),
            secret_access_key: creds.secret_access_key.clone(),
        },
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn cosi_rs_takes_over_an_upstream_install_with_the_same_buckets_and_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let mut stack = Stack::start_api_on(StackOptions::new(dir.path()), api_server().await)
        .await
        .expect("the API server starts");
    stack.start_driver().await.expect("the driver starts");
    let client = stack.client();
    let c = &client;
    // Upstream's CRDs, as its install leaves them.
    up::install_crds(c).await;
    let backend = Backend::local(&stack).await;
    let driver = stack.driver_name().to_owned();

    let (photos_bucket, photos_info, photos_account, photos_creds) =
        backend_bucket(&backend, &stack, "photos").await;
    up::population(
        c,
        &up::PopulationSpec {
            namespace: NS,
            driver: &driver,
            deletion_policy: "Delete",
            claim: "photos",
            bucket_id: &photos_bucket,
            info: photos_info.clone(),
            account_id: &photos_account,
            credentials: photos_creds.clone(),
        },
    )
    .await;
    let (old_bucket, old_info, old_account, old_creds) =
        backend_bucket(&backend, &stack, "old").await;
    up::population(
        c,
        &up::PopulationSpec {
            namespace: NS,
            driver: &driver,
            deletion_policy: "Delete",
            claim: "old",
            bucket_id: &old_bucket,
            info: old_info,
            account_id: &old_account,
            credentials: old_creds,
        },
    )
    .await;
    let s3 = s3_of(&photos_info, &photos_creds);
    put(&s3, &photos_bucket, "a.txt", b"kept").await.unwrap();
    // A claim caught mid-deletion, its Bucket marked in upstream's
    // spelling; its access went first.
    Api::<kube::api::DynamicObject>::namespaced_with(
        c.clone(),
        NS,
        &up::Kind::BucketAccess.resource(),
    )
    .delete("old-rw", &DeleteParams::default())
    .await
    .unwrap();
    let backup = dir.path().join("backup.yaml");

    // While upstream's controller runs, nothing happens (kube-sim runs no
    // Pods).
    if stack.sim().is_none() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "controller", "namespace": NS},
            "spec": {"containers": [{"name": "objectstorage-controller",
                "image": "registry.k8s.io/sig-storage/objectstorage-controller:v0.3.0"}]}
        }))
        .unwrap();
        Api::<Pod>::namespaced(c.clone(), NS)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
        let apply = mc::args(Source::UpstreamV1alpha2, Step::Apply, &backup);
        match migrate(c, &apply).await {
            Err(MigrateError::Refused(why)) => {
                assert!(
                    why.contains("Pod default/controller runs upstream's controller"),
                    "{why}"
                )
            }
            other => panic!("apply while upstream runs: {other:?}"),
        }
        assert!(!backup.exists());
        Api::<Pod>::namespaced(c.clone(), NS)
            .delete("controller", &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }

    up::deleting_claim(c, NS, "old", up::BucketMark::Misspelt).await;
    let plan = mc::args(Source::UpstreamV1alpha2, Step::Plan, &backup);
    assert_eq!(migrate(c, &plan).await.unwrap(), Outcome::Done);
    let apply = mc::args(Source::UpstreamV1alpha2, Step::Apply, &backup);
    assert_eq!(migrate(c, &apply).await.unwrap(), Outcome::Done);
    assert_eq!(migrate(c, &apply).await.unwrap(), Outcome::Done);

    // cosi-rs's CRDs, and cosi-rs's keys beside upstream's in the Secret,
    // with the same credentials.
    let crd: CustomResourceDefinition = Api::all(c.clone())
        .get("buckets.objectstorage.k8s.io")
        .await
        .unwrap();
    let ours = cosi_api::crd::all()
        .into_iter()
        .find(|(_, d)| d.metadata.name.as_deref() == Some("buckets.objectstorage.k8s.io"))
        .unwrap()
        .1;
    assert_eq!(
        crd.metadata
            .annotations
            .unwrap_or_default()
            .get("api-approved.kubernetes.io"),
        ours.metadata
            .annotations
            .unwrap_or_default()
            .get("api-approved.kubernetes.io")
    );
    let secrets: Api<Secret> = Api::namespaced(c.clone(), NS);
    let data = cosi_cli::s3::secret_data(&secrets.get("photos-creds").await.unwrap());
    assert_eq!(data["AWS_ACCESS_KEY_ID"], photos_creds.access_key_id);
    assert_eq!(data["COSI_S3_ACCESS_KEY_ID"], photos_creds.access_key_id);

    // cosi-rs's components take over: nothing is created or granted again.
    stack.start_sidecar().unwrap();
    stack.start_controller().unwrap();
    let claims: Api<BucketClaim> = Api::namespaced(c.clone(), NS);
    let accesses: Api<BucketAccess> = Api::namespaced(c.clone(), NS);
    cosi_cli::wait::until(
        &claims,
        "photos",
        "claim",
        TIMEOUT,
        cosi_cli::wait::provisioned(BucketClaim::conditions),
    )
    .await
    .unwrap();
    cosi_cli::wait::until(
        &claims,
        "old",
        "deleted claim",
        TIMEOUT,
        cosi_cli::wait::deleted(),
    )
    .await
    .unwrap();
    let finish = mc::args(Source::UpstreamV1alpha2, Step::Finish, &backup);
    assert_eq!(migrate(c, &finish).await.unwrap(), Outcome::Done);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let access = accesses.get("photos-rw").await.unwrap();
    assert!(conditions::is_true(access.conditions(), PROVISIONED));
    assert_eq!(access.account_id(), Some(photos_account.as_str()));
    for method in [
        "DriverCreateBucket",
        "DriverGrantBucketAccess",
        "DriverGenerateBucketId",
    ] {
        assert_eq!(calls(&stack, method), 0, "{method}");
    }
    assert_eq!(
        calls(&stack, "DriverDeleteBucket"),
        1,
        "the claim being deleted"
    );
    // The same credentials, through cosi-rs's Secret keys.
    let data = cosi_cli::s3::secret_data(&secrets.get("photos-creds").await.unwrap());
    let (s3, bucket) = cosi_cli::s3::client_from_secret(&data).unwrap();
    assert_eq!(bucket, photos_bucket);
    assert_eq!(get(&s3, &bucket, "a.txt").await.unwrap(), b"kept");
    let state = stack.backend_state().unwrap();
    assert!(state.buckets.iter().any(|b| b.id == photos_bucket));
    assert!(
        !state.buckets.iter().any(|b| b.id == old_bucket),
        "the deleted claim's bucket went"
    );
    stack.shutdown().await;
}

async fn migrate(
    client: &kube::Client,
    args: &cosi_cli::migrate::Args,
) -> Result<Outcome, MigrateError> {
    cosi_cli::migrate::run_with(
        client.clone(),
        args,
        &cosi_cli::migrate::Progress::new(true),
    )
    .await
}

/// What a takeover round leaves of the claim `claim`: its Bucket's and
/// access's conditions (type, status, reason) and the keys of its Secret.
async fn takeover_state(client: &kube::Client, ns: &str, claim: &str) -> Vec<String> {
    let claims: Api<BucketClaim> = Api::namespaced(client.clone(), ns);
    let bound = claims.get(claim).await.unwrap();
    let bucket_name = bound.status.as_ref().unwrap().bound_bucket_name.clone();
    let bucket = Api::<cosi_api::Bucket>::all(client.clone())
        .get(&bucket_name)
        .await
        .unwrap();
    let access = Api::<BucketAccess>::namespaced(client.clone(), ns)
        .get(&format!("{claim}-rw"))
        .await
        .unwrap();
    let brief = |c: &[cosi_api::Condition]| -> Vec<String> {
        c.iter()
            .map(|c| format!("{} {} {}", c.type_, c.status, c.reason))
            .collect()
    };
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get(&format!("{claim}-creds"))
        .await
        .unwrap();
    let mut out = brief(bucket.conditions());
    out.extend(brief(access.conditions()));
    out.extend(secret.data.unwrap_or_default().into_keys());
    out.extend(secret.metadata.annotations.unwrap_or_default().into_keys());
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_at_any_write_of_apply_ends_as_an_uninterrupted_takeover() {
    let dir = tempfile::tempdir().unwrap();
    let mut stack = Stack::start_api_on(StackOptions::new(dir.path()), api_server().await)
        .await
        .expect("the API server starts");
    stack.start_driver().await.expect("the driver starts");
    let client = stack.client();
    let c = &client;
    let backend = Backend::local(&stack).await;
    let driver = stack.driver_name().to_owned();
    // One round: earlier rounds' objects removed (on a real server,
    // upstream's CRDs installed again prune cosi-rs's fields from them as
    // they are read, so apply would take them over again and write more
    // each round), upstream's CRDs (again), a claim and an access in a
    // namespace of their own, apply crashed at its `nth` write then run
    // again; what it leaves, and whether the crash happened.
    let round = async |nth: u64, when: mc::When| {
        let tag = format!("{nth}{}", if when == mc::When::Before { "b" } else { "a" });
        let (ns, claim) = (format!("u{tag}"), format!("c{tag}"));
        mc::remove_objects(c).await;
        up::install_crds(c).await;
        up::ensure_namespace(c, &ns).await;
        let (bucket, info, account, creds) = backend_bucket(&backend, &stack, &claim).await;
        up::population(
            c,
            &up::PopulationSpec {
                namespace: &ns,
                driver: &driver,
                deletion_policy: "Delete",
                claim: &claim,
                bucket_id: &bucket,
                info,
                account_id: &account,
                credentials: creds,
            },
        )
        .await;
        let backup = dir.path().join(format!("backup-{tag}.yaml"));
        let apply = mc::args(Source::UpstreamV1alpha2, Step::Apply, &backup);
        let crashed = nth > 0 && mc::run_crashing_on(c_config(&stack), &apply, nth, when).await;
        assert_eq!(migrate(c, &apply).await.unwrap(), Outcome::Done);
        (takeover_state(c, &ns, &claim).await, crashed)
    };
    let (reference, _) = round(0, mc::When::Before).await;
    assert!(
        reference.contains(&"Provisioned True Provisioned".to_owned()),
        "{reference:?}"
    );
    assert!(
        reference.contains(&"AWS_ACCESS_KEY_ID".to_owned()),
        "{reference:?}"
    );
    let mut rounds = 0;
    for nth in 1.. {
        let mut any = false;
        for when in [mc::When::Before, mc::When::After] {
            let (got, crashed) = round(nth, when).await;
            assert_eq!(got, reference, "crash at write {nth} ({when:?})");
            any |= crashed;
            rounds += 1;
        }
        if !any {
            break;
        }
        assert!(nth < 100, "apply keeps writing");
    }
    assert!(rounds > 4, "only {rounds} rounds");
    stack.shutdown().await;
}

fn c_config(stack: &Stack) -> kube::Config {
    stack.api_server().admin_config()
}
