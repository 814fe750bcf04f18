//! S3 bucket operations that read the same on every S3 store.

use std::fmt;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::operation::delete_bucket::DeleteBucketError;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};

use crate::errors::{BackendError, Dialect, Error, FromSdk};

/// Upper bound on list-and-delete rounds when emptying a bucket; each
/// round removes up to 1000 entries, so one call empties a million and the
/// sidecar's retry continues where it stopped.
pub const MAX_PURGE_ROUNDS: usize = 1000;

/// How a bucket is named as the target of a failed operation.
pub fn target(bucket: &str) -> String {
    format!("bucket {bucket:?}")
}

/// Reads how S3 DeleteBucket on `bucket` ended: `Ok(true)` when it
/// deleted the bucket, `Ok(false)` when there was none, the error
/// `not_empty` makes when the bucket still holds objects, else the
/// backend's error.
pub fn deleted<D: Dialect + fmt::Debug, T>(
    bucket: &str,
    result: Result<T, SdkError<DeleteBucketError, HttpResponse>>,
    not_empty: impl FnOnce() -> Error<D>,
) -> Result<bool, Error<D>> {
    let Err(e) = result else {
        return Ok(true);
    };
    let err = BackendError::<D>::from_sdk("S3 DeleteBucket", target(bucket), &e);
    if err.has_code("NoSuchBucket") {
        Ok(false)
    } else if err.has_code("BucketNotEmpty") {
        Err(not_empty())
    } else {
        Err(err.into())
    }
}

/// What [`empty`] removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Emptied {
    /// Object versions and delete markers deleted.
    pub removed: usize,
    /// Unfinished multipart uploads aborted.
    pub aborted: usize,
}

/// Removes every object version, delete marker and unfinished multipart
/// upload of `bucket` with `s3`, whoever wrote them (the bucket owner may
/// delete any of them). Objects the store refuses to delete (Object Lock)
/// make it `FailedPrecondition`.
pub async fn empty<D: Dialect + fmt::Debug>(
    s3: &Client,
    bucket: &str,
) -> Result<Emptied, Error<D>> {
    let mut emptied = Emptied::default();
    for _ in 0..MAX_PURGE_ROUNDS {
        let page = s3
            .list_object_versions()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| BackendError::from_sdk("S3 ListObjectVersions", target(bucket), &e))?;
        let ids = page
            .versions()
            .iter()
            .map(|v| (v.key(), v.version_id()))
            .chain(
                page.delete_markers()
                    .iter()
                    .map(|m| (m.key(), m.version_id())),
            )
            .filter_map(|(key, version)| {
                ObjectIdentifier::builder()
                    .set_key(key.map(str::to_owned))
                    .set_version_id(version.map(str::to_owned))
                    .build()
                    .ok()
            })
            .collect::<Vec<_>>();
        if ids.is_empty() {
            break;
        }
        let count = ids.len();
        let delete = Delete::builder()
            .set_objects(Some(ids))
            .quiet(true)
            .build()
            .map_err(|e| Error::InvalidArgument(format!("cannot build a delete request: {e}")))?;
        let out = s3
            .delete_objects()
            .bucket(bucket)
            .delete(delete)
            .send()
            .await
            .map_err(|e| BackendError::from_sdk("S3 DeleteObjects", target(bucket), &e))?;
        if let Some(first) = out.errors().first() {
            return Err(Error::FailedPrecondition(format!(
                "cannot empty bucket {bucket:?}: {} of {count} objects were not deleted, e.g. {:?}: {} {} \
                 (Object Lock retention or legal hold?)",
                out.errors().len(),
                first.key().unwrap_or_default(),
                first.code().unwrap_or_default(),
                first.message().unwrap_or_default()
            )));
        }
        emptied.removed += count;
    }
    for _ in 0..MAX_PURGE_ROUNDS {
        let page = s3
            .list_multipart_uploads()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| BackendError::from_sdk("S3 ListMultipartUploads", target(bucket), &e))?;
        let mut aborted = 0usize;
        for upload in page.uploads() {
            let (Some(key), Some(id)) = (upload.key(), upload.upload_id()) else {
                continue;
            };
            let result = s3
                .abort_multipart_upload()
                .bucket(bucket)
                .key(key)
                .upload_id(id)
                .send()
                .await;
            if let Err(e) = result {
                let err =
                    BackendError::<D>::from_sdk("S3 AbortMultipartUpload", target(bucket), &e);
                if !err.is_not_found() {
                    return Err(err.into());
                }
            }
            aborted += 1;
        }
        if aborted == 0 {
            break;
        }
        emptied.aborted += aborted;
    }
    Ok(emptied)
}
