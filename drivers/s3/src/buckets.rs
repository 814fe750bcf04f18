//! Bucket operations on the backend: create (idempotent, "already owned by
//! you" is success), locate (brownfield and grants), and delete (absent is
//! success, non-empty is a retryable refusal unless the class asks to purge).

use aws_sdk_s3::Client;
use aws_sdk_s3::config::Region;
use aws_sdk_s3::types::{
    BucketLocationConstraint, BucketVersioningStatus, CreateBucketConfiguration, Delete,
    ObjectIdentifier, ObjectLockEnabled, Tag, Tagging, VersioningConfiguration,
};

use crate::config::{Config, DEFAULT_REGION};
use crate::errors::{BackendError, Error};
use crate::params::{BucketParams, PURGE_ON_DELETE};

/// Upper bound on list-and-delete rounds when purging a bucket; each round
/// removes up to 1000 objects, so this covers a million objects per call
/// and the sidecar's retry continues where it stopped.
const MAX_PURGE_ROUNDS: usize = 1000;

/// A bucket as the backend reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// The bucket name.
    pub name: String,
    /// The bucket's region.
    pub region: String,
}

fn target(bucket: &str) -> String {
    format!("bucket {bucket:?}")
}

fn s3_config(region: &str) -> aws_sdk_s3::config::Builder {
    aws_sdk_s3::config::Builder::default().region(Region::new(region.to_owned()))
}

/// Creates `bucket` (or accepts it when this account already owns it) and
/// applies the class's settings; `AlreadyExists` when another account owns
/// it or it exists with an incompatible region or without Object Lock.
///
/// An existing bucket is found with HeadBucket before anything is created,
/// so the checks never depend on how a backend answers CreateBucket for a
/// bucket that exists (AWS's us-east-1 says OK, other regions
/// `BucketAlreadyOwnedByYou`, some emulators change its settings).
pub async fn create(
    s3: &Client,
    cfg: &Config,
    bucket: &str,
    params: &BucketParams,
) -> Result<Located, Error> {
    let region = params
        .location_constraint
        .clone()
        .unwrap_or_else(|| cfg.region.clone());
    let existing = match locate(s3, cfg, bucket, &region).await {
        Ok(found) => Some(found),
        Err(Error::NotFound(_)) => None,
        // Someone else's bucket: CreateBucket says so precisely below.
        Err(e) if e.code() == tonic::Code::PermissionDenied => None,
        Err(e) => return Err(e),
    };
    let located = match existing {
        Some(found) => {
            tracing::info!(
                bucket,
                "bucket already exists and is reachable with the driver's credentials"
            );
            found
        }
        None => {
            create_new(s3, bucket, &region, params).await?;
            locate(s3, cfg, bucket, &region).await?
        }
    };
    if located.region != region {
        return Err(Error::AlreadyExists(format!(
            "bucket {bucket:?} exists in region {:?} but the BucketClass asks for {region:?}",
            located.region
        )));
    }
    let regional = || s3_config(&region);
    if params.object_lock {
        let out = s3
            .get_object_lock_configuration()
            .bucket(bucket)
            .customize()
            .config_override(regional())
            .send()
            .await;
        let enabled = match out {
            Ok(o) => o
                .object_lock_configuration()
                .and_then(|c| c.object_lock_enabled())
                .is_some_and(|e| *e == ObjectLockEnabled::Enabled),
            Err(e) => {
                let err =
                    BackendError::from_sdk("S3 GetObjectLockConfiguration", target(bucket), &e);
                if !err.has_code("ObjectLockConfigurationNotFoundError") {
                    return Err(err.into());
                }
                false
            }
        };
        if !enabled {
            return Err(Error::AlreadyExists(format!(
                "bucket {bucket:?} exists without Object Lock, which the BucketClass requires; Object Lock can \
                 only be chosen when a bucket is created"
            )));
        }
    }
    if params.versioning {
        s3.put_bucket_versioning()
            .bucket(bucket)
            .versioning_configuration(
                VersioningConfiguration::builder()
                    .status(BucketVersioningStatus::Enabled)
                    .build(),
            )
            .customize()
            .config_override(regional())
            .send()
            .await
            .map_err(|e| BackendError::from_sdk("S3 PutBucketVersioning", target(bucket), &e))?;
    }
    if !params.tags.is_empty() {
        let tags = params
            .tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::InvalidArgument(format!("tags: {e}")))?;
        let tagging = Tagging::builder()
            .set_tag_set(Some(tags))
            .build()
            .map_err(|e| Error::InvalidArgument(format!("tags: {e}")))?;
        s3.put_bucket_tagging()
            .bucket(bucket)
            .tagging(tagging)
            .customize()
            .config_override(regional())
            .send()
            .await
            .map_err(|e| BackendError::from_sdk("S3 PutBucketTagging", target(bucket), &e))?;
    }
    Ok(located)
}

