//! A cosi-rs driver served over upstream's v1alpha2 API by `serve_upstream`
//! on a temporary socket, called with the generated upstream client: the
//! cosi-rs requests each upstream RPC becomes, the replies built from the
//! driver's (checked on the wire, field number by field number), validation
//! before the driver is called, the driver's status codes passed through,
//! and replies the bridge cannot translate.

mod common;

use std::collections::HashMap;

use common::{ProvisionerRequest, Running, changed};
use cosi_driver::proto::*;
use cosi_driver::testing::params as map;
use cosi_driver::testing::{Call, RecordingDriver};
use cosi_driver::upstream as up;
use cosi_driver::upstream::driver_grant_bucket_access_request::AccessedBucket as UpAccessedBucket;
use cosi_driver::upstream::driver_revoke_bucket_access_request::AccessedBucket as UpRevokedBucket;
use cosi_driver::upstream_bridge::bucket_info;
use cosi_driver::{Code, Driver, DriverApi, DriverClient, Status, UpstreamBridge};

use up::access_mode::Mode;
use up::authentication_type::Type as Auth;
use up::object_protocol::Type as Protocol;

async fn start() -> Running {
    Running::start(DriverApi::Upstream).await
}

fn provisioner(
    r: &Running,
) -> up::provisioner_client::ProvisionerClient<tonic::transport::Channel> {
    r.client.upstream.provisioner.clone()
}

/// An upstream Provisioner request, of any of its RPCs.
enum UpRequest {
    Create(up::DriverCreateBucketRequest),
    GetExisting(up::DriverGetExistingBucketRequest),
    Delete(up::DriverDeleteBucketRequest),
    Grant(up::DriverGrantBucketAccessRequest),
    Revoke(up::DriverRevokeBucketAccessRequest),
}

impl ProvisionerRequest for UpRequest {
    async fn send(self, client: &DriverClient) -> Result<(), Status> {
        let mut p = client.upstream.provisioner.clone();
        match self {
            UpRequest::Create(r) => p.driver_create_bucket(r).await.map(drop),
            UpRequest::GetExisting(r) => p.driver_get_existing_bucket(r).await.map(drop),
            UpRequest::Delete(r) => p.driver_delete_bucket(r).await.map(drop),
            UpRequest::Grant(r) => p.driver_grant_bucket_access(r).await.map(drop),
            UpRequest::Revoke(r) => p.driver_revoke_bucket_access(r).await.map(drop),
        }
    }
}

