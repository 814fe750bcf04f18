//! `cosi migrate v1alpha1` over a COSI v1alpha1 install (upstream v0.2.x's
//! CRDs, and objects as its controller and sidecar leave them, see
//! [`crate::migrate_v1alpha1_fixtures`]) whose bucket and account are real,
//! made by cosi-driver-local serving the v1alpha1 driver API as v0.2.x's
//! sidecar made them. The old credentials keep working until `finish` and
//! stop after `--revoke-old-credentials`; every object written before is
//! read with the new Secret; the CRDs end serving only v1alpha2 with
//! v1alpha1 gone from `status.storedVersions`; a Delete bucket is never
//! deleted.
//!
//! On a real kube-apiserver always: the flow rests on how it keeps a CRD's
//! versions, `storedVersions` and immutability rules for objects stored in
//! another version, which kube-sim does not model.

use std::collections::HashMap;

use cosi_api::{BucketAccess, BucketClaim};
use cosi_cli::migrate::{MigrateError, Outcome, Source, Step};
use cosi_cli::{Stack, StackOptions};
use cosi_driver::v1alpha1::{
    AuthenticationType, DriverCreateBucketRequest, DriverGrantBucketAccessRequest,
};
use cosi_driver::{DriverApi, DriverClient};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams};

use crate::common::*;
use crate::migrate_common as mc;
use crate::migrate_v1alpha1_fixtures as v1;

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

/// Removes cosi-rs's CRDs (installed with the stack) so that the cluster
/// starts as a v0.2.x one.
async fn remove_crds(client: &kube::Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in cosi_api::crd::all() {
        let name = crd.metadata.name.unwrap();
        api.delete(&name, &DeleteParams::default()).await.unwrap();
        cosi_cli::wait::until(&api, &name, "CRD gone", TIMEOUT, cosi_cli::wait::deleted())
            .await
            .unwrap();
    }
}

/// A v0.2.x install on a real control plane of its own: one claim with
/// two objects in its bucket and one access, made for real on
/// cosi-driver-local through the v1alpha1 driver API; cosi-rs's
/// components not started.
struct World {
    stack: Stack,
    client: kube::Client,
    old_s3: aws_sdk_s3::Client,
    bucket_id: String,
    old_account: String,
    dir: tempfile::TempDir,
}

impl World {
    async fn new() -> World {
        let server = control_plane::ApiServer::real(control_plane::Options::default())
            .await
            .unwrap_or_else(|e| panic!("the control plane starts: {e}"));
        World::on(server).await
    }

    /// The next world on the same control plane: this one's components
    /// stop, and every COSI object, CRD, Secret of [`NS`] and migration
    /// record goes; the driver starts afresh on a backend of its own.
    async fn next(self) -> World {
        World::on(self.stack.into_server().await).await
    }

    async fn on(server: control_plane::ApiServer) -> World {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StackOptions::new(dir.path());
        opts.driver_api = DriverApi::V1alpha1;
        let mut stack = Stack::start_api_on(opts, server)
            .await
            .expect("the API server starts");
        let client = stack.client();
        let c = &client;
        mc::remove_objects(c).await;
        mc::remove_secrets_and_record(c, NS, Source::V1alpha1).await;
        remove_crds(c).await;
        v1::install_crds(c).await;
        stack.start_driver().await.expect("the driver starts");
        let driver_name = stack.driver_name().to_owned();

        // What v0.2.x's sidecar did: a bucket and an account, through the
        // v1alpha1 driver API.
        let driver = DriverClient::connect(stack.driver_endpoint())
            .await
            .unwrap();
        let bucket_id = driver
            .v1alpha1
            .provisioner
            .clone()
            .driver_create_bucket(DriverCreateBucketRequest {
                name: "bucket-old".into(),
                parameters: HashMap::new(),
            })
            .await
            .unwrap()
            .into_inner()
            .bucket_id;
        let granted = driver
            .v1alpha1
            .provisioner
            .clone()
            .driver_grant_bucket_access(DriverGrantBucketAccessRequest {
                bucket_id: bucket_id.clone(),
                name: "ba-old".into(),
                authentication_type: AuthenticationType::Key as i32,
                parameters: HashMap::new(),
            })
            .await
            .unwrap()
            .into_inner();
        let secrets = &granted.credentials["s3"].secrets;
        let creds = v1::S3Credentials {
            endpoint: stack.s3_endpoint_url().to_owned(),
            region: "us-east-1".into(),
            access_key_id: secrets["accessKeyID"].clone(),
            secret_access_key: secrets["accessSecretKey"].clone(),
        };
        v1::population(
            c,
            &v1::PopulationSpec {
                namespace: NS,
                driver: &driver_name,
                deletion_policy: "Delete",
                claim: "photos",
                bucket_id: &bucket_id,
                account_id: &granted.account_id,
                credentials: creds.clone(),
            },
        )
        .await;
        let old_s3 = cosi_driver_ceph_rgw::testing::s3_client(
            &creds.endpoint,
            &cosi_driver_ceph_rgw::AdminKeys {
                access_key_id: creds.access_key_id.clone(),
                secret_access_key: creds.secret_access_key.clone(),
            },
        );
        for key in KEYS {
            put(&old_s3, &bucket_id, key, key.as_bytes()).await.unwrap();
        }
        World {
            stack,
            client,
            old_s3,
            bucket_id,
            old_account: granted.account_id,
            dir,
        }
    }

