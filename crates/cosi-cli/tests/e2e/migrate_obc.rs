//! `cosi migrate obc` against Rook's ObjectBucketClaims as Rook's
//! provisioner leaves them (see [`crate::migrate_rook`]), with real data
//! behind them: on cosi-driver-local and on a real radosgw with
//! cosi-driver-ceph-rgw. Every object written before the migration is read
//! back with the new Secret after `finish`; the old credentials work until
//! `finish` and stop after `--revoke-old-credentials`; no bucket is ever
//! deleted, including when Rook's operator restarts in between or after;
//! and a crash at any write of `apply` or `finish`, followed by the step
//! again, ends exactly where an uninterrupted run ends.

use std::collections::BTreeMap;

use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::{Bucket, BucketAccess, BucketClaim, conditions};
use cosi_cli::migrate::{MigrateError, Outcome, Source, Step};
use cosi_driver_ceph_rgw::RgwDriver;
use cosi_driver_ceph_rgw::testing::RgwCluster;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};

use crate::common::*;
use crate::migrate_common::{self as mc, When};
use crate::migrate_rook::*;

/// The objects written into each OBC's bucket before the migration.
const KEYS: [&str; 3] = ["a.txt", "dir/b.txt", "dir/c.txt"];

fn body(bucket: &str, key: &str) -> Vec<u8> {
    format!("{bucket}/{key}").into_bytes()
}

async fn fill(obc: &Obc) {
    let s3 = obc.s3();
    for key in KEYS {
        put(&s3, &obc.bucket, key, &body(&obc.bucket, key))
            .await
            .unwrap_or_else(|e| panic!("write {key} with the OBC's keys: {e}"));
    }
}

async fn reads_every_object(s3: &aws_sdk_s3::Client, bucket: &str, obc_bucket: &str) {
    for key in KEYS {
        assert_eq!(
            get(s3, bucket, key).await.as_deref(),
            Ok(body(obc_bucket, key).as_slice()),
            "{bucket}/{key}"
        );
    }
}

/// The arguments of a step mapping both Rook classes to `class` and the
/// access class [`SINGLE`].
fn obc_args(step: Step, backup: &std::path::Path, class: &str) -> cosi_cli::migrate::Args {
    let mut a = mc::args(Source::Obc, step, backup);
    a.bucket_classes = vec![
        ("rook-delete".into(), class.into()),
        ("rook-retain".into(), class.into()),
    ];
    a.access_class = Some(SINGLE.into());
    a
}

fn provisioned<K: cosi_api::conditions::HasConditions>(o: &K) -> bool {
    conditions::is_true(o.status_conditions(), PROVISIONED)
}

async fn pod_using(client: &Client, namespace: &str, secret: &str) -> Pod {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "app", "namespace": namespace},
        "spec": {"containers": [{"name": "app", "image": "app",
            "envFrom": [{"secretRef": {"name": secret}}]}]}
    }))
    .unwrap();
    Api::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create Pod")
}

