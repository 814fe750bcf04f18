//! A v1alpha2 driver served over the v1alpha1 API by `serve_v1alpha1` on a
//! temporary socket: the v1alpha2 requests each v1alpha1 RPC becomes, the
//! replies built from the driver's, validation before the driver is called,
//! the driver's status codes passed through, and replies the bridge cannot
//! translate.

mod common;

use std::collections::HashMap;

use common::{ProvisionerRequest, Running, changed};
use cosi_driver::proto::*;
use cosi_driver::testing::params as map;
use cosi_driver::testing::{Call, RecordingDriver};
use cosi_driver::v1alpha1;
use cosi_driver::v1alpha1::credential_keys::s3 as s3_secret_keys;
use cosi_driver::{Code, DriverApi, DriverClient, Status};

async fn start() -> Running {
    Running::start(DriverApi::V1alpha1).await
}

fn provisioner(
    r: &Running,
) -> v1alpha1::provisioner_client::ProvisionerClient<tonic::transport::Channel> {
    r.client.v1alpha1.provisioner.clone()
}

/// Stops the server; the bridge never called DriverGetBucket.
async fn stop(r: Running) {
    let calls = r.driver.take();
    assert!(
        !calls.iter().any(|c| matches!(c, Call::GetBucket(_))),
        "the v1alpha1 bridge has no use for DriverGetBucket: {calls:?}"
    );
    r.server.stop().await;
}

/// A v1alpha1 Provisioner request, of any of its RPCs.
enum V1Request {
    Create(v1alpha1::DriverCreateBucketRequest),
    Delete(v1alpha1::DriverDeleteBucketRequest),
    Grant(v1alpha1::DriverGrantBucketAccessRequest),
    Revoke(v1alpha1::DriverRevokeBucketAccessRequest),
}

impl ProvisionerRequest for V1Request {
    async fn send(self, client: &DriverClient) -> Result<(), Status> {
        let mut p = client.v1alpha1.provisioner.clone();
        match self {
            V1Request::Create(r) => p.driver_create_bucket(r).await.map(drop),
            V1Request::Delete(r) => p.driver_delete_bucket(r).await.map(drop),
            V1Request::Grant(r) => p.driver_grant_bucket_access(r).await.map(drop),
            V1Request::Revoke(r) => p.driver_revoke_bucket_access(r).await.map(drop),
        }
    }
}

fn grant_request(auth: v1alpha1::AuthenticationType) -> v1alpha1::DriverGrantBucketAccessRequest {
    v1alpha1::DriverGrantBucketAccessRequest {
        bucket_id: "id-bc-1".into(),
        name: "ba-1".into(),
        authentication_type: auth as i32,
        parameters: map(&[("tier", "gold")]),
    }
}

fn create_request() -> v1alpha1::DriverCreateBucketRequest {
    v1alpha1::DriverCreateBucketRequest {
        name: "bc-1".into(),
        parameters: HashMap::new(),
    }
}

fn delete_request() -> v1alpha1::DriverDeleteBucketRequest {
    v1alpha1::DriverDeleteBucketRequest {
        bucket_id: "id-bc-1".into(),
        delete_context: HashMap::new(),
    }
}

fn revoke_request() -> v1alpha1::DriverRevokeBucketAccessRequest {
    v1alpha1::DriverRevokeBucketAccessRequest {
        bucket_id: "id-bc-1".into(),
        account_id: "acct-ba-1".into(),
        revoke_access_context: HashMap::new(),
    }
}

fn all_read_write(bucket_id: &str) -> Vec<AccessedBucket> {
    let rw = AccessMode::ReadWrite as i32;
    vec![AccessedBucket {
        bucket_id: bucket_id.into(),
        access_mode: Some(AccessModes {
            object_data: rw,
            object_metadata: rw,
            bucket_metadata: rw,
        }),
    }]
}

