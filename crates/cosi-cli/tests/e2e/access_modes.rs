//! Access modes enforced on the data path through real S3 requests:
//! ReadOnly cannot write, WriteOnly cannot read, a bucket the access does
//! not reference is denied, revoked credentials fail, and a class can
//! forbid modes before any credential exists.

use cosi_api::*;
use kube::api::PostParams;

use crate::common::*;

/// A claim `data` holding object `seed`, written by a ReadWrite access `seeder`.
async fn seeded(env: &Env) -> String {
    env.provisioned_claim("data", DELETE).await;
    let (_, bucket) = env
        .write_through_new_access("seeder", "data", "seed", b"seed")
        .await;
    bucket
}

async fn clean_up(env: Env, accesses: &[&str], claims: &[&str]) {
    for a in accesses {
        env.remove_access(a).await;
    }
    for c in claims {
        env.remove_claim(c).await;
    }
    env.stop_empty().await;
}

#[tokio::test]
async fn read_only_credentials_read_but_cannot_write() {
    let env = Env::start().await;
    let bucket = seeded(&env).await;
    env.provisioned_access("ro", SINGLE, &["data"], BucketAccessMode::ReadOnly)
        .await;
    let (s3c, name) = env.s3("ro").await;
    assert_eq!(name, bucket);
    assert_eq!(get(&s3c, &bucket, "seed").await.unwrap(), b"seed");
    assert_eq!(
        put(&s3c, &bucket, "new", b"x").await.unwrap_err(),
        "AccessDenied"
    );
    let deleted = s3c.delete_object().bucket(&bucket).key("seed").send().await;
    assert!(deleted.is_err(), "a ReadOnly key deleted an object");
    assert_eq!(env.backend().buckets[0].objects, 1);
    clean_up(env, &["ro", "seeder"], &["data"]).await;
}

#[tokio::test]
async fn write_only_credentials_write_but_cannot_read() {
    let env = Env::start().await;
    let bucket = seeded(&env).await;
    env.provisioned_access("wo", SINGLE, &["data"], BucketAccessMode::WriteOnly)
        .await;
    let (s3c, _) = env.s3("wo").await;
    put(&s3c, &bucket, "dropbox", b"letter").await.unwrap();
    assert_eq!(
        get(&s3c, &bucket, "seed").await.unwrap_err(),
        "AccessDenied"
    );
    assert_eq!(
        get(&s3c, &bucket, "dropbox").await.unwrap_err(),
        "AccessDenied"
    );
    let listed = s3c.list_objects_v2().bucket(&bucket).send().await;
    assert!(listed.is_err(), "a WriteOnly key listed the bucket");
    let (seeder, _) = env.s3("seeder").await;
    assert_eq!(get(&seeder, &bucket, "dropbox").await.unwrap(), b"letter");
    clean_up(env, &["wo", "seeder"], &["data"]).await;
}

#[tokio::test]
async fn credentials_for_one_bucket_are_denied_on_another() {
    let env = Env::start().await;
    let bucket = seeded(&env).await;
    env.provisioned_claim("elsewhere", DELETE).await;
    env.provisioned_rw_access("outsider", "elsewhere").await;
    let (s3c, own) = env.s3("outsider").await;
    assert_ne!(own, bucket);
    assert_eq!(
        get(&s3c, &bucket, "seed").await.unwrap_err(),
        "AccessDenied"
    );
    assert_eq!(
        put(&s3c, &bucket, "graffiti", b"x").await.unwrap_err(),
        "AccessDenied"
    );
    let listed = s3c.list_buckets().send().await.unwrap();
    let names: Vec<_> = listed.buckets().iter().filter_map(|b| b.name()).collect();
    assert_eq!(
        names,
        vec![own.as_str()],
        "ListBuckets shows only the access's own bucket"
    );
    clean_up(env, &["outsider", "seeder"], &["elsewhere", "data"]).await;
}

#[tokio::test]
async fn revoked_credentials_fail_once_the_access_is_deleted() {
    let env = Env::start().await;
    let bucket = seeded(&env).await;
    env.provisioned_rw_access("temp", "data").await;
    let (s3c, _) = env.s3("temp").await;
    assert_eq!(get(&s3c, &bucket, "seed").await.unwrap(), b"seed");
    env.remove_access("temp").await;
    assert_eq!(
        get(&s3c, &bucket, "seed").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    assert_eq!(
        put(&s3c, &bucket, "late", b"x").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    clean_up(env, &["seeder"], &["data"]).await;
}

#[tokio::test]
async fn a_class_forbidding_a_mode_refuses_accesses_asking_for_it() {
    let env = Env::start().await;
    let mut class = cosi_cli::manifests::access_class(
        "read-only-class",
        env.stack.driver_name(),
        MultiBucketAccess::SingleBucket,
    );
    class.spec.disallowed_bucket_access_modes.object_data =
        vec![BucketAccessMode::ReadWrite, BucketAccessMode::WriteOnly];
    kube::Api::<BucketAccessClass>::all(env.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    env.provisioned_claim("data", DELETE).await;

    env.access(
        "wants-write",
        "read-only-class",
        &["data"],
        BucketAccessMode::ReadWrite,
    )
    .await;
    let refused = env.wait_access_refused("wants-write").await;
    let (_, reason) = condition(refused.conditions(), "ResourcesValidated").unwrap();
    assert_eq!(reason, "AccessModeNotAllowed");
    assert!(env.backend().accounts.is_empty());
    assert!(!env.secret_exists("wants-write").await);

    env.provisioned_access(
        "reads",
        "read-only-class",
        &["data"],
        BucketAccessMode::ReadOnly,
    )
    .await;
    clean_up(env, &["wants-write", "reads"], &["data"]).await;
}
