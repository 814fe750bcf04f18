//! The upstream cases: what upstream's sidecar relies on from a driver of
//! its v1alpha2 API (idempotency by name, error codes, required fields,
//! credential hygiene) and what it reads from replies.

use cosi_driver::Code;
use cosi_driver::upstream::{DriverGetInfoRequest, access_mode, object_protocol};

use crate::cases::data_plane::{BODY, Want, poll, secs, write_object};
use crate::cases::{answered, same_name};
use crate::checks::describe;
use crate::context::{
    OrFail, Step, Stop, expect_already_exists, expect_invalid, fail, proto_map, skip,
};
use crate::names;
use crate::s3::Access;
use crate::target::Target;

use super::context::{Created, CtxUp, granted_s3_info, setup};

const CREATE: &str = "DriverCreateBucket";
const GET: &str = "DriverGetExistingBucket";
const DELETE: &str = "DriverDeleteBucket";
const GRANT: &str = "DriverGrantBucketAccess";
const REVOKE: &str = "DriverRevokeBucketAccess";

pub(super) async fn name_is_a_domain_name(ctx: &mut CtxUp) -> Step {
    cosi_driver::validate::driver_name(&ctx.driver.name).or_fail("")
}

pub(super) async fn answers_the_same(ctx: &mut CtxUp) -> Step {
    let again = ctx
        .send(DriverGetInfoRequest {})
        .await
        .map_err(answered("a second DriverGetInfo"))?;
    same_name(&ctx.driver.name, &again.name)
}

