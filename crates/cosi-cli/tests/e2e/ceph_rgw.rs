//! The whole stack with cosi-driver-ceph-rgw against a real Ceph RADOS
//! Gateway (a throw-away cluster started once for this test binary): claim
//! → access → Secret → S3 data path → deletion, and no RGW user or bucket
//! left, as `radosgw-admin` lists them.

use cosi_driver_ceph_rgw::RgwDriver;
use cosi_driver_ceph_rgw::testing::RgwCluster;
use kube::ResourceExt;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_and_an_access_on_real_ceph_leave_nothing_behind() {
    let cluster = tokio::task::spawn_blocking(RgwCluster::shared)
        .await
        .unwrap();
    let driver = RgwDriver::connect(cluster.config(), cluster.admin_keys().clone())
        .await
        .expect("the driver reaches radosgw");
    let name = driver.config().driver_name.clone();
    let (env, stop, served) = Env::with_driver(&name, driver).await;

    let claim = env.provisioned_claim("photos", DELETE).await;
    let bucket = env.bucket_of(&claim).await;
    let bucket_id = bucket.bucket_id().expect("bucket ID").to_owned();
    assert!(cluster.bucket_names().contains(&bucket_id));
    let access = env.provisioned_rw_access("photos-rw", "photos").await;
    let account = access.account_id().expect("account ID").to_owned();
    assert!(
        cluster.user_ids().contains(&account),
        "one RGW user per access"
    );

    let (s3c, name) = env.s3("photos-rw").await;
    assert_round_trip(&s3c, &name, "a.txt", b"on ceph").await;
    s3c.delete_object()
        .bucket(&name)
        .key("a.txt")
        .send()
        .await
        .expect("the key deletes its object");

    env.remove_access("photos-rw").await;
    assert!(
        !cluster.user_ids().contains(&account),
        "the RGW user is gone"
    );
    assert!(
        get(&s3c, &name, "a.txt").await.is_err(),
        "the revoked key still works"
    );
    env.remove_claim("photos").await;
    env.wait_bucket_gone(&bucket.name_any()).await;
    assert!(
        !cluster.bucket_names().contains(&bucket_id),
        "the RGW bucket is gone"
    );
    stop.trigger();
    let _ = served.await;
}