#[tokio::test]
async fn each_v1alpha1_rpc_becomes_the_v1alpha2_calls_of_the_mapping() {
    let r = start().await;
    let mut identity = r.client.v1alpha1.identity.clone();
    let info = identity
        .driver_get_info(v1alpha1::DriverGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, RecordingDriver::NAME);
    assert_eq!(r.driver.take(), [Call::GetInfo]);

    let mut p = provisioner(&r);
    let created = p
        .driver_create_bucket(v1alpha1::DriverCreateBucketRequest {
            name: "bc-1".into(),
            parameters: map(&[("maxSizeBytes", "1Gi")]),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.bucket_id, "id-bc-1");
    assert_eq!(
        created.bucket_info,
        Some(v1alpha1::Protocol {
            r#type: Some(v1alpha1::protocol::Type::S3(v1alpha1::S3 {
                region: RecordingDriver::REGION.into(),
                signature_version: v1alpha1::S3SignatureVersion::S3v4 as i32,
            })),
        })
    );
    assert_eq!(r.driver.take(), common::create_calls());

    let granted = p
        .driver_grant_bucket_access(grant_request(v1alpha1::AuthenticationType::Key))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(granted.account_id, "acct-ba-1");
    assert_eq!(granted.credentials.len(), 1);
    assert_eq!(
        granted.credentials[v1alpha1::credential_keys::S3].secrets,
        map(&[
            (
                s3_secret_keys::ACCESS_KEY_ID,
                RecordingDriver::ACCESS_KEY_ID
            ),
            (
                s3_secret_keys::ACCESS_SECRET_KEY,
                RecordingDriver::SECRET_KEY
            ),
            (s3_secret_keys::ENDPOINT, RecordingDriver::S3_ENDPOINT),
            (s3_secret_keys::REGION, RecordingDriver::REGION),
        ])
    );
    let shown = format!("{granted:?}");
    assert!(!shown.contains(RecordingDriver::SECRET_KEY), "{shown}");
    assert!(!shown.contains(RecordingDriver::ACCESS_KEY_ID), "{shown}");
    assert_eq!(
        r.driver.take(),
        common::grant_calls(all_read_write("id-bc-1"))
    );

    let revoke = v1alpha1::DriverRevokeBucketAccessRequest {
        revoke_access_context: map(&[("reason", "done")]),
        ..revoke_request()
    };
    let delete = v1alpha1::DriverDeleteBucketRequest {
        delete_context: map(&[("keep", "no")]),
        ..delete_request()
    };
    r.assert_revoke_and_delete(V1Request::Revoke(revoke), V1Request::Delete(delete))
        .await;
    stop(r).await;
}

#[tokio::test]
async fn invalid_requests_never_reach_the_driver() {
    use V1Request::{Create, Delete, Grant, Revoke};
    let r = start().await;
    let key = || grant_request(v1alpha1::AuthenticationType::Key);
    let big = map(&[("k", "v".repeat(5000).as_str())]);
    let refusals = [
        (Create(Default::default()), "name is required"),
        (
            Create(changed(create_request(), |c| c.name = "Not_A_Name".into())),
            "lowercase",
        ),
        (
            Create(changed(create_request(), |c| c.parameters = big)),
            "parameters hold",
        ),
        (
            Grant(grant_request(v1alpha1::AuthenticationType::Iam)),
            "IAM is not supported",
        ),
        (
            Grant(grant_request(
                v1alpha1::AuthenticationType::UnknownAuthenticationType,
            )),
            "authentication_type is required",
        ),
        (
            Grant(changed(key(), |g| g.authentication_type = 7)),
            "unknown value 7",
        ),
        (
            Grant(changed(key(), |g| g.bucket_id.clear())),
            "bucket_id is required",
        ),
        (
            Grant(changed(key(), |g| g.name.clear())),
            "name is required",
        ),
        (Delete(Default::default()), "bucket_id is required"),
        (
            Revoke(changed(revoke_request(), |v| v.account_id.clear())),
            "account_id is required",
        ),
        (
            Revoke(changed(revoke_request(), |v| v.bucket_id.clear())),
            "bucket_id is required",
        ),
    ];
    r.assert_refused(refusals).await;
    stop(r).await;
}

#[tokio::test]
async fn the_drivers_status_codes_pass_through_unchanged() {
    let r = start().await;
    r.assert_failures_pass_through(|| {
        vec![
            V1Request::Create(create_request()),
            V1Request::Grant(grant_request(v1alpha1::AuthenticationType::Key)),
            V1Request::Delete(delete_request()),
            V1Request::Revoke(revoke_request()),
        ]
    })
    .await;
    stop(r).await;
}

#[tokio::test]
async fn replies_without_s3_info_or_keys_are_internal_errors() {
    let r = start().await;
    let mut p = provisioner(&r);
    r.driver.behave(|b| b.create_s3_info = false);
    let err = p.driver_create_bucket(create_request()).await.unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err:?}");
    assert!(err.message().contains("no S3 bucket info"), "{err:?}");

    r.driver.behave(|b| b.grant_s3_credentials = false);
    let err = p
        .driver_grant_bucket_access(grant_request(v1alpha1::AuthenticationType::Key))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err:?}");
    assert!(err.message().contains("no S3 access key"), "{err:?}");
    stop(r).await;
}

#[tokio::test]
async fn a_v1alpha1_process_does_not_serve_v1alpha2() {
    let r = start().await;
    let err = r.client.get_info().await.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
    let err = r
        .client
        .call_empty("/cosi.v1alpha2.Identity/DriverGetInfo")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
    r.client
        .call_empty("/cosi.v1alpha1.Identity/DriverGetInfo")
        .await
        .unwrap();
    stop(r).await;
}

#[test]
fn driver_api_names_round_trip() {
    for api in [DriverApi::V1alpha2, DriverApi::V1alpha1] {
        assert_eq!(api.as_str().parse::<DriverApi>().unwrap(), api);
        assert_eq!(api.package(), format!("cosi.{api}"));
    }
    assert_eq!(DriverApi::default(), DriverApi::V1alpha2);
    let err = "v1".parse::<DriverApi>().unwrap_err();
    assert!(
        err.to_string().contains("v1alpha1 or upstream-v1alpha2"),
        "{err}"
    );
}
