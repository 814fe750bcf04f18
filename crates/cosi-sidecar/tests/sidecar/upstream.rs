//! Drivers of upstream's v1alpha2 driver API (`sigs.k8s.io.cosi.v1alpha2`):
//! detection, one call per object by name, endpoint and region in their
//! places, refusals before any RPC, recovery of IDs that were never
//! persisted, and bad replies that change nothing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use cosi_api::constants::{condition_types, secret_keys};
use cosi_api::reasons;
use cosi_api::{AuthenticationType, BucketAccessMode, BucketAccessModes};
use cosi_driver::testing::TestServer;
use cosi_driver::upstream as up;
use cosi_driver::upstream::identity_server::{Identity, IdentityServer};
use cosi_driver::upstream::provisioner_server::{Provisioner, ProvisionerServer};
use cosi_driver::upstream::{access_mode::Mode, object_protocol::Type};
use cosi_sidecar::DriverApi;
use tonic::{Request, Response, Status};

use crate::common::replay::{ENDPOINT, serve_other_package, serve_router};
use crate::common::*;

const REGION: &str = "eu-west-3";
const SECRET_KEY: &str = "UPSTREAM-SECRET-VALUE";

/// What the double's backend holds.
#[derive(Default)]
struct Backend {
    /// Bucket name → bucket ID.
    buckets: BTreeMap<String, String>,
    /// Account name → (account ID, bucket IDs, modes).
    accounts: BTreeMap<String, (String, Vec<(String, String)>)>,
    /// Every call: (RPC, its name or ID).
    calls: Vec<(&'static str, String)>,
    /// Answer DriverCreateBucket with an empty bucket ID.
    empty_bucket_id: bool,
    /// Answer grants without credentials.
    no_credentials: bool,
}

/// A driver of upstream's v1alpha2 API whose IDs are `id-<name>`.
#[derive(Clone, Default)]
struct UpstreamDriver(Arc<Mutex<Backend>>);

impl UpstreamDriver {
    fn lock(&self) -> MutexGuard<'_, Backend> {
        self.0.lock().unwrap()
    }

    fn calls(&self) -> Vec<&'static str> {
        self.lock().calls.iter().map(|(m, _)| *m).collect()
    }

    fn record(&self, method: &'static str, what: &str) {
        self.lock().calls.push((method, what.to_owned()));
    }

    fn serve(&self, endpoint: &cosi_driver::Endpoint) -> TestServer {
        let router = tonic::transport::Server::builder()
            .add_service(IdentityServer::new(self.clone()))
            .add_service(ProvisionerServer::new(self.clone()));
        serve_router(endpoint, router)
    }
}

fn s3_info(bucket: &str) -> up::ObjectProtocolAndBucketInfo {
    up::ObjectProtocolAndBucketInfo {
        s3: Some(up::S3BucketInfo {
            bucket_id: bucket.into(),
            endpoint: ENDPOINT.into(),
            region: REGION.into(),
            addressing_style: None,
        }),
        ..Default::default()
    }
}

#[tonic::async_trait]
impl Identity for UpstreamDriver {
    async fn driver_get_info(
        &self,
        _: Request<up::DriverGetInfoRequest>,
    ) -> Result<Response<up::DriverGetInfoResponse>, Status> {
        Ok(Response::new(up::DriverGetInfoResponse {
            name: DRIVER.into(),
            supported_protocols: vec![up::ObjectProtocol {
                r#type: Type::S3 as i32,
            }],
        }))
    }
}

#[tonic::async_trait]
impl Provisioner for UpstreamDriver {
    async fn driver_create_bucket(
        &self,
        req: Request<up::DriverCreateBucketRequest>,
    ) -> Result<Response<up::DriverCreateBucketResponse>, Status> {
        let req = req.into_inner();
        self.record("DriverCreateBucket", &req.name);
        let mut b = self.lock();
        let id = format!("id-{}", req.name);
        b.buckets.insert(req.name.clone(), id.clone());
        Ok(Response::new(up::DriverCreateBucketResponse {
            bucket_id: if b.empty_bucket_id { String::new() } else { id },
            protocols: Some(s3_info(&req.name)),
        }))
    }

    async fn driver_get_existing_bucket(
        &self,
        req: Request<up::DriverGetExistingBucketRequest>,
    ) -> Result<Response<up::DriverGetExistingBucketResponse>, Status> {
        let req = req.into_inner();
        self.record("DriverGetExistingBucket", &req.existing_bucket_id);
        Ok(Response::new(up::DriverGetExistingBucketResponse {
            bucket_id: req.existing_bucket_id.clone(),
            protocols: Some(s3_info(&req.existing_bucket_id)),
        }))
    }

