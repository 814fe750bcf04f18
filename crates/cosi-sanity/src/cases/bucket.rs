//! DriverGenerateBucketId, DriverCreateBucket, DriverGetBucket and
//! DriverDeleteBucket.

use std::collections::HashMap;

use cosi_driver::Code;
use cosi_driver::proto::*;

use crate::checks::{self, describe, expect_code, protocol_name};
use crate::context::{
    Ctx, OrFail, Step, Stop, expect_already_exists, expect_invalid, fail, proto_map, skip,
};
use crate::names;

use super::answered;

const GENERATE: &str = "DriverGenerateBucketId";
const CREATE: &str = "DriverCreateBucket";
const GET: &str = "DriverGetBucket";
const DELETE: &str = "DriverDeleteBucket";

const NO_GET: &str = "the driver does not implement DriverGetBucket (no static provisioning)";

fn get_request(ctx: &Ctx, id: &str) -> Result<DriverGetBucketRequest, Stop> {
    Ok(DriverGetBucketRequest {
        bucket_id: id.to_owned(),
        protocols: vec![ctx.protocol()? as i32],
        parameters: ctx.bucket_parameters(),
    })
}

fn delete_request(ctx: &Ctx, id: &str) -> DriverDeleteBucketRequest {
    DriverDeleteBucketRequest {
        bucket_id: id.to_owned(),
        parameters: ctx.bucket_parameters(),
    }
}

/// A phase of dynamic provisioning: both must refuse invalid parameters
/// and a request that does not name the bucket.
#[derive(Clone, Copy)]
pub(super) enum Phase {
    /// DriverGenerateBucketId, for a bucket name.
    Generate,
    /// DriverCreateBucket, for a bucket ID.
    Create,
}

impl Phase {
    /// A bucket the phase's request can name: a fresh name, or the ID
    /// phase 1 gives a fresh name.
    async fn fresh_key(self, ctx: &mut Ctx) -> Result<String, Stop> {
        match self {
            Phase::Generate => Ok(names::bucket_name()),
            Phase::Create => Ok(ctx.new_bucket_id().await?.1),
        }
    }

    /// The request field that names the bucket.
    fn key_field(self) -> &'static str {
        match self {
            Phase::Generate => "name",
            Phase::Create => "bucket_id",
        }
    }

    /// Sends the phase's request for the bucket `key`, with `parameters`
    /// instead of the configured ones when given: it must be refused with
    /// InvalidArgument. `what` describes the request.
    async fn expect_invalid(
        self,
        ctx: &mut Ctx,
        key: &str,
        parameters: Option<HashMap<String, String>>,
        what: &str,
    ) -> Step {
        let (rpc, result) = match self {
            Phase::Generate => {
                let mut req = ctx.generate_request(key)?;
                req.parameters = parameters.unwrap_or(req.parameters);
                (GENERATE, ctx.send(req).await.map(drop))
            }
            Phase::Create => {
                let mut req = ctx.create_request(key)?;
                req.parameters = parameters.unwrap_or(req.parameters);
                (CREATE, ctx.create_bucket(req).await.map(drop))
            }
        };
        expect_invalid(rpc, what, &result)
    }
}

/// `phase` with the configured invalid parameters is InvalidArgument.
pub(super) async fn refuses_invalid_parameters(ctx: &mut Ctx, phase: Phase) -> Step {
    let invalid = ctx.invalid_bucket_parameters()?;
    let key = phase.fresh_key(ctx).await?;
    phase
        .expect_invalid(ctx, &key, Some(invalid), "the invalid parameters")
        .await
}

/// `phase` without the field that names the bucket is InvalidArgument.
pub(super) async fn requires_a_key(ctx: &mut Ctx, phase: Phase) -> Step {
    let what = format!("an empty {}", phase.key_field());
    phase.expect_invalid(ctx, "", None, &what).await
}

/// The bucket ID DriverGenerateBucketId gives `name`; `call` names the
/// call in its failure.
async fn generated_id(ctx: &mut Ctx, name: &str, call: &'static str) -> Result<String, Stop> {
    let req = ctx.generate_request(name)?;
    let resp = ctx.send(req).await.map_err(answered(call))?;
    Ok(resp.bucket_id)
}

