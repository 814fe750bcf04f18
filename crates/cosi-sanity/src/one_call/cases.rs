//! The cases whose check is the same on every one-call API (idempotency
//! aside, which the APIs define differently): the driver's name, what
//! creation, deletion, grants and revocation must answer, credential
//! hygiene, and the data plane. Each API's module registers them under its
//! own case names.

use crate::cases::data_plane::{BODY, Want, poll, secs, write_object};
use crate::cases::{answered, same_name};
use crate::context::{
    OrFail, Step, Stop, expect_already_exists, expect_invalid, fail, proto_map, skip,
};
use crate::names;
use crate::s3::Access;
use crate::target::Target;

use super::{Created, OneCallApi, OneCallCtx, setup};

const CREATE: &str = "DriverCreateBucket";
const DELETE: &str = "DriverDeleteBucket";
const GRANT: &str = "DriverGrantBucketAccess";
const REVOKE: &str = "DriverRevokeBucketAccess";

pub(crate) async fn name_is_a_domain_name<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    cosi_driver::validate::driver_name(&ctx.driver.name).or_fail("")
}

pub(crate) async fn answers_the_same<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    let again = ctx
        .get_info()
        .await
        .map_err(answered("a second DriverGetInfo"))?;
    same_name(&ctx.driver.name, A::driver_name(&again))
}

pub(crate) async fn created_ids_are_unique<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
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

pub(crate) async fn create_refuses_incompatible_repeat<A: OneCallApi>(
    ctx: &mut OneCallCtx<A>,
) -> Step {
    let Some(other) = ctx.config.bucket.incompatible.clone() else {
        skip!("no incompatibleParameters configured (see --parameters)");
    };
    let b = ctx.new_bucket().await?;
    let req = A::create_request(&b.name, proto_map(&other));
    let result = ctx.create(req).await;
    expect_already_exists(CREATE, "the same name and incompatible parameters", &result)
}

pub(crate) async fn create_refuses_invalid_parameters<A: OneCallApi>(
    ctx: &mut OneCallCtx<A>,
) -> Step {
    let Some(invalid) = ctx.config.bucket.invalid.clone() else {
        skip!("no invalidParameters configured (see --parameters)");
    };
    let req = A::create_request(&names::bucket_name(), proto_map(&invalid));
    let result = ctx.create(req).await;
    expect_invalid(CREATE, "invalid parameters", &result)
}

pub(crate) async fn create_requires_a_name<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    let result = ctx.create(ctx.create_request("")).await;
    expect_invalid(CREATE, "an empty name", &result)
}

pub(crate) async fn delete_deletes<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    let b = ctx.new_bucket().await?;
    ctx.delete(&b.id).await.map_err(answered(DELETE))?;
    ctx.delete(&b.id)
        .await
        .map_err(answered("a repeated DriverDeleteBucket"))
}

pub(crate) async fn delete_absent_is_ok<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    ctx.delete(&format!("absent-{}", names::bucket_name()))
        .await
        .map_err(answered("DriverDeleteBucket of an absent bucket"))
}

pub(crate) async fn delete_requires_a_bucket_id<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    let result = ctx.delete("").await;
    expect_invalid(DELETE, "an empty bucket_id", &result)
}

pub(crate) async fn granted_ids_are_unique<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    let b = ctx.new_bucket().await?;
    let one = ctx.new_grant(&b.id).await?;
    let two = ctx.new_grant(&b.id).await?;
    if A::account_id(&one) == A::account_id(&two) {
        fail!(
            "two names got the same account_id {:?}",
            A::account_id(&one)
        );
    }
    Ok(())
}

pub(crate) async fn grant_refuses_incompatible_repeat<A: OneCallApi>(
    ctx: &mut OneCallCtx<A>,
) -> Step {
    let Some(other) = ctx.config.access.incompatible.clone() else {
        skip!("no incompatibleParameters configured (see --access-parameters)");
    };
    let b = ctx.new_bucket().await?;
    let name = names::account_name();
    ctx.grant(ctx.grant_request(&b.id, &name))
        .await
        .map_err(|s| setup(GRANT, &s))?;
    let req = A::grant_request(&b.id, &name, proto_map(&other));
    let result = ctx.grant(req).await;
    expect_already_exists(GRANT, "the same name and incompatible parameters", &result)
}

pub(crate) async fn revoke_revokes<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    let b = ctx.new_bucket().await?;
    let resp = ctx.new_grant(&b.id).await?;
    let account_id = A::account_id(&resp);
    ctx.revoke(&b.id, account_id)
        .await
        .map_err(answered(REVOKE))?;
    ctx.revoke(&b.id, account_id)
        .await
        .map_err(answered("a repeated DriverRevokeBucketAccess"))
}

pub(crate) async fn revoke_absent_is_ok<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    let b = ctx.new_bucket().await?;
    ctx.revoke(&b.id, &format!("absent-{}", names::account_name()))
        .await
        .map_err(answered("DriverRevokeBucketAccess of an absent account"))
}

pub(crate) async fn no_credential_in_errors<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    let b = ctx.new_bucket().await?;
    let name = names::account_name();
    ctx.grant(ctx.grant_request(&b.id, &name))
        .await
        .map_err(|s| setup(GRANT, &s))?;
    // Failing calls after a grant: their messages are checked for its
    // credentials (a leak is reported as a violation of this case).
    let _ = ctx.grant(ctx.grant_request(&b.id, "")).await;
    let _ = ctx.grant(ctx.grant_request("", &name)).await;
    let _ = ctx.revoke(&b.id, "").await;
    let _ = ctx.delete("").await;
    Ok(())
}

fn data_plane_enabled<A: OneCallApi>(ctx: &OneCallCtx<A>) -> Step {
    if !ctx.config.data_plane {
        skip!("data-plane checks are off (enable with --data-plane)");
    }
    Ok(())
}

/// With the data plane on: a new bucket, an account granted access to it,
/// and an S3 client built from the grant's reply.
async fn granted_target<A: OneCallApi>(
    ctx: &mut OneCallCtx<A>,
) -> Result<(Created, String, Target), Stop> {
    data_plane_enabled(ctx)?;
    let b = ctx.new_bucket().await?;
    let resp = ctx.new_grant(&b.id).await?;
    A::check_data_plane_grant(&resp)?;
    let target = ctx.s3_target(&b, &resp)?;
    Ok((b, A::account_id(&resp).to_owned(), target))
}

pub(crate) async fn data_plane_read_write<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    let (b, _, target) = granted_target(ctx).await?;
    let failure = A::unwritable(&b);
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

pub(crate) async fn data_plane_revoked_fail<A: OneCallApi>(ctx: &mut OneCallCtx<A>) -> Step {
    let (b, account_id, target) = granted_target(ctx).await?;
    // A second account removes the object at cleanup.
    let cleaner = ctx.new_grant(&b.id).await?;
    let cleaner = ctx.s3_target(&b, &cleaner)?;
    let failure = "setup: the granted credentials could not write";
    let key = write_object(ctx, &target, &cleaner, failure).await?;
    let timeout = ctx.config.propagation_timeout;
    ctx.revoke(&b.id, &account_id)
        .await
        .map_err(answered(REVOKE))?;
    match poll(timeout, Want::Denied, || target.get(&key)).await {
        Access::Denied(_) => Ok(()),
        Access::Allowed(_) => fail!(
            "revoked credentials still read bucket {:?} after {}",
            A::data_bucket(&b),
            secs(timeout)
        ),
        Access::Failed(e) => fail!(
            "reading with revoked credentials failed without a denial: {}",
            ctx.redact(&e)
        ),
    }
}
