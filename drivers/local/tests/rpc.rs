//! Every COSI RPC of the local driver over a real UNIX socket: results,
//! idempotency and error codes.

mod common;

use std::collections::HashMap;

use common::*;
use cosi_driver::Code;
use cosi_driver::proto::*;
use cosi_driver::testing::assert_status;

#[tokio::test]
async fn get_info_reports_the_name_and_s3_only() {
    let h = Harness::start().await;
    let info = h.client.get_info().await.unwrap();
    assert_eq!(info.name, "local.cosi-rs.dev");
    assert_eq!(info.supported_protocols, [ObjectProtocol::S3 as i32]);
    cosi_driver::validate::driver_info(&info).unwrap();
    h.stop().await;
}

#[tokio::test]
async fn the_driver_name_is_configurable() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(&dir);
    config.driver_name = "edge.example.com".into();
    let driver = cosi_driver_local::LocalDriver::open(&config).unwrap();
    let info = cosi_driver::Identity::driver_get_info(
        &driver,
        cosi_driver::Request::new(DriverGetInfoRequest {}),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(info.name, "edge.example.com");
    config.driver_name = "not a name".into();
    drop(driver);
    assert!(cosi_driver_local::LocalDriver::open(&config).is_err());
}

#[tokio::test]
async fn bucket_ids_are_deterministic_and_create_nothing() {
    let h = Harness::start().await;
    let s3 = &[ObjectProtocol::S3];
    let a = h.generate("bc-1111", s3, &[]).await.unwrap();
    let b = h.generate("bc-1111", s3, &[]).await.unwrap();
    assert_eq!(a, "bc-1111");
    assert_eq!(a, b);
    assert!(h.driver.backend_state().unwrap().buckets.is_empty());
    h.stop().await;
}

#[tokio::test]
async fn create_bucket_is_idempotent_and_returns_s3_info() {
    let h = Harness::start().await;
    let id = h.bucket("bc-2222", &[]).await;
    let again = h.create(&id, &[ObjectProtocol::S3], &[]).await.unwrap();
    let s3 = again.protocols.unwrap().s3.unwrap();
    assert_eq!(s3.bucket_name, id);
    assert_eq!(s3.region, "us-east-1");
    assert_eq!(s3.endpoint, h.s3.endpoint_url());
    assert!(s3.endpoint.starts_with("http://127.0.0.1:"));
    assert_eq!(s3.addressing_style, S3AddressingStyle::Path as i32);
    let state = h.driver.backend_state().unwrap();
    assert_eq!(state.buckets.len(), 1);
    assert!(
        !state.buckets[0].directory_exists,
        "an empty bucket costs no directory"
    );
    h.stop().await;
}

#[tokio::test]
async fn create_bucket_with_other_parameters_is_already_exists() {
    let h = Harness::start().await;
    let id = h.bucket("bc-3333", &[("maxSizeBytes", "1Mi")]).await;
    assert_status(
        h.create(&id, &[], &[("maxSizeBytes", "2Mi")]).await,
        Code::AlreadyExists,
        &["maxSizeBytes 1048576"],
    );
    assert_status(
        h.generate("bc-3333", &[], &[]).await,
        Code::AlreadyExists,
        &[],
    );
    h.stop().await;
}

#[tokio::test]
async fn a_parameter_value_that_does_not_parse_exactly_is_an_invalid_argument_naming_it() {
    let h = Harness::start().await;
    for value in [" 10", "10 ", "10\n", "1 Gi"] {
        assert_status(
            h.create("bc-4445", &[], &[("maxSizeBytes", value)]).await,
            Code::InvalidArgument,
            &["maxSizeBytes"],
        );
    }
    assert!(h.driver.backend_state().unwrap().buckets.is_empty());
    h.stop().await;
}

#[tokio::test]
async fn unknown_parameters_and_protocols_are_invalid_arguments() {
    let h = Harness::start().await;
    assert_status(
        h.generate("bc-4444", &[], &[("quota", "1")]).await,
        Code::InvalidArgument,
        &["\"maxSizeBytes\""],
    );
    let err = assert_status(
        h.create("bc-4444", &[ObjectProtocol::Azure], &[]).await,
        Code::InvalidArgument,
        &[],
    );
    assert!(err.message().contains("only the S3 protocol"));
    assert_status(
        h.create("Not_A_Bucket", &[], &[]).await,
        Code::InvalidArgument,
        &[],
    );
    assert!(h.driver.backend_state().unwrap().buckets.is_empty());
    h.stop().await;
}

