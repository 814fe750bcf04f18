//! The crash-safe state store: one redb file under the data directory
//! holding buckets, accounts (keys and grants), object records and multipart
//! uploads. Every change is one ACID transaction, durable before the call
//! that made it returns, so a crash leaves either the old or the new state.
//! Bucket and account records (written by provisioning calls, which hold
//! the record's lock until they return) are committed in groups: each
//! transaction commits without syncing and waits for a shared durable
//! commit (see `group_commit`). Object and upload records, which S3 readers
//! may see at any moment, are committed durably one by one.
//!
//! Object contents live in blob files next to the store (see `blobs`); a
//! record points at its blob. Records are serialized as JSON.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use redb::{
    Database, Durability, ReadableTable, ReadableTableMetadata, TableDefinition, WriteTransaction,
};
use serde::{Deserialize, Serialize};

use crate::group_commit::{GroupCommit, Writer};
use crate::params::BucketParams;
use crate::policy::Modes;

const BUCKETS: TableDefinition<&str, &[u8]> = TableDefinition::new("buckets");
const ACCOUNTS: TableDefinition<&str, &[u8]> = TableDefinition::new("accounts");
/// access key ID → account ID.
const KEYS: TableDefinition<&str, &str> = TableDefinition::new("keys");
/// (bucket, object key) → object record.
const OBJECTS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("objects");
/// (bucket, upload ID) → upload record.
const UPLOADS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("uploads");
/// (upload ID, part number) → part record.
const PARTS: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("parts");

/// A failure of the state store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed.
    #[error("state store: {0}")]
    Db(Box<redb::Error>),
    /// A record could not be (de)serialized.
    #[error("state store record: {0}")]
    Record(#[from] serde_json::Error),
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError::Db(Box::new(e.into()))
            }
        }
        impl From<$t> for WriteError {
            fn from(e: $t) -> Self {
                WriteError::Store(e.into())
            }
        }
    )*};
}
from_redb!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

/// Where a bucket is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BucketState {
    /// Recorded by an earlier version of this driver, which made the
    /// directory before marking the bucket ready; a repeated
    /// DriverCreateBucket makes it `Ready`. Not served.
    Creating,
    /// Served. Its directory is made by its first object write.
    Ready,
    /// Being deleted; not served.
    Deleting,
}

/// A bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketRecord {
    /// The bucket ID, also its S3 name and directory name.
    pub id: String,
    /// Life-cycle state.
    pub state: BucketState,
    /// Settings from BucketClass parameters.
    pub params: BucketParams,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// Bytes of object data stored.
    pub used_bytes: u64,
    /// Bucket tags.
    #[serde(default)]
    pub tags: Vec<(String, String)>,
}

/// An account: one key pair and its grants.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountRecord {
    /// The account ID.
    pub id: String,
    /// The S3 access key ID.
    pub access_key_id: String,
    /// The S3 secret access key.
    pub secret_access_key: String,
    /// Bucket ID → granted modes.
    pub grants: BTreeMap<String, Modes>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

impl fmt::Debug for AccountRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccountRecord")
            .field("id", &self.id)
            .field("access_key_id", &"<redacted>")
            .field("secret_access_key", &"<redacted>")
            .field("grants", &self.grants)
            .finish()
    }
}

/// Attributes stored with an object, set when it is written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectAttrs {
    /// Content-Type.
    pub content_type: Option<String>,
    /// Content-Encoding.
    pub content_encoding: Option<String>,
    /// Content-Disposition.
    pub content_disposition: Option<String>,
    /// Content-Language.
    pub content_language: Option<String>,
    /// Cache-Control.
    pub cache_control: Option<String>,
    /// User metadata (`x-amz-meta-*`).
    pub metadata: BTreeMap<String, String>,
    /// Object tags.
    pub tags: Vec<(String, String)>,
}

