//! Authentication and authorization of S3 requests. SigV4 signatures are
//! verified by s3s against the secret key looked up here; every request is
//! then authorized against the key's grants (see `policy`). Anonymous
//! requests are always denied. The authenticated account rides along in the
//! request extensions for the operations that need it.

use std::sync::Arc;

use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::dto::{
    CopyObjectInput, CopySource, CreateMultipartUploadInput, PutObjectInput, TaggingDirective,
    UploadPartCopyInput,
};
use s3s::{S3Request, S3Result, s3_error};

use super::key_shares::{Connection, Owner};
use crate::driver::LocalDriver;
use crate::policy::{self, Category, Decision, Direction};
use crate::store::AccountRecord;

/// Looks up secret keys in the state store.
pub(crate) struct KeyLookup(pub(crate) LocalDriver);

/// Authorizes requests against grants.
pub(crate) struct GrantCheck(pub(crate) LocalDriver);

/// The account making a request, stored in the request extensions.
#[derive(Clone)]
pub(crate) struct Caller(pub(crate) AccountRecord);

async fn account_by_key(driver: &LocalDriver, access_key: &str) -> S3Result<Option<AccountRecord>> {
    let store = driver.inner.store.clone();
    let key = access_key.to_owned();
    tokio::task::spawn_blocking(move || store.account_by_key(&key))
        .await
        .map_err(|e| s3_error!(InternalError, "key lookup failed: {e}"))?
        .map_err(|e| s3_error!(InternalError, "key lookup failed: {e}"))
}

#[async_trait::async_trait]
impl S3Auth for KeyLookup {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match account_by_key(&self.0, access_key).await? {
            Some(a) => Ok(SecretKey::from(a.secret_access_key)),
            None => Err(s3_error!(
                InvalidAccessKeyId,
                "The access key ID you provided does not exist in our records."
            )),
        }
    }
}

fn apply(decision: Decision) -> S3Result<()> {
    match decision {
        Decision::Allow => Ok(()),
        Decision::Deny(msg) => {
            tracing::debug!(reason = %msg, "S3 request denied");
            Err(s3_error!(AccessDenied, "{msg}"))
        }
        Decision::NotImplemented(msg) => Err(s3_error!(NotImplemented, "{msg}")),
        Decision::AlreadyOwned(msg) => Err(s3_error!(BucketAlreadyOwnedByYou, "{msg}")),
    }
}

fn caller<T>(req: &S3Request<T>) -> S3Result<&AccountRecord> {
    req.extensions
        .get::<Caller>()
        .map(|c| &c.0)
        .ok_or_else(|| s3_error!(AccessDenied, "the request is not authenticated"))
}

/// Checks `direction` access in `category` on `bucket` for the caller.
fn require<T>(
    req: &S3Request<T>,
    op: &str,
    bucket: &str,
    category: Category,
    direction: Direction,
) -> S3Result<()> {
    let account = caller(req)?;
    apply(policy::check_access(
        op,
        bucket,
        account.grants.get(bucket),
        category,
        direction,
    ))
}

/// Checks write access to the object metadata of `bucket` when the request
/// sets tags.
fn require_tag_write<T>(req: &S3Request<T>, op: &str, bucket: &str, tags: bool) -> S3Result<()> {
    if tags {
        require(req, op, bucket, Category::ObjectMetadata, Direction::Write)
    } else {
        Ok(())
    }
}

/// Checks read access to the object data of a copy's source bucket.
fn require_copy_source<T>(req: &S3Request<T>, op: &str, source: &CopySource) -> S3Result<()> {
    let bucket = copy_source_bucket(source)?;
    require(req, op, bucket, Category::ObjectData, Direction::Read)
}

fn copy_source_bucket(source: &CopySource) -> S3Result<&str> {
    match source {
        CopySource::Bucket { bucket, .. } => Ok(bucket),
        _ => Err(s3_error!(
            NotImplemented,
            "only bucket/key copy sources are supported"
        )),
    }
}

#[async_trait::async_trait]
impl S3Access for GrantCheck {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let Some(credentials) = cx.credentials() else {
            return Err(s3_error!(
                AccessDenied,
                "anonymous requests are not allowed; sign requests with the access key from the BucketAccess Secret"
            ));
        };
        // The key may have been revoked since its signature was checked.
        let Some(account) = account_by_key(&self.0, &credentials.access_key).await? else {
            return Err(s3_error!(
                InvalidAccessKeyId,
                "the access key has been revoked"
            ));
        };
        // The signature holds: the connection now counts against its key,
        // before any of the body is read.
        if let Some(connection) = cx.extensions_mut().get::<Arc<Connection>>()
            && let Err(refused) = connection.claim(Owner::Account(account.id.clone()))
        {
            tracing::debug!(account = %account.id, limit = refused.limit, "S3 connection refused: the key holds as many as it may");
            return Err(s3_error!(
                SlowDown,
                "Please reduce your request rate: this access key holds as many connections as it may ({}); close some, or retry later.",
                refused.limit
            ));
        }
        let op = cx.s3_op().name().to_owned();
        let bucket = cx.s3_path().get_bucket_name().map(str::to_owned);
        let grant = bucket
            .as_deref()
            .and_then(|b| account.grants.get(b))
            .copied();
        apply(policy::decide(&op, bucket.as_deref(), grant.as_ref()))?;
        cx.extensions_mut().insert(Caller(account));
        Ok(())
    }

    async fn put_object(&self, req: &mut S3Request<PutObjectInput>) -> S3Result<()> {
        let tags = req.input.tagging.is_some();
        require_tag_write(req, "PutObject", &req.input.bucket, tags)
    }

    async fn create_multipart_upload(
        &self,
        req: &mut S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<()> {
        let tags = req.input.tagging.is_some();
        require_tag_write(req, "CreateMultipartUpload", &req.input.bucket, tags)
    }

    async fn copy_object(&self, req: &mut S3Request<CopyObjectInput>) -> S3Result<()> {
        require_copy_source(req, "CopyObject", &req.input.copy_source)?;
        let replaces_tags = req
            .input
            .tagging_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == TaggingDirective::REPLACE);
        let tags = replaces_tags && req.input.tagging.is_some();
        require_tag_write(req, "CopyObject", &req.input.bucket, tags)
    }

    async fn upload_part_copy(&self, req: &mut S3Request<UploadPartCopyInput>) -> S3Result<()> {
        require_copy_source(req, "UploadPartCopy", &req.input.copy_source)
    }
}
