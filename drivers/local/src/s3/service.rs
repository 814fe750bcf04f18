//! The S3 operations served on the embedded endpoint, over the state store
//! (object records) and blob files (object contents). Requests reach these
//! only after signature verification and the grant check.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use s3s::crypto::{Checksum as _, Md5};
use s3s::dto::*;
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};

use super::access::Caller;
use super::encoding::{self, MAX_BUCKET_TAGS, MAX_OBJECT_TAGS, Names, xml_text};
use crate::blobs::{self, WriteBlobError};
use crate::driver::LocalDriver;
use crate::listing::{self, Entry, Query};
use crate::store::{
    BucketRecord, BucketState, ObjectAttrs, ObjectRecord, PartRecord, Store, StoreError,
    UploadRecord, WriteError,
};

/// Smallest size of a multipart part other than the last (as S3).
const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
/// Largest part number (as S3).
const MAX_PART_NUMBER: i32 = 10_000;
/// Default and largest page size of listings.
const MAX_LIST: usize = 1000;
/// Owner shown in ACLs and listings.
const OWNER: &str = "cosi-driver-local";

/// The S3 service backed by the driver's store and blobs.
pub(crate) struct LocalS3 {
    pub(crate) driver: LocalDriver,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn timestamp(ms: i64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

fn internal(e: impl std::fmt::Display) -> S3Error {
    tracing::error!(error = %e, "S3 request failed");
    s3_error!(InternalError, "{e}")
}

fn quota_error(bucket: &str, max: u64, would_hold: u64) -> S3Error {
    let mut e = S3Error::with_message(
        S3ErrorCode::Custom("QuotaExceeded".into()),
        format!(
            "bucket {bucket} would hold {would_hold} bytes, over its maxSizeBytes quota of {max} bytes"
        ),
    );
    e.set_status_code(http::StatusCode::FORBIDDEN);
    e
}

fn write_error(bucket: &str, e: WriteError) -> S3Error {
    match e {
        WriteError::NoSuchBucket => s3_error!(NoSuchBucket, "bucket {bucket} does not exist"),
        WriteError::NoSuchUpload => s3_error!(NoSuchUpload),
        WriteError::Quota { max, would_hold } => quota_error(bucket, max, would_hold),
        WriteError::Store(e) => internal(e),
    }
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn owner() -> Owner {
    Owner {
        display_name: Some(OWNER.to_owned()),
        id: Some(OWNER.to_owned()),
    }
}

fn full_control() -> Grants {
    vec![Grant {
        grantee: Some(Grantee {
            display_name: Some(OWNER.to_owned()),
            email_address: None,
            id: Some(OWNER.to_owned()),
            type_: Type::from_static(Type::CANONICAL_USER),
            uri: None,
        }),
        permission: Some(Permission::from_static(Permission::FULL_CONTROL)),
    }]
}

fn to_tag_set(tags: &[(String, String)]) -> TagSet {
    tags.iter()
        .map(|(k, v)| Tag {
            key: Some(k.clone()),
            value: Some(v.clone()),
        })
        .collect()
}

fn from_tag_set(set: TagSet, max: usize) -> S3Result<Vec<(String, String)>> {
    let tags: Vec<(String, String)> = set
        .into_iter()
        .map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default()))
        .collect();
    encoding::check_tags(&tags, max)?;
    Ok(tags)
}

fn etag_of(rec: &ObjectRecord) -> ETag {
    ETag::Strong(rec.etag.clone())
}

fn hex_md5(md5: [u8; 16]) -> String {
    hex::encode(md5)
}

/// Checks `If-Match` / `If-None-Match` against an object's ETag.
/// `read` selects GET/HEAD semantics (304 Not Modified) over write
/// semantics (412 Precondition Failed).
fn check_conditions(
    current: Option<&ObjectRecord>,
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    read: bool,
) -> S3Result<()> {
    let matches = |c: &ETagCondition| match (c, current) {
        (ETagCondition::Any, Some(_)) => true,
        (ETagCondition::ETag(want), Some(o)) => want.value() == o.etag,
        (_, None) => false,
    };
    if let Some(c) = if_match
        && !matches(c)
    {
        return Err(s3_error!(PreconditionFailed, "If-Match condition failed"));
    }
    if let Some(c) = if_none_match
        && matches(c)
    {
        return Err(if read {
            s3_error!(NotModified)
        } else {
            s3_error!(PreconditionFailed, "If-None-Match condition failed")
        });
    }
    Ok(())
}

/// Attributes given on a write request.
struct AttrsInput {
    content_type: Option<String>,
    content_encoding: Option<String>,
    content_disposition: Option<String>,
    content_language: Option<String>,
    cache_control: Option<String>,
    metadata: Option<Metadata>,
    tagging: Option<String>,
}

impl AttrsInput {
    fn into_attrs(self) -> S3Result<ObjectAttrs> {
        if let Some(m) = &self.metadata {
            encoding::check_metadata(m)?;
        }
        Ok(ObjectAttrs {
            content_type: self.content_type,
            content_encoding: self.content_encoding,
            content_disposition: self.content_disposition,
            content_language: self.content_language,
            cache_control: self.cache_control,
            metadata: self.metadata.unwrap_or_default().into_iter().collect(),
            tags: match self.tagging {
                Some(h) => encoding::parse_tagging_header(&h)?,
                None => Vec::new(),
            },
        })
    }
}

fn user_metadata(m: &BTreeMap<String, String>) -> Option<Metadata> {
    (!m.is_empty()).then(|| {
        m.iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<HashMap<_, _>>()
    })
}

/// Checksums requested on an upload, computed while the body streams.
fn checksum_hasher(
    algorithm: Option<&ChecksumAlgorithm>,
    given: &s3s::dto::Checksum,
) -> S3Result<s3s::checksum::ChecksumHasher> {
    let mut h = s3s::checksum::ChecksumHasher::default();
    if given.checksum_crc32.is_some() {
        h.crc32 = Some(Default::default());
    }
    if given.checksum_crc32c.is_some() {
        h.crc32c = Some(Default::default());
    }
    if given.checksum_sha1.is_some() {
        h.sha1 = Some(Default::default());
    }
    if given.checksum_sha256.is_some() {
        h.sha256 = Some(Default::default());
    }
    if given.checksum_crc64nvme.is_some() {
        h.crc64nvme = Some(Default::default());
    }
    if let Some(alg) = algorithm {
        match alg.as_str() {
            ChecksumAlgorithm::CRC32 => h.crc32 = Some(Default::default()),
            ChecksumAlgorithm::CRC32C => h.crc32c = Some(Default::default()),
            ChecksumAlgorithm::SHA1 => h.sha1 = Some(Default::default()),
            ChecksumAlgorithm::SHA256 => h.sha256 = Some(Default::default()),
            ChecksumAlgorithm::CRC64NVME => h.crc64nvme = Some(Default::default()),
            _ => return Err(s3_error!(InvalidArgument, "unsupported checksum algorithm")),
        }
    }
    Ok(h)
}

/// Fills in checksums sent as trailers, then compares every given
/// checksum with the computed one.
fn verify_checksums(
    mut given: s3s::dto::Checksum,
    computed: &s3s::dto::Checksum,
    trailers: Option<&s3s::TrailingHeaders>,
) -> S3Result<()> {
    if let Some(headers) = trailers.and_then(s3s::TrailingHeaders::take) {
        let get = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        given.checksum_crc32 = given.checksum_crc32.or_else(|| get("x-amz-checksum-crc32"));
        given.checksum_crc32c = given
            .checksum_crc32c
            .or_else(|| get("x-amz-checksum-crc32c"));
        given.checksum_sha1 = given.checksum_sha1.or_else(|| get("x-amz-checksum-sha1"));
        given.checksum_sha256 = given
            .checksum_sha256
            .or_else(|| get("x-amz-checksum-sha256"));
        given.checksum_crc64nvme = given
            .checksum_crc64nvme
            .or_else(|| get("x-amz-checksum-crc64nvme"));
    }
    let pairs = [
        ("CRC32", &given.checksum_crc32, &computed.checksum_crc32),
        ("CRC32C", &given.checksum_crc32c, &computed.checksum_crc32c),
        ("SHA1", &given.checksum_sha1, &computed.checksum_sha1),
        ("SHA256", &given.checksum_sha256, &computed.checksum_sha256),
        (
            "CRC64NVME",
            &given.checksum_crc64nvme,
            &computed.checksum_crc64nvme,
        ),
    ];
    for (name, want, got) in pairs {
        if let Some(want) = want
            && Some(want) != got.as_ref()
        {
            return Err(s3_error!(
                BadDigest,
                "the {name} checksum does not match the data"
            ));
        }
    }
    Ok(())
}

/// What a body write produced, with the new blob's name.
struct NewBlob {
    name: String,
    size: u64,
    md5: [u8; 16],
    checksum: s3s::dto::Checksum,
}

impl LocalS3 {
    fn store(&self) -> Store {
        self.driver.inner.store.clone()
    }