/// An object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRecord {
    /// Blob file name within the bucket directory.
    pub blob: String,
    /// Size in bytes.
    pub size: u64,
    /// ETag without quotes.
    pub etag: String,
    /// Last-Modified, milliseconds since the Unix epoch.
    pub last_modified_ms: i64,
    /// Attributes.
    pub attrs: ObjectAttrs,
}

/// A multipart upload in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadRecord {
    /// Object key.
    pub key: String,
    /// The account that started it.
    pub account_id: String,
    /// Start time, milliseconds since the Unix epoch.
    pub initiated_ms: i64,
    /// Attributes of the object to be.
    pub attrs: ObjectAttrs,
}

/// An uploaded part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRecord {
    /// Blob file name within the bucket directory.
    pub blob: String,
    /// Size in bytes.
    pub size: u64,
    /// MD5 of the part, hex.
    pub md5_hex: String,
    /// Upload time, milliseconds since the Unix epoch.
    pub last_modified_ms: i64,
}

/// Why an object write was refused.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The bucket is gone or not ready.
    #[error("no such bucket")]
    NoSuchBucket,
    /// The multipart upload is gone.
    #[error("no such upload")]
    NoSuchUpload,
    /// The bucket's quota would be exceeded.
    #[error("quota exceeded")]
    Quota {
        /// The quota in bytes.
        max: u64,
        /// Bytes the bucket would hold.
        would_hold: u64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How a write transaction is made durable.
#[derive(Clone, Copy)]
enum Commit {
    /// With others, in one durable commit ([`Store::commit_grouped`]).
    Grouped,
    /// By itself.
    Alone,
}

/// A write transaction of a registered grouped writer.
struct GroupedTx<'a> {
    tx: WriteTransaction,
    _writer: Writer<'a>,
}

impl std::ops::Deref for GroupedTx<'_> {
    type Target = WriteTransaction;

    fn deref(&self) -> &WriteTransaction {
        &self.tx
    }
}

/// The state store. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    db: Arc<Database>,
    group: Arc<GroupCommit>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Store")
    }
}

fn enc<T: Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    Ok(serde_json::to_vec(v)?)
}

fn dec<T: for<'de> Deserialize<'de>>(b: &[u8]) -> Result<T, StoreError> {
    Ok(serde_json::from_slice(b)?)
}

/// One page of a listing: entries after a key.
pub struct ObjectPage {
    /// (key, record) in key order.
    pub objects: Vec<(String, ObjectRecord)>,
}

