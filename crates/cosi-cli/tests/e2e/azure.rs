//! The whole stack with cosi-driver-azure against Azurite (Microsoft's
//! Azure Storage emulator, started once for this test binary): a claim
//! with `protocols: [Azure]` → an access → its Secret → Microsoft's Python
//! SDK (azure-storage-blob) uploads, lists and downloads with the Secret's
//! keys alone → deleting the access refuses the token → deleting the claim
//! deletes the container. And credential rotation renewing short-lived
//! tokens: sampled all along, the Secret always holds an unexpired token
//! that works.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use cosi_api::constants::secret_keys::{azure, upstream};
use cosi_api::rotation::annotations;
use cosi_api::*;
use cosi_driver_azure::AzureDriver;
use cosi_driver_azure::testing::Azurite;
use cosi_runtime::Shutdown;
use cosi_sanity::azure::AzureTarget;
use cosi_sanity::s3::Access;
use kube::ResourceExt;
use kube::api::PostParams;
use tokio::process::Command;

use crate::common::*;

/// A BucketClass whose Buckets are deleted with their blobs.
const PURGING: &str = "azure-purging";

/// The stack serving cosi-driver-azure on the shared Azurite, with the
/// usual classes plus [`PURGING`].
async fn azure_env() -> (Env, Shutdown, &'static Azurite) {
    let azurite = tokio::task::spawn_blocking(Azurite::shared).await.unwrap();
    let driver = AzureDriver::connect(azurite.config(), azurite.key())
        .await
        .expect("the driver reaches Azurite");
    let name = driver.config().driver_name.clone();
    let (env, stop, _served) = Env::with_driver(&name, driver).await;
    let mut class =
        cosi_cli::manifests::bucket_class(PURGING, env.stack.driver_name(), DeletionPolicy::Delete);
    class
        .spec
        .parameters
        .insert("deleteNonEmptyContainers".into(), "true".into());
    kube::Api::<BucketClass>::all(env.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("create BucketClass");
    (env, stop, azurite)
}

async fn azure_claim(env: &Env, name: &str, class: &str) -> BucketClaim {
    let mut claim = cosi_cli::manifests::claim(NS, name, class);
    claim.spec.protocols = vec![Protocol::Azure];
    env.claims()
        .create(&PostParams::default(), &claim)
        .await
        .expect("create BucketClaim");
    env.wait_provisioned::<BucketClaim>(name).await
}

async fn azure_access(
    env: &Env,
    name: &str,
    class: &str,
    claim: &str,
    grace: Option<&str>,
) -> BucketAccess {
    let mut access = cosi_cli::manifests::access(
        NS,
        name,
        class,
        &[(claim, name)],
        BucketAccessMode::ReadWrite,
    );
    access.spec.protocol = Protocol::Azure;
    if let Some(grace) = grace {
        access
            .annotations_mut()
            .insert(annotations::ROTATION_GRACE.into(), grace.into());
    }
    env.accesses()
        .create(&PostParams::default(), &access)
        .await
        .expect("create BucketAccess");
    env.wait_provisioned::<BucketAccess>(name).await
}

/// Runs tests/clients/azure_blob.py with only the Secret's keys (and
/// `PATH`) in its environment; its JSON answer.
async fn python_sdk(secret: &BTreeMap<String, String>, args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/azure_blob.py");
    let home = tempfile::tempdir().unwrap();
    let out = Command::new("python3")
        .arg(&script)
        .args(args)
        .env_clear()
        .envs(secret)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("the Python SDK answers within 2 minutes")
        .expect("python3 runs");
    let token = &secret[azure::AZURE_STORAGE_SAS_TOKEN];
    let text = |b: &[u8]| String::from_utf8_lossy(b).replace(token.as_str(), "<redacted>");
    assert!(
        out.status.success(),
        "the Python SDK failed ({}); is azure-storage-blob installed (python3 -m pip install -r \
         requirements-test.txt)?\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stdout)))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_azure_claim_and_access_work_with_the_python_sdk_and_leave_nothing_behind() {
    let (env, stop, azurite) = azure_env().await;
    let api = azurite.api();
    let claim = azure_claim(&env, "photos", PURGING).await;
    let bucket = env.bucket_of(&claim).await;
    let container = bucket.bucket_id().expect("bucket ID").to_owned();
    assert!(
        api.container(&container).await.unwrap().is_some(),
        "no container"
    );
    let access = azure_access(&env, "photos-rw", SINGLE, "photos", None).await;
    let account = access.account_id().expect("account ID").to_owned();
    let policies = api.get_acl(&container).await.unwrap().acl.policies;
    assert_eq!(
        policies.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        [account.as_str()],
        "one stored access policy per access"
    );

    let secret = env.secret("photos-rw").await;
    let keys: BTreeSet<&str> = secret.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "COSI_PROTOCOL",
            azure::AZURE_STORAGE_ACCOUNT,
            azure::AZURE_STORAGE_SAS_TOKEN,
            azure::AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP,
            upstream::AZURE_STORAGE_ACCOUNT,
            upstream::AZURE_ACCESS_TOKEN,
            upstream::AZURE_EXPIRY_TIMESTAMP,
        ]),
        "only the KEP's keys and upstream's"
    );
    assert_eq!(
        secret[upstream::AZURE_ACCESS_TOKEN],
        secret[azure::AZURE_STORAGE_SAS_TOKEN]
    );
    assert_eq!(secret[azure::AZURE_STORAGE_ACCOUNT], "devstoreaccount1");
    assert!(
        secret[azure::AZURE_STORAGE_SAS_TOKEN]
            .starts_with(&format!("{}/{container}?", azurite.endpoint())),
        "the token is the container's SAS URL"
    );
    let expiry = cosi_driver_azure::time::parse_iso8601(
        &secret[azure::AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP],
    )
    .expect("an ISO 8601 expiry");
    let lifetime = expiry.duration_since(SystemTime::now()).unwrap();
    assert!(
        lifetime > Duration::from_secs(7 * 86_400 - 600),
        "the default lifetime is 7 days, not {lifetime:?}"
    );

    let wrote = python_sdk(&secret, &["write", "hello.txt", "from the Python SDK"]).await;
    assert_eq!(wrote["listed"], serde_json::json!(["hello.txt"]));
    assert_eq!(wrote["downloaded"], "from the Python SDK");

    env.remove_access("photos-rw").await;
    assert!(
        api.get_acl(&container)
            .await
            .unwrap()
            .acl
            .policies
            .is_empty(),
        "the policy is deleted"
    );
    let refused = python_sdk(&secret, &["read", "hello.txt"]).await;
    assert_eq!(
        refused["refused"], 403,
        "the revoked token still works: {refused}"
    );

    env.remove_claim("photos").await;
    env.wait_bucket_gone(&bucket.name_any()).await;
    assert!(
        api.container(&container).await.unwrap().is_none(),
        "the container is gone"
    );
    env.stop().await;
    stop.trigger();
}

