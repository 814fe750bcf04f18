//! Bucket operations: observe the bucket (Admin Ops, and S3 for
//! versioning), let [`crate::decide`] plan, carry the plan out. Buckets
//! are created through S3 as the admin user, which therefore owns them;
//! their quota is set through Admin Ops.

use aws_sdk_s3::types::{
    BucketLocationConstraint, BucketVersioningStatus, CreateBucketConfiguration,
    VersioningConfiguration,
};
use cosi_driver_s3_common::buckets::{self as s3_buckets, Emptied, target};

use crate::admin::BucketInfo;
use crate::backend::Backend;
use crate::decide::{self, DeletePlan, Existing, StaticPlan, Versioning};
use crate::errors::{BackendError, Error};
use crate::params::BucketParams;
use cosi_driver_s3_common::errors::FromSdk;

async fn versioning(backend: &Backend, bucket: &str) -> Result<Versioning, Error> {
    let out = backend
        .s3
        .get_bucket_versioning()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| BackendError::from_sdk("S3 GetBucketVersioning", target(bucket), &e))?;
    Ok(match out.status() {
        Some(BucketVersioningStatus::Enabled) => Versioning::Enabled,
        Some(BucketVersioningStatus::Suspended) => Versioning::Suspended,
        _ => Versioning::Never,
    })
}

async fn observe(
    backend: &Backend,
    admin_uid: &str,
    bucket: &str,
) -> Result<Option<Existing>, Error> {
    let Some(info) = backend.admin.bucket(bucket).await? else {
        return Ok(None);
    };
    let versioning = if info.owner == admin_uid {
        Some(versioning(backend, bucket).await?)
    } else {
        None
    };
    Ok(Some(Existing { info, versioning }))
}

/// Creates `bucket` with the class's settings, or completes and accepts
/// one the admin user already owns with the same settings.
pub async fn create(
    backend: &Backend,
    admin_uid: &str,
    bucket: &str,
    params: &BucketParams,
) -> Result<(), Error> {
    let mut existing = observe(backend, admin_uid, bucket).await?;
    let mut plan = decide::plan_create(bucket, existing.as_ref(), params, admin_uid)?;
    if plan.create {
        match create_new(backend, bucket, params).await {
            Ok(()) => tracing::info!(bucket, "bucket created"),
            // Made by someone else between our look and our create: what
            // it is now decides.
            Err(Error::Backend(e)) if e.has_code("BucketAlreadyExists") => {
                existing = observe(backend, admin_uid, bucket).await?;
                plan = decide::plan_create(bucket, existing.as_ref(), params, admin_uid)?;
            }
            Err(e) => return Err(e),
        }
    }
    if plan.enable_versioning {
        backend
            .s3
            .put_bucket_versioning()
            .bucket(bucket)
            .versioning_configuration(
                VersioningConfiguration::builder()
                    .status(BucketVersioningStatus::Enabled)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| BackendError::from_sdk("S3 PutBucketVersioning", target(bucket), &e))?;
        tracing::info!(bucket, "versioning enabled");
    }
    if plan.set_quota {
        backend
            .admin
            .set_bucket_quota(admin_uid, bucket, &params.quota)
            .await?;
        tracing::info!(
            bucket,
            max_objects = ?params.quota.max_objects,
            max_size_kb = ?params.quota.max_size_kb,
            "bucket quota set"
        );
    }
    Ok(())
}

async fn create_new(backend: &Backend, bucket: &str, params: &BucketParams) -> Result<(), Error> {
    let mut request = backend.s3.create_bucket().bucket(bucket);
    if let Some(placement) = &params.placement {
        // `<zonegroup>:<placement>`; an empty zonegroup is the gateway's own.
        request = request.create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(
                    format!(":{placement}").as_str(),
                ))
                .build(),
        );
    }
    let class = params.storage_class.clone();
    request
        .customize()
        .mutate_request(move |r| {
            if let Some(class) = &class {
                r.headers_mut().insert("x-amz-storage-class", class.clone());
            }
        })
        .send()
        .await
        .map(drop)
        .map_err(|e| BackendError::from_sdk("S3 CreateBucket", target(bucket), &e).into())
}

/// Looks up a static bucket, relinking it to the admin user when it
/// belongs to another user and the parameters allow it.
pub async fn get_static(
    backend: &Backend,
    admin_uid: &str,
    bucket: &str,
    relink: bool,
) -> Result<BucketInfo, Error> {
    let info = backend.admin.bucket(bucket).await?;
    match decide::plan_static(bucket, info.as_ref(), admin_uid, relink)? {
        StaticPlan::Use => {}
        StaticPlan::Relink { from } => {
            let Some(found) = &info else {
                return Err(Error::NotFound(format!("bucket {bucket:?} vanished")));
            };
            backend
                .admin
                .link_bucket(bucket, &found.id, admin_uid)
                .await?;
            tracing::info!(bucket, from = %from, to = %admin_uid, "bucket relinked to the driver's admin user");
        }
    }
    backend
        .admin
        .bucket(bucket)
        .await?
        .ok_or_else(|| Error::NotFound(format!("bucket {bucket:?} does not exist in RGW")))
}

/// Deletes `bucket`. Absent is success; a non-empty bucket is
/// `FailedPrecondition` (retried) unless `purge`, which first removes every
/// object version, delete marker and unfinished multipart upload.
pub async fn delete(
    backend: &Backend,
    admin_uid: &str,
    bucket: &str,
    purge: bool,
) -> Result<(), Error> {
    let info = backend.admin.bucket(bucket).await?;
    if decide::plan_delete(bucket, info.as_ref(), admin_uid)? == DeletePlan::Done {
        tracing::info!(bucket, "bucket already absent");
        return Ok(());
    }
    if purge {
        empty(backend, bucket).await?;
    }
    let result = backend.s3.delete_bucket().bucket(bucket).send().await;
    if s3_buckets::deleted(bucket, result, || decide::not_empty(bucket))? {
        tracing::info!(bucket, "bucket deleted");
    }
    Ok(())
}

/// Removes every object version, delete marker and unfinished multipart
/// upload of `bucket`, whoever wrote them (the bucket owner may delete
/// any of them).
pub async fn empty(backend: &Backend, bucket: &str) -> Result<(), Error> {
    let Emptied { removed, aborted } = s3_buckets::empty(&backend.s3, bucket).await?;
    tracing::info!(bucket, removed, aborted, "bucket emptied");
    Ok(())
}