    fn args(&self, step: Step) -> cosi_cli::migrate::Args {
        let mut a = mc::args(Source::V1alpha1, step, &self.dir.path().join("backup.yaml"));
        a.revoke_old_credentials = step == Step::Finish;
        a
    }

    fn start_cosi_rs(&mut self) {
        self.stack.start_sidecar().unwrap();
        self.stack.start_controller().unwrap();
    }

    /// Where the migration ended, with the run's UIDs left out.
    async fn state(&self) -> Vec<String> {
        let c = &self.client;
        let mut out = Vec::new();
        let claim = Api::<BucketClaim>::namespaced(c.clone(), NS)
            .get("photos")
            .await
            .unwrap();
        out.push(format!(
            "claim bound to {}",
            claim
                .spec
                .existing_bucket_name
                .split('-')
                .next()
                .unwrap_or_default()
        ));
        let access = Api::<BucketAccess>::namespaced(c.clone(), NS)
            .get("photos-rw")
            .await
            .unwrap();
        out.push(format!(
            "access old account: {}",
            access.account_id() == Some(self.old_account.as_str())
        ));
        let mut secrets: Vec<String> = Api::<Secret>::namespaced(c.clone(), NS)
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|s| s.metadata.name.clone().unwrap_or_default())
            .collect();
        secrets.sort();
        out.push(format!("secrets {secrets:?}"));
        let data = cosi_cli::s3::secret_data(
            &Api::<Secret>::namespaced(c.clone(), NS)
                .get("photos-creds-cosi")
                .await
                .unwrap(),
        );
        let (s3, bucket) = cosi_cli::s3::client_from_secret(&data).unwrap();
        for key in KEYS {
            out.push(format!(
                "{key}: {:?}",
                get(&s3, &bucket, key).await.map(String::from_utf8)
            ));
        }
        out.push(format!(
            "old key: {:?}",
            get(&self.old_s3, &self.bucket_id, KEYS[0]).await.is_ok()
        ));
        let state = self.stack.backend_state().unwrap();
        out.push(format!(
            "backend {} bucket(s), {} account(s)",
            state.buckets.len(),
            state.accounts.len()
        ));
        let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
        for (_, ours) in cosi_api::crd::all() {
            let crd = crds
                .get(ours.metadata.name.as_deref().unwrap())
                .await
                .unwrap();
            let versions: Vec<&str> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
            out.push(format!(
                "{}: {versions:?} stored {:?}",
                crd.metadata.name.as_deref().unwrap_or_default(),
                crd.status.unwrap().stored_versions.unwrap_or_default()
            ));
        }
        out
    }
}

/// The objects written before the migration.
const KEYS: [&str; 2] = ["a.txt", "b/c.txt"];

