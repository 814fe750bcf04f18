//! Test harness: the driver on a temporary UNIX socket, driving the shared
//! throw-away cluster, with a gRPC client and S3 clients for the data path.

#![allow(dead_code)]

use std::ops::Deref;

use cosi_driver::proto::*;
use cosi_driver_ceph_rgw::testing::RgwCluster;
use cosi_driver_ceph_rgw::{AdminKeys, Config, RgwDriver};
use cosi_driver_s3_common::testing;
pub use cosi_driver_s3_common::testing::{
    access, access_all, assert_denied, delete, get, list, put, s3_result, start_upload,
};

/// The cluster of this test binary.
pub fn rgw() -> &'static RgwCluster {
    let rgw = RgwCluster::shared();
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        eprintln!(
            "Ceph RGW test cluster ready in {:?} at {}",
            rgw.started_in(),
            rgw.endpoint()
        )
    });
    rgw
}

/// The driver served on a temporary UNIX socket, with a connected client
/// and one helper per driver call.
pub struct Served(testing::Served<RgwDriver>);

impl Deref for Served {
    type Target = testing::Served<RgwDriver>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Served {
    /// Serves a driver for the shared cluster.
    pub async fn start() -> Served {
        Served::with_config(rgw().config()).await
    }

    /// Serves a driver for the shared cluster, with a new bucket made
    /// through it.
    pub async fn with_bucket() -> (Served, String) {
        let (d, [bucket]) = Served::with_buckets().await;
        (d, bucket)
    }

    /// Serves a driver for the shared cluster, with `N` new buckets made
    /// through it.
    pub async fn with_buckets<const N: usize>() -> (Served, [String; N]) {
        let d = Served::start().await;
        let mut buckets = Vec::with_capacity(N);
        for _ in 0..N {
            buckets.push(d.new_bucket(&[]).await);
        }
        (d, buckets.try_into().expect("N buckets"))
    }

    /// Serves a driver for the shared cluster with a new bucket and a fresh
    /// account granted the modes of object data, object metadata and bucket
    /// metadata on it; returns the served driver, the bucket, the account
    /// ID and its keys.
    pub async fn with_access(
        data: AccessMode,
        object_meta: AccessMode,
        bucket_meta: AccessMode,
    ) -> (Served, String, String, AdminKeys) {
        let (d, bucket) = Served::with_bucket().await;
        let buckets = [access_all(&bucket, data, object_meta, bucket_meta)];
        let (account, keys) = d.new_access(&buckets).await;
        (d, bucket, account, keys)
    }

    /// Serves a driver with `cfg` and the cluster's admin keys.
    pub async fn with_config(cfg: Config) -> Served {
        let driver = RgwDriver::connect(cfg, rgw().admin_keys().clone())
            .await
            .expect("driver");
        Served(testing::Served::serve(driver).await)
    }

    /// Stops the server and waits for it.
    pub async fn stop(self) {
        self.0.stop().await
    }

    /// Deletes `bucket` with the objects it holds (`purgeOnDelete`).
    pub async fn purge(&self, bucket: &str) {
        let purge = [("purgeOnDelete", "true")];
        self.delete_bucket(bucket, &purge).await.unwrap();
    }

    /// Deletes `buckets` with the objects they hold and asserts that RGW
    /// holds none of them and none of `users` (revoked already).
    pub async fn purge_all(&self, users: &[&str], buckets: &[&str]) {
        for bucket in buckets {
            self.purge(bucket).await;
        }
        assert_gone(users, buckets);
    }

    /// Revokes `account` from `bucket`, deletes the bucket with its objects
    /// and asserts that RGW holds neither any more.
    pub async fn remove(&self, account: &str, bucket: &str) {
        self.revoke(account, &[bucket]).await.unwrap();
        self.purge_all(&[account], &[bucket]).await;
    }

    /// Generates an account ID for a fresh `ba-<uuid>` name and grants it,
    /// returning the account ID and the issued keys.
    pub async fn new_access(&self, buckets: &[AccessedBucket]) -> (String, AdminKeys) {
        let (id, resp) = self.0.new_grant(buckets).await;
        (id, keys_of(&resp))
    }
}

/// The S3 keys of a grant response.
pub fn keys_of(resp: &DriverGrantBucketAccessResponse) -> AdminKeys {
    let (access_key_id, secret_access_key) = testing::s3_keys(resp);
    AdminKeys {
        access_key_id,
        secret_access_key,
    }
}

/// An S3 client of the cluster for `keys`.
pub fn s3(keys: &AdminKeys) -> aws_sdk_s3::Client {
    rgw().s3_client(keys)
}

/// Creates a bucket with the given client, returning the S3 error code on
/// failure.
pub async fn create(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<(), String> {
    s3_result(s3.create_bucket().bucket(bucket).send().await).map(drop)
}

/// Asserts that RGW holds none of `users` and none of `buckets`, as
/// `radosgw-admin user list` and `bucket list` show it.
pub fn assert_gone(users: &[&str], buckets: &[&str]) {
    let left = still_there(users, &rgw().user_ids());
    assert!(left.is_empty(), "RGW users left behind: {left:?}");
    let left = still_there(buckets, &rgw().bucket_names());
    assert!(left.is_empty(), "RGW buckets left behind: {left:?}");
}

/// The names of `names` that `all` holds.
fn still_there<'a>(names: &[&'a str], all: &[String]) -> Vec<&'a str> {
    names
        .iter()
        .copied()
        .filter(|n| all.iter().any(|x| x == n))
        .collect()
}
