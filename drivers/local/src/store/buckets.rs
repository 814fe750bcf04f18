//! Bucket and account records, written by provisioning calls and
//! committed in groups.

use redb::{ReadableTable, ReadableTableMetadata, WriteTransaction};

use super::{
    ACCOUNTS, AccountRecord, BUCKETS, BucketRecord, BucketState, Commit, KEYS, OBJECTS, PARTS,
    Store, StoreError, UPLOADS, collect_keys, dec_opt, enc,
};

impl Store {
    /// The bucket `id`, if recorded.
    pub fn bucket(&self, id: &str) -> Result<Option<BucketRecord>, StoreError> {
        self.record(BUCKETS, id)
    }

    /// Every bucket, by ID.
    pub fn buckets(&self) -> Result<Vec<BucketRecord>, StoreError> {
        self.records(BUCKETS)
    }

    /// Records a new bucket unless one with that ID exists; returns the
    /// record now stored.
    pub fn insert_bucket_if_absent(&self, rec: &BucketRecord) -> Result<BucketRecord, StoreError> {
        self.insert_if_absent(BUCKETS, &rec.id, rec, |_| Ok(()))
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
            let existing: Option<BucketRecord> = dec_opt(t.get(id)?)?;
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
        self.record(ACCOUNTS, id)
    }

    /// The account owning access key `access_key_id`, if any.
    pub fn account_by_key(&self, access_key_id: &str) -> Result<Option<AccountRecord>, StoreError> {
        let tx = self.db.begin_read()?;
        let keys = tx.open_table(KEYS)?;
        let Some(id) = keys.get(access_key_id)?.map(|v| v.value().to_owned()) else {
            return Ok(None);
        };
        let t = tx.open_table(ACCOUNTS)?;
        dec_opt(t.get(id.as_str())?)
    }

    /// Every account, by ID.
    pub fn accounts(&self) -> Result<Vec<AccountRecord>, StoreError> {
        self.records(ACCOUNTS)
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
        self.insert_if_absent(ACCOUNTS, &rec.id, rec, |tx| {
            tx.open_table(KEYS)?
                .insert(rec.access_key_id.as_str(), rec.id.as_str())?;
            Ok(())
        })
    }

    /// Removes account `id` and its key in one transaction; false when absent.
    pub fn remove_account(&self, id: &str) -> Result<bool, StoreError> {
        let tx = self.begin_grouped()?;
        let found = {
            let mut t = tx.open_table(ACCOUNTS)?;
            let existing: Option<AccountRecord> = dec_opt(t.remove(id)?)?;
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
}