fn protocol(t: Protocol) -> up::ObjectProtocol {
    up::ObjectProtocol { r#type: t as i32 }
}

fn key() -> Option<up::AuthenticationType> {
    Some(up::AuthenticationType {
        r#type: Auth::Key as i32,
    })
}

fn create_request() -> up::DriverCreateBucketRequest {
    up::DriverCreateBucketRequest {
        name: "bc-1".into(),
        protocols: vec![protocol(Protocol::S3)],
        parameters: HashMap::new(),
    }
}

fn grant_request(mode: Mode) -> up::DriverGrantBucketAccessRequest {
    up::DriverGrantBucketAccessRequest {
        account_name: "ba-1".into(),
        protocol: Some(protocol(Protocol::S3)),
        authentication_type: key(),
        service_account_name: String::new(),
        parameters: map(&[("tier", "gold")]),
        buckets: vec![UpAccessedBucket {
            bucket_id: "id-bc-1".into(),
            access_mode: Some(up::AccessMode { mode: mode as i32 }),
        }],
    }
}

fn revoke_request() -> up::DriverRevokeBucketAccessRequest {
    up::DriverRevokeBucketAccessRequest {
        account_id: "acct-ba-1".into(),
        protocol: Some(protocol(Protocol::S3)),
        authentication_type: key(),
        service_account_name: String::new(),
        parameters: HashMap::new(),
        buckets: vec![UpRevokedBucket {
            bucket_id: "id-bc-1".into(),
        }],
    }
}

fn delete_request() -> up::DriverDeleteBucketRequest {
    up::DriverDeleteBucketRequest {
        bucket_id: "id-bc-1".into(),
        parameters: HashMap::new(),
    }
}

fn get_existing_request() -> up::DriverGetExistingBucketRequest {
    up::DriverGetExistingBucketRequest {
        existing_bucket_id: "id-bc-1".into(),
        protocols: vec![protocol(Protocol::S3)],
        parameters: HashMap::new(),
    }
}

fn modes(mode: AccessMode) -> Vec<AccessedBucket> {
    let m = mode as i32;
    vec![AccessedBucket {
        bucket_id: "id-bc-1".into(),
        access_mode: Some(AccessModes {
            object_data: m,
            object_metadata: m,
            bucket_metadata: m,
        }),
    }]
}

/// The S3 info the recording driver answers with, in upstream's messages.
fn upstream_s3_info(bucket: &str) -> up::ObjectProtocolAndBucketInfo {
    up::ObjectProtocolAndBucketInfo {
        s3: Some(up::S3BucketInfo {
            bucket_id: bucket.into(),
            endpoint: RecordingDriver::S3_ENDPOINT.into(),
            region: RecordingDriver::REGION.into(),
            addressing_style: Some(up::S3AddressingStyle {
                style: up::s3_addressing_style::Style::Path as i32,
            }),
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn each_upstream_rpc_becomes_the_driver_calls_of_the_mapping() {
    let r = start().await;
    let mut identity = r.client.upstream.identity.clone();
    let info = identity
        .driver_get_info(up::DriverGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, RecordingDriver::NAME);
    assert_eq!(info.supported_protocols, [protocol(Protocol::S3)]);
    assert_eq!(r.driver.take(), [Call::GetInfo]);

    let mut p = provisioner(&r);
    let create = up::DriverCreateBucketRequest {
        parameters: map(&[("maxSizeBytes", "1Gi")]),
        ..create_request()
    };
    let created = p
        .driver_create_bucket(create.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.bucket_id, "id-bc-1");
    assert_eq!(created.protocols, Some(upstream_s3_info("id-bc-1")));
    let phases = common::create_calls();
    assert_eq!(r.driver.take(), phases);
    // Idempotent by name: the same request, the same ID.
    let again = p.driver_create_bucket(create).await.unwrap().into_inner();
    assert_eq!(again.bucket_id, "id-bc-1");
    assert_eq!(r.driver.take(), phases);

    let existing = p
        .driver_get_existing_bucket(up::DriverGetExistingBucketRequest {
            parameters: map(&[("k", "v")]),
            ..get_existing_request()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(existing.bucket_id, "id-bc-1");
    assert_eq!(existing.protocols, Some(upstream_s3_info("id-bc-1")));
    assert_eq!(
        r.driver.take(),
        [Call::GetBucket(DriverGetBucketRequest {
            bucket_id: "id-bc-1".into(),
            protocols: vec![ObjectProtocol::S3 as i32],
            parameters: map(&[("k", "v")]),
        })]
    );

    let granted = p
        .driver_grant_bucket_access(grant_request(Mode::ReadWrite))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(granted.account_id, "acct-ba-1");
    assert_eq!(
        granted.buckets,
        [up::driver_grant_bucket_access_response::BucketInfo {
            bucket_id: "id-bc-1".into(),
            bucket_info: Some(upstream_s3_info("id-bc-1")),
        }]
    );
    let s3 = granted.credentials.clone().unwrap().s3.unwrap();
    assert_eq!(s3.access_key_id, RecordingDriver::ACCESS_KEY_ID);
    assert_eq!(s3.access_secret_key, RecordingDriver::SECRET_KEY);
    let shown = format!("{granted:?}");
    assert!(!shown.contains(RecordingDriver::SECRET_KEY), "{shown}");
    assert!(!shown.contains(RecordingDriver::ACCESS_KEY_ID), "{shown}");
    assert_eq!(
        r.driver.take(),
        common::grant_calls(modes(AccessMode::ReadWrite))
    );

    let revoke = up::DriverRevokeBucketAccessRequest {
        parameters: map(&[("reason", "done")]),
        ..revoke_request()
    };
    let delete = up::DriverDeleteBucketRequest {
        parameters: map(&[("keep", "no")]),
        ..delete_request()
    };
    r.assert_revoke_and_delete(UpRequest::Revoke(revoke), UpRequest::Delete(delete))
        .await;
    r.server.stop().await;
}

#[tokio::test]
async fn each_access_mode_reaches_the_driver_by_name() {
    let r = start().await;
    for (mode, expected) in [
        (Mode::ReadOnly, AccessMode::ReadOnly),
        (Mode::WriteOnly, AccessMode::WriteOnly),
        (Mode::ReadWrite, AccessMode::ReadWrite),
    ] {
        r.send(UpRequest::Grant(grant_request(mode))).await.unwrap();
        let calls = r.driver.take();
        let Call::GrantBucketAccess(grant) = &calls[1] else {
            panic!("no grant reached the driver: {calls:?}");
        };
        assert_eq!(grant.buckets, modes(expected), "{mode:?}");
        let Call::GenerateBucketAccessId(generate) = &calls[0] else {
            panic!("no phase one reached the driver: {calls:?}");
        };
        assert_eq!(generate.buckets, modes(expected), "{mode:?}");
    }
    r.server.stop().await;
}

/// Upstream's S3BucketInfo as a hand-written view of the wire: the numbers
/// of the pinned proto, independent of the generated code.
#[derive(Clone, PartialEq, prost::Message)]
struct S3InfoWire {
    #[prost(string, tag = "1")]
    bucket_id: String,
    #[prost(string, tag = "2")]
    endpoint: String,
    #[prost(string, tag = "3")]
    region: String,
    #[prost(message, optional, tag = "4")]
    style: Option<StyleWire>,
}

/// S3AddressingStyle: style 1 (PATH 1, VIRTUAL 2).
#[derive(Clone, PartialEq, prost::Message)]
struct StyleWire {
    #[prost(int32, tag = "1")]
    style: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
struct BucketInfoWire {
    #[prost(message, optional, tag = "1")]
    s3: Option<S3InfoWire>,
}

/// DriverCreateBucketResponse: bucket_id 1, protocols 2.
#[derive(Clone, PartialEq, prost::Message)]
struct CreateReplyWire {
    #[prost(string, tag = "1")]
    bucket_id: String,
    #[prost(message, optional, tag = "2")]
    protocols: Option<BucketInfoWire>,
}

/// DriverGrantBucketAccessResponse: account_id 1, buckets 2 (bucket_id 1,
/// bucket_info 2).
#[derive(Clone, PartialEq, prost::Message)]
struct GrantReplyWire {
    #[prost(string, tag = "1")]
    account_id: String,
    #[prost(message, repeated, tag = "2")]
    buckets: Vec<GrantedWire>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct GrantedWire {
    #[prost(string, tag = "1")]
    bucket_id: String,
    #[prost(message, optional, tag = "2")]
    bucket_info: Option<BucketInfoWire>,
}

/// Calls `path` with `request` and decodes the reply's bytes as `Reply`.
async fn call_wire<Req, Reply>(client: &DriverClient, path: &'static str, request: Req) -> Reply
where
    Req: prost::Message + Send + Sync + 'static,
    Reply: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(client.channel());
    grpc.ready().await.unwrap();
    grpc.unary(
        tonic::Request::new(request),
        http::uri::PathAndQuery::from_static(path),
        tonic_prost::ProstCodec::<Req, Reply>::default(),
    )
    .await
    .unwrap()
    .into_inner()
}

#[tokio::test]
async fn s3_endpoint_is_field_2_and_region_field_3_on_the_wire() {
    let r = start().await;
    let created: CreateReplyWire = call_wire(
        &r.client,
        "/sigs.k8s.io.cosi.v1alpha2.Provisioner/DriverCreateBucket",
        create_request(),
    )
    .await;
    assert_eq!(created.bucket_id, "id-bc-1");
    let expected = S3InfoWire {
        bucket_id: "id-bc-1".into(),
        endpoint: RecordingDriver::S3_ENDPOINT.into(),
        region: RecordingDriver::REGION.into(),
        style: Some(StyleWire { style: 1 }),
    };
    assert_eq!(created.protocols.unwrap().s3, Some(expected.clone()));

    let granted: GrantReplyWire = call_wire(
        &r.client,
        "/sigs.k8s.io.cosi.v1alpha2.Provisioner/DriverGrantBucketAccess",
        grant_request(Mode::ReadOnly),
    )
    .await;
    assert_eq!(granted.account_id, "acct-ba-1");
    assert_eq!(granted.buckets.len(), 1);
    assert_eq!(granted.buckets[0].bucket_id, "id-bc-1");
    assert_eq!(
        granted.buckets[0].bucket_info.clone().unwrap().s3,
        Some(expected)
    );
    r.server.stop().await;
}

#[test]
fn s3_info_keeps_meaning_across_the_swapped_numbers() {
    use prost::Message as _;
    for (style, wire_style) in [
        (S3AddressingStyle::Path, Some(1)),
        (S3AddressingStyle::Virtual, Some(2)),
        (S3AddressingStyle::Unspecified, None),
    ] {
        let info = bucket_info(ProtocolBucketInfo {
            s3: Some(S3BucketInfo {
                bucket_name: "bkt".into(),
                region: "eu-west-3".into(),
                endpoint: "https://s3.example.com".into(),
                addressing_style: style as i32,
            }),
            ..Default::default()
        });
        let bytes = info.s3.unwrap().encode_to_vec();
        let wire = S3InfoWire::decode(bytes.as_slice()).unwrap();
        assert_eq!(wire.bucket_id, "bkt");
        assert_eq!(wire.endpoint, "https://s3.example.com");
        assert_eq!(wire.region, "eu-west-3");
        assert_eq!(wire.style.map(|s| s.style), wire_style);
    }
}

#[tokio::test]
async fn invalid_requests_never_reach_the_driver() {
    use UpRequest::{Create, Delete, GetExisting, Grant, Revoke};
    let r = start().await;
    let grant = || grant_request(Mode::ReadWrite);
    let big = map(&[("k", "v".repeat(5000).as_str())]);
    let sa = Some(up::AuthenticationType {
        r#type: Auth::ServiceAccount as i32,
    });
    let refusals = [
        (Create(Default::default()), "name is required"),
        (
            Create(changed(create_request(), |c| c.name = "Not_A_Name".into())),
            "lowercase",
        ),
        (
            Create(changed(create_request(), |c| c.parameters = big.clone())),
            "parameters hold",
        ),
        (
            Create(changed(create_request(), |c| {
                c.protocols = vec![protocol(Protocol::Unknown)]
            })),
            "protocols[0].type is UNKNOWN",
        ),
        (
            Create(changed(create_request(), |c| {
                c.protocols.push(up::ObjectProtocol { r#type: 8 })
            })),
            "protocols[1].type has unknown value 8",
        ),
        (
            GetExisting(Default::default()),
            "existing_bucket_id is required",
        ),
        (
            GetExisting(changed(get_existing_request(), |g| {
                g.protocols = vec![protocol(Protocol::Unknown)]
            })),
            "protocols[0].type is UNKNOWN",
        ),
        (Delete(Default::default()), "bucket_id is required"),
        (
            Delete(changed(delete_request(), |d| d.parameters = big.clone())),
            "parameters hold",
        ),
        (
            Grant(changed(grant(), |g| g.account_name.clear())),
            "account_name is required",
        ),
        (
            Grant(changed(grant(), |g| g.protocol = None)),
            "protocol is required",
        ),
        (
            Grant(changed(grant(), |g| {
                g.protocol = Some(protocol(Protocol::Unknown))
            })),
            "protocol.type is UNKNOWN",
        ),
        (
            Grant(changed(grant(), |g| g.authentication_type = None)),
            "authentication_type is required",
        ),
        (
            Grant(changed(grant(), |g| {
                g.authentication_type = Some(up::AuthenticationType {
                    r#type: Auth::Unknown as i32,
                })
            })),
            "authentication_type.type is UNKNOWN",
        ),
        (
            Grant(changed(grant(), |g| {
                g.authentication_type = sa;
                g.service_account_name = "sa-1".into();
            })),
            "carry the ServiceAccount's name without its namespace",
        ),
        (
            Grant(changed(grant(), |g| g.service_account_name = "sa-1".into())),
            "service_account_name must be empty",
        ),
        (
            Grant(changed(grant(), |g| g.buckets.clear())),
            "buckets must list at least one bucket",
        ),
        (
            Grant(changed(grant(), |g| g.buckets[0].bucket_id.clear())),
            "buckets[0].bucket_id is required",
        ),
        (
            Grant(changed(grant(), |g| g.buckets[0].access_mode = None)),
            "buckets[0].access_mode is required",
        ),
        (
            Grant(grant_request(Mode::Unknown)),
            "buckets[0].access_mode.mode is UNKNOWN",
        ),
        (
            Revoke(changed(revoke_request(), |v| v.account_id.clear())),
            "account_id is required",
        ),
        (
            Revoke(changed(revoke_request(), |v| v.buckets.clear())),
            "buckets must list at least one bucket",
        ),
        (
            Revoke(changed(revoke_request(), |v| {
                v.buckets[0].bucket_id.clear()
            })),
            "buckets[0].bucket_id is required",
        ),
        (
            Revoke(changed(revoke_request(), |v| v.protocol = None)),
            "protocol is required",
        ),
        (
            Revoke(changed(revoke_request(), |v| {
                v.authentication_type = sa;
                v.service_account_name = "sa-1".into();
            })),
            "without its namespace",
        ),
    ];
    r.assert_refused(refusals).await;
    r.server.stop().await;
}

#[tokio::test]
async fn the_drivers_status_codes_pass_through_unchanged() {
    let r = start().await;
    r.assert_failures_pass_through(|| {
        vec![
            UpRequest::Create(create_request()),
            UpRequest::GetExisting(get_existing_request()),
            UpRequest::Grant(grant_request(Mode::ReadWrite)),
            UpRequest::Delete(delete_request()),
            UpRequest::Revoke(revoke_request()),
        ]
    })
    .await;
    r.server.stop().await;
}

#[tokio::test]
async fn replies_without_bucket_info_or_credentials_are_internal_errors() {
    let r = start().await;
    r.driver.behave(|b| b.create_s3_info = false);
    let err = r
        .send(UpRequest::Create(create_request()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err:?}");
    assert!(err.message().contains("no bucket info"), "{err:?}");
    r.server.stop().await;
}

/// The recording driver, granting GCS credentials with a private key and
/// no HMAC key.
#[derive(Clone)]
struct PrivateKeyOnly(RecordingDriver);

#[cosi_driver::async_trait]
impl Driver for PrivateKeyOnly {
    async fn get_info(&self) -> Result<DriverGetInfoResponse, Status> {
        self.0.get_info().await
    }
    async fn generate_bucket_id(
        &self,
        r: DriverGenerateBucketIdRequest,
    ) -> Result<DriverGenerateBucketIdResponse, Status> {
        self.0.generate_bucket_id(r).await
    }
    async fn create_bucket(
        &self,
        r: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status> {
        self.0.create_bucket(r).await
    }
    async fn get_bucket(
        &self,
        r: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status> {
        self.0.get_bucket(r).await
    }
    async fn delete_bucket(
        &self,
        r: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status> {
        self.0.delete_bucket(r).await
    }
    async fn generate_bucket_access_id(
        &self,
        r: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status> {
        self.0.generate_bucket_access_id(r).await
    }
    async fn grant_bucket_access(
        &self,
        r: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        let mut granted = self.0.grant_bucket_access(r).await?;
        granted.credentials = Some(Credentials {
            gcs: Some(GcsCredentials {
                private_key_id: "key-1".into(),
                private_key: "private-key-material".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        Ok(granted)
    }
    async fn revoke_bucket_access(
        &self,
        r: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        self.0.revoke_bucket_access(r).await
    }
}

#[tokio::test]
async fn an_unusable_grant_is_revoked_and_refused() {
    let recording = RecordingDriver::default();
    let r = Running::serving(
        DriverApi::Upstream,
        PrivateKeyOnly(recording.clone()),
        recording,
    )
    .await;
    let err = r
        .send(UpRequest::Grant(grant_request(Mode::ReadWrite)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("HMAC"), "{err:?}");
    assert!(!err.message().contains("private-key-material"), "{err:?}");
    let calls: Vec<_> = r.driver.take().iter().map(Call::rpc).collect();
    assert_eq!(
        calls,
        [
            "DriverGenerateBucketAccessId",
            "DriverGrantBucketAccess",
            "DriverRevokeBucketAccess"
        ]
    );
    assert_eq!(r.driver.accounts(), Vec::<String>::new());
    r.server.stop().await;
}

#[tokio::test]
async fn an_upstream_process_serves_upstream_only() {
    let r = start().await;
    let err = r.client.get_info().await.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
    for api in [DriverApi::V1alpha2, DriverApi::V1alpha1] {
        let err = r.client.call_empty(api.get_info_path()).await.unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented, "{api}: {err:?}");
    }
    r.client
        .call_empty(DriverApi::Upstream.get_info_path())
        .await
        .unwrap();
    r.server.stop().await;
}

#[test]
fn the_upstream_api_is_named_and_listed() {
    let api: DriverApi = "upstream-v1alpha2".parse().unwrap();
    assert_eq!(api, DriverApi::Upstream);
    assert_eq!(api.to_string(), "upstream-v1alpha2");
    assert_eq!(api.package(), "sigs.k8s.io.cosi.v1alpha2");
    assert!(DriverApi::ALL.contains(&api));
    assert_eq!(
        DriverApi::starting_with(api),
        [
            DriverApi::Upstream,
            DriverApi::V1alpha2,
            DriverApi::V1alpha1
        ]
    );
    let bridge = UpstreamBridge::new(RecordingDriver::default(), RecordingDriver::default());
    assert_eq!(format!("{bridge:?}"), "UpstreamBridge { .. }");
}
