//! Multipart uploads: creating, uploading and copying parts, completing, aborting and listing.

use std::collections::BTreeMap;

use s3s::crypto::{Checksum as _, Md5};
use s3s::dto::*;
use s3s::{S3Result, s3_error};

use super::checksums::{integrity, with_checksums};
use super::support::{
    attrs_input, check_conditions, conditions, copy_range, hex_md5, i64_of, internal, now_ms,
    owner, part_number_ok, timestamp,
};
use super::{LocalS3, MAX_LIST, MIN_PART_SIZE, Operation, RequestParts};
use crate::blobs;
use crate::s3::encoding::{Names, xml_text};
use crate::store::{ObjectRecord, PartRecord, UploadRecord};

impl Operation for CreateMultipartUploadInput {
    type Output = CreateMultipartUploadOutput;

    async fn serve(input: Self, s3: &LocalS3, request: RequestParts) -> S3Result<Self::Output> {
        let account_id = request.caller().map(|c| c.id.clone()).unwrap_or_default();
        let bucket = s3.ready_bucket(&input.bucket).await?;
        let attrs = attrs_input!(input, input.tagging).into_attrs()?;
        let upload_id = uuid::Uuid::new_v4().simple().to_string();
        let rec = UploadRecord {
            key: input.key.clone(),
            account_id,
            initiated_ms: now_ms(),
            attrs,
        };
        let (b, u) = (bucket.id.clone(), upload_id.clone());
        s3.write(&bucket.id, move |s| s.create_upload(&b, &u, &rec))
            .await?;
        Ok(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: xml_text(input.key),
            upload_id: Some(upload_id),
            ..Default::default()
        })
    }
}

impl Operation for UploadPartInput {
    type Output = UploadPartOutput;

    async fn serve(input: Self, s3: &LocalS3, request: RequestParts) -> S3Result<Self::Output> {
        part_number_ok(input.part_number)?;
        let (bucket, _) = s3
            .ready_upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        let integrity = integrity!(input, request.trailers, None);
        let replaced = s3.part_size(&input.upload_id, input.part_number).await?;
        let blob = s3
            .receive(
                &bucket,
                replaced,
                input.content_length,
                input.body,
                integrity,
            )
            .await?;
        s3.store_part(&bucket.id, &input.upload_id, input.part_number, &blob)
            .await?;
        let c = blob.checksum;
        Ok(with_checksums!(
            c,
            UploadPartOutput {
                e_tag: Some(ETag::Strong(hex_md5(blob.md5)))
            }
        ))
    }
}

impl Operation for UploadPartCopyInput {
    type Output = UploadPartCopyOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        part_number_ok(input.part_number)?;
        let (src_bucket, src) = s3.copy_source(&input.copy_source).await?;
        let (bucket, _) = s3
            .ready_upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        let (offset, len) = copy_range(input.copy_source_range.as_deref(), src.size)?;
        let replaced = s3.part_size(&input.upload_id, input.part_number).await?;
        let room = s3.room(&bucket, replaced, Some(len))?;
        let blob = s3
            .copy_blob(&src_bucket, &src, &bucket, offset, len, room)
            .await?;
        s3.store_part(&bucket.id, &input.upload_id, input.part_number, &blob)
            .await?;
        Ok(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(ETag::Strong(hex_md5(blob.md5))),
                last_modified: Some(timestamp(now_ms())),
                ..Default::default()
            }),
            ..Default::default()
        })
    }
}

impl Operation for CompleteMultipartUploadInput {
    type Output = CompleteMultipartUploadOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        let (bucket, upload) = s3
            .ready_upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        let existing = s3.find_object(&bucket.id, &input.key).await?;
        check_conditions(existing.as_ref(), conditions!(input), false)?;
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
            s3.read(move |s| s.parts(&u)).await?.into_iter().collect();
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
        // Completing replaces the existing object and every part of the
        // upload, chosen or not, which stop being pending.
        let parts: u64 = stored.values().map(|p| p.size).sum();
        let replaced = existing.as_ref().map_or(0, |o| o.size) + parts;
        s3.room(&bucket, replaced, Some(total))?;

        // Concatenate the parts into a new blob.
        let name = blobs::new_blob_name();
        let dir = s3.blob_dir(&bucket.id).await?;
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
            s3.discard(&bucket.id, vec![name]).await;
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
        s3.write_new_blob(&bucket.id, &name, move |s| {
            s.finish_upload(&b, &u, Some(&rec))
        })
        .await?;
        Ok(CompleteMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: xml_text(input.key),
            e_tag: Some(ETag::Strong(etag)),
            ..Default::default()
        })
    }
}

impl Operation for AbortMultipartUploadInput {
    type Output = AbortMultipartUploadOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.ready_upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        let (b, u) = (input.bucket.clone(), input.upload_id.clone());
        let unreferenced = s3
            .write(&input.bucket, move |s| s.finish_upload(&b, &u, None))
            .await?;
        s3.discard(&input.bucket, unreferenced).await;
        Ok(AbortMultipartUploadOutput::default())
    }
}

impl Operation for ListPartsInput {
    type Output = ListPartsOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        s3.ready_upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        let u = input.upload_id.clone();
        let parts = s3.read(move |s| s.parts(&u)).await?;
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
        Ok(ListPartsOutput {
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
        })
    }
}

impl Operation for ListMultipartUploadsInput {
    type Output = ListMultipartUploadsOutput;

    async fn serve(input: Self, s3: &LocalS3, _: RequestParts) -> S3Result<Self::Output> {
        let names = Names::requested(input.encoding_type.as_ref())?;
        s3.ready_bucket(&input.bucket).await?;
        let b = input.bucket.clone();
        let mut uploads = s3.read(move |s| s.uploads(&b)).await?;
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
        Ok(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: names.show_opt(input.prefix)?,
            encoding_type: input.encoding_type,
            is_truncated: Some(false),
            uploads: Some(list),
            ..Default::default()
        })
    }
}
