//! A recording driver served through the SDK on a temporary socket, called
//! through the client helper: all eight RPCs, request validation, socket
//! handling and graceful shutdown.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use cosi_driver::proto::*;
use cosi_driver::testing::{
    Call, PROVISIONER_RPCS, RecordingDriver, Serve, TestServer, access_id_request, grant_request,
    revoke_request,
};
use cosi_driver::{Code, DriverClient, Endpoint};

struct Running {
    client: DriverClient,
    driver: RecordingDriver,
    server: TestServer,
    _dir: tempfile::TempDir,
}

async fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    // A socket in a directory that does not exist yet: the SDK creates it.
    let endpoint = Endpoint::from_path(dir.path().join("plugins/mem/cosi.sock")).unwrap();
    let driver = RecordingDriver::default();
    let serve = Serve::driver(driver.clone(), driver.clone());
    let (client, server) = TestServer::start_at(&endpoint, serve).await;
    Running {
        client,
        driver,
        server,
        _dir: dir,
    }
}

fn rw_bucket(id: &str) -> AccessedBucket {
    AccessedBucket {
        bucket_id: id.into(),
        access_mode: Some(AccessModes {
            object_data: AccessMode::ReadWrite as i32,
            object_metadata: AccessMode::ReadOnly as i32,
            bucket_metadata: AccessMode::Unspecified as i32,
        }),
    }
}

#[tokio::test]
async fn all_eight_rpcs_round_trip_through_the_sdk() {
    let r = start().await;
    let mut p = r.client.provisioner.clone();

    let info = r.client.get_info().await.unwrap();
    assert_eq!(info.name, RecordingDriver::NAME);
    cosi_driver::validate::driver_info(&info).unwrap();

    let id = p
        .driver_generate_bucket_id(DriverGenerateBucketIdRequest {
            name: "bc-1234".into(),
            protocols: vec![ObjectProtocol::S3 as i32],
            parameters: HashMap::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .bucket_id;
    assert_eq!(id, "id-bc-1234");

    let created = p
        .driver_create_bucket(DriverCreateBucketRequest {
            bucket_id: id.clone(),
            protocols: vec![ObjectProtocol::S3 as i32],
            parameters: HashMap::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(created.protocols.unwrap().has(ObjectProtocol::S3));

    let got = p
        .driver_get_bucket(DriverGetBucketRequest {
            bucket_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.protocols.unwrap().s3.unwrap().bucket_name, id);

    let account = p
        .driver_generate_bucket_access_id(access_id_request(
            ObjectProtocol::S3,
            "ba-5678",
            vec![rw_bucket(&id)],
        ))
        .await
        .unwrap()
        .into_inner()
        .account_id;
    assert_eq!(account, "acct-ba-5678");

    let grant = p
        .driver_grant_bucket_access(grant_request(
            ObjectProtocol::S3,
            &account,
            vec![rw_bucket(&id)],
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(grant.buckets.len(), 1);
    assert_eq!(
        grant.credentials.unwrap().s3.unwrap().access_secret_key,
        RecordingDriver::SECRET_KEY
    );

    p.driver_revoke_bucket_access(revoke_request(ObjectProtocol::S3, &account, &[&id]))
        .await
        .unwrap();
    assert!(r.driver.accounts().is_empty());

    p.driver_delete_bucket(DriverDeleteBucketRequest {
        bucket_id: id.clone(),
        parameters: HashMap::new(),
    })
    .await
    .unwrap();
    let gone = p
        .driver_get_bucket(DriverGetBucketRequest {
            bucket_id: id,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);

    let calls: Vec<_> = r.driver.take().iter().map(Call::rpc).collect();
    for rpc in std::iter::once("DriverGetInfo").chain(PROVISIONER_RPCS) {
        assert!(
            calls.contains(&rpc),
            "{rpc} never reached the driver: {calls:?}"
        );
    }
    r.server.stop().await;
}

#[tokio::test]
async fn invalid_requests_are_refused_before_the_driver_sees_them() {
    let r = start().await;
    let mut p = r.client.provisioner.clone();
    let err = p
        .driver_create_bucket(DriverCreateBucketRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "bucket_id is required");
    let err = p
        .driver_grant_bucket_access(DriverGrantBucketAccessRequest {
            account_id: "ba-1".into(),
            buckets: vec![rw_bucket("b")],
            protocol: ObjectProtocol::S3 as i32,
            authentication_type: AuthenticationType::ServiceAccount as i32,
            service_account: None,
            parameters: HashMap::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("service_account is required"));
    assert_eq!(r.driver.take(), []);
    r.server.stop().await;
}

#[tokio::test]
async fn a_request_that_does_not_decode_is_invalid_argument() {
    let r = start().await;
    // Field 1 (bucket_id) says 5 bytes follow; one does.
    let truncated = vec![0x0a, 0x05, b'b'];
    let err = r
        .client
        .call_raw("/cosi.v1alpha2.Provisioner/DriverCreateBucket", truncated)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message()
            .contains("cosi.v1alpha2.DriverCreateBucketRequest"),
        "{}",
        err.message()
    );
    assert_eq!(r.driver.take(), []);
    r.server.stop().await;
}

#[tokio::test]
async fn the_socket_is_0660_replaced_when_stale_and_removed_on_shutdown() {
    let r = start().await;
    let mode = std::fs::metadata(r.server.endpoint().path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o660);

    let endpoint = r.server.endpoint().clone();
    r.server.stop().await;
    assert!(!endpoint.path().exists(), "socket removed on shutdown");

    // A stale socket left by a crashed driver is replaced.
    let stale = std::os::unix::net::UnixListener::bind(endpoint.path()).unwrap();
    drop(stale);
    assert!(endpoint.path().exists());
    let driver = RecordingDriver::default();
    let serve = Serve::driver(driver.clone(), driver);
    let (client, server) = TestServer::start_at(&endpoint, serve).await;
    client.get_info().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn a_regular_file_at_the_socket_path_is_never_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("precious.sock");
    std::fs::write(&path, "data").unwrap();
    let endpoint = Endpoint::from_path(&path).unwrap();
    let d = RecordingDriver::default();
    let err = cosi_driver::serve(&endpoint, d.clone(), d, async {})
        .await
        .unwrap_err();
    assert!(
        matches!(err, cosi_driver::ServeError::NotASocket(_)),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "data");
}

#[tokio::test]
async fn a_lazy_client_reconnects_after_the_driver_restarts() {
    let r = start().await;
    let endpoint = r.server.endpoint().clone();
    let lazy = DriverClient::connect_lazy(&endpoint);
    lazy.get_info().await.unwrap();
    r.server.stop().await;
    assert!(lazy.get_info().await.is_err(), "driver is down");

    let driver = RecordingDriver::default();
    let server = TestServer::spawn_at(&endpoint, Serve::driver(driver.clone(), driver));
    let mut ok = false;
    for _ in 0..200 {
        if lazy.get_info().await.is_ok() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok, "the same client works again once the driver is back");
    server.stop().await;
}
