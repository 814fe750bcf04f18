//! Static buckets (DriverGetBucket): a bucket of another RGW user, as an
//! ObjectBucketClaim leaves it, is refused naming its owner unless the
//! parameters allow relinking; once relinked, COSI accesses reach its old
//! objects.

use cosi_driver::proto::AccessMode::ReadOnly;
use cosi_driver::testing::assert_status;
use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn a_bucket_of_another_user_is_refused_naming_the_owner_unless_relinking_is_allowed() {
    let d = Served::start().await;
    let owner = format!(
        "obc-default-photos-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let owner_keys = rgw().create_user(&owner).unwrap();
    let bucket = format!("photos-{}", uuid::Uuid::new_v4());
    let o = s3(&owner_keys);
    create(&o, &bucket).await.unwrap();
    put(&o, &bucket, "old.jpg", "pixels").await.unwrap();

    assert_status(
        d.get_bucket(&bucket, &[]).await,
        Code::FailedPrecondition,
        &[&format!("{owner:?}"), "relinkForeignBuckets"],
    );
    let id = d.new_access_id(&[access(&bucket, ReadOnly)]).await;
    assert_status(
        d.grant(&id, &[access(&bucket, ReadOnly)]).await,
        Code::FailedPrecondition,
        &[],
    );

    let info = d
        .get_bucket(&bucket, &[("relinkForeignBuckets", "true")])
        .await
        .unwrap();
    assert_eq!(info.bucket_name, bucket);
    let stats = rgw().bucket_stats(&bucket);
    assert_eq!(stats["owner"], d.driver.admin_uid());
    d.get_bucket(&bucket, &[]).await.unwrap();

    let keys = keys_of(&d.grant(&id, &[access(&bucket, ReadOnly)]).await.unwrap());
    assert_eq!(get(&s3(&keys), &bucket, "old.jpg").await.unwrap(), "pixels");
    assert_eq!(
        get(&o, &bucket, "old.jpg").await.unwrap(),
        "pixels",
        "the old owner keeps its objects"
    );
    assert_denied(list(&o, &bucket).await);

    d.revoke(&id, &[&bucket]).await.unwrap();
    d.purge(&bucket).await;
    rgw()
        .radosgw_admin(&["user", "rm", &format!("--uid={owner}")])
        .unwrap();
    assert_gone(&[&id, &owner], &[&bucket]);
}

#[tokio::test]
async fn a_missing_static_bucket_is_not_found_and_retried() {
    let d = Served::start().await;
    assert_status(
        d.get_bucket("no-such-bucket-here", &[]).await,
        Code::NotFound,
        &[],
    );
}
