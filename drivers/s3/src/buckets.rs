//! Bucket operations on the backend: create (idempotent, "already owned by
//! you" is success), locate (brownfield and grants), and delete (absent is
//! success, non-empty is a retryable refusal unless the class asks to purge).

use aws_sdk_s3::Client;
use aws_sdk_s3::config::Region;
use aws_sdk_s3::types::{
    BucketLocationConstraint, BucketVersioningStatus, CreateBucketConfiguration, ObjectLockEnabled,
    Tag, Tagging, VersioningConfiguration,
};
use cosi_driver_s3_common::buckets::{self as s3_buckets, Emptied, target};

use crate::config::{Config, DEFAULT_REGION};
use crate::errors::{BackendError, Error};
use crate::params::{BucketParams, PURGE_ON_DELETE};
use cosi_driver_s3_common::errors::FromSdk;

/// A bucket as the backend reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// The bucket name.
    pub name: String,
    /// The bucket's region.
    pub region: String,
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
    let not_empty = || {
        Error::FailedPrecondition(format!(
            "bucket {bucket:?} is not empty; it is deleted once emptied (retried), or set the \
             BucketClass parameter {PURGE_ON_DELETE}: \"true\" to let the driver delete its objects"
        ))
    };
    if s3_buckets::deleted(bucket, result, not_empty)? {
        tracing::info!(bucket, "bucket deleted");
    }
    Ok(())
}

/// Removes every object version, delete marker and unfinished multipart
/// upload of `bucket`, with a client for the bucket's region.
async fn empty(s3: &Client, bucket: &str, region: &str) -> Result<(), Error> {
    let regional = Client::from_conf(
        s3.config()
            .to_builder()
            .region(Region::new(region.to_owned()))
            .build(),
    );
    let Emptied { removed, .. } = s3_buckets::empty(&regional, bucket).await?;
    tracing::info!(bucket, removed, "bucket purged");
    Ok(())
}
