//! Accesses: IAM users, policies and keys, checked on the data path.

use cosi_driver::Code;
use cosi_driver::proto::*;
use cosi_driver::testing::assert_status;
use cosi_driver_s3::accounts::{GRANTED_TAG_PREFIX, POLICY_NAME};

use crate::common::{
    Served, access, assert_denied, assert_managed_by, delete, get, keys_of, keys_of_user, list,
    put, users_under,
};

#[tokio::test]
async fn granted_credentials_reach_their_bucket_and_no_other() {
    let (moto, d) = Served::on_shared().await;
    let mine = d.new_bucket(&[]).await;
    let other = d.new_bucket(&[]).await;
    let admin = moto.s3(&moto.admin);
    put(&admin, &other, "secret", "not yours").await.unwrap();

    let (_, s3) = d.new_client(moto, &mine, AccessMode::ReadWrite).await;
    put(&s3, &mine, "hello", "world").await.unwrap();
    assert_eq!(get(&s3, &mine, "hello").await.unwrap(), "world");
    assert_eq!(list(&s3, &mine).await.unwrap(), ["hello"]);
    delete(&s3, &mine, "hello").await.unwrap();

    assert_denied(get(&s3, &other, "secret").await);
    assert_denied(list(&s3, &other).await);
    assert_denied(put(&s3, &other, "x", "y").await);
    d.stop().await;
}

#[tokio::test]
async fn grant_returns_info_for_every_bucket_and_no_other() {
    let (moto, d) = Served::on_shared().await;
    let a = d.new_bucket(&[]).await;
    let b = d.new_bucket(&[]).await;
    let buckets = [
        access(&a, AccessMode::ReadWrite),
        access(&b, AccessMode::ReadOnly),
    ];
    let id = d.new_access_id(&buckets).await;
    let resp = d.grant(&id, &buckets).await.unwrap();
    let mut ids: Vec<_> = resp.buckets.iter().map(|g| g.bucket_id.clone()).collect();
    ids.sort();
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(ids, want);
    for g in &resp.buckets {
        let s3 = g
            .bucket_info
            .as_ref()
            .and_then(|i| i.s3.as_ref())
            .expect("S3 info");
        assert_eq!(s3.bucket_name, g.bucket_id);
        assert_eq!(s3.endpoint, moto.endpoint);
        assert_eq!(s3.region, "us-east-1");
    }
    d.stop().await;
}

#[tokio::test]
async fn read_only_access_cannot_write() {
    let (moto, d) = Served::on_shared().await;
    let bucket = d.new_bucket(&[]).await;
    put(&moto.s3(&moto.admin), &bucket, "doc", "content")
        .await
        .unwrap();

    let (_, s3) = d.new_client(moto, &bucket, AccessMode::ReadOnly).await;
    assert_eq!(get(&s3, &bucket, "doc").await.unwrap(), "content");
    assert_eq!(list(&s3, &bucket).await.unwrap(), ["doc"]);
    assert_denied(put(&s3, &bucket, "new", "x").await);
    assert_denied(delete(&s3, &bucket, "doc").await);
    d.stop().await;
}

#[tokio::test]
async fn write_only_access_cannot_read() {
    let (moto, d) = Served::on_shared().await;
    let bucket = d.new_bucket(&[]).await;
    let (_, s3) = d.new_client(moto, &bucket, AccessMode::WriteOnly).await;
    put(&s3, &bucket, "drop", "box").await.unwrap();
    assert_denied(get(&s3, &bucket, "drop").await);
    assert_denied(list(&s3, &bucket).await);
    d.stop().await;
}

