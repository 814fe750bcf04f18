//! The upstream cases: what upstream's sidecar relies on from a driver of
//! its v1alpha2 API (idempotency by name, error codes, required fields,
//! credential hygiene) and what it reads from replies: the cases particular
//! to upstream's API; the others are those of every one-call API
//! (`crate::one_call::cases`).

use cosi_driver::Code;
use cosi_driver::upstream::{access_mode, object_protocol};

use crate::cases::answered;
use crate::checks::describe;
use crate::context::{Step, Stop, expect_invalid, fail, skip};
use crate::names;
use crate::one_call::setup;

use super::context::{CtxUp, granted_s3_info};

const CREATE: &str = "DriverCreateBucket";
const GET: &str = "DriverGetExistingBucket";
const GRANT: &str = "DriverGrantBucketAccess";
const REVOKE: &str = "DriverRevokeBucketAccess";

pub(super) async fn lists_s3(ctx: &mut CtxUp) -> Step {
    let info = ctx.get_info().await.map_err(answered("DriverGetInfo"))?;
    let s3 = object_protocol::Type::S3 as i32;
    if !info.supported_protocols.iter().any(|p| p.r#type == s3) {
        fail!(
            "supported_protocols {:?} lists no S3 (the protocol these cases exercise)",
            info.supported_protocols
        );
    }
    Ok(())
}

pub(super) async fn two_phase_ids(_: &mut CtxUp) -> Step {
    skip!(
        "upstream's v1alpha2 has no DriverGenerateBucketId or DriverGenerateBucketAccessId: creation and grants are one call each, idempotent by name (checked by the DriverCreateBucket and DriverGrantBucketAccess cases)"
    );
}

pub(super) async fn create_is_idempotent(ctx: &mut CtxUp) -> Step {
    let first = ctx.new_bucket().await?;
    let again = ctx
        .create(ctx.create_request(&first.name))
        .await
        .map_err(answered("a repeated DriverCreateBucket"))?;
    if again.bucket_id != first.id {
        fail!(
            "a repeated DriverCreateBucket for name {:?} returned bucket_id {:?}, not {:?}: the driver is not idempotent by name",
            first.name,
            again.bucket_id,
            first.id
        );
    }
    Ok(())
}

pub(super) async fn create_returns_s3_info(ctx: &mut CtxUp) -> Step {
    let name = names::bucket_name();
    let resp = ctx
        .create(ctx.create_request(&name))
        .await
        .map_err(answered(CREATE))?;
    cosi_driver::validate::identifier("bucket_id", &resp.bucket_id)
        .map_err(|s| Stop::Fail(s.message().to_owned()))?;
    let Some(s3) = resp.protocols.and_then(|p| p.s3) else {
        fail!("the reply has no S3 bucket info, though S3 was requested");
    };
    if s3.bucket_id.is_empty() {
        fail!("the S3 bucket info has an empty bucket_id (the S3 bucket's name)");
    }
    if !s3.endpoint.is_empty() && !s3.endpoint.contains("://") {
        fail!(
            "the S3 bucket info's endpoint {:?} is not a URL (is the region in the endpoint's field?)",
            s3.endpoint
        );
    }
    Ok(())
}

pub(super) async fn get_existing_finds_a_bucket(ctx: &mut CtxUp) -> Step {
    let b = ctx.new_bucket().await?;
    let resp = ctx.get_existing(&b.id).await.map_err(answered(GET))?;
    if resp.bucket_id != b.id {
        fail!(
            "DriverGetExistingBucket of {:?} returned bucket_id {:?}",
            b.id,
            resp.bucket_id
        );
    }
    if resp.protocols.and_then(|p| p.s3).is_none() {
        fail!("the reply has no S3 bucket info, though S3 was requested");
    }
    Ok(())
}