#[tokio::test]
async fn missing_fields_are_invalid_arguments() {
    let h = Harness::start().await;
    // An empty message is each request with every field unset.
    for path in [
        "/cosi.v1alpha2.Provisioner/DriverGenerateBucketId",
        "/cosi.v1alpha2.Provisioner/DriverCreateBucket",
        "/cosi.v1alpha2.Provisioner/DriverGetBucket",
        "/cosi.v1alpha2.Provisioner/DriverDeleteBucket",
        "/cosi.v1alpha2.Provisioner/DriverGenerateBucketAccessId",
        "/cosi.v1alpha2.Provisioner/DriverGrantBucketAccess",
        "/cosi.v1alpha2.Provisioner/DriverRevokeBucketAccess",
    ] {
        let status = h.client.call_raw(path, Vec::new()).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{path}: {status:?}");
    }
    h.stop().await;
}

#[tokio::test]
async fn get_bucket_finds_existing_buckets_only() {
    let h = Harness::start().await;
    let id = h.bucket("bc-5555", &[("maxSizeBytes", "1000")]).await;
    let got = h.get(&id, &[ObjectProtocol::S3], &[]).await.unwrap();
    assert_eq!(got.protocols.unwrap().s3.unwrap().bucket_name, id);
    let missing = h.get("no-such-bucket", &[], &[]).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    let incompatible = h
        .get(&id, &[], &[("maxSizeBytes", "2000")])
        .await
        .unwrap_err();
    assert_eq!(incompatible.code(), Code::AlreadyExists);
    h.stop().await;
}

#[tokio::test]
async fn delete_bucket_removes_the_data_on_disk_and_is_ok_when_absent() {
    let h = Harness::start().await;
    let (id, s3) = h.bucket_holding("6666", "k", b"data").await;
    let dir = h.driver.bucket_dir(&id);
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "one blob on disk"
    );

    let mut p = h.provisioner();
    let req = DriverDeleteBucketRequest {
        bucket_id: id.clone(),
        parameters: HashMap::new(),
    };
    p.driver_delete_bucket(req.clone()).await.unwrap();
    assert!(!dir.exists(), "bucket directory removed");
    h.assert_no_buckets();
    p.driver_delete_bucket(req).await.unwrap();
    assert_eq!(get(&s3, &id, "k").await.unwrap_err(), "NoSuchBucket");
    h.stop().await;
}

#[tokio::test]
async fn repeated_grants_return_the_same_credentials_and_one_key() {
    let h = Harness::start().await;
    let (id, first) = h.granted_bucket("7777", &[]).await;
    let mut p = h.provisioner();
    for _ in 0..3 {
        let again = p
            .driver_grant_bucket_access(grant_request("ba-7777", accessed(&[(&id, rw())])))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(again.buckets.len(), 1);
        assert_eq!(again.buckets[0].bucket_id, id);
        let info = again.buckets[0].bucket_info.clone().unwrap().s3.unwrap();
        assert_eq!(info.endpoint, h.s3.endpoint_url());
        assert_eq!(again.credentials.unwrap().s3.unwrap(), first);
    }
    let state = h.driver.backend_state().unwrap();
    assert_eq!(state.accounts.len(), 1);
    assert_eq!(state.access_keys, 1);
    h.stop().await;
}

#[tokio::test]
async fn a_grant_for_other_buckets_on_the_same_account_is_already_exists() {
    let h = Harness::start().await;
    let [a, b] = h.buckets(["bc-8881", "bc-8882"]).await;
    h.grant("ba-8888", &[(&a, rw())]).await;
    let mut p = h.provisioner();
    assert_status(
        p.driver_grant_bucket_access(grant_request(
            "ba-8888",
            accessed(&[(&a, rw()), (&b, rw())]),
        ))
        .await,
        Code::AlreadyExists,
        &["revoke"],
    );
    let ro = object_data(AccessMode::ReadOnly);
    assert_status(
        p.driver_generate_bucket_access_id(access_id_request(
            ObjectProtocol::S3,
            "ba-8888",
            accessed(&[(&a, ro)]),
        ))
        .await,
        Code::AlreadyExists,
        &[],
    );
    assert_eq!(h.driver.backend_state().unwrap().access_keys, 1);
    h.stop().await;
}

#[tokio::test]
async fn grants_to_unknown_buckets_are_not_found() {
    let h = Harness::start().await;
    assert_status(
        h.provisioner()
            .driver_grant_bucket_access(grant_request(
                "ba-9999",
                accessed(&[("no-such-bucket", rw())]),
            ))
            .await,
        Code::NotFound,
        &[],
    );
    assert!(h.driver.backend_state().unwrap().accounts.is_empty());
    h.stop().await;
}

