//! Accesses: RGW itself refuses what the access modes forbid, keys reach
//! only their buckets, repeated grants return the same key, concurrent
//! grants on one bucket all hold, revocation leaves nothing, and a revoke
//! naming buckets its account was never granted changes nothing.

use aws_sdk_s3::types::{Tag, Tagging};
use cosi_driver::locks::KeyLocks;
use cosi_driver::proto::AccessMode::{ReadOnly, ReadWrite, Unspecified, WriteOnly};
use cosi_driver::testing::assert_status;
use cosi_driver_ceph_rgw::{accounts, policy};
use tonic::Code;

use crate::common::*;

/// The policy of `bucket` as the admin reads it; the S3 error code on
/// failure.
async fn bucket_policy(bucket: &str) -> Result<String, String> {
    let admin = s3(rgw().admin_keys());
    let out = s3_result(admin.get_bucket_policy().bucket(bucket).send().await)?;
    Ok(out.policy().expect("a policy").to_owned())
}

#[tokio::test]
async fn read_only_keys_read_and_list_but_cannot_put_or_delete() {
    let (d, bucket) = Served::with_bucket().await;
    let (writer, wk) = d.new_access(&[access(&bucket, ReadWrite)]).await;
    let (reader, rk) = d.new_access(&[access(&bucket, ReadOnly)]).await;
    put(&s3(&wk), &bucket, "note.txt", "hello").await.unwrap();

    let r = s3(&rk);
    assert_eq!(get(&r, &bucket, "note.txt").await.unwrap(), "hello");
    assert_eq!(list(&r, &bucket).await.unwrap(), ["note.txt"]);
    assert_denied(put(&r, &bucket, "nope.txt", "x").await);
    let deleted = delete(&r, &bucket, "note.txt").await;
    assert!(deleted.is_err(), "a ReadOnly key deleted an object");
    assert_eq!(get(&r, &bucket, "note.txt").await.unwrap(), "hello");

    d.revoke(&writer, &[&bucket]).await.unwrap();
    d.revoke(&reader, &[&bucket]).await.unwrap();
    d.purge_all(&[&writer, &reader], &[&bucket]).await;
}

#[tokio::test]
async fn write_only_keys_write_but_cannot_read_even_what_they_wrote() {
    let (d, bucket) = Served::with_bucket().await;
    let (writer, wk) = d.new_access(&[access(&bucket, WriteOnly)]).await;
    let (reader, rk) = d.new_access(&[access(&bucket, ReadOnly)]).await;

    let w = s3(&wk);
    put(&w, &bucket, "drop.txt", "sealed").await.unwrap();
    assert_denied(get(&w, &bucket, "drop.txt").await);
    assert_denied(list(&w, &bucket).await);
    let head = w.head_object().bucket(&bucket).key("drop.txt").send().await;
    assert!(head.is_err(), "a WriteOnly key read an object's metadata");
    assert_eq!(get(&s3(&rk), &bucket, "drop.txt").await.unwrap(), "sealed");

    d.revoke(&writer, &[&bucket]).await.unwrap();
    d.revoke(&reader, &[&bucket]).await.unwrap();
    d.purge_all(&[&writer, &reader], &[&bucket]).await;
}

#[tokio::test]
async fn keys_reach_only_their_buckets() {
    let (d, [mine, other]) = Served::with_buckets().await;
    let (owner, ok) = d.new_access(&[access(&other, ReadWrite)]).await;
    put(&s3(&ok), &other, "secret.txt", "not yours")
        .await
        .unwrap();
    let (account, keys) = d.new_access(&[access(&mine, ReadWrite)]).await;

    let c = s3(&keys);
    put(&c, &mine, "a.txt", "mine").await.unwrap();
    assert_denied(put(&c, &other, "a.txt", "x").await);
    assert_denied(get(&c, &other, "secret.txt").await);
    assert_denied(list(&c, &other).await);
    let buckets = c.list_buckets().send().await.expect("ListBuckets");
    assert!(buckets.buckets().is_empty(), "an access key owns buckets");

    d.revoke(&account, &[&mine]).await.unwrap();
    d.revoke(&owner, &[&other]).await.unwrap();
    d.purge_all(&[&account, &owner], &[&mine, &other]).await;
}