    async fn driver_delete_bucket(
        &self,
        req: Request<up::DriverDeleteBucketRequest>,
    ) -> Result<Response<up::DriverDeleteBucketResponse>, Status> {
        let req = req.into_inner();
        self.record("DriverDeleteBucket", &req.bucket_id);
        self.lock().buckets.retain(|_, id| *id != req.bucket_id);
        Ok(Response::new(up::DriverDeleteBucketResponse {}))
    }

    async fn driver_grant_bucket_access(
        &self,
        req: Request<up::DriverGrantBucketAccessRequest>,
    ) -> Result<Response<up::DriverGrantBucketAccessResponse>, Status> {
        let req = req.into_inner();
        self.record("DriverGrantBucketAccess", &req.account_name);
        let mut modes = Vec::new();
        for b in &req.buckets {
            let mode = b
                .access_mode
                .and_then(|m| Mode::try_from(m.mode).ok())
                .filter(|m| *m != Mode::Unknown)
                .ok_or_else(|| Status::invalid_argument("an access mode is required"))?;
            modes.push((b.bucket_id.clone(), mode.as_str_name().to_owned()));
        }
        let id = format!("id-{}", req.account_name);
        let mut backend = self.lock();
        backend
            .accounts
            .insert(req.account_name.clone(), (id.clone(), modes));
        Ok(Response::new(up::DriverGrantBucketAccessResponse {
            account_id: id,
            buckets: req
                .buckets
                .iter()
                .map(|b| up::driver_grant_bucket_access_response::BucketInfo {
                    bucket_id: b.bucket_id.clone(),
                    bucket_info: Some(s3_info(b.bucket_id.trim_start_matches("id-"))),
                })
                .collect(),
            credentials: (!backend.no_credentials).then(|| up::CredentialInfo {
                s3: Some(up::S3CredentialInfo {
                    access_key_id: "AKID".into(),
                    access_secret_key: SECRET_KEY.into(),
                }),
                ..Default::default()
            }),
        }))
    }

    async fn driver_revoke_bucket_access(
        &self,
        req: Request<up::DriverRevokeBucketAccessRequest>,
    ) -> Result<Response<up::DriverRevokeBucketAccessResponse>, Status> {
        let req = req.into_inner();
        self.record("DriverRevokeBucketAccess", &req.account_id);
        self.lock()
            .accounts
            .retain(|_, (id, _)| *id != req.account_id);
        Ok(Response::new(up::DriverRevokeBucketAccessResponse {}))
    }
}

/// A harness whose socket serves the upstream double.
struct Up {
    h: Harness,
    driver: UpstreamDriver,
    _served: TestServer,
}

impl Up {
    async fn new() -> Self {
        let mut h = Harness::new().await;
        h.stop_driver().await;
        let driver = UpstreamDriver::default();
        let served = driver.serve(&h.endpoint);
        Self {
            h,
            driver,
            _served: served,
        }
    }
}

#[tokio::test]
async fn an_upstream_driver_is_detected_and_provisions_in_one_call_per_object() {
    let u = Up::new().await;
    let sidecar = u.h.start_sidecar();
    let b = u.h.provision_bucket("bc-one").await;
    assert_eq!(b.status.clone().unwrap().bucket_id, "id-bc-one");
    assert!(
        sidecar.metrics().contains(&format!(
            r#"cosi_sidecar_driver_info{{api_version="{}",driver_name="{DRIVER}"}} 1"#,
            DriverApi::Upstream.as_str()
        )),
        "{}",
        sidecar.metrics()
    );
    let a =
        u.h.grant("ba-one", &[("claim-bc-one", "bc-one", "creds")])
            .await;
    let account = format!("ba-{}", uid(&a));
    assert_eq!(a.status.unwrap().account_id, format!("id-{account}"));
    let s = u.h.secret("creds").await.expect("Secret written");
    let value = |key| secret_string(&s, key).unwrap_or_else(|| panic!("no {key}"));
    assert_eq!(value(secret_keys::s3::AWS_ENDPOINT_URL), ENDPOINT);
    assert_eq!(value(secret_keys::s3::AWS_REGION), REGION);
    assert_eq!(value(secret_keys::s3::BUCKET_NAME), "bc-one");
    assert_eq!(value(secret_keys::s3::AWS_SECRET_ACCESS_KEY), SECRET_KEY);
    // ReadWrite in both object categories: READ_WRITE on the bucket.
    assert_eq!(
        u.driver.lock().accounts[&account].1,
        [("id-bc-one".to_owned(), "READ_WRITE".to_owned())]
    );
    assert_eq!(
        u.driver.calls(),
        ["DriverCreateBucket", "DriverGrantBucketAccess"],
        "the phase-1 replies served phase 2"
    );
    assert!(
        !logs::captured().contains(SECRET_KEY),
        "a credential was logged"
    );

    u.h.delete_access("ba-one").await;
    u.h.access_cleaned_up("ba-one").await;
    assert!(u.driver.lock().accounts.is_empty(), "revoked");
    u.h.claim_deleted("bc-one", true).await;
    u.h.bucket_gone("bc-one").await;
    assert!(u.driver.lock().buckets.is_empty(), "deleted");
    let calls = u.driver.lock().calls.clone();
    assert!(calls.contains(&("DriverRevokeBucketAccess", format!("id-{account}"))));
    assert!(calls.contains(&("DriverDeleteBucket", "id-bc-one".to_owned())));
}

