//! Bucket operations: listing, location, versioning, ACL, policy and tags.

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use super::LocalS3;
use super::support::{from_tag_set, full_control, owner, timestamp, to_tag_set};
use crate::s3::access::Caller;
use crate::s3::encoding::MAX_BUCKET_TAGS;
use crate::store::BucketState;

pub(super) async fn list_buckets(
    s3: &LocalS3,
    req: S3Request<ListBucketsInput>,
) -> S3Result<S3Response<ListBucketsOutput>> {
    let caller = req
        .extensions
        .get::<Caller>()
        .ok_or_else(|| s3_error!(AccessDenied))?;
    let granted: Vec<String> = caller.0.grants.keys().cloned().collect();
    let records = s3.read(|s| s.buckets()).await?;
    let buckets = records
        .into_iter()
        .filter(|b| b.state == BucketState::Ready && granted.contains(&b.id))
        .map(|b| Bucket {
            name: Some(b.id),
            creation_date: Some(timestamp(b.created_ms)),
            bucket_region: Some(s3.driver.inner.region.clone()),
        })
        .collect();
    Ok(S3Response::new(ListBucketsOutput {
        buckets: Some(buckets),
        owner: Some(owner()),
        ..Default::default()
    }))
}

pub(super) async fn head_bucket(
    s3: &LocalS3,
    req: S3Request<HeadBucketInput>,
) -> S3Result<S3Response<HeadBucketOutput>> {
    s3.ready_bucket(&req.input.bucket).await?;
    Ok(S3Response::new(HeadBucketOutput {
        bucket_region: Some(s3.driver.inner.region.clone()),
        ..Default::default()
    }))
}

pub(super) async fn get_bucket_location(
    s3: &LocalS3,
    req: S3Request<GetBucketLocationInput>,
) -> S3Result<S3Response<GetBucketLocationOutput>> {
    s3.ready_bucket(&req.input.bucket).await?;
    let region = &s3.driver.inner.region;
    // As S3: us-east-1 is reported as an empty location constraint.
    let location_constraint =
        (region != "us-east-1").then(|| BucketLocationConstraint::from(region.clone()));
    Ok(S3Response::new(GetBucketLocationOutput {
        location_constraint,
    }))
}

pub(super) async fn get_bucket_versioning(
    s3: &LocalS3,
    req: S3Request<GetBucketVersioningInput>,
) -> S3Result<S3Response<GetBucketVersioningOutput>> {
    s3.ready_bucket(&req.input.bucket).await?;
    Ok(S3Response::new(GetBucketVersioningOutput::default()))
}

pub(super) async fn get_bucket_acl(
    s3: &LocalS3,
    req: S3Request<GetBucketAclInput>,
) -> S3Result<S3Response<GetBucketAclOutput>> {
    s3.ready_bucket(&req.input.bucket).await?;
    Ok(S3Response::new(GetBucketAclOutput {
        grants: Some(full_control()),
        owner: Some(owner()),
    }))
}

pub(super) async fn get_bucket_policy(
    s3: &LocalS3,
    req: S3Request<GetBucketPolicyInput>,
) -> S3Result<S3Response<GetBucketPolicyOutput>> {
    s3.ready_bucket(&req.input.bucket).await?;
    Err(s3_error!(
        NoSuchBucketPolicy,
        "buckets of cosi-driver-local have no policy: access is granted through COSI BucketAccesses"
    ))
}

pub(super) async fn get_bucket_tagging(
    s3: &LocalS3,
    req: S3Request<GetBucketTaggingInput>,
) -> S3Result<S3Response<GetBucketTaggingOutput>> {
    let b = s3.ready_bucket(&req.input.bucket).await?;
    if b.tags.is_empty() {
        return Err(s3_error!(NoSuchTagSet, "the bucket has no tags"));
    }
    Ok(S3Response::new(GetBucketTaggingOutput {
        tag_set: to_tag_set(&b.tags),
    }))
}

pub(super) async fn put_bucket_tagging(
    s3: &LocalS3,
    req: S3Request<PutBucketTaggingInput>,
) -> S3Result<S3Response<PutBucketTaggingOutput>> {
    let input = req.input;
    s3.ready_bucket(&input.bucket).await?;
    let tags = from_tag_set(input.tagging.tag_set, MAX_BUCKET_TAGS)?;
    let b = input.bucket.clone();
    if !s3.read(move |s| s.set_bucket_tags(&b, tags)).await? {
        return Err(s3_error!(NoSuchBucket));
    }
    Ok(S3Response::new(PutBucketTaggingOutput::default()))
}

pub(super) async fn delete_bucket_tagging(
    s3: &LocalS3,
    req: S3Request<DeleteBucketTaggingInput>,
) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
    s3.ready_bucket(&req.input.bucket).await?;
    let b = req.input.bucket.clone();
    s3.read(move |s| s.set_bucket_tags(&b, Vec::new())).await?;
    Ok(S3Response::new(DeleteBucketTaggingOutput::default()))
}
