//! Buckets: creation, class parameters, brownfield lookup, deletion.

use cosi_driver::Code;
use cosi_driver::proto::S3AddressingStyle;
use cosi_driver::testing::assert_status;

use crate::common::{Served, delete, put, start_upload};

#[tokio::test]
async fn create_bucket_is_idempotent_and_reports_client_facing_info() {
    let (moto, d) = Served::on_shared().await;
    let name = format!("bc-{}", uuid::Uuid::new_v4());
    let id = d.generate_bucket_id(&name, &[]).await.unwrap();
    assert_eq!(id, name, "a bc-<uuid> name is a valid bucket name as it is");
    assert_eq!(d.generate_bucket_id(&name, &[]).await.unwrap(), id);

    let first = d.create_bucket(&id, &[]).await.unwrap();
    let again = d.create_bucket(&id, &[]).await.unwrap();
    assert_eq!(first, again);
    assert_eq!(first.bucket_name, id);
    assert_eq!(first.region, "us-east-1");
    assert_eq!(first.endpoint, moto.endpoint);
    assert_eq!(first.addressing_style, S3AddressingStyle::Path as i32);

    let listed = moto.s3(&moto.admin).list_buckets().send().await.unwrap();
    let same: Vec<_> = listed
        .buckets()
        .iter()
        .filter(|b| b.name() == Some(id.as_str()))
        .collect();
    assert_eq!(same.len(), 1);
    d.stop().await;
}

#[tokio::test]
async fn class_parameters_prefix_version_and_tag_the_bucket() {
    let (moto, d) = Served::on_shared().await;
    let params = [
        ("bucketNamePrefix", "team-a-"),
        ("versioning", "true"),
        ("tags", "team=a,env=test"),
    ];
    let name = format!("bc-{}", uuid::Uuid::new_v4());
    let id = d.generate_bucket_id(&name, &params).await.unwrap();
    assert_eq!(id, format!("team-a-{name}"));
    d.create_bucket(&id, &params).await.unwrap();
    d.create_bucket(&id, &params).await.unwrap();

    // Checked by behaviour: moto's GetBucketVersioning reply does not parse.
    let s3 = moto.s3(&moto.admin);
    put(&s3, &id, "doc", "v1").await.unwrap();
    put(&s3, &id, "doc", "v2").await.unwrap();
    let versions = s3.list_object_versions().bucket(&id).send().await.unwrap();
    assert_eq!(
        versions.versions().len(),
        2,
        "versioning keeps both versions"
    );
    let tags = s3.get_bucket_tagging().bucket(&id).send().await.unwrap();
    let mut got: Vec<_> = tags
        .tag_set()
        .iter()
        .map(|t| format!("{}={}", t.key(), t.value()))
        .collect();
    got.sort();
    assert_eq!(got, ["env=test", "team=a"]);
    d.stop().await;
}

#[tokio::test]
async fn existing_bucket_without_object_lock_is_incompatible() {
    let (_, d) = Served::on_shared().await;
    let id = d.new_bucket(&[]).await;
    assert_status(
        d.create_bucket(&id, &[("objectLock", "true")]).await,
        Code::AlreadyExists,
        &["Object Lock"],
    );

    let locked = d.new_bucket(&[("objectLock", "true")]).await;
    d.create_bucket(&locked, &[("objectLock", "true")])
        .await
        .unwrap();
    d.stop().await;
}

#[tokio::test]
async fn brownfield_get_bucket_finds_existing_buckets_and_reports_missing_ones() {
    let (moto, d) = Served::on_shared().await;
    let existing = format!("legacy-{}", uuid::Uuid::new_v4());
    moto.s3(&moto.admin)
        .create_bucket()
        .bucket(&existing)
        .send()
        .await
        .unwrap();
    let info = d.get_bucket(&existing, &[]).await.unwrap();
    assert_eq!(info.bucket_name, existing);
    assert_eq!(info.endpoint, moto.endpoint);
    assert_eq!(info.region, "us-east-1");

    let missing = format!("missing-{}", uuid::Uuid::new_v4());
    let err = assert_status(d.get_bucket(&missing, &[]).await, Code::NotFound, &[]);
    assert!(err.message().contains(&missing), "{}", err.message());
    d.stop().await;
}

#[tokio::test]
async fn deleting_a_non_empty_bucket_is_a_retryable_refusal() {
    let (moto, d) = Served::on_shared().await;
    let id = d.new_bucket(&[]).await;
    let s3 = moto.s3(&moto.admin);
    put(&s3, &id, "keep", "data").await.unwrap();

    assert_status(
        d.delete_bucket(&id, &[]).await,
        Code::FailedPrecondition,
        &["not empty", "purgeOnDelete"],
    );
    assert!(
        s3.head_bucket().bucket(&id).send().await.is_ok(),
        "the bucket must survive"
    );

    delete(&s3, &id, "keep").await.unwrap();
    d.delete_bucket(&id, &[]).await.unwrap();
    assert!(
        s3.head_bucket().bucket(&id).send().await.is_err(),
        "the bucket must be gone"
    );
    d.stop().await;
}

#[tokio::test]
async fn purge_on_delete_removes_objects_versions_and_uploads() {
    let (moto, d) = Served::on_shared().await;
    let params = [("versioning", "true"), ("purgeOnDelete", "true")];
    let id = d.new_bucket(&params).await;
    let s3 = moto.s3(&moto.admin);
    for i in 0..5 {
        put(&s3, &id, &format!("obj-{i}"), "v1").await.unwrap();
        put(&s3, &id, &format!("obj-{i}"), "v2").await.unwrap();
    }
    delete(&s3, &id, "obj-0").await.unwrap();
    start_upload(&s3, &id, "big").await.unwrap();

    d.delete_bucket(&id, &params).await.unwrap();
    assert!(
        s3.head_bucket().bucket(&id).send().await.is_err(),
        "the bucket must be gone"
    );
    d.delete_bucket(&id, &params).await.unwrap();
    d.stop().await;
}

#[tokio::test]
async fn deleting_an_absent_bucket_succeeds() {
    let (_, d) = Served::on_shared().await;
    d.delete_bucket(&format!("bc-{}", uuid::Uuid::new_v4()), &[])
        .await
        .unwrap();
    let id = d.new_bucket(&[]).await;
    d.delete_bucket(&id, &[]).await.unwrap();
    d.delete_bucket(&id, &[]).await.unwrap();
    d.stop().await;
}
