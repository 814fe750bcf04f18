//! Buckets: creation with the class's settings (quota enforced by RGW,
//! placement, storage class, versioning), repeats, and deletion with and
//! without emptying. A repeat asking for versioning on a bucket that never
//! had it enables it (that is how a create interrupted before versioning
//! completes), so versioning is not among the incompatible settings.

use cosi_driver::proto::AccessMode::{ReadWrite, Unspecified};
use cosi_driver::testing::assert_status;
use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn a_bucket_is_created_once_owned_by_the_admin_user_and_repeats_are_ok() {
    let d = Served::start().await;
    let name = format!("bc-{}", uuid::Uuid::new_v4());
    let id = d.generate_bucket_id(&name, &[]).await.unwrap();
    assert_eq!(id, name);
    let info = d.create_bucket(&id, &[]).await.unwrap();
    assert_eq!(info.bucket_name, id);
    assert_eq!(info.endpoint, rgw().endpoint());
    assert_eq!(info.region, "us-east-1");
    let again = d.create_bucket(&id, &[]).await.unwrap();
    assert_eq!(again, info);
    assert_eq!(rgw().bucket_names().iter().filter(|b| **b == id).count(), 1);
    assert_eq!(rgw().bucket_stats(&id)["owner"], d.driver.admin_uid());
    assert_eq!(d.get_bucket(&id, &[]).await.unwrap(), info);

    d.delete_bucket(&id, &[]).await.unwrap();
    d.delete_bucket(&id, &[]).await.unwrap();
    assert_gone(&[], &[&id]);
}

#[tokio::test]
async fn a_max_objects_quota_is_enforced_by_rgw() {
    let d = Served::start().await;
    let bucket = d
        .new_bucket(&[("maxObjects", "3"), ("maxSizeBytes", "1Mi")])
        .await;
    let quota = &rgw().bucket_stats(&bucket)["bucket_quota"];
    assert_eq!(quota["enabled"], true, "{quota}");
    assert_eq!(quota["max_objects"], 3, "{quota}");
    assert_eq!(quota["max_size"], 1 << 20, "{quota}");
    let (account, keys) = d.new_access(&[access(&bucket, ReadWrite)]).await;
    let c = s3(&keys);
    for i in 0..3 {
        put(&c, &bucket, &format!("o{i}"), "x")
            .await
            .unwrap_or_else(|e| panic!("object {i}: {e}"));
    }
    assert_eq!(
        put(&c, &bucket, "o3", "x").await.unwrap_err(),
        "QuotaExceeded"
    );
    assert_eq!(list(&c, &bucket).await.unwrap().len(), 3);

    d.remove(&account, &bucket).await;
}

#[tokio::test]
async fn a_max_size_quota_is_enforced_by_rgw() {
    let d = Served::start().await;
    let bucket = d.new_bucket(&[("maxSizeBytes", "10Ki")]).await;
    let (account, keys) = d.new_access(&[access(&bucket, ReadWrite)]).await;
    let c = s3(&keys);
    put(&c, &bucket, "small", &"x".repeat(3000)).await.unwrap();
    let big = "y".repeat(20 * 1024);
    assert_eq!(
        put(&c, &bucket, "big", &big).await.unwrap_err(),
        "QuotaExceeded"
    );

    d.remove(&account, &bucket).await;
}

#[tokio::test]
async fn a_repeat_with_other_settings_is_already_exists_and_changes_nothing() {
    let d = Served::start().await;
    let bucket = d.new_bucket(&[("maxObjects", "100")]).await;
    for other in [
        vec![("maxObjects", "200")],
        vec![],
        vec![("maxObjects", "100"), ("storageClass", "COLD")],
    ] {
        assert_status(
            d.create_bucket(&bucket, &other).await,
            Code::AlreadyExists,
            &[],
        );
    }
    assert_eq!(
        rgw().bucket_stats(&bucket)["bucket_quota"]["max_objects"],
        100
    );
    d.create_bucket(&bucket, &[("maxObjects", "100"), ("versioning", "false")])
        .await
        .unwrap();

    d.delete_bucket(&bucket, &[]).await.unwrap();
    assert_gone(&[], &[&bucket]);
}