#[tokio::test]
async fn after_a_restart_phase_two_repeats_the_call_by_name() {
    let u = Up::new().await;
    // Phase 1 ran and its ID was persisted; the sidecar that kept the
    // reply is gone.
    u.h.create_bucket(&dynamic_bucket("bc-again")).await;
    let persisted = serde_json::json!({"status": {"bucketID": "id-bc-again"}});
    u.h.merge_status::<Bucket>("bc-again", persisted).await;
    let _sidecar = u.h.start_sidecar();
    let b = u.h.provisioned_bucket("bc-again").await;
    assert_eq!(b.status.unwrap().bucket_id, "id-bc-again");
    assert_eq!(
        u.driver.lock().calls,
        [("DriverCreateBucket", "bc-again".to_owned())]
    );
}

#[tokio::test]
async fn static_buckets_are_checked_with_get_existing_bucket() {
    let u = Up::new().await;
    let _sidecar = u.h.start_sidecar();
    u.h.create_bucket(&static_bucket("static-one", "legacy"))
        .await;
    u.h.provisioned_bucket("static-one").await;
    assert_eq!(u.driver.calls(), ["DriverGetExistingBucket"]);
}

#[tokio::test]
async fn objects_deleted_before_their_ids_were_persisted_are_found_by_name() {
    let u = Up::new().await;
    // A bucket whose create succeeded, but whose ID never reached the status.
    u.h.create_bucket(&dynamic_bucket("bc-lost")).await;
    u.driver
        .lock()
        .buckets
        .insert("bc-lost".into(), "id-bc-lost".into());
    u.h.claim_deleted("bc-lost", true).await;
    let sidecar = u.h.start_sidecar();
    u.h.bucket_gone("bc-lost").await;
    assert!(u.driver.lock().buckets.is_empty(), "the bucket leaked");

    // An access whose grant succeeded, but whose account ID never reached the status.
    u.h.provision_bucket("bc-kept").await;
    sidecar.stop().await.unwrap();
    let mut a = access("ba-lost", &[("claim-bc-kept", "lost")]);
    a.spec.bucket_claims[0].access_modes = BucketAccessModes::objects(BucketAccessMode::ReadOnly);
    let a = u.h.create_access(&a).await;
    u.h.hand_off(
        "ba-lost",
        &[("claim-bc-kept", "bc-kept")],
        AuthenticationType::Key,
    )
    .await;
    let started = serde_json::json!({"status": {"grantStarted": true}});
    u.h.merge_status::<BucketAccess>("ba-lost", started).await;
    let account = format!("ba-{}", uid(&a));
    u.driver.lock().accounts.insert(
        account.clone(),
        (
            format!("id-{account}"),
            vec![("id-bc-kept".into(), "READ_ONLY".into())],
        ),
    );
    u.h.delete_access("ba-lost").await;
    let _sidecar = u.h.start_sidecar();
    u.h.access_cleaned_up("ba-lost").await;
    assert!(u.driver.lock().accounts.is_empty(), "the account leaked");
    let calls = u.driver.lock().calls.clone();
    assert!(
        calls.contains(&("DriverGrantBucketAccess", account.clone())),
        "looked up by name: {calls:?}"
    );
    assert!(calls.contains(&("DriverRevokeBucketAccess", format!("id-{account}"))));
}

