//! `--ca-file`: an HTTPS backend signed by a private CA is reachable only
//! when the driver trusts that CA, and workloads receive the CA with their
//! credentials.

use cosi_driver::Code;
use cosi_driver::proto::AccessMode;
use cosi_driver::testing::assert_status;

use crate::common::{Moto, Served, access, keys_of, put};

#[tokio::test]
async fn https_backend_is_trusted_only_with_the_ca_file() {
    let moto = tokio::task::spawn_blocking(|| Moto::start(true))
        .await
        .unwrap();
    let ca = moto.ca_pem.clone().expect("a TLS server has a CA");
    assert!(moto.endpoint.starts_with("https://"));

    let trusting = Served::on(&moto).await;
    let bucket = trusting.new_bucket(&[]).await;
    let buckets = [access(&bucket, AccessMode::ReadWrite)];
    let id = trusting.new_access_id(&buckets).await;
    let resp = trusting.grant(&id, &buckets).await.unwrap();
    assert_eq!(resp.credentials.as_ref().unwrap().certificate_authority, ca);
    put(&moto.s3(&keys_of(&resp)), &bucket, "over", "tls")
        .await
        .unwrap();
    trusting.stop().await;

    let cfg = cosi_driver_s3::Config {
        ca_pem: None,
        ..moto.config()
    };
    let untrusting = Served::start(cfg, &moto.admin).await;
    assert_status(
        untrusting.get_bucket(&bucket, &[]).await,
        Code::Unavailable,
        &["--ca-file"],
    );
    untrusting.stop().await;
}
