//! The driver handle: configuration, the state store, start-up recovery,
//! read-only inspection of backend state, and fault injection for tests.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use cosi_driver::Status;

use crate::blobs;
use crate::config::{self, Config};
use crate::error::Error;
use crate::file_modes;
use crate::key_locks::KeyLocks;
use crate::store::{BucketState, Store};

/// The local driver: implements [`cosi_driver::Driver`] (served as the COSI
/// `Identity` and `Provisioner` services) and backs the embedded S3
/// endpoint. Cheap to clone; clones share one state store.
#[derive(Clone)]
pub struct LocalDriver {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for LocalDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalDriver")
            .field("driver_name", &self.inner.driver_name)
            .field("data_dir", &self.inner.data_dir)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) driver_name: String,
    pub(crate) data_dir: PathBuf,
    pub(crate) region: String,
    pub(crate) s3_address: SocketAddr,
    pub(crate) s3_limits: crate::server::Limits,
    pub(crate) configured_url: Option<String>,
    pub(crate) endpoint_url: RwLock<String>,
    pub(crate) store: Store,
    /// Keeps provisioning calls on the same bucket or account from
    /// interleaving.
    pub(crate) provisioning: KeyLocks,
    pub(crate) crash_at: Mutex<Option<CrashPoint>>,
}

/// A point between two steps of a provisioning call where a test can make
/// the call stop as if the driver had crashed there (the steps before it
/// are done and durable, the ones after are not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPoint {
    /// DriverCreateBucket: the bucket is recorded, the reply not yet sent.
    AfterBucketRecorded,
    /// DriverDeleteBucket: the contents are removed, the record not yet.
    AfterBucketDataRemoved,
    /// DriverGrantBucketAccess: the account is committed, the reply not yet sent.
    AfterAccountRecorded,
    /// DriverRevokeBucketAccess: the account is removed, the reply not yet sent.
    AfterAccountRemoved,
}

/// A bucket as the backend holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendBucket {
    /// The bucket ID (also its S3 name).
    pub id: String,
    /// Where it is in its life cycle.
    pub state: BucketState,
    /// Number of objects.
    pub objects: usize,
    /// Bytes of object data.
    pub used_bytes: u64,
    /// Its quota, if any.
    pub max_size_bytes: Option<u64>,
    /// True when its directory exists on disk (made by its first object
    /// write, removed when the bucket is deleted).
    pub directory_exists: bool,
}

/// An account as the backend holds it (never its credentials).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendAccount {
    /// The account ID.
    pub id: String,
    /// The buckets it may access.
    pub buckets: Vec<String>,
}

/// Everything the backend holds, for tests and fault suites checking that
/// nothing leaked and nothing was duplicated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackendState {
    /// Every recorded bucket, by ID.
    pub buckets: Vec<BackendBucket>,
    /// Every account, by ID.
    pub accounts: Vec<BackendAccount>,
    /// Number of access keys (one per account when consistent).
    pub access_keys: u64,
    /// Directories under the buckets directory with no bucket record.
    pub stray_directories: Vec<String>,
}

impl LocalDriver {
    /// Opens the driver's state under `config.data_dir` (creating it), and
    /// removes what a crash may have left behind (unreferenced blobs).
    pub fn open(config: &Config) -> Result<Self, Error> {
        config.validate().map_err(Error::Config)?;
        let data_dir = config.data_dir.clone();
        let buckets = blobs::buckets_dir(&data_dir);
        file_modes::create_dir_all(&buckets).map_err(Error::io("creating", &buckets))?;
        let state_path = data_dir.join(config::STATE_FILE);
        // The store holds secret keys: owner-only from its first byte.
        file_modes::ensure_file(&state_path).map_err(Error::io("creating", &state_path))?;
        file_modes::secure_data_dir(&data_dir, &state_path, &buckets)
            .map_err(Error::io("securing", &data_dir))?;
        let store = Store::open(&state_path)?;
        let driver = Self {
            inner: Arc::new(Inner {
                driver_name: config.driver_name.clone(),
                data_dir,
                region: config.region.clone(),
                s3_address: config.s3_address,
                s3_limits: crate::server::Limits::of(config),
                configured_url: config.s3_endpoint_url.clone(),
                endpoint_url: RwLock::new(config::endpoint_url(
                    config.s3_endpoint_url.as_deref(),
                    config.s3_address,
                )),
                store,
                provisioning: KeyLocks::default(),
                crash_at: Mutex::new(None),
            }),
        };
        driver.recover()?;
        tracing::info!(
            driver = %config.driver_name,
            data_dir = %config.data_dir.display(),
            "local driver state opened"
        );
        Ok(driver)
    }

