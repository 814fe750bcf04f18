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

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use redb::{Database, Durability, ReadableTable, TableDefinition, WriteTransaction};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::group_commit::{GroupCommit, Writer};

/// A table of records by ID.
type ById = TableDefinition<'static, &'static str, &'static [u8]>;

const BUCKETS: ById = TableDefinition::new("buckets");
const ACCOUNTS: ById = TableDefinition::new("accounts");
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

mod buckets;
mod objects;
mod records;

pub use records::{
    AccountRecord, BucketRecord, BucketState, ObjectAttrs, ObjectRecord, PartRecord, UploadRecord,
};

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

/// Decodes the record a table lookup found, if any.
fn dec_opt<T: DeserializeOwned>(
    found: Option<redb::AccessGuard<'_, &'static [u8]>>,
) -> Result<Option<T>, StoreError> {
    found.map(|v| dec(v.value())).transpose()
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

    /// The record `id` of `table`, if any.
    fn record<T: DeserializeOwned>(&self, table: ById, id: &str) -> Result<Option<T>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(table)?;
        dec_opt(t.get(id)?)
    }

    /// Every record of `table`, by ID.
    fn records<T: DeserializeOwned>(&self, table: ById) -> Result<Vec<T>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(table)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            out.push(dec(v.value())?);
        }
        Ok(out)
    }

    /// Records `rec` as `id` of `table` unless a record with that ID
    /// exists, writing what `also` writes with a new record in the same
    /// grouped transaction; returns the record now stored.
    fn insert_if_absent<T: Serialize + DeserializeOwned + Clone>(
        &self,
        table: ById,
        id: &str,
        rec: &T,
        also: impl FnOnce(&WriteTransaction) -> Result<(), StoreError>,
    ) -> Result<T, StoreError> {
        let tx = self.begin_grouped()?;
        let stored = {
            let mut t = tx.open_table(table)?;
            let existing = dec_opt(t.get(id)?)?;
            match existing {
                Some(e) => e,
                None => {
                    t.insert(id, enc(rec)?.as_slice())?;
                    also(&tx)?;
                    rec.clone()
                }
            }
        };
        self.commit_grouped(tx)?;
        Ok(stored)
    }
}

/// `f` of the second key part and the value of each row of `t` whose key
/// starts with `first`, in key order.
fn scan_rows<T>(
    t: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    first: &str,
    mut f: impl FnMut(&str, &[u8]) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::new();
    for row in t.range::<(&str, &str)>((first, "")..)? {
        let (k, v) = row?;
        let (head, tail) = k.value();
        if head != first {
            break;
        }
        out.push(f(tail, v.value())?);
    }
    Ok(out)
}

/// The second key components of every row whose first component is `first`.
fn collect_keys(
    t: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    first: &str,
) -> Result<Vec<String>, StoreError> {
    scan_rows(t, first, |s, _| Ok(s.to_owned()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::params::BucketParams;

    fn bucket(id: &str, max: Option<u64>) -> BucketRecord {
        BucketRecord {
            id: id.into(),
            state: BucketState::Ready,
            params: BucketParams {
                max_size_bytes: max,
            },
            created_ms: 0,
            used_bytes: 0,
            pending_bytes: 0,
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

    fn upload(key: &str) -> UploadRecord {
        UploadRecord {
            key: key.into(),
            account_id: "ba-1".into(),
            initiated_ms: 0,
            attrs: ObjectAttrs::default(),
        }
    }

    fn part(blob: &str, size: u64) -> PartRecord {
        PartRecord {
            blob: blob.into(),
            size,
            md5_hex: "m".into(),
            last_modified_ms: 0,
        }
    }

    fn held(s: &Store, bucket: &str) -> (u64, u64) {
        let b = s.bucket(bucket).unwrap().unwrap();
        (b.used_bytes, b.pending_bytes)
    }

    #[test]
    fn finishing_an_upload_moves_parts_into_one_object() {
        let (_d, s) = store();
        s.insert_bucket_if_absent(&bucket("b", Some(6))).unwrap();
        s.create_upload("b", "u1", &upload("k")).unwrap();
        s.put_part("b", "u1", 1, &part("p1", 3)).unwrap();
        s.put_part("b", "u1", 2, &part("p2", 3)).unwrap();
        assert_eq!(s.parts("u1").unwrap().len(), 2);
        let mut refs = s.referenced_blobs("b").unwrap();
        refs.sort();
        assert_eq!(refs, ["p1", "p2"]);
        assert_eq!(held(&s, "b"), (0, 6));
        // 7 bytes exceed the 6-byte quota: nothing changes.
        let err = s
            .finish_upload("b", "u1", Some(&object("o", 7)))
            .unwrap_err();
        assert!(matches!(err, WriteError::Quota { .. }));
        assert!(s.upload("b", "u1").unwrap().is_some());
        assert_eq!(held(&s, "b"), (0, 6));
        let freed = s.finish_upload("b", "u1", Some(&object("o", 6))).unwrap();
        assert_eq!(freed, ["p1", "p2"]);
        assert!(s.upload("b", "u1").unwrap().is_none());
        assert_eq!(s.referenced_blobs("b").unwrap(), ["o"]);
        assert_eq!(held(&s, "b"), (6, 0));
    }

    #[test]
    fn pending_parts_count_against_the_quota_until_their_upload_ends() {
        let (_d, s) = store();
        s.insert_bucket_if_absent(&bucket("b", Some(10))).unwrap();
        s.create_upload("b", "u1", &upload("k")).unwrap();
        s.put_part("b", "u1", 1, &part("p1", 6)).unwrap();
        // 6 pending + 5 > 10, whether a part or an object.
        let err = s.put_part("b", "u1", 2, &part("p2", 5)).unwrap_err();
        assert!(matches!(
            err,
            WriteError::Quota {
                max: 10,
                would_hold: 11
            }
        ));
        assert!(matches!(
            s.put_object("b", "o", &object("o", 5)).unwrap_err(),
            WriteError::Quota { .. }
        ));
        // Uploading part 1 again replaces its 6 bytes.
        assert_eq!(
            s.put_part("b", "u1", 1, &part("p1b", 10)).unwrap(),
            Some("p1".into())
        );
        assert_eq!(held(&s, "b"), (0, 10));
        // Aborting releases them.
        assert_eq!(s.finish_upload("b", "u1", None).unwrap(), ["p1b"]);
        assert_eq!(held(&s, "b"), (0, 0));
        s.put_object("b", "o", &object("o", 10)).unwrap();
    }

    #[test]
    fn pending_parts_recorded_before_they_were_counted_are_recounted() {
        let (_d, s) = store();
        s.insert_bucket_if_absent(&bucket("b", None)).unwrap();
        s.create_upload("b", "u1", &upload("k")).unwrap();
        s.put_part("b", "u1", 1, &part("p1", 4)).unwrap();
        assert!(!s.recount_pending("b").unwrap());
        // A record from before: no pending bytes.
        let mut b = s.bucket("b").unwrap().unwrap();
        b.pending_bytes = 0;
        let tx = s.db.begin_write().unwrap();
        tx.open_table(BUCKETS)
            .unwrap()
            .insert("b", enc(&b).unwrap().as_slice())
            .unwrap();
        tx.commit().unwrap();
        assert!(s.recount_pending("b").unwrap());
        assert_eq!(held(&s, "b"), (0, 4));
        assert!(!s.recount_pending("nope").unwrap());
    }
}
