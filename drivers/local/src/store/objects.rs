//! Object, multipart upload and part records, written by S3 requests and
//! committed durably one by one.

use std::ops::Bound;

use redb::{ReadableTable, WriteTransaction};

use super::{
    BUCKETS, BucketRecord, BucketState, OBJECTS, ObjectPage, ObjectRecord, PARTS, PartRecord,
    Store, StoreError, UPLOADS, UploadRecord, WriteError, collect_keys, dec, dec_opt, enc,
    scan_rows,
};

impl Store {
    /// The object `key` in `bucket`, if any.
    pub fn object(&self, bucket: &str, key: &str) -> Result<Option<ObjectRecord>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(OBJECTS)?;
        dec_opt(t.get((bucket, key))?)
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
        let old = replace_object(&tx, bucket, key, rec, 0)?;
        tx.commit()?;
        Ok(old.map(|o| o.blob))
    }

    /// Removes object `key` of `bucket`; returns its blob when it existed.
    pub fn delete_object(&self, bucket: &str, key: &str) -> Result<Option<String>, StoreError> {
        let tx = self.db.begin_write()?;
        let old = {
            let mut objects = tx.open_table(OBJECTS)?;
            let old: Option<ObjectRecord> = dec_opt(objects.remove((bucket, key))?)?;
            if let Some(o) = &old {
                let mut buckets = tx.open_table(BUCKETS)?;
                let b: Option<BucketRecord> = dec_opt(buckets.get(bucket)?)?;
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
            let existing: Option<ObjectRecord> = dec_opt(objects.get((bucket, key))?)?;
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
        dec_opt(t.get((bucket, upload_id))?)
    }

    /// The uploads in progress in `bucket`, by upload ID.
    pub fn uploads(&self, bucket: &str) -> Result<Vec<(String, UploadRecord)>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(UPLOADS)?;
        scan_rows(&t, bucket, |id, v| Ok((id.to_owned(), dec(v)?)))
    }

    /// Stores part `number` of an upload if the bucket is ready and its
    /// quota allows (pending parts count against it); returns the replaced
    /// part's blob.
    pub fn put_part(
        &self,
        bucket: &str,
        upload_id: &str,
        number: u32,
        rec: &PartRecord,
    ) -> Result<Option<String>, WriteError> {
        let tx = self.db.begin_write()?;
        let old = {
            let mut buckets = tx.open_table(BUCKETS)?;
            let mut b = ready_bucket(&buckets, bucket)?;
            if tx.open_table(UPLOADS)?.get((bucket, upload_id))?.is_none() {
                return Err(WriteError::NoSuchUpload);
            }
            let mut parts = tx.open_table(PARTS)?;
            let old: Option<PartRecord> = dec_opt(parts.get((upload_id, number))?)?;
            let old_size = old.as_ref().map_or(0, |p| p.size);
            check_quota(&b, old_size, rec.size)?;
            b.pending_bytes = b.pending_bytes.saturating_sub(old_size) + rec.size;
            parts.insert((upload_id, number), enc(rec)?.as_slice())?;
            buckets.insert(bucket, enc(&b)?.as_slice())?;
            old
        };
        tx.commit()?;
        Ok(old.map(|p| p.blob))
    }

    /// Part `number` of an upload, if uploaded.
    pub fn part(&self, upload_id: &str, number: u32) -> Result<Option<PartRecord>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(PARTS)?;
        dec_opt(t.get((upload_id, number))?)
    }

    /// The parts of an upload, by number.
    pub fn parts(&self, upload_id: &str) -> Result<Vec<(u32, PartRecord)>, StoreError> {
        let tx = self.db.begin_read()?;
        upload_parts(&tx.open_table(PARTS)?, upload_id)
    }

    /// Ends an upload: removes it and its parts (no longer pending) and,
    /// when `object` is given, stores it as the upload's object (quota
    /// permitting) in the same transaction. Returns the blobs no longer
    /// referenced (all parts and any replaced object).
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
            let mut released = 0u64;
            for (n, p) in upload_parts(&parts, upload_id)? {
                parts.remove((upload_id, n))?;
                released = released.saturating_add(p.size);
                unreferenced.push(p.blob);
            }
            match object {
                Some(rec) => {
                    let old = replace_object(&tx, bucket, &upload.key, rec, released)?;
                    unreferenced.extend(old.map(|o| o.blob));
                }
                None => {
                    let mut buckets = tx.open_table(BUCKETS)?;
                    let b: Option<BucketRecord> = dec_opt(buckets.get(bucket)?)?;
                    if let Some(mut b) = b {
                        b.pending_bytes = b.pending_bytes.saturating_sub(released);
                        buckets.insert(bucket, enc(&b)?.as_slice())?;
                    }
                }
            }
        }
        tx.commit()?;
        Ok(unreferenced)
    }

    /// Sets the pending bytes of `bucket` to what its parts hold, when they
    /// differ (records written before parts were counted); true when they
    /// did.
    pub fn recount_pending(&self, bucket: &str) -> Result<bool, StoreError> {
        let tx = self.db.begin_write()?;
        let changed = {
            let mut buckets = tx.open_table(BUCKETS)?;
            let b: Option<BucketRecord> = dec_opt(buckets.get(bucket)?)?;
            let Some(mut b) = b else {
                return Ok(false);
            };
            let uploads = tx.open_table(UPLOADS)?;
            let parts = tx.open_table(PARTS)?;
            let mut pending = 0u64;
            for u in collect_keys(&uploads, bucket)? {
                for (_, p) in upload_parts(&parts, &u)? {
                    pending = pending.saturating_add(p.size);
                }
            }
            let changed = b.pending_bytes != pending;
            b.pending_bytes = pending;
            if changed {
                buckets.insert(bucket, enc(&b)?.as_slice())?;
            }
            changed
        };
        if changed {
            tx.commit()?;
        } else {
            tx.abort()?;
        }
        Ok(changed)
    }

    /// Every blob referenced by the objects and parts of `bucket`.
    pub fn referenced_blobs(&self, bucket: &str) -> Result<Vec<String>, StoreError> {
        let tx = self.db.begin_read()?;
        let objects = tx.open_table(OBJECTS)?;
        let mut out = scan_rows(&objects, bucket, |_, v| Ok(dec::<ObjectRecord>(v)?.blob))?;
        let uploads = tx.open_table(UPLOADS)?;
        let parts = tx.open_table(PARTS)?;
        for u in collect_keys(&uploads, bucket)? {
            out.extend(upload_parts(&parts, &u)?.into_iter().map(|(_, p)| p.blob));
        }
        Ok(out)
    }
}