async fn create_new(
    s3: &Client,
    bucket: &str,
    region: &str,
    params: &BucketParams,
) -> Result<(), Error> {
    let mut req = s3.create_bucket().bucket(bucket);
    if region != DEFAULT_REGION {
        req = req.create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(region))
                .build(),
        );
    }
    if params.object_lock {
        req = req.object_lock_enabled_for_bucket(true);
    }
    match req
        .customize()
        .config_override(s3_config(region))
        .send()
        .await
    {
        Ok(_) => {
            tracing::info!(bucket, %region, "bucket created");
            Ok(())
        }
        Err(e) => {
            let err = BackendError::from_sdk("S3 CreateBucket", target(bucket), &e);
            if err.has_code("BucketAlreadyOwnedByYou") {
                tracing::info!(
                    bucket,
                    "bucket already exists and is owned by the driver's account"
                );
                Ok(())
            } else if err.has_code("BucketAlreadyExists") {
                Err(Error::AlreadyExists(format!(
                    "bucket {bucket:?} already exists and belongs to another account; S3 bucket names are \
                     global: use another bucketNamePrefix in the BucketClass"
                )))
            } else {
                Err(err.into())
            }
        }
    }
}

/// Finds an existing bucket and its region; `NotFound` when it does not exist.
///
/// `region_hint` is tried first; a backend that answers with another region
/// (AWS's 301 with `x-amz-bucket-region`) is asked again in that region.
pub async fn locate(
    s3: &Client,
    cfg: &Config,
    bucket: &str,
    region_hint: &str,
) -> Result<Located, Error> {
    let mut region = region_hint.to_owned();
    for _ in 0..2 {
        let result = s3
            .head_bucket()
            .bucket(bucket)
            .customize()
            .config_override(s3_config(&region))
            .send()
            .await;
        match result {
            Ok(out) => {
                let actual = out
                    .bucket_region()
                    .filter(|r| !r.is_empty())
                    .unwrap_or(&region);
                return Ok(Located {
                    name: bucket.to_owned(),
                    region: actual.to_owned(),
                });
            }
            Err(e) => {
                let redirect = e.raw_response().and_then(|r| {
                    let moved = matches!(r.status().as_u16(), 301 | 307 | 400);
                    let header = r.headers().get("x-amz-bucket-region");
                    header.filter(|h| moved && *h != region).map(str::to_owned)
                });
                if let Some(other) = redirect {
                    region = other;
                    continue;
                }
                let err = BackendError::from_sdk("S3 HeadBucket", target(bucket), &e);
                if err.error_code.is_none() && err.http_status == Some(403) {
                    return Err(diagnose_forbidden(s3, bucket, &region, err).await);
                }
                if err.is_not_found() {
                    return Err(Error::NotFound(format!(
                        "bucket {bucket:?} does not exist in the backend (endpoint {})",
                        cfg.client_endpoint(&region)
                    )));
                }
                return Err(err.into());
            }
        }
    }
    Err(Error::NotFound(format!(
        "bucket {bucket:?} could not be located: the backend keeps redirecting between regions"
    )))
}