impl Store {
    /// Opens (or creates) the store at `path`, creating every table.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = Database::create(path)?;
        let tx = db.begin_write()?;
        tx.open_table(BUCKETS)?;
        tx.open_table(ACCOUNTS)?;
        tx.open_table(KEYS)?;
        tx.open_table(OBJECTS)?;
        tx.open_table(UPLOADS)?;
        tx.open_table(PARTS)?;
        tx.commit()?;
        Ok(Self {
            db: Arc::new(db),
            group: Arc::default(),
        })
    }

    /// Begins a write transaction to be committed with
    /// [`Self::commit_grouped`].
    fn begin_grouped(&self) -> Result<GroupedTx<'_>, StoreError> {
        let writer = self.group.writer();
        Ok(GroupedTx {
            tx: self.db.begin_write()?,
            _writer: writer,
        })
    }

    /// Commits durably: by itself when no other grouped write is under
    /// way, else without syncing and then waiting for a durable commit
    /// that covers it, shared with the other writers.
    fn commit_grouped(&self, grouped: GroupedTx<'_>) -> Result<(), StoreError> {
        let GroupedTx { mut tx, _writer } = grouped;
        if self.group.alone() {
            if let Err(e) = tx.commit() {
                self.group.failed_alone();
                return Err(e.into());
            }
            self.group.committed_alone();
            return Ok(());
        }
        tx.set_durability(Durability::None);
        tx.commit()?;
        self.group.wait_durable(|covered| self.flush(covered))
    }

    /// An empty durable commit, which makes every commit before it
    /// durable; calls `covered` once it holds the write transaction.
    fn flush(&self, covered: &dyn Fn()) -> Result<(), StoreError> {
        let tx = self.db.begin_write()?;
        covered();
        tx.commit()?;
        Ok(())
    }

    /// Makes durable what a failed durable commit may have left visible
    /// but not durable (nothing to do otherwise). Call before answering
    /// from what was read: a retry of a call that failed must not hand out
    /// state a crash could still take back.
    pub fn ensure_durable(&self) -> Result<(), StoreError> {
        if !self.group.unsynced() {
            return Ok(());
        }
        let _writer = self.group.writer();
        self.group.wait_durable(|covered| self.flush(covered))
    }

    /// Durable commits of grouped writes so far.
    pub fn durable_commits(&self) -> u64 {
        self.group.durable_commits()
    }

    // ---- buckets ----

    /// The bucket `id`, if recorded.
    pub fn bucket(&self, id: &str) -> Result<Option<BucketRecord>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(BUCKETS)?;
        t.get(id)?.map(|v| dec(v.value())).transpose()
    }

    /// Every bucket, by ID.
    pub fn buckets(&self) -> Result<Vec<BucketRecord>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(BUCKETS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            out.push(dec(v.value())?);
        }
        Ok(out)
    }

    /// Records a new bucket unless one with that ID exists; returns the
    /// record now stored.
    pub fn insert_bucket_if_absent(&self, rec: &BucketRecord) -> Result<BucketRecord, StoreError> {
        let tx = self.begin_grouped()?;
        let stored = {
            let mut t = tx.open_table(BUCKETS)?;
            let existing = t
                .get(rec.id.as_str())?
                .map(|v| dec(v.value()))
                .transpose()?;
            match existing {
                Some(e) => e,
                None => {
                    t.insert(rec.id.as_str(), enc(rec)?.as_slice())?;
                    rec.clone()
                }
            }
        };
        self.commit_grouped(tx)?;
        Ok(stored)
    }

    /// Sets the state of bucket `id`; false when it is not recorded.
    pub fn set_bucket_state(&self, id: &str, state: BucketState) -> Result<bool, StoreError> {
        self.update_bucket(id, Commit::Grouped, |b| b.state = state)
    }

    /// Sets the tags of bucket `id`; false when it is not recorded.
    pub fn set_bucket_tags(
        &self,
        id: &str,
        tags: Vec<(String, String)>,
    ) -> Result<bool, StoreError> {
        self.update_bucket(id, Commit::Alone, |b| b.tags = tags)
    }

    fn update_bucket(
        &self,
        id: &str,
        commit: Commit,
        f: impl FnOnce(&mut BucketRecord),
    ) -> Result<bool, StoreError> {
        let update = |tx: &WriteTransaction| -> Result<bool, StoreError> {
            let mut t = tx.open_table(BUCKETS)?;
            let existing: Option<BucketRecord> = t.get(id)?.map(|v| dec(v.value())).transpose()?;
            Ok(match existing {
                Some(mut b) => {
                    f(&mut b);
                    t.insert(id, enc(&b)?.as_slice())?;
                    true
                }
                None => false,
            })
        };
        match commit {
            Commit::Grouped => {
                let tx = self.begin_grouped()?;
                let found = update(&tx)?;
                self.commit_grouped(tx)?;
                Ok(found)
            }
            Commit::Alone => {
                let tx = self.db.begin_write()?;
                let found = update(&tx)?;
                tx.commit()?;
                Ok(found)
            }
        }
    }

    /// Removes bucket `id` with all its object, upload and part records.
    pub fn remove_bucket(&self, id: &str) -> Result<(), StoreError> {
        let tx = self.begin_grouped()?;
        {
            tx.open_table(BUCKETS)?.remove(id)?;
            let mut objects = tx.open_table(OBJECTS)?;
            let keys = collect_keys(&objects, id)?;
            for k in &keys {
                objects.remove((id, k.as_str()))?;
            }
            let mut uploads = tx.open_table(UPLOADS)?;
            let upload_ids = collect_keys(&uploads, id)?;
            let mut parts = tx.open_table(PARTS)?;
            for u in &upload_ids {
                uploads.remove((id, u.as_str()))?;
                let numbers: Vec<u32> = parts
                    .range((u.as_str(), 0)..=(u.as_str(), u32::MAX))?
                    .map(|r| r.map(|(k, _)| k.value().1))
                    .collect::<Result<_, _>>()?;
                for n in numbers {
                    parts.remove((u.as_str(), n))?;
                }
            }
        }
        self.commit_grouped(tx)?;
        Ok(())
    }

    // ---- accounts ----

    /// The account `id`, if recorded.
    pub fn account(&self, id: &str) -> Result<Option<AccountRecord>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(ACCOUNTS)?;
        t.get(id)?.map(|v| dec(v.value())).transpose()
    }

    /// The account owning access key `access_key_id`, if any.
    pub fn account_by_key(&self, access_key_id: &str) -> Result<Option<AccountRecord>, StoreError> {
        let tx = self.db.begin_read()?;
        let keys = tx.open_table(KEYS)?;
        let Some(id) = keys.get(access_key_id)?.map(|v| v.value().to_owned()) else {
            return Ok(None);
        };
        let t = tx.open_table(ACCOUNTS)?;
        t.get(id.as_str())?.map(|v| dec(v.value())).transpose()
    }

    /// Every account, by ID.
    pub fn accounts(&self) -> Result<Vec<AccountRecord>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(ACCOUNTS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            out.push(dec(v.value())?);
        }
        Ok(out)
    }

    /// Number of access keys recorded (one per account when consistent).
    pub fn key_count(&self) -> Result<u64, StoreError> {
        let tx = self.db.begin_read()?;
        Ok(tx.open_table(KEYS)?.len()?)
    }

    /// Records a new account and its key in one transaction unless the
    /// account exists; returns the account now stored.
    pub fn insert_account_if_absent(
        &self,
        rec: &AccountRecord,
    ) -> Result<AccountRecord, StoreError> {
        let tx = self.begin_grouped()?;
        let stored = {
            let mut t = tx.open_table(ACCOUNTS)?;
            let existing = t
                .get(rec.id.as_str())?
                .map(|v| dec(v.value()))
                .transpose()?;
            match existing {
                Some(e) => e,
                None => {
                    t.insert(rec.id.as_str(), enc(rec)?.as_slice())?;
                    tx.open_table(KEYS)?
                        .insert(rec.access_key_id.as_str(), rec.id.as_str())?;
                    rec.clone()
                }
            }
        };
        self.commit_grouped(tx)?;
        Ok(stored)
    }

    /// Removes account `id` and its key in one transaction; false when absent.
    pub fn remove_account(&self, id: &str) -> Result<bool, StoreError> {
        let tx = self.begin_grouped()?;
        let found = {
            let mut t = tx.open_table(ACCOUNTS)?;
            let existing: Option<AccountRecord> =
                t.remove(id)?.map(|v| dec(v.value())).transpose()?;
            match existing {
                Some(a) => {
                    tx.open_table(KEYS)?.remove(a.access_key_id.as_str())?;
                    true
                }
                None => false,
            }
        };
        self.commit_grouped(tx)?;
        Ok(found)
    }

    // ---- objects ----

    /// The object `key` in `bucket`, if any.
    pub fn object(&self, bucket: &str, key: &str) -> Result<Option<ObjectRecord>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(OBJECTS)?;
        t.get((bucket, key))?.map(|v| dec(v.value())).transpose()
    }

    /// Up to `limit` objects of `bucket` whose keys start with `prefix` and
    /// sort after `after` (or from the prefix when `None`).
    pub fn objects_after(
        &self,
        bucket: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ObjectPage, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(OBJECTS)?;
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded((bucket, a)),
            _ => Bound::Included((bucket, prefix)),
        };
        let mut objects = Vec::new();
        for row in t.range::<(&str, &str)>((start, Bound::Unbounded))? {
            let (k, v) = row?;
            let (b, key) = k.value();
            if b != bucket || !key.starts_with(prefix) || objects.len() >= limit {
                break;
            }
            objects.push((key.to_owned(), dec(v.value())?));
        }
        Ok(ObjectPage { objects })
    }

    /// Number of objects in `bucket`.
    pub fn object_count(&self, bucket: &str) -> Result<usize, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(OBJECTS)?;
        Ok(collect_keys(&t, bucket)?.len())
    }

    /// Stores `rec` as object `key` of `bucket` if the bucket is ready and
    /// its quota allows; returns the replaced object's blob.
    pub fn put_object(
        &self,
        bucket: &str,
        key: &str,
        rec: &ObjectRecord,
    ) -> Result<Option<String>, WriteError> {
        let tx = self.db.begin_write()?;
        let old = {
            let mut buckets = tx.open_table(BUCKETS)?;
            let mut b = ready_bucket(&buckets, bucket)?;
            let mut objects = tx.open_table(OBJECTS)?;
            let old: Option<ObjectRecord> = objects
                .get((bucket, key))?
                .map(|v| dec(v.value()))
                .transpose()?;
            let old_size = old.as_ref().map_or(0, |o| o.size);
            b.used_bytes = check_quota(&b, old_size, rec.size)?;
            objects.insert((bucket, key), enc(rec)?.as_slice())?;
            buckets.insert(bucket, enc(&b)?.as_slice())?;
            old
        };
        tx.commit()?;
        Ok(old.map(|o| o.blob))
    }

    /// Removes object `key` of `bucket`; returns its blob when it existed.
    pub fn delete_object(&self, bucket: &str, key: &str) -> Result<Option<String>, StoreError> {
        let tx = self.db.begin_write()?;
        let old = {
            let mut objects = tx.open_table(OBJECTS)?;
            let old: Option<ObjectRecord> = objects
                .remove((bucket, key))?
                .map(|v| dec(v.value()))
                .transpose()?;
            if let Some(o) = &old {
                let mut buckets = tx.open_table(BUCKETS)?;
                let b: Option<BucketRecord> =
                    buckets.get(bucket)?.map(|v| dec(v.value())).transpose()?;
                if let Some(mut b) = b {
                    b.used_bytes = b.used_bytes.saturating_sub(o.size);
                    buckets.insert(bucket, enc(&b)?.as_slice())?;
                }
            }
            old
        };
        tx.commit()?;
        Ok(old.map(|o| o.blob))
    }

    /// Replaces the tags of object `key`; false when the object is absent.
    pub fn set_object_tags(
        &self,
        bucket: &str,
        key: &str,
        tags: Vec<(String, String)>,
    ) -> Result<bool, StoreError> {
        let tx = self.db.begin_write()?;
        let found = {
            let mut objects = tx.open_table(OBJECTS)?;
            let existing: Option<ObjectRecord> = objects
                .get((bucket, key))?
                .map(|v| dec(v.value()))
                .transpose()?;
            match existing {
                Some(mut o) => {
                    o.attrs.tags = tags;
                    objects.insert((bucket, key), enc(&o)?.as_slice())?;
                    true
                }
                None => false,
            }
        };
        tx.commit()?;
        Ok(found)
    }

    // ---- multipart uploads ----

    /// Records a new multipart upload in a ready bucket.
    pub fn create_upload(
        &self,
        bucket: &str,
        upload_id: &str,
        rec: &UploadRecord,
    ) -> Result<(), WriteError> {
        let tx = self.db.begin_write()?;
        {
            ready_bucket(&tx.open_table(BUCKETS)?, bucket)?;
            tx.open_table(UPLOADS)?
                .insert((bucket, upload_id), enc(rec)?.as_slice())?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The upload `upload_id` of `bucket`, if any.
    pub fn upload(
        &self,
        bucket: &str,
        upload_id: &str,
    ) -> Result<Option<UploadRecord>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(UPLOADS)?;
        t.get((bucket, upload_id))?
            .map(|v| dec(v.value()))
            .transpose()
    }

    /// The uploads in progress in `bucket`, by upload ID.
    pub fn uploads(&self, bucket: &str) -> Result<Vec<(String, UploadRecord)>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(UPLOADS)?;
        let mut out = Vec::new();
        for row in t.range::<(&str, &str)>((bucket, "")..)? {
            let (k, v) = row?;
            if k.value().0 != bucket {
                break;
            }
            out.push((k.value().1.to_owned(), dec(v.value())?));
        }
        Ok(out)
    }

    /// Stores part `number` of an upload; returns the replaced part's blob.
    pub fn put_part(
        &self,
        bucket: &str,
        upload_id: &str,
        number: u32,
        rec: &PartRecord,
    ) -> Result<Option<String>, WriteError> {
        let tx = self.db.begin_write()?;
        let old = {
            ready_bucket(&tx.open_table(BUCKETS)?, bucket)?;
            if tx.open_table(UPLOADS)?.get((bucket, upload_id))?.is_none() {
                return Err(WriteError::NoSuchUpload);
            }
            let mut parts = tx.open_table(PARTS)?;
            let old: Option<PartRecord> = parts
                .insert((upload_id, number), enc(rec)?.as_slice())?
                .map(|v| dec(v.value()))
                .transpose()?;
            old
        };
        tx.commit()?;
        Ok(old.map(|p| p.blob))
    }

    /// The parts of an upload, by number.
    pub fn parts(&self, upload_id: &str) -> Result<Vec<(u32, PartRecord)>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(PARTS)?;
        let mut out = Vec::new();
        for row in t.range((upload_id, 0)..=(upload_id, u32::MAX))? {
            let (k, v) = row?;
            out.push((k.value().1, dec(v.value())?));
        }
        Ok(out)
    }

    /// Ends an upload: removes it and its parts and, when `object` is given,
    /// stores it as the upload's object (quota permitting) in the same
    /// transaction. Returns the blobs no longer referenced (all parts and
    /// any replaced object).
    pub fn finish_upload(
        &self,
        bucket: &str,
        upload_id: &str,
        object: Option<&ObjectRecord>,
    ) -> Result<Vec<String>, WriteError> {
        let tx = self.db.begin_write()?;
        let mut unreferenced = Vec::new();
        {
            let mut uploads = tx.open_table(UPLOADS)?;
            let upload: UploadRecord = match uploads.remove((bucket, upload_id))? {
                Some(v) => dec(v.value())?,
                None => return Err(WriteError::NoSuchUpload),
            };
            let mut parts = tx.open_table(PARTS)?;
            let numbers: Vec<(u32, PartRecord)> = parts
                .range((upload_id, 0)..=(upload_id, u32::MAX))?
                .map(|r| {
                    let (k, v) = r?;
                    Ok((k.value().1, dec(v.value())?))
                })
                .collect::<Result<_, StoreError>>()?;
            for (n, p) in numbers {
                parts.remove((upload_id, n))?;
                unreferenced.push(p.blob);
            }
            if let Some(rec) = object {
                let mut buckets = tx.open_table(BUCKETS)?;
                let mut b = ready_bucket(&buckets, bucket)?;
                let mut objects = tx.open_table(OBJECTS)?;
                let key = upload.key.as_str();
                let old: Option<ObjectRecord> = objects
                    .get((bucket, key))?
                    .map(|v| dec(v.value()))
                    .transpose()?;
                b.used_bytes = check_quota(&b, old.as_ref().map_or(0, |o| o.size), rec.size)?;
                objects.insert((bucket, key), enc(rec)?.as_slice())?;
                buckets.insert(bucket, enc(&b)?.as_slice())?;
                unreferenced.extend(old.map(|o| o.blob));
            }
        }
        tx.commit()?;
        Ok(unreferenced)
    }

    /// Every blob referenced by the objects and parts of `bucket`.
    pub fn referenced_blobs(&self, bucket: &str) -> Result<Vec<String>, StoreError> {
        let tx = self.db.begin_read()?;
        let objects = tx.open_table(OBJECTS)?;
        let mut out = Vec::new();
        for row in objects.range::<(&str, &str)>((bucket, "")..)? {
            let (k, v) = row?;
            if k.value().0 != bucket {
                break;
            }
            out.push(dec::<ObjectRecord>(v.value())?.blob);
        }
        let uploads = tx.open_table(UPLOADS)?;
        let parts = tx.open_table(PARTS)?;
        for u in collect_keys(&uploads, bucket)? {
            for row in parts.range((u.as_str(), 0)..=(u.as_str(), u32::MAX))? {
                let (_, v) = row?;
                out.push(dec::<PartRecord>(v.value())?.blob);
            }
        }
        Ok(out)
    }
}

