//! Access modes enforced on the data path through real S3 requests:
//! ReadOnly cannot write, WriteOnly cannot read, a bucket the access does
//! not reference is denied, revoked credentials fail, and a class can
//! forbid modes before any credential exists.

use cosi_api::*;

use crate::common::*;

/// A claim `data` holding object `seed`, written by a ReadWrite access `seeder`.
async fn seeded(env: &Env) -> String {
    env.provisioned_claim("data", DELETE).await;
    let (_, bucket) = env
        .write_through_new_access("seeder", "data", "seed", b"seed")
        .await;
    bucket
}

/// A new environment with the claim of [`seeded`] and a provisioned access
/// `name` to it with `mode`; the environment, the bucket and the access's
/// S3 client (which names that bucket).
async fn seeded_with_access(
    name: &str,
    mode: BucketAccessMode,
) -> (Env, String, aws_sdk_s3::Client) {
    let env = Env::start().await;
    let bucket = seeded(&env).await;
    env.provisioned_access(name, SINGLE, "data", mode).await;
    let (s3c, named) = env.s3(name).await;
    assert_eq!(named, bucket);
    (env, bucket, s3c)
}

/// Reading `seed` from `bucket` and writing `key` into it both fail with
/// the S3 error `code`.
async fn assert_locked_out(s3c: &aws_sdk_s3::Client, bucket: &str, key: &str, code: &str) {
    assert_eq!(get(s3c, bucket, "seed").await.unwrap_err(), code);
    assert_eq!(put(s3c, bucket, key, b"x").await.unwrap_err(), code);
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
    let (env, bucket, s3c) = seeded_with_access("ro", BucketAccessMode::ReadOnly).await;
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
    let (env, bucket, s3c) = seeded_with_access("wo", BucketAccessMode::WriteOnly).await;
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
    assert_locked_out(&s3c, &bucket, "graffiti", "AccessDenied").await;
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
    let (env, bucket, s3c) = seeded_with_access("temp", BucketAccessMode::ReadWrite).await;
    assert_eq!(get(&s3c, &bucket, "seed").await.unwrap(), b"seed");
    env.remove_access("temp").await;
    assert_locked_out(&s3c, &bucket, "late", "InvalidAccessKeyId").await;
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
    cosi_cli::manifests::create_cluster_object(&env.client, &class)
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
    let refused = env.wait_refused::<BucketAccess>("wants-write").await;
    let (_, reason) = condition(refused.conditions(), "ResourcesValidated").unwrap();
    assert_eq!(reason, "AccessModeNotAllowed");
    let status = refused.status.clone().unwrap();
    assert_eq!(status.ready_to_use, Some(false));
    let refusal = cosi_api::conditions::find(refused.conditions(), "ResourcesValidated").unwrap();
    assert_eq!(
        status.error.and_then(|e| e.message),
        Some(refusal.message.clone()),
        "the access's error is its refusal"
    );
    assert!(env.backend().accounts.is_empty());
    assert!(!env.secret_exists("wants-write").await);

    env.provisioned_access(
        "reads",
        "read-only-class",
        "data",
        BucketAccessMode::ReadOnly,
    )
    .await;
    clean_up(env, &["wants-write", "reads"], &["data"]).await;
}

#[tokio::test]
async fn an_access_in_upstreams_single_access_mode_form_reads_but_cannot_write() {
    let env = Env::start().await;
    let bucket = seeded(&env).await;
    // Upstream COSI's form: `accessMode` instead of the KEP's `accessModes`.
    let mut manifest = serde_json::to_value(cosi_cli::manifests::access(
        NS,
        "upstream-ro",
        SINGLE,
        &[("data", "upstream-ro")],
        BucketAccessMode::ReadOnly,
    ))
    .unwrap();
    let entry = &mut manifest["spec"]["bucketClaims"][0];
    entry.as_object_mut().unwrap().remove("accessModes");
    entry["accessMode"] = "ReadOnly".into();
    env.accesses()
        .patch(
            "upstream-ro",
            &kube::api::PatchParams::apply("e2e"),
            &kube::api::Patch::Apply(&manifest),
        )
        .await
        .expect("the CRD accepts upstream's accessMode");
    let access = env.wait_provisioned::<BucketAccess>("upstream-ro").await;
    assert_eq!(
        access.spec.bucket_claims[0].access_modes,
        BucketAccessModes::objects(BucketAccessMode::ReadOnly),
        "read as the KEP's modes for objects' data and metadata"
    );
    let (s3c, named) = env.s3("upstream-ro").await;
    assert_eq!(named, bucket);
    assert_eq!(get(&s3c, &bucket, "seed").await.unwrap(), b"seed");
    assert_eq!(
        put(&s3c, &bucket, "new", b"x").await.unwrap_err(),
        "AccessDenied"
    );
    clean_up(env, &["seeder", "upstream-ro"], &["data"]).await;
}
