//! Bucket operations (listing, location, versioning, ACL, policy, tags)
//! and object operations (writes, reads, copies, deletions, listings, tags,
//! attributes).

use s3s::dto::*;
use s3s::{S3Result, s3_error};

use super::checksums::{integrity, with_checksums};
use super::state::{listing_output, objects_query};
use super::support::{
    attrs_input, check_conditions, conditions, etag_of, from_tag_set, full_control, i64_of,
    internal, no_date_conditions, owner, timestamp, to_tag_set, with_object_headers,
};
use super::{LocalS3, MAX_LIST, Operation, RequestParts};
use crate::blobs;
use crate::s3::encoding::{self, MAX_BUCKET_TAGS, MAX_OBJECT_TAGS, Names, xml_text};
use crate::store::BucketState;

impl Operation for ListBucketsInput {
    type Output = ListBucketsOutput;

    async fn serve(_: Self, s3: &LocalS3, request: RequestParts) -> S3Result<Self::Output> {
        let caller = request.caller().ok_or_else(|| s3_error!(AccessDenied))?;
        let granted: Vec<String> = caller.grants.keys().cloned().collect();
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
        Ok(ListBucketsOutput {
            buckets: Some(buckets),
            owner: Some(owner()),
            ..Default::default()
        })
    }
}

impl Operation for HeadBucketInput {
    type Output = HeadBucketOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.ready_bucket(&input.bucket).await?;
        Ok(HeadBucketOutput {
            bucket_region: Some(s3.driver.inner.region.clone()),
            ..Default::default()
        })
    }
}

impl Operation for GetBucketLocationInput {
    type Output = GetBucketLocationOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.ready_bucket(&input.bucket).await?;
        let region = &s3.driver.inner.region;
        // As S3: us-east-1 is reported as an empty location constraint.
        let location_constraint =
            (region != "us-east-1").then(|| BucketLocationConstraint::from(region.clone()));
        Ok(GetBucketLocationOutput {
            location_constraint,
        })
    }
}

impl Operation for GetBucketVersioningInput {
    type Output = GetBucketVersioningOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.ready_bucket(&input.bucket).await?;
        Ok(GetBucketVersioningOutput::default())
    }
}

impl Operation for GetBucketAclInput {
    type Output = GetBucketAclOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.ready_bucket(&input.bucket).await?;
        Ok(GetBucketAclOutput {
            grants: Some(full_control()),
            owner: Some(owner()),
        })
    }
}

impl Operation for GetBucketPolicyInput {
    type Output = GetBucketPolicyOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.ready_bucket(&input.bucket).await?;
        Err(s3_error!(
            NoSuchBucketPolicy,
            "buckets of cosi-driver-local have no policy: access is granted through COSI BucketAccesses"
        ))
    }
}

impl Operation for GetBucketTaggingInput {
    type Output = GetBucketTaggingOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        let b = s3.ready_bucket(&input.bucket).await?;
        if b.tags.is_empty() {
            return Err(s3_error!(NoSuchTagSet, "the bucket has no tags"));
        }
        Ok(GetBucketTaggingOutput {
            tag_set: to_tag_set(&b.tags),
        })
    }
}

impl Operation for PutBucketTaggingInput {
    type Output = PutBucketTaggingOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.ready_bucket(&input.bucket).await?;
        let tags = from_tag_set(input.tagging.tag_set, MAX_BUCKET_TAGS)?;
        let b = input.bucket.clone();
        if !s3.read(move |s| s.set_bucket_tags(&b, tags)).await? {
            return Err(s3_error!(NoSuchBucket));
        }
        Ok(PutBucketTaggingOutput::default())
    }
}

impl Operation for DeleteBucketTaggingInput {
    type Output = DeleteBucketTaggingOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.ready_bucket(&input.bucket).await?;
        let b = input.bucket.clone();
        s3.read(move |s| s.set_bucket_tags(&b, Vec::new())).await?;
        Ok(DeleteBucketTaggingOutput::default())
    }
}