pub(super) async fn lists_s3(ctx: &mut CtxUp) -> Step {
    let info = ctx
        .send(DriverGetInfoRequest {})
        .await
        .map_err(answered("DriverGetInfo"))?;
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

pub(super) async fn created_ids_are_unique(ctx: &mut CtxUp) -> Step {
    let a = ctx.new_bucket().await?;
    let b = ctx.new_bucket().await?;
    if a.id == b.id {
        fail!(
            "names {:?} and {:?} both got bucket_id {:?}",
            a.name,
            b.name,
            a.id
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

pub(super) async fn create_refuses_incompatible_repeat(ctx: &mut CtxUp) -> Step {
    let Some(other) = ctx.config.bucket.incompatible.clone() else {
        skip!("no incompatibleParameters configured (see --parameters)");
    };
    let b = ctx.new_bucket().await?;
    let mut req = ctx.create_request(&b.name);
    req.parameters = proto_map(&other);
    let result = ctx.create(req).await;
    expect_already_exists(CREATE, "the same name and incompatible parameters", &result)
}

pub(super) async fn create_refuses_invalid_parameters(ctx: &mut CtxUp) -> Step {
    let Some(invalid) = ctx.config.bucket.invalid.clone() else {
        skip!("no invalidParameters configured (see --parameters)");
    };
    let mut req = ctx.create_request(&names::bucket_name());
    req.parameters = proto_map(&invalid);
    let result = ctx.create(req).await;
    expect_invalid(CREATE, "invalid parameters", &result)
}

pub(super) async fn create_requires_a_name(ctx: &mut CtxUp) -> Step {
    let result = ctx.create(ctx.create_request("")).await;
    expect_invalid(CREATE, "an empty name", &result)
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

pub(super) async fn delete_deletes(ctx: &mut CtxUp) -> Step {
    let b = ctx.new_bucket().await?;
    ctx.delete(&b.id).await.map_err(answered(DELETE))?;
    ctx.delete(&b.id)
        .await
        .map_err(answered("a repeated DriverDeleteBucket"))
}

pub(super) async fn delete_absent_is_ok(ctx: &mut CtxUp) -> Step {
    ctx.delete(&format!("absent-{}", names::bucket_name()))
        .await
        .map_err(answered("DriverDeleteBucket of an absent bucket"))
}

pub(super) async fn delete_requires_a_bucket_id(ctx: &mut CtxUp) -> Step {
    let result = ctx.delete("").await;
    expect_invalid(DELETE, "an empty bucket_id", &result)
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

pub(super) async fn granted_ids_are_unique(ctx: &mut CtxUp) -> Step {
    let b = ctx.new_bucket().await?;
    let one = ctx.new_grant(&b.id).await?;
    let two = ctx.new_grant(&b.id).await?;
    if one.account_id == two.account_id {
        fail!("two names got the same account_id {:?}", one.account_id);
    }
    Ok(())
}

pub(super) async fn grant_refuses_incompatible_repeat(ctx: &mut CtxUp) -> Step {
    let Some(other) = ctx.config.access.incompatible.clone() else {
        skip!("no incompatibleParameters configured (see --access-parameters)");
    };
    let b = ctx.new_bucket().await?;
    let name = names::account_name();
    ctx.grant(ctx.grant_request(&b.id, &name))
        .await
        .map_err(|s| setup(GRANT, &s))?;
    let mut req = ctx.grant_request(&b.id, &name);
    req.parameters = proto_map(&other);
    let result = ctx.grant(req).await;
    expect_already_exists(GRANT, "the same name and incompatible parameters", &result)
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

pub(super) async fn revoke_revokes(ctx: &mut CtxUp) -> Step {
    let b = ctx.new_bucket().await?;
    let resp = ctx.new_grant(&b.id).await?;
    ctx.revoke(ctx.revoke_request(&b.id, &resp.account_id))
        .await
        .map_err(answered(REVOKE))?;
    ctx.revoke(ctx.revoke_request(&b.id, &resp.account_id))
        .await
        .map_err(answered("a repeated DriverRevokeBucketAccess"))
}

pub(super) async fn revoke_absent_is_ok(ctx: &mut CtxUp) -> Step {
    let b = ctx.new_bucket().await?;
    let req = ctx.revoke_request(&b.id, &format!("absent-{}", names::account_name()));
    ctx.revoke(req)
        .await
        .map_err(answered("DriverRevokeBucketAccess of an absent account"))
}

pub(super) async fn revoke_requires_fields(ctx: &mut CtxUp) -> Step {
    let b = ctx.new_bucket().await?;
    let no_account = ctx.revoke(ctx.revoke_request(&b.id, "")).await;
    expect_invalid(REVOKE, "an empty account_id", &no_account)?;
    let mut no_buckets = ctx.revoke_request(&b.id, "some-account");
    no_buckets.buckets.clear();
    let no_buckets = ctx.revoke(no_buckets).await;
    expect_invalid(REVOKE, "no buckets", &no_buckets)?;
    let no_bucket = ctx.revoke(ctx.revoke_request("", "some-account")).await;
    expect_invalid(REVOKE, "an empty bucket_id", &no_bucket)
}

pub(super) async fn no_credential_in_errors(ctx: &mut CtxUp) -> Step {
    let b = ctx.new_bucket().await?;
    let name = names::account_name();
    ctx.grant(ctx.grant_request(&b.id, &name))
        .await
        .map_err(|s| setup(GRANT, &s))?;
    // Failing calls after a grant: their messages are checked for its
    // credentials (a leak is reported as a violation of this case).
    let _ = ctx.grant(ctx.grant_request(&b.id, "")).await;
    let _ = ctx.grant(ctx.grant_request("", &name)).await;
    let _ = ctx.revoke(ctx.revoke_request(&b.id, "")).await;
    let _ = ctx.delete("").await;
    Ok(())
}

fn data_plane_enabled(ctx: &CtxUp) -> Step {
    if !ctx.config.data_plane {
        skip!("data-plane checks are off (enable with --data-plane)");
    }
    Ok(())
}

/// With the data plane on: a new bucket, an account granted access to it,
/// and an S3 client built from the grant's reply.
async fn granted_target(ctx: &mut CtxUp) -> Result<(Created, String, Target), Stop> {
    data_plane_enabled(ctx)?;
    let b = ctx.new_bucket().await?;
    let resp = ctx.new_grant(&b.id).await?;
    let target = ctx.s3_target(&b.id, &resp)?;
    Ok((b, resp.account_id, target))
}

pub(super) async fn data_plane_read_write(ctx: &mut CtxUp) -> Step {
    let (b, _, target) = granted_target(ctx).await?;
    let failure = format!(
        "the granted credentials could not write to the bucket the grant's reply names (bucket {:?})",
        b.id
    );
    let key = write_object(ctx, &target, &target, &failure).await?;
    let timeout = ctx.config.propagation_timeout;
    match poll(timeout, Want::Allowed, || target.get(&key)).await {
        Access::Allowed(body) if body == BODY => Ok(()),
        Access::Allowed(_) => fail!("the object read back differs from the one written"),
        Access::Denied(e) | Access::Failed(e) => fail!(
            "the granted credentials could not read back within {}: {}",
            secs(timeout),
            ctx.redact(&e)
        ),
    }
}

pub(super) async fn data_plane_revoked_fail(ctx: &mut CtxUp) -> Step {
    let (b, account_id, target) = granted_target(ctx).await?;
    // A second account removes the object at cleanup.
    let cleaner = ctx.new_grant(&b.id).await?;
    let cleaner = ctx.s3_target(&b.id, &cleaner)?;
    let failure = "setup: the granted credentials could not write";
    let key = write_object(ctx, &target, &cleaner, failure).await?;
    let timeout = ctx.config.propagation_timeout;
    ctx.revoke(ctx.revoke_request(&b.id, &account_id))
        .await
        .map_err(answered(REVOKE))?;
    match poll(timeout, Want::Denied, || target.get(&key)).await {
        Access::Denied(_) => Ok(()),
        Access::Allowed(_) => fail!(
            "revoked credentials still read bucket {:?} after {}",
            b.id,
            secs(timeout)
        ),
        Access::Failed(e) => fail!(
            "reading with revoked credentials failed without a denial: {}",
            ctx.redact(&e)
        ),
    }
}