    fn dir(&self, bucket: &str) -> PathBuf {
        self.driver.bucket_dir(bucket)
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> S3Result<T> {
        let store = self.store();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(internal)?
            .map_err(internal)
    }

    async fn write<T: Send + 'static>(
        &self,
        bucket: &str,
        f: impl FnOnce(&Store) -> Result<T, WriteError> + Send + 'static,
    ) -> S3Result<T> {
        let store = self.store();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(internal)?
            .map_err(|e| write_error(bucket, e))
    }

    /// The directory of `bucket` for a new blob: a bucket has none until
    /// its first object write makes it. A directory made here for a bucket
    /// that is no longer ready (DriverDeleteBucket ran meanwhile) is removed
    /// again, so a write racing a deletion leaves nothing behind.
    async fn blob_dir(&self, bucket: &str) -> S3Result<PathBuf> {
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

    async fn ready_bucket(&self, bucket: &str) -> S3Result<BucketRecord> {
        let id = bucket.to_owned();
        match self.read(move |s| s.bucket(&id)).await? {
            Some(b) if b.state == BucketState::Ready => Ok(b),
            _ => Err(s3_error!(NoSuchBucket, "bucket {bucket} does not exist")),
        }
    }

    async fn find_object(&self, bucket: &str, key: &str) -> S3Result<Option<ObjectRecord>> {
        let (b, k) = (bucket.to_owned(), key.to_owned());
        self.read(move |s| s.object(&b, &k)).await
    }

    async fn object(&self, bucket: &str, key: &str) -> S3Result<ObjectRecord> {
        self.ready_bucket(bucket).await?;
        self.find_object(bucket, key)
            .await?
            .ok_or_else(|| s3_error!(NoSuchKey, "the object {key:?} does not exist"))
    }

    /// The most bytes a write to `bucket` replacing `replaced` bytes may
    /// add, and an early refusal when `declared` is already too many.
    fn room(&self, bucket: &BucketRecord, replaced: u64, declared: Option<u64>) -> S3Result<u64> {
        let Some(max) = bucket.params.max_size_bytes else {
            return Ok(u64::MAX);
        };
        let base = bucket.used_bytes.saturating_sub(replaced);
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
    async fn write_blob<S, E>(
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

    async fn discard(&self, bucket: &str, blobs: Vec<String>) {
        blobs::remove_all(&self.dir(bucket), blobs).await;
    }

    /// Commits `rec` as `key` in `bucket`, removing the replaced blob, or
    /// removes the new blob if the commit fails.
    async fn commit_object(&self, bucket: &str, key: &str, rec: ObjectRecord) -> S3Result<()> {
        let blob = rec.blob.clone();
        let (b, k) = (bucket.to_owned(), key.to_owned());
        match self
            .write(bucket, move |s| s.put_object(&b, &k, &rec))
            .await
        {
            Ok(old) => {
                self.discard(bucket, old.into_iter().collect()).await;
                Ok(())
            }
            Err(e) => {
                self.discard(bucket, vec![blob]).await;
                Err(e)
            }
        }
    }

    async fn copy_source(&self, source: &CopySource) -> S3Result<(String, ObjectRecord)> {
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
    async fn copy_blob(
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

    async fn upload(&self, bucket: &str, key: &str, upload_id: &str) -> S3Result<UploadRecord> {
        let (b, u) = (bucket.to_owned(), upload_id.to_owned());
        match self.read(move |s| s.upload(&b, &u)).await? {
            Some(up) if up.key == key => Ok(up),
            _ => Err(s3_error!(NoSuchUpload)),
        }
    }

    async fn store_part(
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
        match self
            .write(bucket, move |s| s.put_part(&b, &u, number, &rec))
            .await
        {
            Ok(old) => {
                self.discard(bucket, old.into_iter().collect()).await;
                Ok(())
            }
            Err(e) => {
                self.discard(bucket, vec![blob.name.clone()]).await;
                Err(e)
            }
        }
    }

    fn list_page(
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

fn part_number_ok(n: i32) -> S3Result<()> {
    if (1..=MAX_PART_NUMBER).contains(&n) {
        Ok(())
    } else {
        Err(s3_error!(
            InvalidArgument,
            "part numbers must be between 1 and {MAX_PART_NUMBER}"
        ))
    }
}

/// Parses `bytes=first-last` of UploadPartCopy against a source size.
fn copy_range(range: Option<&str>, size: u64) -> S3Result<(u64, u64)> {
    let Some(range) = range else {
        return Ok((0, size));
    };
    let bad = || s3_error!(InvalidRange, "the copy source range is not satisfiable");
    let (first, last) = range
        .strip_prefix("bytes=")
        .and_then(|r| r.split_once('-'))
        .ok_or_else(|| {
            s3_error!(
                InvalidArgument,
                "x-amz-copy-source-range must be bytes=first-last"
            )
        })?;
    let first: u64 = first.parse().map_err(|_| bad())?;
    let last: u64 = last.parse().map_err(|_| bad())?;
    if first > last || last >= size {
        return Err(bad());
    }
    Ok((first, last - first + 1))
}

fn object_entry(key: String, rec: &ObjectRecord, names: Names) -> S3Result<Object> {
    Ok(Object {
        key: Some(names.show(key)?),
        e_tag: Some(etag_of(rec)),
        last_modified: Some(timestamp(rec.last_modified_ms)),
        size: Some(i64_of(rec.size)),
        storage_class: Some(ObjectStorageClass::from_static(
            ObjectStorageClass::STANDARD,
        )),
        owner: Some(owner()),
        ..Default::default()
    })
}

/// Splits a listing into S3 contents and common prefixes.
fn split_listing(
    l: listing::Listing<ObjectRecord>,
    names: Names,
) -> S3Result<(Vec<Object>, Vec<CommonPrefix>)> {
    let mut contents = Vec::new();
    let mut prefixes = Vec::new();
    for e in l.entries {
        match e {
            Entry::Object(k, rec) => contents.push(object_entry(k, &rec, names)?),
            Entry::Prefix(p) => prefixes.push(CommonPrefix {
                prefix: Some(names.show(p)?),
            }),
        }
    }
    Ok((contents, prefixes))
}

fn max_keys(n: Option<i32>) -> usize {
    n.map_or(MAX_LIST, |n| usize::try_from(n).unwrap_or(0).min(MAX_LIST))
}

#[async_trait::async_trait]
impl S3 for LocalS3 {
    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        let caller = req
            .extensions
            .get::<Caller>()
            .ok_or_else(|| s3_error!(AccessDenied))?;
        let granted: Vec<String> = caller.0.grants.keys().cloned().collect();
        let records = self.read(|s| s.buckets()).await?;
        let buckets = records
            .into_iter()
            .filter(|b| b.state == BucketState::Ready && granted.contains(&b.id))
            .map(|b| Bucket {
                name: Some(b.id),
                creation_date: Some(timestamp(b.created_ms)),
                bucket_region: Some(self.driver.inner.region.clone()),
            })
            .collect();
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            owner: Some(owner()),
            ..Default::default()
        }))
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.ready_bucket(&req.input.bucket).await?;
        Ok(S3Response::new(HeadBucketOutput {
            bucket_region: Some(self.driver.inner.region.clone()),
            ..Default::default()
        }))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.ready_bucket(&req.input.bucket).await?;
        let region = &self.driver.inner.region;
        // As S3: us-east-1 is reported as an empty location constraint.
        let location_constraint =
            (region != "us-east-1").then(|| BucketLocationConstraint::from(region.clone()));
        Ok(S3Response::new(GetBucketLocationOutput {
            location_constraint,
        }))
    }

    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        self.ready_bucket(&req.input.bucket).await?;
        Ok(S3Response::new(GetBucketVersioningOutput::default()))
    }

    async fn get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        self.ready_bucket(&req.input.bucket).await?;
        Ok(S3Response::new(GetBucketAclOutput {
            grants: Some(full_control()),
            owner: Some(owner()),
        }))
    }

    async fn get_bucket_policy(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        self.ready_bucket(&req.input.bucket).await?;
        Err(s3_error!(
            NoSuchBucketPolicy,
            "buckets of cosi-driver-local have no policy: access is granted through COSI BucketAccesses"
        ))
    }

    async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        let b = self.ready_bucket(&req.input.bucket).await?;
        if b.tags.is_empty() {
            return Err(s3_error!(NoSuchTagSet, "the bucket has no tags"));
        }
        Ok(S3Response::new(GetBucketTaggingOutput {
            tag_set: to_tag_set(&b.tags),
        }))
    }