fn ready_bucket(
    buckets: &impl ReadableTable<&'static str, &'static [u8]>,
    id: &str,
) -> Result<BucketRecord, WriteError> {
    let b: Option<BucketRecord> = buckets.get(id)?.map(|v| dec(v.value())).transpose()?;
    match b {
        Some(b) if b.state == BucketState::Ready => Ok(b),
        _ => Err(WriteError::NoSuchBucket),
    }
}

/// The bucket's new usage after replacing `old_size` bytes by `new_size`,
/// or `Quota` when that exceeds its quota.
fn check_quota(b: &BucketRecord, old_size: u64, new_size: u64) -> Result<u64, WriteError> {
    let would_hold = b
        .used_bytes
        .saturating_sub(old_size)
        .saturating_add(new_size);
    match b.params.max_size_bytes {
        Some(max) if would_hold > max && new_size > old_size => {
            Err(WriteError::Quota { max, would_hold })
        }
        _ => Ok(would_hold),
    }
}

/// The second key components of every row whose first component is `first`.
fn collect_keys(
    t: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    first: &str,
) -> Result<Vec<String>, StoreError> {
    let mut out = Vec::new();
    for row in t.range::<(&str, &str)>((first, "")..)? {
        let (k, _) = row?;
        let (f, s) = k.value();
        if f != first {
            break;
        }
        out.push(s.to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(id: &str, max: Option<u64>) -> BucketRecord {
        BucketRecord {
            id: id.into(),
            state: BucketState::Ready,
            params: BucketParams {
                max_size_bytes: max,
            },
            created_ms: 0,
            used_bytes: 0,
            tags: vec![],
        }
    }

    fn object(blob: &str, size: u64) -> ObjectRecord {
        ObjectRecord {
            blob: blob.into(),
            size,
            etag: "e".into(),
            last_modified_ms: 0,
            attrs: ObjectAttrs::default(),
        }
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("state.redb")).unwrap();
        (dir, s)
    }

    #[test]
    fn quota_counts_replaced_objects_once() {
        let (_d, s) = store();
        s.insert_bucket_if_absent(&bucket("b", Some(10))).unwrap();
        s.put_object("b", "k", &object("1", 8)).unwrap();
        // Overwriting 8 bytes with 9 fits a 10-byte quota.
        assert_eq!(
            s.put_object("b", "k", &object("2", 9)).unwrap(),
            Some("1".into())
        );
        let err = s.put_object("b", "k2", &object("3", 2)).unwrap_err();
        assert!(matches!(
            err,
            WriteError::Quota {
                max: 10,
                would_hold: 11
            }
        ));
        assert_eq!(s.bucket("b").unwrap().unwrap().used_bytes, 9);
        s.delete_object("b", "k").unwrap();
        assert_eq!(s.bucket("b").unwrap().unwrap().used_bytes, 0);
    }

    #[test]
    fn objects_list_in_key_order_within_their_bucket() {
        let (_d, s) = store();
        s.insert_bucket_if_absent(&bucket("a", None)).unwrap();
        s.insert_bucket_if_absent(&bucket("b", None)).unwrap();
        for k in ["x/2", "x/1", "y", "w"] {
            s.put_object("a", k, &object(k, 1)).unwrap();
        }
        s.put_object("b", "x/0", &object("o", 1)).unwrap();
        let keys = |p: ObjectPage| p.objects.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(
            keys(s.objects_after("a", "x/", None, 10).unwrap()),
            ["x/1", "x/2"]
        );
        assert_eq!(
            keys(s.objects_after("a", "", Some("x/1"), 10).unwrap()),
            ["x/2", "y"]
        );
        assert_eq!(
            keys(s.objects_after("a", "", None, 2).unwrap()),
            ["w", "x/1"]
        );
        s.remove_bucket("a").unwrap();
        assert_eq!(s.object_count("a").unwrap(), 0);
        assert_eq!(s.object_count("b").unwrap(), 1);
    }

    #[test]
    fn writes_to_a_bucket_that_is_not_ready_are_refused() {
        let (_d, s) = store();
        let mut b = bucket("b", None);
        b.state = BucketState::Creating;
        s.insert_bucket_if_absent(&b).unwrap();
        assert!(matches!(
            s.put_object("b", "k", &object("1", 1)).unwrap_err(),
            WriteError::NoSuchBucket
        ));
        assert!(matches!(
            s.put_object("nope", "k", &object("1", 1)).unwrap_err(),
            WriteError::NoSuchBucket
        ));
    }

    #[test]
    fn accounts_and_keys_come_and_go_together() {
        let (_d, s) = store();
        let a = AccountRecord {
            id: "ba-1".into(),
            access_key_id: "AK".into(),
            secret_access_key: "SK".into(),
            grants: BTreeMap::new(),
            created_ms: 0,
        };
        s.insert_account_if_absent(&a).unwrap();
        let mut other = a.clone();
        other.access_key_id = "AK2".into();
        // A second insert keeps the first account and adds no key.
        assert_eq!(s.insert_account_if_absent(&other).unwrap(), a);
        assert_eq!(s.key_count().unwrap(), 1);
        assert_eq!(s.account_by_key("AK").unwrap().unwrap().id, "ba-1");
        assert!(s.remove_account("ba-1").unwrap());
        assert!(!s.remove_account("ba-1").unwrap());
        assert!(s.account_by_key("AK").unwrap().is_none());
        assert_eq!(s.key_count().unwrap(), 0);
        assert!(!format!("{a:?}").contains("SK"));
    }

    #[test]
    fn finishing_an_upload_moves_parts_into_one_object() {
        let (_d, s) = store();
        s.insert_bucket_if_absent(&bucket("b", Some(5))).unwrap();
        let up = UploadRecord {
            key: "k".into(),
            account_id: "ba-1".into(),
            initiated_ms: 0,
            attrs: ObjectAttrs::default(),
        };
        s.create_upload("b", "u1", &up).unwrap();
        let part = |blob: &str| PartRecord {
            blob: blob.into(),
            size: 3,
            md5_hex: "m".into(),
            last_modified_ms: 0,
        };
        s.put_part("b", "u1", 1, &part("p1")).unwrap();
        s.put_part("b", "u1", 2, &part("p2")).unwrap();
        assert_eq!(s.parts("u1").unwrap().len(), 2);
        let mut refs = s.referenced_blobs("b").unwrap();
        refs.sort();
        assert_eq!(refs, ["p1", "p2"]);
        // 6 bytes exceed the 5-byte quota: nothing changes.
        let err = s
            .finish_upload("b", "u1", Some(&object("o", 6)))
            .unwrap_err();
        assert!(matches!(err, WriteError::Quota { .. }));
        assert!(s.upload("b", "u1").unwrap().is_some());
        let freed = s.finish_upload("b", "u1", Some(&object("o", 5))).unwrap();
        assert_eq!(freed, ["p1", "p2"]);
        assert!(s.upload("b", "u1").unwrap().is_none());
        assert_eq!(s.referenced_blobs("b").unwrap(), ["o"]);
    }
}