pub(super) async fn generate_is_idempotent(ctx: &mut Ctx) -> Step {
    let name = names::bucket_name();
    let first = generated_id(ctx, &name, GENERATE).await?;
    let second = generated_id(ctx, &name, "a repeated DriverGenerateBucketId").await?;
    if first != second {
        fail!("two calls for name {name:?} returned different bucket_ids {first:?} and {second:?}");
    }
    Ok(())
}

pub(super) async fn generated_id_is_well_formed(ctx: &mut Ctx) -> Step {
    let id = generated_id(ctx, &names::bucket_name(), GENERATE).await?;
    cosi_driver::validate::identifier("bucket_id", &id)
        .map_err(|s| Stop::Fail(s.message().to_owned()))
}

pub(super) async fn generated_ids_are_unique(ctx: &mut Ctx) -> Step {
    let (a, b) = (names::bucket_name(), names::bucket_name());
    let id_a = generated_id(ctx, &a, GENERATE).await?;
    let id_b = generated_id(ctx, &b, GENERATE).await?;
    if id_a == id_b {
        fail!("names {a:?} and {b:?} both got bucket_id {id_a:?}; IDs must be unique");
    }
    Ok(())
}

pub(super) async fn generate_creates_nothing(ctx: &mut Ctx) -> Step {
    let name = names::bucket_name();
    let id = generated_id(ctx, &name, GENERATE).await?;
    let again = generated_id(ctx, &name, GENERATE).await?;
    if id != again {
        skip!(
            "the driver does not derive bucket_id deterministically from the name, \
             so there is no ID to look up before DriverCreateBucket"
        );
    }
    let req = get_request(ctx, &id)?;
    match ctx.get_bucket(req).await {
        Err(s) if s.code() == Code::NotFound => Ok(()),
        Err(s) if s.code() == Code::Unimplemented => skip!("{NO_GET}"),
        Err(s) => fail!(
            "DriverGetBucket of the generated, not yet created bucket_id {id:?} answered {} instead of NotFound",
            describe(&s)
        ),
        Ok(_) => {
            ctx.track_bucket(&id, ctx.bucket_parameters());
            fail!(
                "bucket {id:?} exists right after DriverGenerateBucketId: phase 1 must not create a backend bucket"
            )
        }
    }
}

pub(super) async fn create_covers_protocols(ctx: &mut Ctx) -> Step {
    let protocol = ctx.protocol()?;
    let (_, id) = ctx.new_bucket_id().await?;
    let req = ctx.create_request(&id)?;
    let resp = ctx.create_bucket(req).await.map_err(answered(CREATE))?;
    checks::covers_protocols(resp.protocols.as_ref(), &[protocol]).or_fail(CREATE)
}

pub(super) async fn create_is_idempotent(ctx: &mut Ctx) -> Step {
    let (_, id) = ctx.new_bucket_id().await?;
    let req = ctx.create_request(&id)?;
    let first = ctx
        .create_bucket(req.clone())
        .await
        .map_err(answered(CREATE))?;
    let second = ctx.create_bucket(req).await.map_err(answered(
        "a repeated DriverCreateBucket with the same parameters",
    ))?;
    if first.protocols != second.protocols {
        fail!(
            "a repeated DriverCreateBucket returned different bucket info: {:?} then {:?}",
            first.protocols,
            second.protocols
        );
    }
    Ok(())
}

pub(super) async fn create_refuses_incompatible_repeat(ctx: &mut Ctx) -> Step {
    let Some(incompatible) = ctx.config.bucket.incompatible.clone() else {
        skip!(
            "no incompatible bucket parameters given (incompatibleParameters in --parameters FILE)"
        );
    };
    let bucket = ctx.new_bucket().await?;
    let mut req = ctx.create_request(&bucket.id)?;
    req.parameters = proto_map(&incompatible);
    let result = ctx.create_bucket(req).await;
    expect_already_exists(
        CREATE,
        "the incompatible parameters for an existing bucket",
        &result,
    )
}