impl Operation for PutObjectInput {
    type Output = PutObjectOutput;

    async fn serve(input: Self, s3: &LocalS3, request: RequestParts) -> S3Result<Self::Output> {
        let bucket = s3.ready_bucket(&input.bucket).await?;
        let key = input.key;
        let existing = s3.find_object(&bucket.id, &key).await?;
        check_conditions(existing.as_ref(), conditions!(input), false)?;
        let attrs = attrs_input!(input, input.tagging).into_attrs()?;
        let replaced = existing.as_ref().map_or(0, |o| o.size);
        let integrity = integrity!(input, request.trailers, input.content_md5);
        let blob = s3
            .receive(
                &bucket,
                replaced,
                input.content_length,
                input.body,
                integrity,
            )
            .await?;
        let (etag, _) = s3.commit_object(&bucket.id, &key, &blob, attrs).await?;
        let c = blob.checksum;
        Ok(with_checksums!(
            c,
            PutObjectOutput {
                e_tag: Some(ETag::Strong(etag))
            }
        ))
    }
}

impl Operation for GetObjectInput {
    type Output = GetObjectOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        no_date_conditions(&input.if_modified_since, &input.if_unmodified_since)?;
        if input.part_number.is_some() {
            return Err(s3_error!(
                NotImplemented,
                "partNumber reads are not supported"
            ));
        }
        // An overwrite may remove the blob between reading the record and
        // opening the file: read the record again once.
        let mut attempt = 0;
        let (rec, stream, len, range) = loop {
            attempt += 1;
            let rec = s3.object(&input.bucket, &input.key).await?;
            check_conditions(Some(&rec), conditions!(input), true)?;
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
            match blobs::read(&s3.dir(&input.bucket).join(&rec.blob), offset, len).await {
                Ok(stream) => break (rec, stream, len, content_range),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt < 2 => continue,
                Err(e) => return Err(internal(e)),
            }
        };
        let tags = rec.attrs.tags.len();
        Ok(with_object_headers!(
            rec,
            GetObjectOutput {
                body: Some(StreamingBlob::wrap(stream)),
                content_length: Some(i64_of(len)),
                content_range: range,
                tag_count: (tags > 0).then(|| i32::try_from(tags).unwrap_or(i32::MAX)),
            }
        ))
    }
}

impl Operation for HeadObjectInput {
    type Output = HeadObjectOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        no_date_conditions(&input.if_modified_since, &input.if_unmodified_since)?;
        let rec = s3.object(&input.bucket, &input.key).await?;
        check_conditions(Some(&rec), conditions!(input), true)?;
        Ok(with_object_headers!(
            rec,
            HeadObjectOutput {
                content_length: Some(i64_of(rec.size)),
            }
        ))
    }
}

impl Operation for DeleteObjectInput {
    type Output = DeleteObjectOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.ready_bucket(&input.bucket).await?;
        let (b, k) = (input.bucket.clone(), input.key.clone());
        let old = s3.read(move |s| s.delete_object(&b, &k)).await?;
        s3.discard(&input.bucket, old.into_iter().collect()).await;
        Ok(DeleteObjectOutput::default())
    }
}

impl Operation for DeleteObjectsInput {
    type Output = DeleteObjectsOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.ready_bucket(&input.bucket).await?;
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
            match s3.read(move |s| s.delete_object(&b, &k)).await {
                Ok(old) => {
                    s3.discard(&input.bucket, old.into_iter().collect()).await;
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
        Ok(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        })
    }
}

