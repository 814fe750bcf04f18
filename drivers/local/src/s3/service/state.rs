//! Access to the store and blob files for the S3 operations.

use std::path::PathBuf;

use s3s::dto::{CommonPrefix, CopySource, Object, StreamingBlob};
use s3s::{S3Result, s3_error};

use super::LocalS3;
use super::checksums::{Integrity, checksum_hasher, verify_checksums};
use super::support::{
    base64_decode, hex_md5, internal, max_keys, now_ms, quota_error, split_listing, write_error,
};
use crate::blobs::{self, WriteBlobError};
use crate::listing::{self, Query};
use crate::s3::encoding::Names;
use crate::store::{
    BucketRecord, BucketState, ObjectAttrs, ObjectRecord, PartRecord, Store, StoreError,
    UploadRecord, WriteError,
};

/// What a body write produced, with the new blob's name.
pub(super) struct NewBlob {
    pub(super) name: String,
    pub(super) size: u64,
    pub(super) md5: [u8; 16],
    pub(super) checksum: s3s::dto::Checksum,
}

/// What ListObjects and ListObjectsV2 ask for: the objects of `bucket`
/// under `prefix`, grouped by `delimiter`, at most `max_keys` a page.
pub(super) struct ObjectsQuery<'a> {
    pub(super) bucket: &'a str,
    pub(super) prefix: Option<&'a str>,
    pub(super) delimiter: Option<&'a str>,
    pub(super) max_keys: Option<i32>,
}

/// The [`ObjectsQuery`] of listing request `$input`, which names its
/// fields alike.
macro_rules! objects_query {
    ($input:ident) => {
        $crate::s3::service::state::ObjectsQuery {
            bucket: &$input.bucket,
            prefix: $input.prefix.as_deref(),
            delimiter: $input.delimiter.as_deref(),
            max_keys: $input.max_keys,
        }
    };
}
pub(super) use objects_query;

/// Builds ListObjects or ListObjectsV2 output `$target` from the given
/// fields, the fields of request `$input` it echoes (names shown as
/// `$names` asks) and the [`ObjectsPage`] `$page`.
macro_rules! listing_output {
    ($input:ident, $names:ident, $page:ident, $target:ident { $($field:ident: $value:expr),* $(,)? }) => {
        $target {
            $($field: $value,)*
            name: Some($input.bucket),
            prefix: $names.show_opt($input.prefix)?,
            delimiter: $names.show_opt($input.delimiter)?,
            encoding_type: $input.encoding_type,
            max_keys: Some($page.max_keys),
            is_truncated: Some($page.is_truncated),
            contents: Some($page.contents),
            common_prefixes: $page.common_prefixes,
            ..Default::default()
        }
    };
}
pub(super) use listing_output;

/// One page of a bucket's objects, as ListObjects and ListObjectsV2 show it.
pub(super) struct ObjectsPage {
    /// The page size: as asked for, at most [`super::MAX_LIST`].
    pub(super) max_keys: i32,
    /// How many objects and common prefixes the page holds.
    pub(super) key_count: i32,
    pub(super) is_truncated: bool,
    /// Where the next page starts, when the listing is truncated.
    pub(super) next_marker: Option<String>,
    pub(super) contents: Vec<Object>,
    /// The common prefixes, `None` for none.
    pub(super) common_prefixes: Option<Vec<CommonPrefix>>,
}

impl LocalS3 {
    pub(super) fn store(&self) -> Store {
        self.driver.inner.store.clone()
    }

    pub(super) fn dir(&self, bucket: &str) -> PathBuf {
        self.driver.bucket_dir(bucket)
    }