#[tokio::test(flavor = "multi_thread")]
async fn a_v1alpha1_install_becomes_v1alpha2_in_place_with_no_byte_lost() {
    let mut w = World::new().await;
    let c = &w.client.clone();
    let backup = w.dir.path().join("backup.yaml");
    assert_eq!(
        migrate(c, &w.args(Step::Plan)).await.unwrap(),
        Outcome::Done
    );
    assert_eq!(
        migrate(c, &w.args(Step::Apply)).await.unwrap(),
        Outcome::Done
    );
    // Again: it resumes from the backup, v1alpha1 being served no more.
    assert_eq!(
        migrate(c, &w.args(Step::Apply)).await.unwrap(),
        Outcome::Done
    );
    // The old key works until finish.
    assert_eq!(
        get(&w.old_s3, &w.bucket_id, KEYS[0]).await.unwrap(),
        KEYS[0].as_bytes()
    );

    // cosi-rs's components take over; finish refuses while v0.2.x's
    // controller is still deployed, naming it and how to stop it.
    w.start_cosi_rs();
    v1::controller_deployment(c, 1).await;
    match migrate(c, &w.args(Step::Finish)).await {
        Err(MigrateError::Refused(why)) => assert!(
            why.contains("container-object-storage-controller") && why.contains("--replicas=0"),
            "{why}"
        ),
        other => panic!("finish while v0.2.x's controller runs: {other:?}"),
    }
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(c.clone(), v1::controller::NAMESPACE)
        .patch(
            v1::controller::DEPLOYMENT,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    assert_eq!(
        migrate(c, &w.args(Step::Finish)).await.unwrap(),
        Outcome::Done
    );
    assert_eq!(
        migrate(c, &w.args(Step::Finish)).await.unwrap(),
        Outcome::Done
    );

    let claim = Api::<BucketClaim>::namespaced(c.clone(), NS)
        .get("photos")
        .await
        .unwrap();
    assert_eq!(
        claim.spec.existing_bucket_name,
        "bucket-".to_owned() + &v1_claim_uid(&backup)
    );
    // v0.2.x's components, started again by mistake, find nothing to act
    // on: v1alpha1 is not served.
    let old_claims: Api<cosi_cli::migrate::v1alpha1_objects::BucketClaim> = Api::all(c.clone());
    assert!(old_claims.list(&Default::default()).await.is_err());
    let state = w.state().await;
    let expected = [
        "claim bound to bucket".to_owned(),
        "access old account: false".into(),
        r#"secrets ["photos-creds-cosi"]"#.into(),
        r#"a.txt: Ok(Ok("a.txt"))"#.into(),
        r#"b/c.txt: Ok(Ok("b/c.txt"))"#.into(),
        "old key: false".into(),
        "backend 1 bucket(s), 1 account(s)".into(),
    ];
    assert_eq!(state[..expected.len()], expected, "{state:?}");
    for line in &state[expected.len()..] {
        assert!(
            line.ends_with(r#"["v1alpha2"] stored ["v1alpha2"]"#),
            "{line}"
        );
    }
    w.stack.shutdown().await;
}

/// A crash after every write of apply and of finish (each round on the same
/// control plane, cleared and populated again), then the step again: the
/// same end as without.
#[tokio::test(flavor = "multi_thread")]
async fn a_crash_in_apply_or_finish_ends_as_an_uninterrupted_migration() {
    let mut w = World::new().await;
    let config = w.stack.api_server().admin_config();
    let apply_writes = mc::run_counting(config.clone(), &w.args(Step::Apply)).await;
    w.start_cosi_rs();
    let finish_writes = mc::run_counting(config.clone(), &w.args(Step::Finish)).await;
    let reference = w.state().await;
    assert!(
        apply_writes > 10 && finish_writes > 5,
        "{apply_writes} {finish_writes}"
    );
    // A crash before a write leaves what a crash after the one before it
    // leaves, so after each write is between every two.
    let points = (1..=apply_writes)
        .map(|nth| (Step::Apply, nth))
        .chain((1..=finish_writes).map(|nth| (Step::Finish, nth)));
    for (step, nth) in points {
        w = w.next().await;
        let c = w.client.clone();
        if step == Step::Apply {
            crash(&w, config.clone(), step, nth).await;
        }
        assert_eq!(
            migrate(&c, &w.args(Step::Apply)).await.unwrap(),
            Outcome::Done
        );
        w.start_cosi_rs();
        if step == Step::Finish {
            crash(&w, config.clone(), step, nth).await;
        }
        assert_eq!(
            migrate(&c, &w.args(Step::Finish)).await.unwrap(),
            Outcome::Done
        );
        assert_eq!(
            w.state().await,
            reference,
            "crash after {step:?} write {nth}"
        );
    }
    w.stack.shutdown().await;
}

/// Runs `step` of `w` with a crash after its `nth` write.
async fn crash(w: &World, config: kube::Config, step: Step, nth: u64) {
    let crashed = mc::run_crashing_on(config, &w.args(step), nth, mc::When::After).await;
    assert!(crashed, "{step:?} ran out of writes before {nth}");
}

/// The UID of the v1alpha1 claim `photos`, as the backup holds it.
fn v1_claim_uid(backup: &std::path::Path) -> String {
    let text = std::fs::read_to_string(backup).unwrap();
    let list: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "BucketClaim")
        .and_then(|i| i["metadata"]["uid"].as_str())
        .unwrap()
        .to_owned()
}
