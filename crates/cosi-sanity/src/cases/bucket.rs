//! DriverGenerateBucketId, DriverCreateBucket, DriverGetBucket and
//! DriverDeleteBucket.

use cosi_driver::Code;
use cosi_driver::proto::*;

use crate::checks::{self, describe, expect_code, protocol_name};
use crate::context::{
    CaseContext as _, Ctx, OrFail, Step, Stop, expect_already_exists, expect_invalid, fail,
    proto_map, skip,
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

pub(super) async fn generate_is_idempotent(ctx: &mut Ctx) -> Step {
    let name = names::bucket_name();
    let req = ctx.generate_request(&name)?;
    let first = ctx
        .generate_bucket_id(req.clone())
        .await
        .map_err(answered(GENERATE))?;
    let second = ctx
        .generate_bucket_id(req)
        .await
        .map_err(answered("a repeated DriverGenerateBucketId"))?;
    if first.bucket_id != second.bucket_id {
        fail!(
            "two calls for name {name:?} returned different bucket_ids {:?} and {:?}",
            first.bucket_id,
            second.bucket_id
        );
    }
    Ok(())
}

pub(super) async fn generated_id_is_well_formed(ctx: &mut Ctx) -> Step {
    let req = ctx.generate_request(&names::bucket_name())?;
    let resp = ctx
        .generate_bucket_id(req)
        .await
        .map_err(answered(GENERATE))?;
    cosi_driver::validate::identifier("bucket_id", &resp.bucket_id)
        .map_err(|s| Stop::Fail(s.message().to_owned()))
}

pub(super) async fn generated_ids_are_unique(ctx: &mut Ctx) -> Step {
    let (a, b) = (names::bucket_name(), names::bucket_name());
    let req_a = ctx.generate_request(&a)?;
    let req_b = ctx.generate_request(&b)?;
    let id_a = ctx
        .generate_bucket_id(req_a)
        .await
        .map_err(answered(GENERATE))?;
    let id_b = ctx
        .generate_bucket_id(req_b)
        .await
        .map_err(answered(GENERATE))?;
    if id_a.bucket_id == id_b.bucket_id {
        fail!(
            "names {a:?} and {b:?} both got bucket_id {:?}; IDs must be unique",
            id_a.bucket_id
        );
    }
    Ok(())
}

pub(super) async fn generate_creates_nothing(ctx: &mut Ctx) -> Step {
    let name = names::bucket_name();
    let req = ctx.generate_request(&name)?;
    let first = ctx
        .generate_bucket_id(req.clone())
        .await
        .map_err(answered(GENERATE))?;
    let second = ctx
        .generate_bucket_id(req)
        .await
        .map_err(answered(GENERATE))?;
    if first.bucket_id != second.bucket_id {
        skip!(
            "the driver does not derive bucket_id deterministically from the name, \
             so there is no ID to look up before DriverCreateBucket"
        );
    }
    let id = first.bucket_id;
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

pub(super) async fn generate_refuses_invalid_parameters(ctx: &mut Ctx) -> Step {
    let invalid = ctx.invalid_bucket_parameters()?;
    let mut req = ctx.generate_request(&names::bucket_name())?;
    req.parameters = invalid;
    let result = ctx.generate_bucket_id(req).await;
    expect_invalid(GENERATE, "the invalid parameters", &result)
}

pub(super) async fn generate_requires_a_name(ctx: &mut Ctx) -> Step {
    let req = ctx.generate_request("")?;
    let result = ctx.generate_bucket_id(req).await;
    expect_invalid(GENERATE, "an empty name", &result)
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
    let Some(incompatible) = ctx.config.incompatible_parameters.clone() else {
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
    let Some(unsupported) = checks::unsupported_protocol(&ctx.info.supported_protocols) else {
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

pub(super) async fn create_refuses_invalid_parameters(ctx: &mut Ctx) -> Step {
    let invalid = ctx.invalid_bucket_parameters()?;
    let (_, id) = ctx.new_bucket_id().await?;
    let mut req = ctx.create_request(&id)?;
    req.parameters = invalid;
    let result = ctx.create_bucket(req).await;
    expect_invalid(CREATE, "the invalid parameters", &result)
}

pub(super) async fn create_requires_a_bucket_id(ctx: &mut Ctx) -> Step {
    let req = ctx.create_request("")?;
    let result = ctx.create_bucket(req).await;
    expect_invalid(CREATE, "an empty bucket_id", &result)
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