#[tokio::test]
async fn granted_keys_cannot_create_buckets() {
    let (d, bucket, account, keys) = Served::with_access(ReadWrite, ReadWrite, ReadWrite).await;
    let attempt = format!("made-by-{account}");
    let err = create(&s3(&keys), &attempt).await.unwrap_err();
    assert!(
        ["AccessDenied", "TooManyBuckets"].contains(&err.as_str()),
        "{err}"
    );
    assert!(
        !rgw().bucket_names().contains(&attempt),
        "the key created a bucket"
    );
    let user = rgw().user_info(&account);
    assert!(user["max_buckets"].as_i64().unwrap() < 0, "{user}");

    d.revoke(&account, &[&bucket]).await.unwrap();
    d.delete_bucket(&bucket, &[]).await.unwrap();
    assert_gone(&[&account], &[&bucket, &attempt]);
}

#[tokio::test]
async fn a_repeated_grant_returns_the_same_key_and_keeps_one_user_with_one_key() {
    let (d, bucket) = Served::with_bucket().await;
    let buckets = [access(&bucket, ReadWrite)];
    let (account, first) = d.new_access(&buckets).await;
    let again = keys_of(&d.grant(&account, &buckets).await.unwrap());
    assert_eq!(again, first, "a repeated grant issued another key");
    put(&s3(&again), &bucket, "k", "v").await.unwrap();
    let info = rgw().user_info(&account);
    assert_eq!(
        info["keys"].as_array().unwrap().len(),
        1,
        "{}",
        info["keys"].as_array().unwrap().len()
    );
    assert_eq!(
        rgw().user_ids().iter().filter(|u| **u == account).count(),
        1
    );

    d.revoke(&account, &[&bucket]).await.unwrap();
    d.revoke(&account, &[&bucket]).await.unwrap();
    assert_eq!(
        put(&s3(&first), &bucket, "k2", "v").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    d.purge_all(&[&account], &[&bucket]).await;
}

#[tokio::test]
async fn one_key_reaches_several_buckets_each_with_its_own_mode() {
    let (d, [rw, ro]) = Served::with_buckets().await;
    let (seeder, sk) = d.new_access(&[access(&ro, ReadWrite)]).await;
    put(&s3(&sk), &ro, "seed.txt", "seed").await.unwrap();
    let (account, keys) = d
        .new_access(&[access(&rw, ReadWrite), access(&ro, ReadOnly)])
        .await;

    let c = s3(&keys);
    put(&c, &rw, "x.txt", "x").await.unwrap();
    assert_eq!(get(&c, &rw, "x.txt").await.unwrap(), "x");
    assert_eq!(get(&c, &ro, "seed.txt").await.unwrap(), "seed");
    assert_denied(put(&c, &ro, "x.txt", "x").await);

    d.revoke(&account, &[&rw, &ro]).await.unwrap();
    assert_eq!(
        get(&c, &ro, "seed.txt").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    d.revoke(&seeder, &[&ro]).await.unwrap();
    d.purge_all(&[&account, &seeder], &[&rw, &ro]).await;
}

#[tokio::test]
async fn metadata_modes_are_enforced_per_category() {
    let (d, bucket, account, keys) = Served::with_access(ReadWrite, ReadOnly, Unspecified).await;
    let c = s3(&keys);
    put(&c, &bucket, "t.txt", "t").await.unwrap();
    let call = c.get_object_tagging().bucket(&bucket).key("t.txt");
    let tags = call.send().await;
    assert!(
        tags.is_ok(),
        "object metadata ReadOnly cannot read tags: {tags:?}"
    );
    let tag = Tag::builder().key("k").value("v").build().unwrap();
    let tagging = Tagging::builder().tag_set(tag).build().unwrap();
    let call = c.put_object_tagging().bucket(&bucket).key("t.txt");
    let set = call.tagging(tagging).send().await;
    assert!(set.is_err(), "object metadata ReadOnly wrote tags");
    let versioning = c.get_bucket_versioning().bucket(&bucket).send().await;
    assert!(
        versioning.is_err(),
        "bucket metadata unspecified read the versioning"
    );

    d.remove(&account, &bucket).await;
}

#[tokio::test]
async fn ten_concurrent_grants_on_one_bucket_all_hold_and_concurrent_revokes_leave_no_statement() {
    let (d, bucket) = Served::with_bucket().await;
    let grants = (0..10).map(|_| {
        let (d, bucket) = (&d, bucket.clone());
        async move { d.new_access(&[access(&bucket, ReadWrite)]).await }
    });
    let accounts = futures::future::join_all(grants).await;

    for (i, (_, keys)) in accounts.iter().enumerate() {
        let c = s3(keys);
        put(&c, &bucket, &format!("from-{i}"), "x")
            .await
            .unwrap_or_else(|e| panic!("access {i}: {e}"));
        assert_eq!(get(&c, &bucket, &format!("from-{i}")).await.unwrap(), "x");
    }
    let policy_text = bucket_policy(&bucket).await.unwrap();
    let mut granted = policy::accounts(&policy_text);
    granted.sort();
    let mut expected: Vec<String> = accounts.iter().map(|(a, _)| a.clone()).collect();
    expected.sort();
    assert_eq!(granted, expected, "statements lost");

    let revokes = accounts.iter().map(|(a, _)| {
        let (d, bucket) = (&d, bucket.clone());
        async move { d.revoke(a, &[&bucket]).await }
    });
    for r in futures::future::join_all(revokes).await {
        r.unwrap();
    }
    let after = bucket_policy(&bucket).await;
    assert!(after.is_err(), "statements left behind: {after:?}");
    let users: Vec<&str> = accounts.iter().map(|(a, _)| a.as_str()).collect();
    d.purge_all(&users, &[&bucket]).await;
}

#[tokio::test]
async fn a_bucket_policy_that_would_outgrow_the_limit_is_resource_exhausted() {
    let mut cfg = rgw().config();
    cfg.max_policy_size = 2500;
    let d = Served::with_config(cfg).await;
    let bucket = d.new_bucket(&[]).await;
    let buckets = [access(&bucket, ReadWrite)];
    let (first, _) = d.new_access(&buckets).await;
    let mut granted = vec![first];
    let refused = loop {
        let id = d.new_access_id(&buckets).await;
        match d.grant(&id, &buckets).await {
            Ok(_) => granted.push(id),
            Err(e) => break (id, e),
        }
        assert!(granted.len() < 10, "the limit was never reached");
    };
    assert_eq!(
        refused.1.code(),
        Code::ResourceExhausted,
        "{}",
        refused.1.message()
    );
    assert!(
        refused.1.message().contains("max-bucket-policy-size"),
        "{}",
        refused.1.message()
    );
    assert!(
        !rgw().user_ids().contains(&refused.0),
        "a refused grant created its user"
    );
    for a in &granted {
        put(
            &s3(&keys_of(&d.grant(a, &buckets).await.unwrap())),
            &bucket,
            a,
            "still works",
        )
        .await
        .unwrap();
    }

    d.revoke(&refused.0, &[&bucket]).await.unwrap();
    for a in &granted {
        d.revoke(a, &[&bucket]).await.unwrap();
    }
    let mut users: Vec<&str> = granted.iter().map(String::as_str).collect();
    users.push(&refused.0);
    d.purge_all(&users, &[&bucket]).await;
}

#[tokio::test]
async fn an_rgw_user_the_driver_did_not_create_is_never_taken_over() {
    let (d, bucket) = Served::with_bucket().await;
    let id = d.new_access_id(&[access(&bucket, ReadWrite)]).await;
    rgw().create_user(&id).unwrap();
    assert_status(
        d.grant(&id, &[access(&bucket, ReadWrite)]).await,
        Code::AlreadyExists,
        &[],
    );
    d.revoke(&id, &[&bucket]).await.unwrap();
    assert!(
        rgw().user_ids().contains(&id),
        "a revoke deleted a user the driver did not create"
    );

    rgw()
        .radosgw_admin(&["user", "rm", &format!("--uid={id}")])
        .unwrap();
    d.delete_bucket(&bucket, &[]).await.unwrap();
    assert_gone(&[&id], &[&bucket]);
}

#[tokio::test]
async fn grants_wait_for_missing_buckets() {
    let d = Served::start().await;
    let missing = format!("bc-{}", uuid::Uuid::new_v4());
    let id = d.new_access_id(&[access(&missing, ReadWrite)]).await;
    assert_status(
        d.grant(&id, &[access(&missing, ReadWrite)]).await,
        Code::NotFound,
        &[],
    );
    assert_gone(&[&id], &[&missing]);
}

#[tokio::test]
async fn a_revoke_naming_a_bucket_the_account_was_never_granted_is_refused_and_the_key_still_works()
{
    let (d, [victim_bucket, own_bucket]) = Served::with_buckets().await;
    let (victim, keys) = d.new_access(&[access(&victim_bucket, ReadWrite)]).await;
    let (own, _) = d.new_access(&[access(&own_bucket, ReadWrite)]).await;
    put(&s3(&keys), &victim_bucket, "k", "v").await.unwrap();

    for named in [
        vec![own_bucket.as_str()],
        vec![victim_bucket.as_str(), own_bucket.as_str()],
    ] {
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
    assert!(rgw().user_ids().contains(&victim));
    let statements = policy::accounts(&bucket_policy(&victim_bucket).await.unwrap());
    assert_eq!(statements, [victim.as_str()]);
    assert_eq!(get(&s3(&keys), &victim_bucket, "k").await.unwrap(), "v");
    put(&s3(&keys), &victim_bucket, "k2", "still writes")
        .await
        .unwrap();

    d.revoke(&victim, &[&victim_bucket]).await.unwrap();
    d.revoke(&own, &[&own_bucket]).await.unwrap();
    d.purge_all(&[&victim, &own], &[&victim_bucket, &own_bucket])
        .await;
}

#[tokio::test]
async fn a_revoke_of_an_account_already_gone_is_ok_and_touches_no_other_account() {
    let (d, bucket) = Served::with_bucket().await;
    let (account, keys) = d.new_access(&[access(&bucket, ReadWrite)]).await;
    let never_granted = d.new_access_id(&[access(&bucket, ReadWrite)]).await;
    d.revoke(&never_granted, &[&bucket]).await.unwrap();
    let statements = policy::accounts(&bucket_policy(&bucket).await.unwrap());
    assert_eq!(statements, [account.as_str()]);
    put(&s3(&keys), &bucket, "k", "v").await.unwrap();
    d.remove(&account, &bucket).await;
}

#[tokio::test]
async fn a_revoke_cut_short_after_deleting_the_user_is_completed_by_its_retry() {
    let (d, [a, b]) = Served::with_buckets().await;
    let (account, keys) = d
        .new_access(&[access(&a, ReadWrite), access(&b, ReadOnly)])
        .await;
    // The revoke's first step, as a crash would leave it: the user gone,
    // its statements still in both policies.
    rgw()
        .radosgw_admin(&["user", "rm", &format!("--uid={account}")])
        .unwrap();
    assert!(bucket_policy(&a).await.is_ok() && bucket_policy(&b).await.is_ok());

    d.revoke(&account, &[&a, &b]).await.unwrap();
    for bucket in [&a, &b] {
        let left = bucket_policy(bucket).await;
        assert!(left.is_err(), "statements left behind: {left:?}");
    }
    assert_eq!(
        put(&s3(&keys), &a, "k", "v").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    d.purge_all(&[&account], &[&a, &b]).await;
}

#[tokio::test]
async fn a_grant_cut_short_before_making_its_user_is_revoked_without_a_trace() {
    let (d, bucket) = Served::with_bucket().await;
    let buckets = [access(&bucket, ReadWrite)];
    let account = d.new_access_id(&buckets).await;
    // The grant's first step, as a crash would leave it: the statements
    // written, no user yet.
    let grant = policy::Grant::for_modes(&buckets[0].access_mode.unwrap());
    accounts::set_statements(
        d.driver.backend(),
        &KeyLocks::default(),
        d.driver.config(),
        &bucket,
        &account,
        policy::statements(&bucket, &account, &grant),
    )
    .await
    .unwrap();
    assert!(!rgw().user_ids().contains(&account));

    d.revoke(&account, &[&bucket]).await.unwrap();
    let left = bucket_policy(&bucket).await;
    assert!(left.is_err(), "statements left behind: {left:?}");
    d.purge_all(&[&account], &[&bucket]).await;
}