#[tokio::test]
async fn service_account_authentication_is_refused_with_a_clear_message() {
    let h = Harness::start().await;
    let id = h.bucket("bc-1010", &[]).await;
    let mut req = grant_request("ba-1010", accessed(&[(&id, rw())]));
    req.authentication_type = AuthenticationType::ServiceAccount as i32;
    req.service_account = Some(ServiceAccount {
        namespace: "apps".into(),
        name: "web".into(),
    });
    let err = assert_status(
        h.provisioner().driver_grant_bucket_access(req).await,
        Code::InvalidArgument,
        &[],
    );
    assert!(
        err.message()
            .starts_with("cosi-driver-local supports only Key authentication"),
        "{}",
        err.message()
    );
    h.stop().await;
}

#[tokio::test]
async fn access_parameters_are_refused_because_none_are_known() {
    let h = Harness::start().await;
    let id = h.bucket("bc-1111", &[]).await;
    let mut req = grant_request("ba-1111", accessed(&[(&id, rw())]));
    req.parameters = map(&[("policy", "admin")]);
    let err = assert_status(
        h.provisioner().driver_grant_bucket_access(req).await,
        Code::InvalidArgument,
        &["knows none"],
    );
    assert!(!err.message().contains("admin"), "values are never quoted");
    h.stop().await;
}

#[tokio::test]
async fn revoke_removes_the_account_and_is_ok_when_absent() {
    let h = Harness::start().await;
    let id = h.bucket("bc-1212", &[]).await;
    h.grant("ba-1212", &[(&id, rw())]).await;
    h.revoke("ba-1212", &id).await;
    let state = h.driver.backend_state().unwrap();
    assert!(state.accounts.is_empty());
    assert_eq!(state.access_keys, 0);
    h.revoke("ba-1212", &id).await;
    h.revoke("ba-never-granted", &id).await;
    h.stop().await;
}

#[tokio::test]
async fn a_revoke_naming_a_bucket_the_account_was_never_granted_is_refused_and_the_key_still_works()
{
    let h = Harness::start().await;
    let (victim_bucket, victim) = h.bucket_holding("1515", "k", b"v").await;
    let (own_bucket, _) = h.granted_bucket("1516", &[]).await;
    let before = h.driver.backend_state().unwrap();
    let mut p = h.provisioner();
    for named in [
        vec![own_bucket.as_str()],
        vec![victim_bucket.as_str(), own_bucket.as_str()],
    ] {
        let request = cosi_driver::testing::revoke_request(ObjectProtocol::S3, "ba-1515", &named);
        let err = assert_status(
            p.driver_revoke_bucket_access(request).await,
            Code::FailedPrecondition,
            &["\"ba-1515\"", &own_bucket, "nothing was revoked"],
        );
        assert!(
            !err.message().contains(&format!("{victim_bucket:?}")),
            "the refusal names a bucket the request did not name as not granted: {}",
            err.message()
        );
    }
    assert_eq!(h.driver.backend_state().unwrap(), before);
    assert_eq!(get(&victim, &victim_bucket, "k").await.unwrap(), b"v");
    put(&victim, &victim_bucket, "k2", b"still writes")
        .await
        .unwrap();
    h.stop().await;
}

#[tokio::test]
async fn a_revoke_of_an_account_already_gone_is_ok_and_touches_no_other_account() {
    let h = Harness::start().await;
    let (id, s3) = h.bucket_holding("1717", "k", b"v").await;
    let before = h.driver.backend_state().unwrap();
    h.revoke("ba-never-granted", &id).await;
    h.revoke("ba-never-granted", "bc-no-such-bucket").await;
    assert_eq!(h.driver.backend_state().unwrap(), before);
    assert_eq!(get(&s3, &id, "k").await.unwrap(), b"v");
    h.stop().await;
}

#[tokio::test]
async fn a_regranted_account_gets_a_fresh_key() {
    let h = Harness::start().await;
    let (id, first) = h.granted_bucket("1313", &[]).await;
    h.revoke("ba-1313", &id).await;
    let second = h.grant("ba-1313", &[(&id, rw())]).await;
    assert_ne!(first.access_key_id, second.access_key_id);
    assert_ne!(first.access_secret_key, second.access_secret_key);
    h.stop().await;
}

#[tokio::test]
async fn debug_output_of_grants_hides_credentials() {
    let h = Harness::start().await;
    let id = h.bucket("bc-1414", &[]).await;
    let resp = h
        .provisioner()
        .driver_grant_bucket_access(grant_request("ba-1414", accessed(&[(&id, rw())])))
        .await
        .unwrap()
        .into_inner();
    let creds = resp.credentials.clone().unwrap().s3.unwrap();
    let shown = format!("{resp:?} {:?}", h.driver.backend_state().unwrap());
    assert!(!shown.contains(&creds.access_key_id));
    assert!(!shown.contains(&creds.access_secret_key));
    h.stop().await;
}
