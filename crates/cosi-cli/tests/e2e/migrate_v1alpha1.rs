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

#[tokio::test(flavor = "multi_thread")]
async fn a_v1alpha1_install_becomes_v1alpha2_in_place_with_no_byte_lost() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = StackOptions::new(dir.path());
    opts.driver_api = DriverApi::V1alpha1;
    let server = control_plane::ApiServer::real(control_plane::Options::default())
        .await
        .unwrap_or_else(|e| panic!("the control plane starts: {e}"));
    let mut stack = Stack::start_api_on(opts, server)
        .await
        .expect("the API server starts");
    let client = stack.client();
    let c = &client;
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
    for key in ["a.txt", "b/c.txt"] {
        put(&old_s3, &bucket_id, key, key.as_bytes()).await.unwrap();
    }

    let backup = dir.path().join("backup.yaml");
    let plan = mc::args(Source::V1alpha1, Step::Plan, &backup);
    assert_eq!(migrate(c, &plan).await.unwrap(), Outcome::Done);
    let apply = mc::args(Source::V1alpha1, Step::Apply, &backup);
    assert_eq!(migrate(c, &apply).await.unwrap(), Outcome::Done);
    // Again: it resumes from the backup, v1alpha1 being served no more.
    assert_eq!(migrate(c, &apply).await.unwrap(), Outcome::Done);

    // cosi-rs's components take over.
    stack.start_sidecar().unwrap();
    stack.start_controller().unwrap();
    let mut finish = mc::args(Source::V1alpha1, Step::Finish, &backup);
    finish.revoke_old_credentials = true;
    // The old key works until finish.
    assert_eq!(get(&old_s3, &bucket_id, "a.txt").await.unwrap(), b"a.txt");
    assert_eq!(migrate(c, &finish).await.unwrap(), Outcome::Done);
    assert_eq!(migrate(c, &finish).await.unwrap(), Outcome::Done);

    let claims: Api<BucketClaim> = Api::namespaced(c.clone(), NS);
    let claim = claims.get("photos").await.unwrap();
    assert_eq!(
        claim.spec.existing_bucket_name,
        "bucket-".to_owned() + &v1_claim_uid(&backup)
    );
    let accesses: Api<BucketAccess> = Api::namespaced(c.clone(), NS);
    let access = accesses.get("photos-rw").await.unwrap();
    assert_ne!(access.account_id(), Some(granted.account_id.as_str()));
    let secrets: Api<Secret> = Api::namespaced(c.clone(), NS);
    assert!(
        secrets.get_opt("photos-creds").await.unwrap().is_none(),
        "the old Secret went"
    );
    let data = cosi_cli::s3::secret_data(&secrets.get("photos-creds-cosi").await.unwrap());
    let (s3, bucket) = cosi_cli::s3::client_from_secret(&data).unwrap();
    assert_eq!(bucket, bucket_id);
    for key in ["a.txt", "b/c.txt"] {
        assert_eq!(get(&s3, &bucket, key).await.unwrap(), key.as_bytes());
    }
    assert!(
        get(&old_s3, &bucket_id, "a.txt").await.is_err(),
        "the old key is revoked"
    );
    let state = stack.backend_state().unwrap();
    assert_eq!(state.buckets.len(), 1, "the bucket stays, none made");
    assert_eq!(state.accounts.len(), 1, "only the new account");

    // The CRDs serve v1alpha2 alone; v1alpha1 is not stored any more.
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    for (_, ours) in cosi_api::crd::all() {
        let crd = crds
            .get(ours.metadata.name.as_deref().unwrap())
            .await
            .unwrap();
        let versions: Vec<&str> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(versions, ["v1alpha2"]);
        assert_eq!(crd.status.unwrap().stored_versions.unwrap(), ["v1alpha2"]);
    }
    stack.shutdown().await;
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