impl Operation for CopyObjectInput {
    type Output = CopyObjectOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        let (src_bucket, src) = s3.copy_source(&input.copy_source).await?;
        let bucket = s3.ready_bucket(&input.bucket).await?;
        let existing = s3.find_object(&bucket.id, &input.key).await?;
        let replace_meta = input
            .metadata_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        let replace_tags = input
            .tagging_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == TaggingDirective::REPLACE);
        let mut attrs = if replace_meta {
            attrs_input!(input, None).into_attrs()?
        } else {
            src.attrs.clone()
        };
        attrs.tags = match (replace_tags, input.tagging) {
            (true, Some(h)) => encoding::parse_tagging_header(&h)?,
            (true, None) => Vec::new(),
            (false, _) => src.attrs.tags.clone(),
        };
        let room = s3.room(
            &bucket,
            existing.as_ref().map_or(0, |o| o.size),
            Some(src.size),
        )?;
        let blob = s3
            .copy_blob(&src_bucket, &src, &bucket, 0, src.size, room)
            .await?;
        let (etag, last_modified_ms) = s3
            .commit_object(&bucket.id, &input.key, &blob, attrs)
            .await?;
        Ok(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: Some(ETag::Strong(etag)),
                last_modified: Some(timestamp(last_modified_ms)),
                ..Default::default()
            }),
            ..Default::default()
        })
    }
}

impl Operation for ListObjectsV2Input {
    type Output = ListObjectsV2Output;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        let names = Names::requested(input.encoding_type.as_ref())?;
        let after = match &input.continuation_token {
            Some(token) => Some(encoding::resume_after(token)?),
            None => input.start_after.clone(),
        };
        let page = s3.objects_page(objects_query!(input), after, names).await?;
        let next = page
            .next_marker
            .as_deref()
            .map(encoding::continuation_token);
        Ok(listing_output!(
            input,
            names,
            page,
            ListObjectsV2Output {
                key_count: Some(page.key_count),
                // Checked by resume_after: only base64url characters.
                continuation_token: input.continuation_token,
                next_continuation_token: next,
                start_after: names.show_opt(input.start_after)?,
            }
        ))
    }
}

impl Operation for ListObjectsInput {
    type Output = ListObjectsOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        let names = Names::requested(input.encoding_type.as_ref())?;
        let after = input.marker.clone();
        let page = s3.objects_page(objects_query!(input), after, names).await?;
        let next = page.next_marker.clone();
        Ok(listing_output!(
            input,
            names,
            page,
            ListObjectsOutput {
                marker: names.show_opt(input.marker)?,
                next_marker: names.show_opt(next)?,
            }
        ))
    }
}

impl Operation for GetObjectTaggingInput {
    type Output = GetObjectTaggingOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        let rec = s3.object(&input.bucket, &input.key).await?;
        Ok(GetObjectTaggingOutput {
            tag_set: to_tag_set(&rec.attrs.tags),
            version_id: None,
        })
    }
}

impl Operation for PutObjectTaggingInput {
    type Output = PutObjectTaggingOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.object(&input.bucket, &input.key).await?;
        let tags = from_tag_set(input.tagging.tag_set, MAX_OBJECT_TAGS)?;
        s3.set_object_tags(&input.bucket, &input.key, tags).await?;
        Ok(PutObjectTaggingOutput::default())
    }
}

impl Operation for DeleteObjectTaggingInput {
    type Output = DeleteObjectTaggingOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.object(&input.bucket, &input.key).await?;
        s3.set_object_tags(&input.bucket, &input.key, Vec::new())
            .await?;
        Ok(DeleteObjectTaggingOutput::default())
    }
}

impl Operation for GetObjectAclInput {
    type Output = GetObjectAclOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.object(&input.bucket, &input.key).await?;
        Ok(GetObjectAclOutput {
            grants: Some(full_control()),
            owner: Some(owner()),
            ..Default::default()
        })
    }
}

impl Operation for GetObjectAttributesInput {
    type Output = GetObjectAttributesOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        let rec = s3.object(&input.bucket, &input.key).await?;
        Ok(GetObjectAttributesOutput {
            e_tag: Some(etag_of(&rec)),
            last_modified: Some(timestamp(rec.last_modified_ms)),
            object_size: Some(i64_of(rec.size)),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            ..Default::default()
        })
    }
}
