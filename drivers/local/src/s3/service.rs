//! The S3 operations served on the embedded endpoint, over the state store
//! (object records) and blob files (object contents). Requests reach these
//! only after signature verification and the grant check.

use s3s::dto::*;
use s3s::{S3, S3Request, S3Response, S3Result, TrailingHeaders};

use crate::driver::LocalDriver;
use crate::s3::access::Caller;
use crate::store::AccountRecord;

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

/// An S3 operation, served for its input type.
trait Operation: Sized {
    /// What the operation answers.
    type Output;

    /// Serves `input`, which came with `request`.
    async fn serve(input: Self, s3: &LocalS3, request: RequestParts) -> S3Result<Self::Output>;
}

/// What an operation may need of its request besides the input.
struct RequestParts {
    /// The request's extensions, the [`Caller`] among them.
    extensions: http::Extensions,
    /// The trailers of a streaming upload.
    trailers: Option<TrailingHeaders>,
}

impl RequestParts {
    /// The account making the request.
    fn caller(&self) -> Option<&AccountRecord> {
        self.extensions.get::<Caller>().map(|c| &c.0)
    }
}

/// Implements [`S3`] for [`LocalS3`], each operation served by the
/// [`Operation`] of its input.
macro_rules! serve {
    ($($op:ident($input:ty) -> $output:ty;)*) => {
        #[async_trait::async_trait]
        impl S3 for LocalS3 {
            $(
                async fn $op(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    let request = RequestParts {
                        extensions: req.extensions,
                        trailers: req.trailing_headers,
                    };
                    Operation::serve(req.input, self, request)
                        .await
                        .map(S3Response::new)
                }
            )*
        }
    };
}

serve! {
    list_buckets(ListBucketsInput) -> ListBucketsOutput;
    head_bucket(HeadBucketInput) -> HeadBucketOutput;
    get_bucket_location(GetBucketLocationInput) -> GetBucketLocationOutput;
    get_bucket_versioning(GetBucketVersioningInput) -> GetBucketVersioningOutput;
    get_bucket_acl(GetBucketAclInput) -> GetBucketAclOutput;
    get_bucket_policy(GetBucketPolicyInput) -> GetBucketPolicyOutput;
    get_bucket_tagging(GetBucketTaggingInput) -> GetBucketTaggingOutput;
    put_bucket_tagging(PutBucketTaggingInput) -> PutBucketTaggingOutput;
    delete_bucket_tagging(DeleteBucketTaggingInput) -> DeleteBucketTaggingOutput;
    put_object(PutObjectInput) -> PutObjectOutput;
    get_object(GetObjectInput) -> GetObjectOutput;
    head_object(HeadObjectInput) -> HeadObjectOutput;
    delete_object(DeleteObjectInput) -> DeleteObjectOutput;
    delete_objects(DeleteObjectsInput) -> DeleteObjectsOutput;
    copy_object(CopyObjectInput) -> CopyObjectOutput;
    list_objects_v2(ListObjectsV2Input) -> ListObjectsV2Output;
    list_objects(ListObjectsInput) -> ListObjectsOutput;
    get_object_tagging(GetObjectTaggingInput) -> GetObjectTaggingOutput;
    put_object_tagging(PutObjectTaggingInput) -> PutObjectTaggingOutput;
    delete_object_tagging(DeleteObjectTaggingInput) -> DeleteObjectTaggingOutput;
    get_object_acl(GetObjectAclInput) -> GetObjectAclOutput;
    get_object_attributes(GetObjectAttributesInput) -> GetObjectAttributesOutput;
    create_multipart_upload(CreateMultipartUploadInput) -> CreateMultipartUploadOutput;
    upload_part(UploadPartInput) -> UploadPartOutput;
    upload_part_copy(UploadPartCopyInput) -> UploadPartCopyOutput;
    complete_multipart_upload(CompleteMultipartUploadInput) -> CompleteMultipartUploadOutput;
    abort_multipart_upload(AbortMultipartUploadInput) -> AbortMultipartUploadOutput;
    list_parts(ListPartsInput) -> ListPartsOutput;
    list_multipart_uploads(ListMultipartUploadsInput) -> ListMultipartUploadsOutput;
}
