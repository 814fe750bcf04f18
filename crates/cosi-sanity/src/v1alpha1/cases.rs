//! The v1alpha1 cases: the rules of the v1alpha1 driver specification
//! (idempotency by name, error codes, size limits, credential hygiene) and
//! what the v1alpha1 sidecars read from replies: the cases particular to
//! v1alpha1; the others are those of every one-call API
//! (`crate::one_call::cases`).

use cosi_driver::Code;
use cosi_driver::v1alpha1::{DriverGrantBucketAccessResponse, credential_keys};

use crate::cases::answered;
use crate::checks::describe;
use crate::context::{Step, Stop, expect_invalid, fail};
use crate::names;
use crate::one_call::setup;

use super::context::Ctx1;

const GRANT: &str = "DriverGrantBucketAccess";
const REVOKE: &str = "DriverRevokeBucketAccess";

/// The v1alpha1 specification's limit on string fields.
pub const MAX_STRING_BYTES: usize = 128;
/// The v1alpha1 specification's limit on a `map<string, string>`.
pub const MAX_MAP_BYTES: usize = 4096;

pub(super) async fn create_is_idempotent(ctx: &mut Ctx1) -> Step {
    let first = ctx.new_bucket().await?;
    match ctx.create(ctx.create_request(&first.name)).await {
        Ok(again) if again.bucket_id == first.id => Ok(()),
        Ok(again) => fail!(
            "a repeated DriverCreateBucket for name {:?} returned bucket_id {:?}, not {:?}: the driver is not idempotent by name",
            first.name,
            again.bucket_id,
            first.id
        ),
        // The v1alpha1 specification allows ALREADY_EXISTS when the first
        // call succeeded.
        Err(s) if s.code() == Code::AlreadyExists => Ok(()),
        Err(s) => fail!("a repeated DriverCreateBucket answered {}", describe(&s)),
    }
}

pub(super) async fn created_id_is_well_formed(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    cosi_driver::validate::identifier_within("bucket_id", &b.id, MAX_STRING_BYTES)
        .map_err(|s| Stop::Fail(s.message().to_owned()))
}

/// Checks the credentials of a grant for S3: `credentials["s3"]` with the
/// keys the v1alpha1 sidecar reads, within the specification's map limit.
pub(super) fn s3_credentials(resp: &DriverGrantBucketAccessResponse) -> Step {
    use credential_keys::s3;
    let Some(details) = resp.credentials.get(credential_keys::S3) else {
        let mut have: Vec<&str> = resp.credentials.keys().map(String::as_str).collect();
        have.sort();
        fail!(
            "the credentials map has no \"s3\" entry (it has {:?})",
            have
        );
    };
    let missing: Vec<&str> = [s3::ACCESS_KEY_ID, s3::ACCESS_SECRET_KEY, s3::ENDPOINT]
        .into_iter()
        .filter(|k| {
            !credential_keys::spellings(k)
                .iter()
                .any(|k| details.secrets.get(*k).is_some_and(|v| !v.is_empty()))
        })
        .collect();
    if !missing.is_empty() {
        fail!(
            "credentials[\"s3\"] lacks key(s) {} (the keys v1alpha1 sidecars read)",
            missing.join(", ")
        );
    }
    let bytes: usize = details.secrets.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > MAX_MAP_BYTES {
        fail!("credentials[\"s3\"] holds {bytes} bytes; the limit of a map is {MAX_MAP_BYTES}");
    }
    Ok(())
}

pub(super) async fn grant_is_complete(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    let resp = ctx
        .grant(ctx.grant_request(&b.id, &names::account_name()))
        .await
        .map_err(answered(GRANT))?;
    cosi_driver::validate::identifier_within("account_id", &resp.account_id, MAX_STRING_BYTES)
        .map_err(|s| Stop::Fail(s.message().to_owned()))?;
    s3_credentials(&resp)
}

pub(super) async fn grant_is_idempotent(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    let name = names::account_name();
    let first = ctx
        .grant(ctx.grant_request(&b.id, &name))
        .await
        .map_err(|s| setup(GRANT, &s))?;
    match ctx.grant(ctx.grant_request(&b.id, &name)).await {
        Ok(again) if again.account_id == first.account_id => Ok(()),
        Ok(again) => fail!(
            "a repeated DriverGrantBucketAccess for name {name:?} returned account_id {:?}, not {:?}: the driver is not idempotent by name",
            again.account_id,
            first.account_id
        ),
        Err(s) if s.code() == Code::AlreadyExists => Ok(()),
        Err(s) => fail!(
            "a repeated DriverGrantBucketAccess answered {}",
            describe(&s)
        ),
    }
}

pub(super) async fn grant_requires_fields(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    let no_bucket = ctx
        .grant(ctx.grant_request("", &names::account_name()))
        .await;
    expect_invalid(GRANT, "an empty bucket_id", &no_bucket)?;
    let no_name = ctx.grant(ctx.grant_request(&b.id, "")).await;
    expect_invalid(GRANT, "an empty name", &no_name)
}

pub(super) async fn revoke_requires_fields(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    let no_account = ctx.revoke(&b.id, "").await;
    expect_invalid(REVOKE, "an empty account_id", &no_account)?;
    let no_bucket = ctx.revoke("", "some-account").await;
    expect_invalid(REVOKE, "an empty bucket_id", &no_bucket)
}