    /// Removes blobs no record refers to (left by a crash mid-write), and
    /// counts the pending multipart parts of buckets recorded before they
    /// were counted against quotas.
    fn recover(&self) -> Result<(), Error> {
        for bucket in self.inner.store.buckets()? {
            if self.inner.store.recount_pending(&bucket.id)? {
                tracing::info!(bucket = %bucket.id, "counted the bucket's pending multipart parts against its quota");
            }
            let dir = self.bucket_dir(&bucket.id);
            let referenced: HashSet<String> = self
                .inner
                .store
                .referenced_blobs(&bucket.id)?
                .into_iter()
                .collect();
            let removed = blobs::sweep(&dir, &referenced).map_err(Error::io("sweeping", &dir))?;
            if removed > 0 {
                tracing::info!(bucket = %bucket.id, removed, "removed blobs left by an interrupted write");
            }
        }
        Ok(())
    }

    /// The driver name reported by DriverGetInfo.
    pub fn driver_name(&self) -> &str {
        &self.inner.driver_name
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.inner.data_dir
    }

    /// The directory holding the contents of bucket `id`.
    pub fn bucket_dir(&self, id: &str) -> PathBuf {
        blobs::buckets_dir(&self.inner.data_dir).join(id)
    }

    /// The S3 endpoint URL given to workloads.
    pub fn endpoint_url(&self) -> String {
        self.inner
            .endpoint_url
            .read()
            .map(|u| u.clone())
            .unwrap_or_default()
    }

    /// Records the address the S3 endpoint is bound to; unless an endpoint
    /// URL was configured, the advertised URL follows it.
    pub(crate) fn set_bound_address(&self, bound: SocketAddr) {
        if let Ok(mut url) = self.inner.endpoint_url.write() {
            *url = config::endpoint_url(self.inner.configured_url.as_deref(), bound);
        }
    }

    /// Makes the next provisioning call that reaches `point` stop there
    /// with `UNAVAILABLE`, as if the driver had crashed (fault injection for
    /// tests and fault suites).
    pub fn crash_once_at(&self, point: CrashPoint) {
        if let Ok(mut c) = self.inner.crash_at.lock() {
            *c = Some(point);
        }
    }

    /// `Err(UNAVAILABLE)` when a crash was injected at `point` (once).
    pub(crate) fn crash_point(&self, point: CrashPoint) -> Result<(), Status> {
        let mut armed = self
            .inner
            .crash_at
            .lock()
            .map_err(|_| Status::internal("fault injection lock poisoned"))?;
        if *armed == Some(point) {
            *armed = None;
            tracing::warn!(?point, "injected crash");
            return Err(Status::unavailable(format!("injected crash at {point:?}")));
        }
        Ok(())
    }

    /// Durable commits of bucket and account records so far. Concurrent
    /// provisioning calls share them, so under load there are fewer than
    /// the changes they commit.
    pub fn durable_commits(&self) -> u64 {
        self.inner.store.durable_commits()
    }

    /// The ID of the account owning access key `access_key_id`, if any
    /// (for tests checking which account a Secret's credentials belong to).
    pub fn account_of_access_key(&self, access_key_id: &str) -> Result<Option<String>, Error> {
        Ok(self
            .inner
            .store
            .account_by_key(access_key_id)?
            .map(|a| a.id))
    }

    /// A read-only snapshot of every bucket and account in the backend.
    pub fn backend_state(&self) -> Result<BackendState, Error> {
        let store = &self.inner.store;
        let mut state = BackendState::default();
        let mut known = HashSet::new();
        for b in store.buckets()? {
            known.insert(b.id.clone());
            state.buckets.push(BackendBucket {
                objects: store.object_count(&b.id)?,
                directory_exists: self.bucket_dir(&b.id).is_dir(),
                id: b.id,
                state: b.state,
                used_bytes: b.used_bytes,
                max_size_bytes: b.params.max_size_bytes,
            });
        }
        for a in store.accounts()? {
            state.accounts.push(BackendAccount {
                id: a.id.clone(),
                buckets: a.grants.keys().cloned().collect(),
            });
        }
        state.access_keys = store.key_count()?;
        let dir = blobs::buckets_dir(&self.inner.data_dir);
        let entries = std::fs::read_dir(&dir).map_err(Error::io("listing", &dir))?;
        for entry in entries {
            let entry = entry.map_err(Error::io("listing", &dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !known.contains(&name) {
                state.stray_directories.push(name);
            }
        }
        state.stray_directories.sort();
        Ok(state)
    }
}