#[tokio::test]
async fn revoked_key_fails_on_next_request() {
    let (moto, d, path) = Served::on_shared_path().await;
    let bucket = d.new_bucket(&[]).await;
    let (account, s3) = d.new_client(moto, &bucket, AccessMode::ReadWrite).await;
    put(&s3, &bucket, "k", "v").await.unwrap();

    d.revoke(&account, &[&bucket]).await.unwrap();
    assert_eq!(
        get(&s3, &bucket, "k").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    assert!(
        users_under(&moto.iam(), &path).await.is_empty(),
        "the user must be deleted"
    );
    d.revoke(&account, &[&bucket]).await.unwrap();
    d.stop().await;
}

/// The buckets whose grant IAM user `user`'s tags record.
async fn recorded_buckets(iam: &aws_sdk_iam::Client, user: &str) -> Vec<String> {
    let out = iam.list_user_tags().user_name(user).send().await.unwrap();
    out.tags()
        .iter()
        .filter_map(|t| t.key().strip_prefix(GRANTED_TAG_PREFIX))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_revoke_naming_a_bucket_the_account_was_never_granted_is_refused_and_the_key_still_works()
{
    let (moto, d, path) = Served::on_shared_path().await;
    let victim_bucket = d.new_bucket(&[]).await;
    let own_bucket = d.new_bucket(&[]).await;
    let (victim, s3) = d
        .new_client(moto, &victim_bucket, AccessMode::ReadWrite)
        .await;
    let (own, _) = d.new_client(moto, &own_bucket, AccessMode::ReadWrite).await;
    put(&s3, &victim_bucket, "k", "v").await.unwrap();
    let iam = moto.iam();
    assert_eq!(
        recorded_buckets(&iam, &victim).await,
        [victim_bucket.as_str()]
    );

    for named in [vec![own_bucket.as_str()], vec![&victim_bucket, &own_bucket]] {
        let err = assert_status(
            d.revoke(&victim, &named).await,
            Code::FailedPrecondition,
            &[&victim, &own_bucket, "nothing was revoked"],
        );
        assert!(
            !err.message().contains(&format!("{victim_bucket:?}")),
            "{}",
            err.message()
        );
    }
    assert_eq!(get(&s3, &victim_bucket, "k").await.unwrap(), "v");
    put(&s3, &victim_bucket, "k2", "still writes")
        .await
        .unwrap();
    assert_eq!(keys_of_user(&iam, &victim).await.len(), 1);

    d.revoke(&victim, &[&victim_bucket]).await.unwrap();
    d.revoke(&own, &[&own_bucket]).await.unwrap();
    assert!(users_under(&iam, &path).await.is_empty());
    d.stop().await;
}

#[tokio::test]
async fn a_revoke_of_an_account_already_gone_is_ok_and_touches_no_other_user() {
    let (moto, d, path) = Served::on_shared_path().await;
    let bucket = d.new_bucket(&[]).await;
    let (account, s3) = d.new_client(moto, &bucket, AccessMode::ReadWrite).await;
    let never_granted = d
        .new_access_id(&[access(&bucket, AccessMode::ReadWrite)])
        .await;
    d.revoke(&never_granted, &[&bucket]).await.unwrap();
    d.revoke(&never_granted, &["bc-no-such-bucket"])
        .await
        .unwrap();
    assert_eq!(users_under(&moto.iam(), &path).await, [account.as_str()]);
    put(&s3, &bucket, "k", "v").await.unwrap();
    d.revoke(&account, &[&bucket]).await.unwrap();
    d.stop().await;
}

#[tokio::test]
async fn a_revoke_cut_short_after_removing_the_keys_and_policy_is_completed_by_its_retry() {
    let (moto, d, path) = Served::on_shared_path().await;
    let a = d.new_bucket(&[]).await;
    let b = d.new_bucket(&[]).await;
    let other = d.new_bucket(&[]).await;
    let buckets = [
        access(&a, AccessMode::ReadWrite),
        access(&b, AccessMode::ReadOnly),
    ];
    let (account, keys) = d.new_access(&buckets).await;
    let iam = moto.iam();
    // The revoke's first steps, as a crash would leave them: keys and
    // policy gone, the user (with its record of the grant) still there.
    for key in keys_of_user(&iam, &account).await {
        let request = iam.delete_access_key().user_name(&account);
        request.access_key_id(key).send().await.unwrap();
    }
    let request = iam.delete_user_policy().user_name(&account);
    request.policy_name(POLICY_NAME).send().await.unwrap();

    assert_status(
        d.revoke(&account, &[&other]).await,
        Code::FailedPrecondition,
        &[&other],
    );
    assert_eq!(users_under(&iam, &path).await, [account.as_str()]);
    d.revoke(&account, &[&a, &b]).await.unwrap();
    assert!(users_under(&iam, &path).await.is_empty());
    assert_eq!(
        put(&moto.s3(&keys), &a, "k", "v").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    d.revoke(&account, &[&a, &b]).await.unwrap();
    d.stop().await;
}

#[tokio::test]
async fn a_user_granted_before_buckets_were_recorded_is_checked_against_its_policy() {
    let (moto, d, path) = Served::on_shared_path().await;
    let bucket = d.new_bucket(&[]).await;
    let other = d.new_bucket(&[]).await;
    let (account, _) = d.new_client(moto, &bucket, AccessMode::ReadWrite).await;
    let iam = moto.iam();
    let record = format!("{GRANTED_TAG_PREFIX}{bucket}");
    iam.untag_user()
        .user_name(&account)
        .tag_keys(record)
        .send()
        .await
        .unwrap();
    assert!(recorded_buckets(&iam, &account).await.is_empty());

    assert_status(
        d.revoke(&account, &[&other]).await,
        Code::FailedPrecondition,
        &[&other],
    );
    assert_eq!(users_under(&iam, &path).await, [account.as_str()]);
    d.revoke(&account, &[&bucket]).await.unwrap();
    assert!(users_under(&iam, &path).await.is_empty());
    d.stop().await;
}

#[tokio::test]
async fn interrupted_grant_retried_leaves_one_user_with_one_key() {
    let (moto, d, path) = Served::on_shared_path().await;
    let bucket = d.new_bucket(&[]).await;
    let buckets = [access(&bucket, AccessMode::ReadWrite)];
    let name = format!("ba-{}", uuid::Uuid::new_v4());

    // The sidecar crashed after phase 1 and asks again: same ID, nothing created.
    let id = d.generate_access_id(&name, &buckets).await.unwrap();
    assert!(
        users_under(&moto.iam(), &path).await.is_empty(),
        "phase 1 creates nothing"
    );
    assert_eq!(d.generate_access_id(&name, &buckets).await.unwrap(), id);

    // Phase 2 runs, its answer is lost, and it is retried twice.
    let lost = keys_of(&d.grant(&id, &buckets).await.unwrap());
    let retried = keys_of(&d.grant(&id, &buckets).await.unwrap());
    let last = keys_of(&d.grant(&id, &buckets).await.unwrap());
    assert_ne!(lost.id, last.id);
    assert_ne!(retried.id, last.id);

    let iam = moto.iam();
    assert_eq!(users_under(&iam, &path).await, vec![id.clone()]);
    assert_eq!(keys_of_user(&iam, &id).await, vec![last.id.clone()]);
    put(&moto.s3(&last), &bucket, "k", "v").await.unwrap();
    assert_eq!(
        put(&moto.s3(&lost), &bucket, "k", "v").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    d.stop().await;
}

#[tokio::test]
async fn one_access_to_several_buckets_is_one_user_with_one_policy() {
    let (moto, d, path) = Served::on_shared_path().await;
    let a = d.new_bucket(&[]).await;
    let b = d.new_bucket(&[]).await;
    let (account, keys) = d
        .new_access(&[
            access(&a, AccessMode::ReadWrite),
            access(&b, AccessMode::ReadWrite),
        ])
        .await;
    let s3 = moto.s3(&keys);
    put(&s3, &a, "in-a", "1").await.unwrap();
    put(&s3, &b, "in-b", "2").await.unwrap();

    let iam = moto.iam();
    assert_eq!(users_under(&iam, &path).await, vec![account.clone()]);
    let request = iam.list_user_policies().user_name(&account);
    let policies = request.send().await.unwrap();
    assert_eq!(policies.policy_names(), [POLICY_NAME]);
    assert_managed_by(&iam, &account, "s3.cosi-rs.dev").await;
    d.stop().await;
}

#[tokio::test]
async fn foreign_iam_user_is_refused_and_left_alone() {
    let (moto, d) = Served::on_shared().await;
    let bucket = d.new_bucket(&[]).await;
    let buckets = [access(&bucket, AccessMode::ReadWrite)];
    let id = d.new_access_id(&buckets).await;
    let iam = moto.iam();
    iam.create_user().user_name(&id).send().await.unwrap();

    assert_status(
        d.grant(&id, &buckets).await,
        Code::AlreadyExists,
        &["not created by driver"],
    );
    assert!(keys_of_user(&iam, &id).await.is_empty());

    d.revoke(&id, &[&bucket]).await.unwrap();
    iam.get_user()
        .user_name(&id)
        .send()
        .await
        .expect("the foreign user must survive revoke");
    d.stop().await;
}

#[tokio::test]
async fn grant_to_a_missing_bucket_is_not_found_and_creates_nothing() {
    let (moto, d, path) = Served::on_shared_path().await;
    let missing = format!("bc-{}", uuid::Uuid::new_v4());
    let buckets = [access(&missing, AccessMode::ReadWrite)];
    let id = d.new_access_id(&buckets).await;
    assert_status(d.grant(&id, &buckets).await, Code::NotFound, &[]);
    assert!(users_under(&moto.iam(), &path).await.is_empty());
    d.stop().await;
}

#[tokio::test]
async fn service_account_authentication_is_refused() {
    let (_, d) = Served::on_shared().await;
    let mut p = d.client.provisioner.clone();
    assert_status(
        p.driver_generate_bucket_access_id(DriverGenerateBucketAccessIdRequest {
            account_name: format!("ba-{}", uuid::Uuid::new_v4()),
            buckets: vec![access("bc-any", AccessMode::ReadWrite)],
            protocol: ObjectProtocol::S3 as i32,
            authentication_type: AuthenticationType::ServiceAccount as i32,
            service_account: Some(ServiceAccount {
                namespace: "apps".into(),
                name: "app".into(),
            }),
            parameters: Default::default(),
        })
        .await,
        Code::InvalidArgument,
        &["ServiceAccount authentication is not supported"],
    );
    d.stop().await;
}