#[tokio::test(flavor = "multi_thread")]
async fn obcs_on_the_local_driver_move_to_cosi_rs_with_no_byte_lost() {
    let env = Env::start().await;
    let c = &env.client;
    install_crds(c).await;
    let backend = Backend::local(&env.stack).await;
    let photos = provision_obc(
        c,
        &backend,
        NS,
        "photos",
        "rook-delete",
        ReclaimPolicy::Delete,
    )
    .await;
    let docs = provision_obc(
        c,
        &backend,
        NS,
        "docs",
        "rook-retain",
        ReclaimPolicy::Retain,
    )
    .await;
    fill(&photos).await;
    fill(&docs).await;
    let rook = rook_reacts_to_deleted_obcs(c.clone(), backend.clone(), Revocation::AsRook);
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("backup.yaml");

    // plan: nothing maps the StorageClasses yet, so apply cannot run.
    let mut bare = mc::args(Source::Obc, Step::Plan, &backup);
    bare.access_class = Some(SINGLE.into());
    assert!(matches!(mc::run(&env, &bare).await, Ok(Outcome::Blocked)));
    let mut apply = bare.clone();
    apply.step = Step::Apply;
    match mc::run(&env, &apply).await {
        Err(MigrateError::Refused(why)) => {
            assert!(why.contains("--bucket-class rook-delete="), "{why}");
            assert!(why.contains("nothing was changed"), "{why}");
        }
        other => panic!("apply without classes: {other:?}"),
    }
    assert!(!backup.exists(), "a refused apply writes nothing");
    assert_eq!(
        mc::run(&env, &obc_args(Step::Plan, &backup, RETAIN))
            .await
            .unwrap(),
        Outcome::Done
    );

    // apply, twice: the second finds everything done.
    mc::run_ok(&env, &obc_args(Step::Apply, &backup, RETAIN)).await;
    mc::run_ok(&env, &obc_args(Step::Apply, &backup, RETAIN)).await;
    let text = std::fs::read_to_string(&backup).unwrap();
    let list: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let items = list["items"].as_array().unwrap();
    for kind in ["ObjectBucketClaim", "ObjectBucket", "Secret", "ConfigMap"] {
        let n = items.iter().filter(|i| i["kind"] == kind).count();
        assert_eq!(n, 2, "{kind} in the backup");
    }
    assert!(
        items.iter().any(|i| i["spec"]["reclaimPolicy"] == "Delete"),
        "the backup keeps the original policy"
    );
    for obc in [&photos, &docs] {
        let ob = obs(c).get(&obc.object_bucket).await.unwrap();
        assert_eq!(ob.data["spec"]["reclaimPolicy"], "Retain");
        assert_eq!(
            ob.data["spec"]["storageClassName"],
            format!("cosi-migrate-{}", obc.storage_class)
        );
        let bucket = env.buckets().get(&obc.object_bucket).await.unwrap();
        assert!(provisioned(&bucket));
        assert_eq!(bucket.spec.existing_bucket_id, obc.bucket);
        let claim = env.claims().get(&obc.name).await.unwrap();
        assert!(provisioned(&claim));
        assert!(provisioned(&env.accesses().get(&obc.name).await.unwrap()));
        // Old and new credentials both work.
        reads_every_object(&obc.s3(), &obc.bucket, &obc.bucket).await;
        let (s3, name) = env.s3(&format!("{}-cosi", obc.name)).await;
        reads_every_object(&s3, &name, &obc.bucket).await;
    }

    // Rook's operator restarts: it refuses to provision the OBCs again, so
    // no bucket goes back to the OBC's user and nothing changes.
    for (obc, result) in rook_operator_restarts(c, &backend, Revocation::AsRook).await {
        assert!(result.is_err(), "{obc}: {result:?}");
    }
    assert!(backend.bucket_exists(&photos.bucket).await);

    // finish refuses while a Pod uses an OBC's Secret, naming it (kube-sim
    // serves no Pods).
    let mut finish = obc_args(Step::Finish, &backup, RETAIN);
    finish.revoke_old_credentials = true;
    if env.stack.sim().is_none() {
        pod_using(c, NS, "photos").await;
        match mc::run(&env, &finish).await {
            Err(MigrateError::Refused(why)) => {
                assert!(why.contains("Pod default/app uses Secret photos"), "{why}")
            }
            other => panic!("finish with a Pod on the old Secret: {other:?}"),
        }
        assert_eq!(
            all_obcs(c)
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .len(),
            2
        );
        Api::<Pod>::namespaced(c.clone(), NS)
            .delete("app", &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
    mc::run_ok(&env, &finish).await;
    mc::run_ok(&env, &finish).await;

    assert!(
        all_obcs(c)
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    for obc in [&photos, &docs] {
        assert!(
            backend.bucket_exists(&obc.bucket).await,
            "{} kept",
            obc.bucket
        );
        assert!(
            get(&obc.s3(), &obc.bucket, KEYS[0]).await.is_err(),
            "the OBC's keys are revoked"
        );
        let (s3, name) = env.s3(&format!("{}-cosi", obc.name)).await;
        reads_every_object(&s3, &name, &obc.bucket).await;
    }
    // Rook started again later finds nothing to act on.
    assert!(
        rook_operator_restarts(c, &backend, Revocation::AsRook)
            .await
            .is_empty()
    );
    // The bucket of the Delete OBC outlives its new claim too (Retain).
    env.remove_access("photos").await;
    env.remove_claim("photos").await;
    assert!(backend.bucket_exists(&photos.bucket).await);
    rook.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn obcs_on_radosgw_move_to_the_ceph_rgw_driver_and_survive_rook_removing_their_users() {
    let cluster: &'static RgwCluster = tokio::task::spawn_blocking(RgwCluster::shared)
        .await
        .unwrap();
    let driver = RgwDriver::connect(cluster.config(), cluster.admin_keys().clone())
        .await
        .expect("the driver reaches radosgw");
    let admin_uid = driver.admin_uid().to_owned();
    let name = driver.config().driver_name.clone();
    let (env, stop, served) = Env::with_driver(&name, driver).await;
    let c = &env.client;
    install_crds(c).await;
    let backend = Backend::rgw(cluster);
    let ns = format!("rgw-{}", std::process::id());
    mc::namespace(&env, &ns).await;
    let photos = provision_obc(
        c,
        &backend,
        &ns,
        "photos",
        "rook-delete",
        ReclaimPolicy::Delete,
    )
    .await;
    fill(&photos).await;
    assert_eq!(
        backend.bucket_owner(&photos.bucket).await.as_ref(),
        Some(&photos.user)
    );
    // The harsher model: Rook removes the OBC's user with its data.
    let rook = rook_reacts_to_deleted_obcs(c.clone(), backend.clone(), Revocation::PurgeUser);
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("backup.yaml");
    let mut apply = obc_args(Step::Apply, &backup, RETAIN);
    apply.bucket_parameters = vec![("relinkForeignBuckets".into(), "true".into())];
    mc::run_ok(&env, &apply).await;
    assert_eq!(
        backend.bucket_owner(&photos.bucket).await,
        Some(admin_uid),
        "the bucket moved to the driver's user before anything could remove the OBC's"
    );
    reads_every_object(&photos.s3(), &photos.bucket, &photos.bucket).await;
    let secrets: Api<Secret> = Api::namespaced(c.clone(), &ns);
    let data = cosi_cli::s3::secret_data(&secrets.get("photos-cosi").await.unwrap());
    let (s3, bucket) = cosi_cli::s3::client_from_secret(&data).unwrap();
    reads_every_object(&s3, &bucket, &photos.bucket).await;

    let mut finish = obc_args(Step::Finish, &backup, RETAIN);
    finish.revoke_old_credentials = true;
    mc::run_ok(&env, &finish).await;
    assert!(
        !cluster.user_ids().contains(&photos.user),
        "Rook removed the OBC's user"
    );
    assert!(
        cluster.bucket_names().contains(&photos.bucket),
        "the bucket stays"
    );
    assert!(get(&photos.s3(), &photos.bucket, KEYS[0]).await.is_err());
    reads_every_object(&s3, &bucket, &photos.bucket).await;

    rook.stop();
    let _ = cluster.radosgw_admin(&[
        "bucket",
        "rm",
        &format!("--bucket={}", photos.bucket),
        "--purge-objects",
    ]);
    stop.trigger();
    let _ = served.await;
}

/// What a round of the crash test leaves in namespace `ns`, with `ns`
/// written as `NS`: every migrated object with what matters of it, the
/// OBC objects left, and on the backend each OBC bucket with its objects
/// and the accounts that may use it.
async fn state(env: &Env, ns: &str, obcs: &[&Obc]) -> BTreeMap<String, String> {
    let c = &env.client;
    let mut out = BTreeMap::new();
    let norm = |s: &str| {
        let s = obcs.iter().fold(s.to_owned(), |s, o| {
            s.replace(&o.bucket, &format!("bucket-of-{}", o.name))
        });
        s.replace(ns, "NS")
    };
    for b in Api::<Bucket>::all(c.clone())
        .list(&Default::default())
        .await
        .unwrap()
    {
        if b.spec.bucket_claim_ref.namespace == ns {
            out.insert(
                norm(&format!("Bucket {}", b.name_any())),
                format!(
                    "{} {:?} provisioned={}",
                    norm(&b.spec.existing_bucket_id),
                    b.spec.deletion_policy,
                    provisioned(&b)
                ),
            );
        }
    }
    for cl in Api::<BucketClaim>::namespaced(c.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap()
    {
        out.insert(
            format!("BucketClaim {}", cl.name_any()),
            format!(
                "{} provisioned={}",
                norm(&cl.spec.existing_bucket_name),
                provisioned(&cl)
            ),
        );
    }
    for a in Api::<BucketAccess>::namespaced(c.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap()
    {
        out.insert(
            format!("BucketAccess {}", a.name_any()),
            format!("provisioned={}", provisioned(&a)),
        );
    }
    for s in Api::<Secret>::namespaced(c.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap()
    {
        out.insert(format!("Secret {}", s.name_any()), String::new());
    }
    for o in obcs_in(c, ns).await {
        out.insert(format!("ObjectBucketClaim {o}"), String::new());
    }
    let state = env.backend();
    for obc in obcs {
        let bucket = state.buckets.iter().find(|b| b.id == obc.bucket);
        let accounts = state
            .accounts
            .iter()
            .filter(|a| a.buckets.contains(&obc.bucket))
            .count();
        out.insert(
            format!("backend {}", obc.name),
            format!(
                "exists={} objects={} accounts={accounts}",
                bucket.is_some(),
                bucket.map_or(0, |b| b.objects)
            ),
        );
    }
    out
}

async fn obcs_in(client: &Client, ns: &str) -> Vec<String> {
    obcs(client, ns)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect()
}

/// One round: two OBCs in a namespace of their own, `apply` crashed at its
/// `nth` write (`when`) then run again, `finish` likewise. The state it
/// leaves, and whether either crash happened.
async fn round(
    env: &Env,
    backend: &Backend,
    nth: u64,
    when: When,
) -> (BTreeMap<String, String>, bool) {
    let ns = format!("r{nth}-{}", if when == When::Before { "b" } else { "a" });
    mc::namespace(env, &ns).await;
    let c = &env.client;
    let photos = provision_obc(
        c,
        backend,
        &ns,
        "photos",
        "rook-delete",
        ReclaimPolicy::Delete,
    )
    .await;
    let docs = provision_obc(
        c,
        backend,
        &ns,
        "docs",
        "rook-retain",
        ReclaimPolicy::Retain,
    )
    .await;
    fill(&photos).await;
    fill(&docs).await;
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("backup.yaml");
    let apply = obc_args(Step::Apply, &backup, RETAIN);
    let mut finish = obc_args(Step::Finish, &backup, RETAIN);
    finish.revoke_old_credentials = true;
    let mut crashed = false;
    if nth > 0 {
        crashed |= mc::run_crashing(env, &apply, nth, when).await;
    }
    mc::run_ok(env, &apply).await;
    if nth > 0 {
        crashed |= mc::run_crashing(env, &finish, nth, when).await;
    }
    mc::run_ok(env, &finish).await;
    for obc in [&photos, &docs] {
        let (s3, name) = {
            let secrets: Api<Secret> = Api::namespaced(c.clone(), &ns);
            let data = cosi_cli::s3::secret_data(
                &secrets.get(&format!("{}-cosi", obc.name)).await.unwrap(),
            );
            cosi_cli::s3::client_from_secret(&data).unwrap()
        };
        reads_every_object(&s3, &name, &obc.bucket).await;
    }
    (state(env, &ns, &[&photos, &docs]).await, crashed)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_at_any_write_of_apply_or_finish_ends_as_an_uninterrupted_migration() {
    let env = Env::start().await;
    install_crds(&env.client).await;
    let backend = Backend::local(&env.stack).await;
    let rook = rook_reacts_to_deleted_obcs(env.client.clone(), backend.clone(), Revocation::AsRook);
    let (reference, _) = round(&env, &backend, 0, When::Before).await;
    assert_eq!(
        reference["BucketClaim photos"],
        "obc-NS-photos provisioned=true"
    );
    assert_eq!(
        reference["backend photos"],
        "exists=true objects=3 accounts=1"
    );
    let mut rounds = 0;
    for nth in 1.. {
        let mut any = false;
        for when in [When::Before, When::After] {
            let (got, crashed) = round(&env, &backend, nth, when).await;
            assert_eq!(got, reference, "crash at write {nth} ({when:?})");
            any |= crashed;
            rounds += 1;
        }
        if !any {
            break;
        }
        assert!(nth < 100, "the steps keep writing");
    }
    assert!(rounds > 10, "only {rounds} rounds");
    rook.stop();
}