pub(super) async fn create_refuses_unsupported_protocol(ctx: &mut Ctx) -> Step {
    let Some(unsupported) = checks::unsupported_protocol(&ctx.driver.info.supported_protocols)
    else {
        skip!("the driver supports every protocol");
    };
    let (_, id) = ctx.new_bucket_id().await?;
    let mut req = ctx.create_request(&id)?;
    req.protocols = vec![unsupported as i32];
    let result = ctx.create_bucket(req).await;
    let what = format!(
        "protocols [{}], which it does not advertise",
        protocol_name(unsupported)
    );
    expect_invalid(CREATE, &what, &result)
}

pub(super) async fn get_finds_a_bucket(ctx: &mut Ctx) -> Step {
    let protocol = ctx.protocol()?;
    let bucket = ctx.new_bucket().await?;
    let req = get_request(ctx, &bucket.id)?;
    match ctx.get_bucket(req).await {
        Ok(resp) => checks::covers_protocols(resp.protocols.as_ref(), &[protocol]).or_fail(GET),
        Err(s) if s.code() == Code::Unimplemented => skip!("{NO_GET}"),
        Err(s) => fail!(
            "DriverGetBucket of an existing bucket answered {}",
            describe(&s)
        ),
    }
}

pub(super) async fn get_unknown_is_not_found(ctx: &mut Ctx) -> Step {
    // An ID of the driver's own form that was never created.
    let (_, id) = ctx.new_bucket_id().await?;
    let req = get_request(ctx, &id)?;
    match ctx.get_bucket(req).await {
        Err(s) if s.code() == Code::Unimplemented => skip!("{NO_GET}"),
        result => expect_code(
            GET,
            "a bucket_id that was never created",
            &result,
            Code::NotFound,
        )
        .or_fail(""),
    }
}

pub(super) async fn get_requires_a_bucket_id(ctx: &mut Ctx) -> Step {
    let req = get_request(ctx, "")?;
    match ctx.get_bucket(req).await {
        Err(s) if s.code() == Code::Unimplemented => skip!("{NO_GET}"),
        result => expect_invalid(GET, "an empty bucket_id", &result),
    }
}

pub(super) async fn delete_deletes(ctx: &mut Ctx) -> Step {
    let bucket = ctx.new_bucket().await?;
    let req = delete_request(ctx, &bucket.id);
    ctx.delete_bucket(req).await.map_err(answered(DELETE))?;
    let req = get_request(ctx, &bucket.id)?;
    match ctx.get_bucket(req).await {
        Err(s) if matches!(s.code(), Code::NotFound | Code::Unimplemented) => Ok(()),
        Err(s) => fail!(
            "DriverGetBucket of the deleted bucket answered {} instead of NotFound",
            describe(&s)
        ),
        Ok(_) => {
            ctx.track_bucket(&bucket.id, ctx.bucket_parameters());
            fail!(
                "bucket {:?} still exists after DriverDeleteBucket returned OK",
                bucket.id
            )
        }
    }
}

pub(super) async fn delete_absent_is_ok(ctx: &mut Ctx) -> Step {
    let (_, never_created) = ctx.new_bucket_id().await?;
    let req = delete_request(ctx, &never_created);
    ctx.delete_bucket(req).await.map_err(answered(
        "DriverDeleteBucket of a bucket that was never created",
    ))?;
    let bucket = ctx.new_bucket().await?;
    let req = delete_request(ctx, &bucket.id);
    ctx.delete_bucket(req.clone())
        .await
        .map_err(answered(DELETE))?;
    ctx.delete_bucket(req)
        .await
        .map_err(answered("a second DriverDeleteBucket of a deleted bucket"))?;
    Ok(())
}

pub(super) async fn delete_requires_a_bucket_id(ctx: &mut Ctx) -> Step {
    let req = delete_request(ctx, "");
    let result = ctx.delete_bucket(req).await;
    expect_invalid(DELETE, "an empty bucket_id", &result)
}