/// How long the tokens of [`tokens_renewed_by_rotation_are_never_expired_or_refused`] live.
const TOKEN_LIFETIME: &str = "20s";
/// How often that test's class rotates: well within the token lifetime.
const ROTATE_EVERY: &str = "5s";

#[tokio::test(flavor = "multi_thread")]
async fn tokens_renewed_by_rotation_are_never_expired_or_refused() {
    let (env, stop, azurite) = azure_env().await;
    let mut class = cosi_cli::manifests::access_class(
        "short-lived",
        env.stack.driver_name(),
        MultiBucketAccess::SingleBucket,
    );
    class
        .spec
        .parameters
        .insert("sasTokenLifetime".into(), TOKEN_LIFETIME.into());
    class
        .annotations_mut()
        .insert(annotations::ROTATE_EVERY.into(), ROTATE_EVERY.into());
    class
        .annotations_mut()
        .insert(annotations::MAX_ROTATION_GRACE.into(), "2s".into());
    kube::Api::<BucketAccessClass>::all(env.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("create BucketAccessClass");
    let claim = azure_claim(&env, "logs", PURGING).await;
    let container = env.bucket_of(&claim).await.bucket_id().unwrap().to_owned();
    azure_access(&env, "logs-rw", "short-lived", "logs", Some("1s")).await;
    let first = env.secret("logs-rw").await;
    let probe = AzureTarget::new(
        &first[azure::AZURE_STORAGE_SAS_TOKEN],
        None,
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(probe.put("probe", b"1").await, Access::Allowed(()));

    // Sampled for longer than the token lifetime: without renewal the
    // first token would expire within the window.
    let window = Duration::from_secs(24);
    let started = Instant::now();
    let mut tokens = BTreeSet::new();
    let mut samples = 0;
    while started.elapsed() < window {
        let secret = env.secret("logs-rw").await;
        let token = &secret[azure::AZURE_STORAGE_SAS_TOKEN];
        let expiry = cosi_driver_azure::time::parse_iso8601(
            &secret[azure::AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP],
        )
        .expect("an ISO 8601 expiry");
        assert!(
            expiry > SystemTime::now(),
            "sample {samples}: the Secret holds a token that expired at {expiry:?}"
        );
        let target = AzureTarget::new(token, None, Duration::from_secs(10)).unwrap();
        assert_eq!(
            target.get("probe").await,
            Access::Allowed(b"1".to_vec()),
            "sample {samples} ({:?} in): the Secret's token does not work",
            started.elapsed()
        );
        tokens.insert(token.clone());
        samples += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        tokens.len() >= 3,
        "{} tokens in {window:?} with rotation every {ROTATE_EVERY}: the class policy did not renew them",
        tokens.len()
    );
    let policies = azurite
        .api()
        .get_acl(&container)
        .await
        .unwrap()
        .acl
        .policies;
    assert!(
        policies.len() <= 2,
        "replaced accounts were not revoked: {policies:?}"
    );
    env.remove_access("logs-rw").await;
    assert!(
        azurite
            .api()
            .get_acl(&container)
            .await
            .unwrap()
            .acl
            .policies
            .is_empty()
    );
    env.remove_claim("logs").await;
    env.stop().await;
    stop.trigger();
    eprintln!("{samples} samples, {} tokens", tokens.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_multi_bucket_azure_access_is_refused_as_out_of_range_on_the_access() {
    let (env, stop, azurite) = azure_env().await;
    let mut containers = Vec::new();
    for name in ["left", "right"] {
        let claim = azure_claim(&env, name, PURGING).await;
        containers.push(env.bucket_of(&claim).await.bucket_id().unwrap().to_owned());
    }
    let mut access = cosi_cli::manifests::access(
        NS,
        "both",
        MULTI,
        &[("left", "both-left"), ("right", "both-right")],
        BucketAccessMode::ReadWrite,
    );
    access.spec.protocol = Protocol::Azure;
    env.accesses()
        .create(&PostParams::default(), &access)
        .await
        .expect("create BucketAccess");
    let refused = env
        .wait_failed::<BucketAccess>("both", "to be refused by the driver")
        .await;
    let messages: Vec<&str> = refused
        .conditions()
        .iter()
        .map(|c| c.message.as_str())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("OutOfRange") || m.contains("reaches one container")),
        "the refusal does not say why: {messages:?}"
    );
    for c in &containers {
        let policies = azurite.api().get_acl(c).await.unwrap().acl.policies;
        assert!(policies.is_empty(), "a refused access wrote {policies:?}");
    }
    env.remove_access_and_claim("both", "left").await;
    env.remove_claim("right").await;
    env.stop().await;
    stop.trigger();
}