#[tokio::test]
async fn placement_and_storage_class_are_applied_and_unknown_ones_refused() {
    let d = Served::start().await;
    let params = [
        ("placement", "default-placement"),
        ("storageClass", "STANDARD"),
    ];
    let bucket = d.new_bucket(&params).await;
    assert_eq!(
        rgw().bucket_stats(&bucket)["placement_rule"],
        "default-placement"
    );
    d.create_bucket(&bucket, &params).await.unwrap();

    let nowhere = format!("bc-{}", uuid::Uuid::new_v4());
    let unknown: [(_, &[&str]); 2] = [
        (
            ("placement", "no-such-placement"),
            &["InvalidLocationConstraint"],
        ),
        (("storageClass", "NO_SUCH_CLASS"), &[]),
    ];
    for (param, needles) in unknown {
        let result = d.create_bucket(&nowhere, &[param]).await;
        assert_status(result, Code::InvalidArgument, needles);
    }

    d.delete_bucket(&bucket, &[]).await.unwrap();
    assert_gone(&[], &[&bucket, &nowhere]);
}

#[tokio::test]
async fn invalid_parameters_are_refused_before_anything_is_created() {
    let d = Served::start().await;
    let name = format!("bc-{}", uuid::Uuid::new_v4());
    assert_status(
        d.create_bucket(&name, &[("maxObjects", "lots"), ("maxSize", "1G")])
            .await,
        Code::InvalidArgument,
        &["maxObjects", "\"maxSize\""],
    );
    assert_gone(&[], &[&name]);
}

#[tokio::test]
async fn a_non_empty_bucket_is_refused_unless_the_class_says_to_empty_it() {
    let (d, bucket, account, keys) = Served::with_access(ReadWrite, Unspecified, Unspecified).await;
    put(&s3(&keys), &bucket, "keep.txt", "data").await.unwrap();
    d.revoke(&account, &[&bucket]).await.unwrap();

    assert_status(
        d.delete_bucket(&bucket, &[]).await,
        Code::FailedPrecondition,
        &["purgeOnDelete"],
    );
    assert!(rgw().bucket_names().contains(&bucket));

    d.purge_all(&[&account], &[&bucket]).await;
}

#[tokio::test]
async fn emptying_a_versioned_bucket_leaves_nothing() {
    let d = Served::start().await;
    let bucket = d.new_bucket(&[("versioning", "true")]).await;
    let admin = s3(rgw().admin_keys());
    let status = s3_result(admin.get_bucket_versioning().bucket(&bucket).send().await).unwrap();
    assert_eq!(status.status().map(|s| s.as_str()), Some("Enabled"));
    let (account, keys) = d.new_access(&[access(&bucket, ReadWrite)]).await;
    let c = s3(&keys);
    for v in 0..3 {
        put(&c, &bucket, "doc.txt", &format!("version {v}"))
            .await
            .unwrap();
    }
    put(&c, &bucket, "gone.txt", "soon deleted").await.unwrap();
    delete(&c, &bucket, "gone.txt").await.unwrap();
    let upload_id = start_upload(&c, &bucket, "big.bin").await.unwrap();
    c.upload_part()
        .bucket(&bucket)
        .key("big.bin")
        .upload_id(upload_id)
        .part_number(1)
        .body(vec![7u8; 1024].into())
        .send()
        .await
        .unwrap();
    let versions = s3_result(admin.list_object_versions().bucket(&bucket).send().await).unwrap();
    assert_eq!(versions.versions().len(), 4);
    assert_eq!(versions.delete_markers().len(), 1);
    // The writer is gone before the deletion: its objects stay, owned by a
    // user that no longer exists.
    d.revoke(&account, &[&bucket]).await.unwrap();

    assert_status(
        d.delete_bucket(&bucket, &[]).await,
        Code::FailedPrecondition,
        &[],
    );
    d.purge_all(&[&account], &[&bucket]).await;
    let stats = rgw().radosgw_admin(&["bucket", "stats", &format!("--bucket={bucket}")]);
    assert!(stats.is_err(), "the bucket still has stats: {stats:?}");
}

#[tokio::test]
async fn deleting_a_bucket_that_never_existed_is_ok() {
    let d = Served::start().await;
    let name = format!("bc-{}", uuid::Uuid::new_v4());
    d.purge_all(&[], &[&name]).await;
}