fn ready_bucket(
    buckets: &impl ReadableTable<&'static str, &'static [u8]>,
    id: &str,
) -> Result<BucketRecord, WriteError> {
    let b: Option<BucketRecord> = dec_opt(buckets.get(id)?)?;
    match b {
        Some(b) if b.state == BucketState::Ready => Ok(b),
        _ => Err(WriteError::NoSuchBucket),
    }
}

/// Stores `rec` as object `key` of `bucket` within `tx` if the bucket is
/// ready and its quota allows, updating the bucket's usage; returns the
/// replaced object. `released` bytes of pending parts (those of the
/// upload `rec` completes) stop being pending in the same write.
fn replace_object(
    tx: &WriteTransaction,
    bucket: &str,
    key: &str,
    rec: &ObjectRecord,
    released: u64,
) -> Result<Option<ObjectRecord>, WriteError> {
    let mut buckets = tx.open_table(BUCKETS)?;
    let mut b = ready_bucket(&buckets, bucket)?;
    let mut objects = tx.open_table(OBJECTS)?;
    let old: Option<ObjectRecord> = dec_opt(objects.get((bucket, key))?)?;
    let old_size = old.as_ref().map_or(0, |o| o.size);
    check_quota(&b, old_size.saturating_add(released), rec.size)?;
    b.used_bytes = b.used_bytes.saturating_sub(old_size) + rec.size;
    b.pending_bytes = b.pending_bytes.saturating_sub(released);
    objects.insert((bucket, key), enc(rec)?.as_slice())?;
    buckets.insert(bucket, enc(&b)?.as_slice())?;
    Ok(old)
}

/// The parts of upload `upload_id`, by number.
fn upload_parts(
    parts: &impl ReadableTable<(&'static str, u32), &'static [u8]>,
    upload_id: &str,
) -> Result<Vec<(u32, PartRecord)>, StoreError> {
    let mut out = Vec::new();
    for row in parts.range((upload_id, 0)..=(upload_id, u32::MAX))? {
        let (k, v) = row?;
        out.push((k.value().1, dec(v.value())?));
    }
    Ok(out)
}

/// Refuses replacing `old_size` bytes the bucket holds by `new_size`
/// when that takes what it holds, objects and pending parts, over its
/// quota. A write that does not grow the bucket always passes, so one
/// over its quota (a quota lowered by hand) can still shrink.
fn check_quota(b: &BucketRecord, old_size: u64, new_size: u64) -> Result<(), WriteError> {
    let would_hold = b
        .used_bytes
        .saturating_add(b.pending_bytes)
        .saturating_sub(old_size)
        .saturating_add(new_size);
    match b.params.max_size_bytes {
        Some(max) if would_hold > max && new_size > old_size => {
            Err(WriteError::Quota { max, would_hold })
        }
        _ => Ok(()),
    }
}
