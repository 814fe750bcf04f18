//! The S3 operations served on the embedded endpoint, over the state store
//! (object records) and blob files (object contents). Requests reach these
//! only after signature verification and the grant check.

use s3s::dto::*;
use s3s::{S3, S3Request, S3Response, S3Result};

use crate::driver::LocalDriver;

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

mod checksums;
mod multipart;
mod objects;
mod state;
mod support;

/// Implements [`S3`] for [`LocalS3`], each operation served by the
/// function of the same name in its module.
macro_rules! serve {
    ($($module:ident::$op:ident($input:ty) -> $output:ty;)*) => {
        #[async_trait::async_trait]
        impl S3 for LocalS3 {
            $(
                async fn $op(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    $module::$op(self, req).await
                }
            )*
        }
    };
}

serve! {
    objects::list_buckets(ListBucketsInput) -> ListBucketsOutput;
    objects::head_bucket(HeadBucketInput) -> HeadBucketOutput;
    objects::get_bucket_location(GetBucketLocationInput) -> GetBucketLocationOutput;
    objects::get_bucket_versioning(GetBucketVersioningInput) -> GetBucketVersioningOutput;
    objects::get_bucket_acl(GetBucketAclInput) -> GetBucketAclOutput;
    objects::get_bucket_policy(GetBucketPolicyInput) -> GetBucketPolicyOutput;
    objects::get_bucket_tagging(GetBucketTaggingInput) -> GetBucketTaggingOutput;
    objects::put_bucket_tagging(PutBucketTaggingInput) -> PutBucketTaggingOutput;
    objects::delete_bucket_tagging(DeleteBucketTaggingInput) -> DeleteBucketTaggingOutput;
    objects::put_object(PutObjectInput) -> PutObjectOutput;
    objects::get_object(GetObjectInput) -> GetObjectOutput;
    objects::head_object(HeadObjectInput) -> HeadObjectOutput;
    objects::delete_object(DeleteObjectInput) -> DeleteObjectOutput;
    objects::delete_objects(DeleteObjectsInput) -> DeleteObjectsOutput;
    objects::copy_object(CopyObjectInput) -> CopyObjectOutput;
    objects::list_objects_v2(ListObjectsV2Input) -> ListObjectsV2Output;
    objects::list_objects(ListObjectsInput) -> ListObjectsOutput;
    objects::get_object_tagging(GetObjectTaggingInput) -> GetObjectTaggingOutput;
    objects::put_object_tagging(PutObjectTaggingInput) -> PutObjectTaggingOutput;
    objects::delete_object_tagging(DeleteObjectTaggingInput) -> DeleteObjectTaggingOutput;
    objects::get_object_acl(GetObjectAclInput) -> GetObjectAclOutput;
    objects::get_object_attributes(GetObjectAttributesInput) -> GetObjectAttributesOutput;
    multipart::create_multipart_upload(CreateMultipartUploadInput) -> CreateMultipartUploadOutput;
    multipart::upload_part(UploadPartInput) -> UploadPartOutput;
    multipart::upload_part_copy(UploadPartCopyInput) -> UploadPartCopyOutput;
    multipart::complete_multipart_upload(CompleteMultipartUploadInput) -> CompleteMultipartUploadOutput;
    multipart::abort_multipart_upload(AbortMultipartUploadInput) -> AbortMultipartUploadOutput;
    multipart::list_parts(ListPartsInput) -> ListPartsOutput;
    multipart::list_multipart_uploads(ListMultipartUploadsInput) -> ListMultipartUploadsOutput;
}