#[tokio::test]
async fn mixed_access_modes_are_refused_before_any_rpc() {
    let u = Up::new().await;
    let _sidecar = u.h.start_sidecar();
    u.h.provision_bucket("bc-a").await;
    let mut mixed = access("ba-mixed", &[("claim-bc-a", "mixed")]);
    mixed.spec.bucket_claims[0].access_modes = BucketAccessModes {
        object_data: Some(BucketAccessMode::ReadOnly),
        object_metadata: Some(BucketAccessMode::ReadWrite),
        bucket_metadata: None,
    };
    u.h.create_access(&mixed).await;
    u.h.hand_off(
        "ba-mixed",
        &[("claim-bc-a", "bc-a")],
        AuthenticationType::Key,
    )
    .await;
    let reason = reasons::ACCESS_MODE_NOT_SUPPORTED;
    let a =
        u.h.when::<BucketAccess>("ba-mixed", reason, |a| {
            condition(a.conditions(), condition_types::RESOURCES_VALIDATED)
                .is_some_and(|c| c.status == "False" && c.reason == reason)
        })
        .await;
    let c = condition(a.conditions(), condition_types::RESOURCES_VALIDATED).unwrap();
    assert_contains(&c.message, "same mode in every category");
    assert!(a.status.unwrap().account_id.is_empty());
    assert!(!u.driver.calls().contains(&"DriverGrantBucketAccess"));
}

#[tokio::test]
async fn bad_replies_are_invalid_driver_responses_that_change_nothing() {
    let u = Up::new().await;
    u.driver.lock().empty_bucket_id = true;
    let _sidecar = u.h.start_sidecar();
    u.h.create_bucket(&dynamic_bucket("bc-bad")).await;
    let b: Bucket =
        u.h.with_reason(
            "bc-bad",
            condition_types::PROVISION_FAILED,
            reasons::INVALID_DRIVER_RESPONSE,
        )
        .await;
    let c = condition(b.conditions(), condition_types::PROVISION_FAILED)
        .cloned()
        .unwrap();
    assert!(b.status.unwrap().bucket_id.is_empty(), "never persisted");
    assert_contains(&c.message, "bucket_id");

    u.driver.lock().empty_bucket_id = false;
    u.driver.lock().no_credentials = true;
    u.h.provision_bucket("bc-good").await;
    u.h.handed_off_access("ba-bad", "claim-bc-good", "bad", "bc-good")
        .await;
    let a: BucketAccess =
        u.h.with_reason(
            "ba-bad",
            condition_types::PROVISION_FAILED,
            reasons::INVALID_DRIVER_RESPONSE,
        )
        .await;
    let c = condition(a.conditions(), condition_types::PROVISION_FAILED).unwrap();
    assert_contains(&c.message, "no credentials");
    assert!(u.h.secret("bad").await.is_none(), "no Secret written");
}

#[tokio::test]
async fn a_driver_whose_upstream_identity_fails_is_reported_with_its_code() {
    let mut h = Harness::new().await;
    h.stop_driver().await;
    let _served = serve_other_package(&h.endpoint);
    let sidecar = h.start_sidecar();
    let reason = unready(&sidecar.readiness, "InvalidArgument").await;
    assert_contains(&reason, "DriverGetInfo");
}

#[tokio::test]
async fn a_driver_of_no_known_api_names_the_three_it_was_asked_on() {
    let mut h = Harness::new().await;
    h.stop_driver().await;
    let router = tonic::transport::Server::builder()
        .add_optional_service(None::<IdentityServer<UpstreamDriver>>);
    let _served = serve_router(&h.endpoint, router);
    let sidecar = h.start_sidecar();
    let reason = unready(&sidecar.readiness, "does not serve DriverGetInfo").await;
    assert_contains(
        &reason,
        "cosi.v1alpha2.Identity nor on sigs.k8s.io.cosi.v1alpha2.Identity nor on cosi.v1alpha1.Identity",
    );
    assert_contains(&reason, "belongs to a COSI driver");
}

#[tokio::test]
async fn a_pinned_upstream_api_is_the_only_one_asked() {
    let u = Up::new().await;
    let sidecar = u.h.start_sidecar_with(u.h.sidecar_client(), |c| {
        c.driver_api = Some(DriverApi::Upstream);
    });
    u.h.provision_bucket("bc-pinned").await;
    assert!(
        sidecar
            .metrics()
            .contains(r#"api_version="upstream-v1alpha2""#)
    );
}