    /// Runs `f` on the store off the async workers.
    async fn blocking<T: Send + 'static, E: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, E> + Send + 'static,
    ) -> S3Result<Result<T, E>> {
        let store = self.store();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(internal)
    }

    pub(super) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> S3Result<T> {
        self.blocking(f).await?.map_err(internal)
    }

    pub(super) async fn write<T: Send + 'static>(
        &self,
        bucket: &str,
        f: impl FnOnce(&Store) -> Result<T, WriteError> + Send + 'static,
    ) -> S3Result<T> {
        self.blocking(f).await?.map_err(|e| write_error(bucket, e))
    }

    /// The directory of `bucket` for a new blob: a bucket has none until
    /// its first object write makes it. A directory made here for a bucket
    /// that is no longer ready (DriverDeleteBucket ran meanwhile) is removed
    /// again, so a write racing a deletion leaves nothing behind.
    pub(super) async fn blob_dir(&self, bucket: &str) -> S3Result<PathBuf> {
        let dir = self.dir(bucket);
        let buckets = blobs::buckets_dir(self.driver.data_dir());
        let target = dir.clone();
        let made = tokio::task::spawn_blocking(move || blobs::make_dir(&target, &buckets))
            .await
            .map_err(internal)?
            .map_err(internal)?;
        if made && let Err(e) = self.ready_bucket(bucket).await {
            let _ = tokio::fs::remove_dir(&dir).await;
            return Err(e);
        }
        Ok(dir)
    }

    pub(super) async fn ready_bucket(&self, bucket: &str) -> S3Result<BucketRecord> {
        let id = bucket.to_owned();
        match self.read(move |s| s.bucket(&id)).await? {
            Some(b) if b.state == BucketState::Ready => Ok(b),
            _ => Err(s3_error!(NoSuchBucket, "bucket {bucket} does not exist")),
        }
    }

    pub(super) async fn find_object(
        &self,
        bucket: &str,
        key: &str,
    ) -> S3Result<Option<ObjectRecord>> {
        let (b, k) = (bucket.to_owned(), key.to_owned());
        self.read(move |s| s.object(&b, &k)).await
    }

    pub(super) async fn object(&self, bucket: &str, key: &str) -> S3Result<ObjectRecord> {
        self.ready_bucket(bucket).await?;
        self.find_object(bucket, key)
            .await?
            .ok_or_else(|| s3_error!(NoSuchKey, "the object {key:?} does not exist"))
    }

    /// Sets the tags of the existing object `key` of `bucket`.
    pub(super) async fn set_object_tags(
        &self,
        bucket: &str,
        key: &str,
        tags: Vec<(String, String)>,
    ) -> S3Result<()> {
        let (b, k) = (bucket.to_owned(), key.to_owned());
        if !self.read(move |s| s.set_object_tags(&b, &k, tags)).await? {
            return Err(s3_error!(NoSuchKey));
        }
        Ok(())
    }

    /// The most bytes a write to `bucket` replacing `replaced` bytes may
    /// add, and an early refusal when `declared` is already too many. The
    /// bucket holds its objects and its pending multipart parts.
    pub(super) fn room(
        &self,
        bucket: &BucketRecord,
        replaced: u64,
        declared: Option<u64>,
    ) -> S3Result<u64> {
        let Some(max) = bucket.params.max_size_bytes else {
            return Ok(u64::MAX);
        };
        let base = bucket
            .used_bytes
            .saturating_add(bucket.pending_bytes)
            .saturating_sub(replaced);
        let room = max.saturating_sub(base);
        if let Some(n) = declared
            && n > room
        {
            return Err(quota_error(&bucket.id, max, base.saturating_add(n)));
        }
        Ok(room)
    }

    /// Streams `body` into a new blob of `bucket`: at most `room` bytes,
    /// and exactly `declared` when the request declared its length.
    pub(super) async fn write_blob<S, E>(
        &self,
        bucket: &BucketRecord,
        body: S,
        room: u64,
        declared: Option<u64>,
        mut hasher: s3s::checksum::ChecksumHasher,
    ) -> S3Result<NewBlob>
    where
        S: futures::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
        E: Into<s3s::StdError>,
    {
        let name = blobs::new_blob_name();
        let path = self.blob_dir(&bucket.id).await?.join(&name);
        let length = blobs::Length {
            limit: room,
            declared,
        };
        match blobs::write(&path, body, length, |chunk| hasher.update(chunk)).await {
            Ok(w) => Ok(NewBlob {
                name,
                size: w.size,
                md5: w.md5,
                checksum: hasher.finalize(),
            }),
            Err(WriteBlobError::TooLarge(_)) => {
                let max = bucket.params.max_size_bytes.unwrap_or(u64::MAX);
                let mut e = quota_error(&bucket.id, max, max.saturating_add(1));
                e.set_message(format!(
                    "bucket {} would exceed its maxSizeBytes quota of {max} bytes",
                    bucket.id
                ));
                Err(e)
            }
            Err(WriteBlobError::Body(e)) => Err(s3_error!(IncompleteBody, "{e}")),
            Err(WriteBlobError::LengthMismatch { declared, .. }) => Err(s3_error!(
                IncompleteBody,
                "You did not provide the number of bytes specified by the Content-Length HTTP header: {declared} bytes were declared (for aws-chunked bodies, in x-amz-decoded-content-length)"
            )),
            Err(WriteBlobError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Err(
                s3_error!(NoSuchBucket, "bucket {} does not exist", bucket.id),
            ),
            Err(WriteBlobError::Io(e)) => Err(internal(e)),
        }
    }

    /// Streams an upload body of `content_length` declared bytes, replacing
    /// `replaced` bytes, into a new blob of `bucket` as [`Self::room`] and
    /// [`Self::write_blob`] allow, computing the checksums `integrity` asks
    /// for, then checks the Content-MD5 and checksums; a blob failing
    /// them is removed.
    pub(super) async fn receive(
        &self,
        bucket: &BucketRecord,
        replaced: u64,
        content_length: Option<i64>,
        body: Option<StreamingBlob>,
        integrity: Integrity,
    ) -> S3Result<NewBlob> {
        let declared = content_length.and_then(|n| u64::try_from(n).ok());
        let room = self.room(bucket, replaced, declared)?;
        let Integrity {
            given,
            algorithm,
            content_md5,
            trailers,
        } = integrity;
        let hasher = checksum_hasher(algorithm.as_ref(), &given)?;
        let body = body.unwrap_or_else(|| {
            StreamingBlob::wrap(futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>())
        });
        let blob = self
            .write_blob(bucket, body, room, declared, hasher)
            .await?;
        let verified = (|| {
            if let Some(md5) = &content_md5 {
                let want = base64_decode(md5)
                    .ok_or_else(|| s3_error!(InvalidDigest, "Content-MD5 is not base64"))?;
                if want != blob.md5 {
                    return Err(s3_error!(BadDigest, "Content-MD5 does not match the data"));
                }
            }
            verify_checksums(given, &blob.checksum, trailers.as_ref())
        })();
        if let Err(e) = verified {
            self.discard(&bucket.id, vec![blob.name]).await;
            return Err(e);
        }
        Ok(blob)
    }

    pub(super) async fn discard(&self, bucket: &str, blobs: Vec<String>) {
        blobs::remove_all(&self.dir(bucket), blobs).await;
    }

    /// Runs the store write `f` that references the new blob `blob` of
    /// `bucket`, then removes the blobs it no longer references, or the new
    /// blob if the write fails.
    pub(super) async fn write_new_blob<T: IntoIterator<Item = String> + Send + 'static>(
        &self,
        bucket: &str,
        blob: &str,
        f: impl FnOnce(&Store) -> Result<T, WriteError> + Send + 'static,
    ) -> S3Result<()> {
        match self.write(bucket, f).await {
            Ok(unreferenced) => {
                self.discard(bucket, unreferenced.into_iter().collect())
                    .await;
                Ok(())
            }
            Err(e) => {
                self.discard(bucket, vec![blob.to_owned()]).await;
                Err(e)
            }
        }
    }

    /// Commits `blob` with `attrs` as `key` in `bucket` (see
    /// [`Self::write_new_blob`]), returning its ETag and modification time.
    pub(super) async fn commit_object(
        &self,
        bucket: &str,
        key: &str,
        blob: &NewBlob,
        attrs: ObjectAttrs,
    ) -> S3Result<(String, i64)> {
        let etag = hex_md5(blob.md5);
        let last_modified_ms = now_ms();
        let rec = ObjectRecord {
            blob: blob.name.clone(),
            size: blob.size,
            etag: etag.clone(),
            last_modified_ms,
            attrs,
        };
        let (b, k) = (bucket.to_owned(), key.to_owned());
        self.write_new_blob(bucket, &blob.name, move |s| s.put_object(&b, &k, &rec))
            .await?;
        Ok((etag, last_modified_ms))
    }

    pub(super) async fn copy_source(
        &self,
        source: &CopySource,
    ) -> S3Result<(String, ObjectRecord)> {
        let CopySource::Bucket {
            bucket,
            key,
            version_id,
        } = source
        else {
            return Err(s3_error!(
                NotImplemented,
                "only bucket/key copy sources are supported"
            ));
        };
        if version_id.is_some() {
            return Err(s3_error!(
                NotImplemented,
                "cosi-driver-local does not keep object versions"
            ));
        }
        let rec = self.object(bucket, key).await?;
        Ok((bucket.to_string(), rec))
    }

    /// Copies `len` bytes from `offset` of a source blob into a new blob of `bucket`.
    pub(super) async fn copy_blob(
        &self,
        src_bucket: &str,
        src: &ObjectRecord,
        bucket: &BucketRecord,
        offset: u64,
        len: u64,
        room: u64,
    ) -> S3Result<NewBlob> {
        let stream = blobs::read(&self.dir(src_bucket).join(&src.blob), offset, len)
            .await
            .map_err(internal)?;
        self.write_blob(
            bucket,
            Box::pin(stream),
            room,
            Some(len),
            Default::default(),
        )
        .await
    }

    /// The ready bucket `bucket` and its upload `upload_id` of `key`.
    pub(super) async fn ready_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> S3Result<(BucketRecord, UploadRecord)> {
        let ready = self.ready_bucket(bucket).await?;
        let (b, u) = (bucket.to_owned(), upload_id.to_owned());
        match self.read(move |s| s.upload(&b, &u)).await? {
            Some(up) if up.key == key => Ok((ready, up)),
            _ => Err(s3_error!(NoSuchUpload)),
        }
    }

    /// The size of part `part_number` of upload `upload_id`, 0 when none
    /// was uploaded: what uploading it again replaces.
    pub(super) async fn part_size(&self, upload_id: &str, part_number: i32) -> S3Result<u64> {
        let (u, n) = (
            upload_id.to_owned(),
            u32::try_from(part_number).unwrap_or(0),
        );
        Ok(self
            .read(move |s| s.part(&u, n))
            .await?
            .map_or(0, |p| p.size))
    }

    pub(super) async fn store_part(
        &self,
        bucket: &str,
        upload_id: &str,
        part_number: i32,
        blob: &NewBlob,
    ) -> S3Result<()> {
        let number = u32::try_from(part_number).unwrap_or(0);
        let rec = PartRecord {
            blob: blob.name.clone(),
            size: blob.size,
            md5_hex: hex_md5(blob.md5),
            last_modified_ms: now_ms(),
        };
        let (b, u) = (bucket.to_owned(), upload_id.to_owned());
        self.write_new_blob(bucket, &blob.name, move |s| {
            s.put_part(&b, &u, number, &rec)
        })
        .await
    }

    /// The page of objects `query` asks for after `after`, with keys shown
    /// as `names` asks.
    pub(super) async fn objects_page(
        &self,
        query: ObjectsQuery<'_>,
        after: Option<String>,
        names: Names,
    ) -> S3Result<ObjectsPage> {
        self.ready_bucket(query.bucket).await?;
        let max = max_keys(query.max_keys);
        let listing = self
            .list_page(
                query.bucket.to_owned(),
                query.prefix.unwrap_or_default().to_owned(),
                query.delimiter.map(str::to_owned),
                after,
                max,
            )
            .await?;
        let is_truncated = listing.truncated;
        let next_marker = listing.next_marker.clone();
        let (contents, prefixes) = split_listing(listing, names)?;
        let count = contents.len() + prefixes.len();
        Ok(ObjectsPage {
            max_keys: i32::try_from(max).unwrap_or(i32::MAX),
            key_count: i32::try_from(count).unwrap_or(i32::MAX),
            is_truncated,
            next_marker,
            contents,
            common_prefixes: (!prefixes.is_empty()).then_some(prefixes),
        })
    }

    pub(super) fn list_page(
        &self,
        bucket: String,
        prefix: String,
        delimiter: Option<String>,
        start_after: Option<String>,
        max_keys: usize,
    ) -> impl Future<Output = S3Result<listing::Listing<ObjectRecord>>> + Send + 'static {
        let store = self.store();
        async move {
            tokio::task::spawn_blocking(move || {
                let query = Query {
                    prefix: &prefix,
                    delimiter: delimiter.as_deref(),
                    start_after: start_after.as_deref(),
                    max_keys,
                };
                listing::list(query, |after, limit| {
                    store
                        .objects_after(&bucket, &prefix, after, limit)
                        .map(|p| p.objects)
                })
            })
            .await
            .map_err(internal)?
            .map_err(internal)
        }
    }
}