pub(super) async fn get_existing_absent_is_not_found(ctx: &mut CtxUp) -> Step {
    let result = ctx
        .get_existing(&format!("absent-{}", names::bucket_name()))
        .await;
    match result {
        Err(s) if s.code() == Code::NotFound => Ok(()),
        Err(s) => fail!("{GET} of an absent bucket answered {}", describe(&s)),
        Ok(_) => fail!("{GET} of an absent bucket answered OK"),
    }
}

pub(super) async fn get_existing_requires_an_id(ctx: &mut CtxUp) -> Step {
    let result = ctx.get_existing("").await;
    expect_invalid(GET, "an empty existing_bucket_id", &result)
}

pub(super) async fn grant_is_complete(ctx: &mut CtxUp) -> Step {
    let b = ctx.new_bucket().await?;
    let resp = ctx
        .grant(ctx.grant_request(&b.id, &names::account_name()))
        .await
        .map_err(answered(GRANT))?;
    cosi_driver::validate::identifier("account_id", &resp.account_id)
        .map_err(|s| Stop::Fail(s.message().to_owned()))?;
    granted_s3_info(&resp, &b.id).map_err(Stop::Fail)?;
    match resp.credentials.as_ref().and_then(|c| c.s3.as_ref()) {
        Some(k) if !k.access_key_id.is_empty() && !k.access_secret_key.is_empty() => Ok(()),
        _ => fail!("the reply has no S3 access key and secret"),
    }
}

pub(super) async fn grant_is_idempotent(ctx: &mut CtxUp) -> Step {
    let b = ctx.new_bucket().await?;
    let name = names::account_name();
    let first = ctx
        .grant(ctx.grant_request(&b.id, &name))
        .await
        .map_err(|s| setup(GRANT, &s))?;
    let again = ctx
        .grant(ctx.grant_request(&b.id, &name))
        .await
        .map_err(answered("a repeated DriverGrantBucketAccess"))?;
    if again.account_id != first.account_id {
        fail!(
            "a repeated DriverGrantBucketAccess for name {name:?} returned account_id {:?}, not {:?}: the driver is not idempotent by name",
            again.account_id,
            first.account_id
        );
    }
    Ok(())
}

pub(super) async fn grant_requires_fields(ctx: &mut CtxUp) -> Step {
    let b = ctx.new_bucket().await?;
    let account = names::account_name();
    let base = ctx.grant_request(&b.id, &account);
    let cases = [
        ("an empty account_name", {
            let mut r = base.clone();
            r.account_name.clear();
            r
        }),
        ("no buckets", {
            let mut r = base.clone();
            r.buckets.clear();
            r
        }),
        ("an empty bucket_id", {
            let mut r = base.clone();
            r.buckets[0].bucket_id.clear();
            r
        }),
        ("no protocol", {
            let mut r = base.clone();
            r.protocol = None;
            r
        }),
        ("no authentication_type", {
            let mut r = base.clone();
            r.authentication_type = None;
            r
        }),
        ("an UNKNOWN access mode", {
            let mut r = base.clone();
            r.buckets[0].access_mode = Some(cosi_driver::upstream::AccessMode {
                mode: access_mode::Mode::Unknown as i32,
            });
            r
        }),
    ];
    for (what, req) in cases {
        let result = ctx.grant(req).await;
        expect_invalid(GRANT, what, &result)?;
    }
    Ok(())
}

pub(super) async fn revoke_requires_fields(ctx: &mut CtxUp) -> Step {
    let b = ctx.new_bucket().await?;
    let no_account = ctx.revoke(&b.id, "").await;
    expect_invalid(REVOKE, "an empty account_id", &no_account)?;
    let mut no_buckets = ctx.revoke_request(&b.id, "some-account");
    no_buckets.buckets.clear();
    // Sent as it is: with no bucket, it revokes nothing the case tracks.
    let no_buckets = ctx.send(no_buckets).await;
    expect_invalid(REVOKE, "no buckets", &no_buckets)?;
    let no_bucket = ctx.revoke("", "some-account").await;
    expect_invalid(REVOKE, "an empty bucket_id", &no_bucket)
}