    async fn put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        let input = req.input;
        self.ready_bucket(&input.bucket).await?;
        let tags = from_tag_set(input.tagging.tag_set, MAX_BUCKET_TAGS)?;
        let b = input.bucket.clone();
        if !self.read(move |s| s.set_bucket_tags(&b, tags)).await? {
            return Err(s3_error!(NoSuchBucket));
        }
        Ok(S3Response::new(PutBucketTaggingOutput::default()))
    }

    async fn delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        self.ready_bucket(&req.input.bucket).await?;
        let b = req.input.bucket.clone();
        self.read(move |s| s.set_bucket_tags(&b, Vec::new()))
            .await?;
        Ok(S3Response::new(DeleteBucketTaggingOutput::default()))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let trailers = req.trailing_headers;
        let input = req.input;
        let bucket = self.ready_bucket(&input.bucket).await?;
        let key = input.key;
        let existing = self.find_object(&bucket.id, &key).await?;
        check_conditions(
            existing.as_ref(),
            input.if_match.as_ref(),
            input.if_none_match.as_ref(),
            false,
        )?;
        let attrs = AttrsInput {
            content_type: input.content_type,
            content_encoding: input.content_encoding,
            content_disposition: input.content_disposition,
            content_language: input.content_language,
            cache_control: input.cache_control,
            metadata: input.metadata,
            tagging: input.tagging,
        }
        .into_attrs()?;
        let declared = input.content_length.and_then(|n| u64::try_from(n).ok());
        let room = self.room(&bucket, existing.as_ref().map_or(0, |o| o.size), declared)?;
        let given = s3s::dto::Checksum {
            checksum_crc32: input.checksum_crc32,
            checksum_crc32c: input.checksum_crc32c,
            checksum_sha1: input.checksum_sha1,
            checksum_sha256: input.checksum_sha256,
            checksum_crc64nvme: input.checksum_crc64nvme,
            ..Default::default()
        };
        let hasher = checksum_hasher(input.checksum_algorithm.as_ref(), &given)?;
        let body = input.body.unwrap_or_else(|| {
            StreamingBlob::wrap(futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>())
        });
        let blob = self
            .write_blob(&bucket, body, room, declared, hasher)
            .await?;
        let verified = (|| {
            if let Some(md5) = &input.content_md5 {
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
        let etag = hex_md5(blob.md5);
        let rec = ObjectRecord {
            blob: blob.name.clone(),
            size: blob.size,
            etag: etag.clone(),
            last_modified_ms: now_ms(),
            attrs,
        };
        self.commit_object(&bucket.id, &key, rec).await?;
        let c = blob.checksum;
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(ETag::Strong(etag)),
            checksum_crc32: c.checksum_crc32,
            checksum_crc32c: c.checksum_crc32c,
            checksum_sha1: c.checksum_sha1,
            checksum_sha256: c.checksum_sha256,
            checksum_crc64nvme: c.checksum_crc64nvme,
            ..Default::default()
        }))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let input = req.input;
        if input.if_modified_since.is_some() || input.if_unmodified_since.is_some() {
            return Err(s3_error!(
                NotImplemented,
                "date conditions are not supported; use If-Match / If-None-Match"
            ));
        }
        if input.part_number.is_some() {
            return Err(s3_error!(
                NotImplemented,
                "partNumber reads are not supported"
            ));
        }
        // An overwrite may remove the blob between reading the record and
        // opening the file: read the record again once.
        let mut attempt = 0;
        let (rec, stream, len, content_range) = loop {
            attempt += 1;
            let rec = self.object(&input.bucket, &input.key).await?;
            check_conditions(
                Some(&rec),
                input.if_match.as_ref(),
                input.if_none_match.as_ref(),
                true,
            )?;
            let (offset, len, content_range) = match &input.range {
                None => (0, rec.size, None),
                Some(r) => {
                    let range = r.check(rec.size).map_err(|_| {
                        s3_error!(InvalidRange, "the requested range is not satisfiable")
                    })?;
                    let len = range.end - range.start;
                    let cr = format!("bytes {}-{}/{}", range.start, range.end - 1, rec.size);
                    (range.start, len, Some(cr))
                }
            };
            match blobs::read(&self.dir(&input.bucket).join(&rec.blob), offset, len).await {
                Ok(stream) => break (rec, stream, len, content_range),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt < 2 => continue,
                Err(e) => return Err(internal(e)),
            }
        };
        let a = &rec.attrs;
        Ok(S3Response::new(GetObjectOutput {
            body: Some(StreamingBlob::wrap(stream)),
            content_length: Some(i64_of(len)),
            content_range,
            accept_ranges: Some("bytes".to_owned()),
            e_tag: Some(etag_of(&rec)),
            last_modified: Some(timestamp(rec.last_modified_ms)),
            content_type: a.content_type.clone(),
            content_encoding: a.content_encoding.clone(),
            content_disposition: a.content_disposition.clone(),
            content_language: a.content_language.clone(),
            cache_control: a.cache_control.clone(),
            metadata: user_metadata(&a.metadata),
            tag_count: (!a.tags.is_empty())
                .then(|| i32::try_from(a.tags.len()).unwrap_or(i32::MAX)),
            ..Default::default()
        }))
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let input = req.input;
        if input.if_modified_since.is_some() || input.if_unmodified_since.is_some() {
            return Err(s3_error!(
                NotImplemented,
                "date conditions are not supported; use If-Match / If-None-Match"
            ));
        }
        let rec = self.object(&input.bucket, &input.key).await?;
        check_conditions(
            Some(&rec),
            input.if_match.as_ref(),
            input.if_none_match.as_ref(),
            true,
        )?;
        let a = &rec.attrs;
        Ok(S3Response::new(HeadObjectOutput {
            content_length: Some(i64_of(rec.size)),
            accept_ranges: Some("bytes".to_owned()),
            e_tag: Some(etag_of(&rec)),
            last_modified: Some(timestamp(rec.last_modified_ms)),
            content_type: a.content_type.clone(),
            content_encoding: a.content_encoding.clone(),
            content_disposition: a.content_disposition.clone(),
            content_language: a.content_language.clone(),
            cache_control: a.cache_control.clone(),
            metadata: user_metadata(&a.metadata),
            ..Default::default()
        }))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let input = req.input;
        self.ready_bucket(&input.bucket).await?;
        let (b, k) = (input.bucket.clone(), input.key.clone());
        let old = self.read(move |s| s.delete_object(&b, &k)).await?;
        self.discard(&input.bucket, old.into_iter().collect()).await;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let input = req.input;
        self.ready_bucket(&input.bucket).await?;
        if input.delete.objects.len() > MAX_LIST {
            return Err(s3_error!(
                MalformedXML,
                "at most {MAX_LIST} keys may be deleted at once"
            ));
        }
        let quiet = input.delete.quiet.unwrap_or(false);
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        for obj in input.delete.objects {
            let (b, k) = (input.bucket.clone(), obj.key.clone());
            match self.read(move |s| s.delete_object(&b, &k)).await {
                Ok(old) => {
                    self.discard(&input.bucket, old.into_iter().collect()).await;
                    if !quiet {
                        deleted.push(DeletedObject {
                            key: xml_text(obj.key),
                            ..Default::default()
                        });
                    }
                }
                Err(e) => errors.push(s3s::dto::Error {
                    code: Some(e.code().as_str().to_owned()),
                    key: xml_text(obj.key),
                    message: e.message().map(str::to_owned),
                    version_id: None,
                }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        }))
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let input = req.input;
        let (src_bucket, src) = self.copy_source(&input.copy_source).await?;
        let bucket = self.ready_bucket(&input.bucket).await?;
        let existing = self.find_object(&bucket.id, &input.key).await?;
        let replace_meta = input
            .metadata_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        let replace_tags = input
            .tagging_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == TaggingDirective::REPLACE);
        let mut attrs = if replace_meta {
            AttrsInput {
                content_type: input.content_type,
                content_encoding: input.content_encoding,
                content_disposition: input.content_disposition,
                content_language: input.content_language,
                cache_control: input.cache_control,
                metadata: input.metadata,
                tagging: None,
            }
            .into_attrs()?
        } else {
            src.attrs.clone()
        };
        attrs.tags = match (replace_tags, input.tagging) {
            (true, Some(h)) => encoding::parse_tagging_header(&h)?,
            (true, None) => Vec::new(),
            (false, _) => src.attrs.tags.clone(),
        };
        let room = self.room(
            &bucket,
            existing.as_ref().map_or(0, |o| o.size),
            Some(src.size),
        )?;
        let blob = self
            .copy_blob(&src_bucket, &src, &bucket, 0, src.size, room)
            .await?;
        let etag = hex_md5(blob.md5);
        let last_modified_ms = now_ms();
        let rec = ObjectRecord {
            blob: blob.name,
            size: blob.size,
            etag: etag.clone(),
            last_modified_ms,
            attrs,
        };
        self.commit_object(&bucket.id, &input.key, rec).await?;
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: Some(ETag::Strong(etag)),
                last_modified: Some(timestamp(last_modified_ms)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let input = req.input;
        let names = Names::requested(input.encoding_type.as_ref())?;
        let after = match &input.continuation_token {
            Some(token) => Some(encoding::resume_after(token)?),
            None => input.start_after.clone(),
        };
        self.ready_bucket(&input.bucket).await?;
        let max = max_keys(input.max_keys);
        let listing = self
            .list_page(
                input.bucket.clone(),
                input.prefix.clone().unwrap_or_default(),
                input.delimiter.clone(),
                after,
                max,
            )
            .await?;
        let truncated = listing.truncated;
        let next = listing
            .next_marker
            .as_deref()
            .map(encoding::continuation_token);
        let (contents, prefixes) = split_listing(listing, names)?;
        let count = contents.len() + prefixes.len();
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: names.show_opt(input.prefix)?,
            delimiter: names.show_opt(input.delimiter)?,
            encoding_type: input.encoding_type,
            max_keys: Some(i32::try_from(max).unwrap_or(i32::MAX)),
            key_count: Some(i32::try_from(count).unwrap_or(i32::MAX)),
            is_truncated: Some(truncated),
            // Checked by resume_after: only base64url characters.
            continuation_token: input.continuation_token,
            next_continuation_token: next,
            start_after: names.show_opt(input.start_after)?,
            contents: Some(contents),
            common_prefixes: (!prefixes.is_empty()).then_some(prefixes),
            ..Default::default()
        }))
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let input = req.input;
        let names = Names::requested(input.encoding_type.as_ref())?;
        self.ready_bucket(&input.bucket).await?;
        let max = max_keys(input.max_keys);
        let listing = self
            .list_page(
                input.bucket.clone(),
                input.prefix.clone().unwrap_or_default(),
                input.delimiter.clone(),
                input.marker.clone(),
                max,
            )
            .await?;
        let truncated = listing.truncated;
        let next = listing.next_marker.clone();
        let (contents, prefixes) = split_listing(listing, names)?;
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(input.bucket),
            prefix: names.show_opt(input.prefix)?,
            marker: names.show_opt(input.marker)?,
            delimiter: names.show_opt(input.delimiter)?,
            encoding_type: input.encoding_type,
            max_keys: Some(i32::try_from(max).unwrap_or(i32::MAX)),
            is_truncated: Some(truncated),
            next_marker: names.show_opt(next)?,
            contents: Some(contents),
            common_prefixes: (!prefixes.is_empty()).then_some(prefixes),
            ..Default::default()
        }))
    }

    async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        let rec = self.object(&req.input.bucket, &req.input.key).await?;
        Ok(S3Response::new(GetObjectTaggingOutput {
            tag_set: to_tag_set(&rec.attrs.tags),
            version_id: None,
        }))
    }

    async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        let input = req.input;
        self.object(&input.bucket, &input.key).await?;
        let tags = from_tag_set(input.tagging.tag_set, MAX_OBJECT_TAGS)?;
        let (b, k) = (input.bucket.clone(), input.key.clone());
        if !self.read(move |s| s.set_object_tags(&b, &k, tags)).await? {
            return Err(s3_error!(NoSuchKey));
        }
        Ok(S3Response::new(PutObjectTaggingOutput::default()))
    }

    async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        let input = req.input;
        self.object(&input.bucket, &input.key).await?;
        let (b, k) = (input.bucket.clone(), input.key.clone());
        if !self
            .read(move |s| s.set_object_tags(&b, &k, Vec::new()))
            .await?
        {
            return Err(s3_error!(NoSuchKey));
        }
        Ok(S3Response::new(DeleteObjectTaggingOutput::default()))
    }

    async fn get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        self.object(&req.input.bucket, &req.input.key).await?;
        Ok(S3Response::new(GetObjectAclOutput {
            grants: Some(full_control()),
            owner: Some(owner()),
            ..Default::default()
        }))
    }

    async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        let rec = self.object(&req.input.bucket, &req.input.key).await?;
        Ok(S3Response::new(GetObjectAttributesOutput {
            e_tag: Some(etag_of(&rec)),
            last_modified: Some(timestamp(rec.last_modified_ms)),
            object_size: Some(i64_of(rec.size)),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            ..Default::default()
        }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let account_id = req
            .extensions
            .get::<Caller>()
            .map(|c| c.0.id.clone())
            .unwrap_or_default();
        let input = req.input;
        let bucket = self.ready_bucket(&input.bucket).await?;
        let attrs = AttrsInput {
            content_type: input.content_type,
            content_encoding: input.content_encoding,
            content_disposition: input.content_disposition,
            content_language: input.content_language,
            cache_control: input.cache_control,
            metadata: input.metadata,
            tagging: input.tagging,
        }
        .into_attrs()?;
        let upload_id = uuid::Uuid::new_v4().simple().to_string();
        let rec = UploadRecord {
            key: input.key.clone(),
            account_id,
            initiated_ms: now_ms(),
            attrs,
        };
        let (b, u) = (bucket.id.clone(), upload_id.clone());
        self.write(&bucket.id, move |s| s.create_upload(&b, &u, &rec))
            .await?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: xml_text(input.key),
            upload_id: Some(upload_id),
            ..Default::default()
        }))
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let trailers = req.trailing_headers;
        let input = req.input;
        part_number_ok(input.part_number)?;
        let bucket = self.ready_bucket(&input.bucket).await?;
        self.upload(&bucket.id, &input.key, &input.upload_id)
            .await?;
        let declared = input.content_length.and_then(|n| u64::try_from(n).ok());
        let room = self.room(&bucket, 0, declared)?;
        let given = s3s::dto::Checksum {
            checksum_crc32: input.checksum_crc32,
            checksum_crc32c: input.checksum_crc32c,
            checksum_sha1: input.checksum_sha1,
            checksum_sha256: input.checksum_sha256,
            checksum_crc64nvme: input.checksum_crc64nvme,
            ..Default::default()
        };
        let hasher = checksum_hasher(input.checksum_algorithm.as_ref(), &given)?;
        let body = input.body.unwrap_or_else(|| {
            StreamingBlob::wrap(futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>())
        });
        let blob = self
            .write_blob(&bucket, body, room, declared, hasher)
            .await?;
        if let Err(e) = verify_checksums(given, &blob.checksum, trailers.as_ref()) {
            self.discard(&bucket.id, vec![blob.name]).await;
            return Err(e);
        }
        self.store_part(&bucket.id, &input.upload_id, input.part_number, &blob)
            .await?;
        let c = blob.checksum;
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(ETag::Strong(hex_md5(blob.md5))),
            checksum_crc32: c.checksum_crc32,
            checksum_crc32c: c.checksum_crc32c,
            checksum_sha1: c.checksum_sha1,
            checksum_sha256: c.checksum_sha256,
            checksum_crc64nvme: c.checksum_crc64nvme,
            ..Default::default()
        }))
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let input = req.input;
        part_number_ok(input.part_number)?;
        let (src_bucket, src) = self.copy_source(&input.copy_source).await?;
        let bucket = self.ready_bucket(&input.bucket).await?;
        self.upload(&bucket.id, &input.key, &input.upload_id)
            .await?;
        let (offset, len) = copy_range(input.copy_source_range.as_deref(), src.size)?;
        let room = self.room(&bucket, 0, Some(len))?;
        let blob = self
            .copy_blob(&src_bucket, &src, &bucket, offset, len, room)
            .await?;
        self.store_part(&bucket.id, &input.upload_id, input.part_number, &blob)
            .await?;
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(ETag::Strong(hex_md5(blob.md5))),
                last_modified: Some(timestamp(now_ms())),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let input = req.input;
        let bucket = self.ready_bucket(&input.bucket).await?;
        let upload = self
            .upload(&bucket.id, &input.key, &input.upload_id)
            .await?;
        let existing = self.find_object(&bucket.id, &input.key).await?;
        check_conditions(
            existing.as_ref(),
            input.if_match.as_ref(),
            input.if_none_match.as_ref(),
            false,
        )?;
        let requested = input
            .multipart_upload
            .and_then(|m| m.parts)
            .unwrap_or_default();
        if requested.is_empty() {
            return Err(s3_error!(
                InvalidRequest,
                "you must specify at least one part"
            ));
        }
        let u = input.upload_id.clone();
        let stored: BTreeMap<u32, PartRecord> =
            self.read(move |s| s.parts(&u)).await?.into_iter().collect();
        let mut chosen = Vec::with_capacity(requested.len());
        let mut previous = 0i32;
        for (i, p) in requested.iter().enumerate() {
            let n = p
                .part_number
                .ok_or_else(|| s3_error!(InvalidPart, "a part has no part number"))?;
            if n <= previous {
                return Err(s3_error!(
                    InvalidPartOrder,
                    "parts must be listed in ascending order"
                ));
            }
            previous = n;
            let rec = stored
                .get(&u32::try_from(n).unwrap_or(0))
                .ok_or_else(|| s3_error!(InvalidPart, "part {n} was not uploaded"))?;
            if let Some(etag) = &p.e_tag
                && etag.value() != rec.md5_hex
            {
                return Err(s3_error!(
                    InvalidPart,
                    "the ETag of part {n} does not match"
                ));
            }
            if i + 1 < requested.len() && rec.size < MIN_PART_SIZE {
                return Err(s3_error!(
                    EntityTooSmall,
                    "part {n} is smaller than 5 MiB and is not the last part"
                ));
            }
            chosen.push(rec.clone());
        }
        let total: u64 = chosen.iter().map(|p| p.size).sum();
        self.room(
            &bucket,
            existing.as_ref().map_or(0, |o| o.size),
            Some(total),
        )?;

        // Concatenate the parts into a new blob.
        let name = blobs::new_blob_name();
        let dir = self.blob_dir(&bucket.id).await?;
        let path = dir.join(&name);
        let written: std::io::Result<()> = async {
            let mut file = blobs::create(&path).await?;
            for p in &chosen {
                blobs::append(&mut file, &dir.join(&p.blob), |_| {}).await?;
            }
            tokio::io::AsyncWriteExt::flush(&mut file).await?;
            file.sync_all().await
        }
        .await;
        if let Err(e) = written {
            self.discard(&bucket.id, vec![name]).await;
            return Err(internal(e));
        }
        let mut etag_md5 = Md5::new();
        for p in &chosen {
            let raw = hex::decode(&p.md5_hex).map_err(internal)?;
            etag_md5.update(&raw);
        }
        let etag = format!("{}-{}", hex_md5(etag_md5.finalize()), chosen.len());
        let rec = ObjectRecord {
            blob: name.clone(),
            size: total,
            etag: etag.clone(),
            last_modified_ms: now_ms(),
            attrs: upload.attrs,
        };
        let (b, u) = (bucket.id.clone(), input.upload_id.clone());
        match self
            .write(&bucket.id, move |s| s.finish_upload(&b, &u, Some(&rec)))
            .await
        {
            Ok(unreferenced) => self.discard(&bucket.id, unreferenced).await,
            Err(e) => {
                self.discard(&bucket.id, vec![name]).await;
                return Err(e);
            }
        }
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: xml_text(input.key),
            e_tag: Some(ETag::Strong(etag)),
            ..Default::default()
        }))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let input = req.input;
        self.ready_bucket(&input.bucket).await?;
        self.upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        let (b, u) = (input.bucket.clone(), input.upload_id.clone());
        let unreferenced = self
            .write(&input.bucket, move |s| s.finish_upload(&b, &u, None))
            .await?;
        self.discard(&input.bucket, unreferenced).await;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let input = req.input;
        self.ready_bucket(&input.bucket).await?;
        self.upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        let u = input.upload_id.clone();
        let parts = self.read(move |s| s.parts(&u)).await?;
        let marker = input
            .part_number_marker
            .and_then(|m| u32::try_from(m).ok())
            .unwrap_or(0);
        let max = input
            .max_parts
            .map_or(MAX_LIST, |m| usize::try_from(m).unwrap_or(0).min(MAX_LIST));
        let after: Vec<(u32, PartRecord)> =
            parts.into_iter().filter(|(n, _)| *n > marker).collect();
        let truncated = after.len() > max;
        let page: Vec<(u32, PartRecord)> = after.into_iter().take(max).collect();
        let next = page
            .last()
            .and_then(|(n, _)| i32::try_from(*n).ok())
            .filter(|_| truncated);
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: xml_text(input.key),
            upload_id: Some(input.upload_id),
            is_truncated: Some(truncated),
            next_part_number_marker: next,
            max_parts: Some(i32::try_from(max).unwrap_or(i32::MAX)),
            parts: Some(
                page.into_iter()
                    .map(|(n, p)| Part {
                        part_number: Some(i32::try_from(n).unwrap_or(i32::MAX)),
                        e_tag: Some(ETag::Strong(p.md5_hex)),
                        size: Some(i64_of(p.size)),
                        last_modified: Some(timestamp(p.last_modified_ms)),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }))
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let input = req.input;
        let names = Names::requested(input.encoding_type.as_ref())?;
        self.ready_bucket(&input.bucket).await?;
        let b = input.bucket.clone();
        let mut uploads = self.read(move |s| s.uploads(&b)).await?;
        let prefix = input.prefix.clone().unwrap_or_default();
        uploads.retain(|(_, u)| u.key.starts_with(&prefix));
        uploads.sort_by(|(ia, a), (ib, b)| {
            (&a.key, a.initiated_ms, ia).cmp(&(&b.key, b.initiated_ms, ib))
        });
        let list = uploads
            .into_iter()
            .map(|(id, u)| {
                Ok(MultipartUpload {
                    key: Some(names.show(u.key)?),
                    upload_id: Some(id),
                    initiated: Some(timestamp(u.initiated_ms)),
                    owner: Some(owner()),
                    storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                    ..Default::default()
                })
            })
            .collect::<S3Result<Vec<_>>>()?;
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: names.show_opt(input.prefix)?,
            encoding_type: input.encoding_type,
            is_truncated: Some(false),
            uploads: Some(list),
            ..Default::default()
        }))
    }
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(etag: &str) -> ObjectRecord {
        ObjectRecord {
            blob: "b".into(),
            size: 1,
            etag: etag.into(),
            last_modified_ms: 0,
            attrs: ObjectAttrs::default(),
        }
    }

    #[test]
    fn etag_conditions_follow_http_semantics() {
        let o = rec("abc");
        let tag = |s: &str| ETagCondition::ETag(ETag::Strong(s.into()));
        assert!(check_conditions(Some(&o), Some(&tag("abc")), None, true).is_ok());
        let e = check_conditions(Some(&o), Some(&tag("zzz")), None, true).unwrap_err();
        assert_eq!(*e.code(), S3ErrorCode::PreconditionFailed);
        let e = check_conditions(Some(&o), None, Some(&tag("abc")), true).unwrap_err();
        assert_eq!(*e.code(), S3ErrorCode::NotModified);
        // Create-only writes: If-None-Match: * fails when the object exists.
        let e = check_conditions(Some(&o), None, Some(&ETagCondition::Any), false).unwrap_err();
        assert_eq!(*e.code(), S3ErrorCode::PreconditionFailed);
        assert!(check_conditions(None, None, Some(&ETagCondition::Any), false).is_ok());
    }

    #[test]
    fn copy_ranges_are_inclusive_and_bounded() {
        assert_eq!(copy_range(None, 10).unwrap(), (0, 10));
        assert_eq!(copy_range(Some("bytes=2-4"), 10).unwrap(), (2, 3));
        assert!(copy_range(Some("bytes=5-10"), 10).is_err());
        assert!(copy_range(Some("bytes=4-2"), 10).is_err());
        assert!(copy_range(Some("2-4"), 10).is_err());
    }

    #[test]
    fn base64_decodes_content_md5() {
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("1B2M2Y8AsgTpgAmY7PhCfg==").unwrap().len(), 16);
        assert!(base64_decode("!!").is_none());
    }

    #[test]
    fn quota_errors_are_403_quota_exceeded() {
        let e = quota_error("b", 10, 11);
        assert_eq!(e.code().as_str(), "QuotaExceeded");
        assert_eq!(e.status_code(), Some(http::StatusCode::FORBIDDEN));
        assert!(
            e.message()
                .unwrap()
                .contains("maxSizeBytes quota of 10 bytes")
        );
    }
}