/// A HEAD response has no body, so a 403 does not say whether the
/// credentials are unknown, the signature is wrong or access is denied:
/// GetBucketLocation, which answers with an error document, tells.
async fn diagnose_forbidden(s3: &Client, bucket: &str, region: &str, head: BackendError) -> Error {
    let result = s3
        .get_bucket_location()
        .bucket(bucket)
        .customize()
        .config_override(s3_config(region))
        .send()
        .await;
    match result {
        Err(e) => {
            let err = BackendError::from_sdk("S3 GetBucketLocation", target(bucket), &e);
            if err.error_code.is_some() {
                err.into()
            } else {
                head.into()
            }
        }
        Ok(_) => head.into(),
    }
}

/// Deletes `bucket`. Absent is success; a non-empty bucket is
/// `FailedPrecondition` (retried by the sidecar) unless `purge` is set, in
/// which case every object, version and unfinished upload is removed first.
pub async fn delete(
    s3: &Client,
    cfg: &Config,
    bucket: &str,
    region_hint: &str,
    purge: bool,
) -> Result<(), Error> {
    let located = match locate(s3, cfg, bucket, region_hint).await {
        Ok(l) => l,
        Err(Error::NotFound(_)) => {
            tracing::info!(bucket, "bucket already absent");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    if purge {
        empty(s3, bucket, &located.region).await?;
    }
    let result = s3
        .delete_bucket()
        .bucket(bucket)
        .customize()
        .config_override(s3_config(&located.region))
        .send()
        .await;
    match result {
        Ok(_) => {
            tracing::info!(bucket, "bucket deleted");
            Ok(())
        }
        Err(e) => {
            let err = BackendError::from_sdk("S3 DeleteBucket", target(bucket), &e);
            if err.has_code("NoSuchBucket") {
                Ok(())
            } else if err.has_code("BucketNotEmpty") {
                Err(Error::FailedPrecondition(format!(
                    "bucket {bucket:?} is not empty; it is deleted once emptied (retried), or set the \
                     BucketClass parameter {PURGE_ON_DELETE}: \"true\" to let the driver delete its objects"
                )))
            } else {
                Err(err.into())
            }
        }
    }
}

/// Removes every object version, delete marker and unfinished multipart
/// upload of `bucket`.
async fn empty(s3: &Client, bucket: &str, region: &str) -> Result<(), Error> {
    let regional = || s3_config(region);
    let mut removed = 0usize;
    for _ in 0..MAX_PURGE_ROUNDS {
        let page = s3
            .list_object_versions()
            .bucket(bucket)
            .customize()
            .config_override(regional())
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
            .customize()
            .config_override(regional())
            .send()
            .await
            .map_err(|e| BackendError::from_sdk("S3 DeleteObjects", target(bucket), &e))?;
        if let Some(first) = out.errors().first() {
            return Err(Error::FailedPrecondition(format!(
                "cannot purge bucket {bucket:?}: {} of {count} objects were not deleted, e.g. {:?}: {} {} \
                 (Object Lock retention or legal hold?)",
                out.errors().len(),
                first.key().unwrap_or_default(),
                first.code().unwrap_or_default(),
                first.message().unwrap_or_default()
            )));
        }
        removed += count;
    }
    for _ in 0..MAX_PURGE_ROUNDS {
        let page = s3
            .list_multipart_uploads()
            .bucket(bucket)
            .customize()
            .config_override(regional())
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
                .customize()
                .config_override(regional())
                .send()
                .await;
            if let Err(e) = result {
                let err = BackendError::from_sdk("S3 AbortMultipartUpload", target(bucket), &e);
                if !err.is_not_found() {
                    return Err(err.into());
                }
            }
            aborted += 1;
        }
        if aborted == 0 {
            break;
        }
    }
    tracing::info!(bucket, removed, "bucket purged");
    Ok(())
}
