//! Backend failures and bad requests become the documented gRPC codes, with
//! messages that help an admin and never carry a credential.

use cosi_driver::Code;
use cosi_driver::proto::*;
use cosi_driver::testing::assert_status;

use crate::common::{Keys, Moto, Served, access, map, new_access_key};

fn assert_no_credentials(message: &str, keys: &[&Keys]) {
    for k in keys {
        assert!(!message.contains(&k.id), "access key ID leaked: {message}");
        assert!(!message.contains(&k.secret), "secret leaked: {message}");
    }
}

/// Serves a driver for the shared server with `admin` as its admin keys
/// and asserts that creating a fresh bucket fails with `code`, naming
/// `needles` and neither `admin`'s nor the real admin's keys; returns the
/// served driver.
async fn assert_create_refused(admin: &Keys, code: Code, needles: &[&str]) -> Served {
    let moto = Moto::shared();
    let d = Served::start(moto.config(), admin).await;
    let name = format!("bc-{}", uuid::Uuid::new_v4());
    let err = assert_status(d.create_bucket(&name, &[]).await, code, needles);
    assert_no_credentials(err.message(), &[admin, &moto.admin]);
    d
}

#[tokio::test]
async fn driver_reports_its_name_and_protocol() {
    let (_, d) = Served::on_shared().await;
    let info = d.client.get_info().await.unwrap();
    assert_eq!(info.name, "s3.cosi-rs.dev");
    assert_eq!(info.supported_protocols, [ObjectProtocol::S3 as i32]);
    d.stop().await;
}

#[tokio::test]
async fn wrong_admin_secret_is_unauthenticated() {
    let moto = Moto::shared();
    let wrong = Keys {
        id: moto.admin.id.clone(),
        secret: "wJalrXUtnFEMIK7MDENGbPxRfiCYWRONGSECRET1".into(),
    };
    let needles = ["SignatureDoesNotMatch", "admin credentials"];
    let d = assert_create_refused(&wrong, Code::Unauthenticated, &needles).await;
    d.stop().await;
}

#[tokio::test]
async fn unknown_admin_key_is_unauthenticated() {
    let moto = Moto::shared();
    let unknown = Keys {
        id: "AKIAIOSFODNN7UNKNOWN".into(),
        secret: "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".into(),
    };
    let d = Served::start(moto.config(), &unknown).await;
    let err = assert_status(
        d.get_bucket("some-bucket", &[]).await,
        Code::Unauthenticated,
        &[],
    );
    assert_no_credentials(err.message(), &[&unknown]);

    let err = assert_status(
        d.revoke("ba-unknown", &["bc-unknown"]).await,
        Code::Unauthenticated,
        &[],
    );
    assert_no_credentials(err.message(), &[&unknown]);
    d.stop().await;
}

#[tokio::test]
async fn admin_without_permissions_is_permission_denied() {
    let moto = Moto::shared();
    let iam = moto.iam();
    let user = format!(
        "powerless-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    iam.create_user().user_name(&user).send().await.unwrap();
    let powerless = new_access_key(&iam, &user).await;
    let needles = ["S3 CreateBucket", "admin policy"];
    let d = assert_create_refused(&powerless, Code::PermissionDenied, &needles).await;

    let admin = Served::on(moto).await;
    let bucket = admin.new_bucket(&[]).await;
    let buckets = [access(&bucket, AccessMode::ReadWrite)];
    let id = d.new_access_id(&buckets).await;
    assert_status(d.grant(&id, &buckets).await, Code::PermissionDenied, &[]);
    admin.stop().await;
    d.stop().await;
}

#[tokio::test]
async fn unreachable_backend_is_unavailable() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let moto = Moto::shared();
    let cfg = cosi_driver_s3::Config {
        s3_endpoint: Some(closed.clone()),
        iam_endpoint: Some(closed),
        ..moto.config()
    };
    let d = Served::start(cfg, &moto.admin).await;
    assert_status(
        d.get_bucket("some-bucket", &[]).await,
        Code::Unavailable,
        &["cannot reach the backend"],
    );
    d.stop().await;
}

#[tokio::test]
async fn invalid_requests_are_invalid_argument() {
    let (_, d) = Served::on_shared().await;
    let name = format!("bc-{}", uuid::Uuid::new_v4());

    assert_status(
        d.generate_bucket_id(&name, &[("versionning", "true")])
            .await,
        Code::InvalidArgument,
        &["unknown parameter \"versionning\""],
    );

    assert_status(
        d.create_bucket("Not_A_Bucket", &[]).await,
        Code::InvalidArgument,
        &[],
    );

    let mut p = d.client.provisioner.clone();
    assert_status(
        p.driver_generate_bucket_id(DriverGenerateBucketIdRequest {
            name,
            protocols: vec![ObjectProtocol::Azure as i32],
            parameters: map(&[]),
        })
        .await,
        Code::InvalidArgument,
        &["only the S3 protocol"],
    );

    assert_status(
        d.create_bucket(
            &format!("bc-{}", uuid::Uuid::new_v4()),
            &[("locationConstraint", "Mars")],
        )
        .await,
        Code::InvalidArgument,
        &[],
    );
    d.stop().await;
}
