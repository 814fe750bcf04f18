//! DriverGenerateBucketAccessId, DriverGrantBucketAccess and
//! DriverRevokeBucketAccess.

use cosi_driver::Code;
use cosi_driver::proto::*;

use crate::checks::{self, expect_code};
use crate::context::{
    Ctx, Grant, GrantSpec, OrFail, Step, Stop, expect_already_exists, expect_invalid, fail,
    proto_map, skip,
};
use crate::names;

use super::answered;
use super::required::{access_mutations, revoke_mutations};

const GENERATE: &str = "DriverGenerateBucketAccessId";
const GRANT: &str = "DriverGrantBucketAccess";
const REVOKE: &str = "DriverRevokeBucketAccess";

/// A read-write spec for one fresh bucket.
async fn one_bucket_spec(ctx: &mut Ctx) -> Result<GrantSpec, Stop> {
    let bucket = ctx.new_bucket().await?;
    ctx.spec(&[&bucket.id], AccessMode::ReadWrite)
}

async fn account_id(ctx: &mut Ctx, spec: &GrantSpec, name: &str) -> Result<String, Stop> {
    Ok(ctx
        .generate_access_id(spec.generate_request(name))
        .await
        .map_err(answered(GENERATE))?
        .account_id)
}

/// A read-write spec for one fresh bucket and the account ID phase 1
/// returned for a fresh name.
async fn phase_one(ctx: &mut Ctx) -> Result<(GrantSpec, String), Stop> {
    let spec = one_bucket_spec(ctx).await?;
    let id = account_id(ctx, &spec, &names::account_name()).await?;
    Ok((spec, id))
}

/// Grants `spec` to account `id`; an error fails the case as `what`.
async fn grant(
    ctx: &mut Ctx,
    spec: &GrantSpec,
    id: &str,
    what: &'static str,
) -> Result<DriverGrantBucketAccessResponse, Stop> {
    ctx.grant_access(spec.grant_request(id))
        .await
        .map_err(answered(what))
}

/// Checks a grant reply against its request.
fn check_grant(spec: &GrantSpec, resp: &DriverGrantBucketAccessResponse) -> Step {
    checks::granted_buckets(&resp.buckets, &spec.bucket_ids(), spec.protocol).or_fail(GRANT)?;
    checks::credentials(resp.credentials.as_ref(), spec.protocol, spec.auth).or_fail(GRANT)
}

pub(super) async fn generate_is_idempotent(ctx: &mut Ctx) -> Step {
    let spec = one_bucket_spec(ctx).await?;
    let name = names::account_name();
    let first = account_id(ctx, &spec, &name).await?;
    let second = account_id(ctx, &spec, &name).await?;
    if first != second {
        fail!(
            "two calls for account_name {name:?} returned different account_ids {first:?} and {second:?}"
        );
    }
    Ok(())
}

pub(super) async fn generated_id_is_well_formed(ctx: &mut Ctx) -> Step {
    let (_, id) = phase_one(ctx).await?;
    cosi_driver::validate::identifier("account_id", &id)
        .map_err(|s| Stop::Fail(s.message().to_owned()))
}

pub(super) async fn generated_ids_are_unique(ctx: &mut Ctx) -> Step {
    let spec = one_bucket_spec(ctx).await?;
    let (a, b) = (names::account_name(), names::account_name());
    let id_a = account_id(ctx, &spec, &a).await?;
    let id_b = account_id(ctx, &spec, &b).await?;
    if id_a == id_b {
        fail!("account_names {a:?} and {b:?} both got account_id {id_a:?}; IDs must be unique");
    }
    Ok(())
}

pub(super) async fn generate_refuses_invalid_parameters(ctx: &mut Ctx) -> Step {
    let invalid = ctx.invalid_access_parameters()?;
    let mut spec = one_bucket_spec(ctx).await?;
    spec.parameters = invalid;
    let result = ctx
        .generate_access_id(spec.generate_request(&names::account_name()))
        .await;
    expect_invalid(GENERATE, "the invalid parameters", &result)
}

pub(super) async fn generate_requires_fields(ctx: &mut Ctx) -> Step {
    let valid = one_bucket_spec(ctx).await?;
    let mut problems = Vec::new();
    for m in access_mutations("account_name") {
        let (mut spec, mut name) = (valid.clone(), names::account_name());
        (m.apply)(&mut spec, &mut name);
        let result = ctx.generate_access_id(spec.generate_request(&name)).await;
        if let Err(e) = expect_code(GENERATE, m.what, &result, Code::InvalidArgument) {
            problems.push(e);
        }
    }
    report(problems)
}

fn report(problems: Vec<String>) -> Step {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Stop::Fail(problems.join("; ")))
    }
}

pub(super) async fn grant_is_complete(ctx: &mut Ctx) -> Step {
    let (spec, id) = phase_one(ctx).await?;
    let resp = grant(ctx, &spec, &id, GRANT).await?;
    check_grant(&spec, &resp)
}

pub(super) async fn grant_is_idempotent(ctx: &mut Ctx) -> Step {
    let (spec, id) = phase_one(ctx).await?;
    let first = grant(ctx, &spec, &id, GRANT).await?;
    check_grant(&spec, &first)?;
    let second = grant(ctx, &spec, &id, "a repeated DriverGrantBucketAccess").await?;
    check_grant(&spec, &second).map_err(|stop| match stop {
        Stop::Fail(e) => Stop::Fail(format!("the repeated grant: {e}")),
        other => other,
    })
}

pub(super) async fn grant_several_buckets(ctx: &mut Ctx) -> Step {
    let a = ctx.new_bucket().await?;
    let b = ctx.new_bucket().await?;
    let spec = ctx.spec(&[&a.id, &b.id], AccessMode::ReadWrite)?;
    let refused = match ctx.try_grant(&spec).await {
        Ok(grant) => return check_grant(&spec, &grant.response),
        Err(e) if e.status.code() == Code::OutOfRange => e,
        Err(e) => fail!(
            "a grant for two buckets: {e}; expected OK, or OutOfRange when one credential cannot cover several buckets"
        ),
    };
    // OutOfRange is allowed only because there are two buckets: a
    // single-bucket grant must work.
    let single = ctx.spec(&[&a.id], AccessMode::ReadWrite)?;
    match ctx.try_grant(&single).await {
        Ok(grant) => check_grant(&single, &grant.response),
        Err(e) => fail!(
            "{} refused two buckets with OutOfRange, but a single-bucket grant also fails: {e}",
            refused.rpc
        ),
    }
}

pub(super) async fn grant_service_account(ctx: &mut Ctx) -> Step {
    let mut spec = one_bucket_spec(ctx).await?;
    spec.auth = AuthenticationType::ServiceAccount;
    spec.service_account = Some(ServiceAccount {
        namespace: "cosi-sanity".into(),
        name: names::account_name(),
    });
    match ctx.try_grant(&spec).await {
        Ok(grant) => check_grant(&spec, &grant.response),
        Err(e) if e.status.code() == Code::InvalidArgument => Ok(()),
        Err(e) => fail!(
            "ServiceAccount authentication: {e}; a driver that does not support it must answer InvalidArgument"
        ),
    }
}

pub(super) async fn grant_access_modes(ctx: &mut Ctx) -> Step {
    let bucket = ctx.new_bucket().await?;
    let all_categories = AccessModes {
        object_data: AccessMode::ReadWrite as i32,
        object_metadata: AccessMode::ReadWrite as i32,
        bucket_metadata: AccessMode::ReadWrite as i32,
    };
    let variants = [
        (
            "object data ReadOnly",
            AccessModes::object_data_only(AccessMode::ReadOnly),
        ),
        (
            "object data WriteOnly",
            AccessModes::object_data_only(AccessMode::WriteOnly),
        ),
        ("ReadWrite in all three categories", all_categories),
    ];
    let mut problems = Vec::new();
    for (what, modes) in variants {
        let mut spec = ctx.spec(&[&bucket.id], AccessMode::ReadWrite)?;
        spec.buckets[0].access_mode = Some(modes);
        match ctx.try_grant(&spec).await {
            Ok(grant) => {
                if let Err(Stop::Fail(e)) = check_grant(&spec, &grant.response) {
                    problems.push(format!("{what}: {e}"));
                }
            }
            Err(e) if e.status.code() == Code::InvalidArgument => {}
            Err(e) => problems.push(format!(
                "{what}: {e}; a mode the driver cannot honour must be InvalidArgument"
            )),
        }
    }
    report(problems)
}

pub(super) async fn grant_refuses_incompatible_repeat(ctx: &mut Ctx) -> Step {
    let Some(incompatible) = ctx.config.access.incompatible.clone() else {
        skip!(
            "no incompatible access parameters given (incompatibleParameters in --access-parameters FILE)"
        );
    };
    let spec = one_bucket_spec(ctx).await?;
    let grant: Grant = ctx.grant(&spec).await?;
    let mut other = spec.clone();
    other.parameters = proto_map(&incompatible);
    let result = ctx
        .grant_access(other.grant_request(&grant.account_id))
        .await;
    expect_already_exists(
        GRANT,
        "the incompatible parameters for an existing account",
        &result,
    )
}

pub(super) async fn grant_refuses_invalid_parameters(ctx: &mut Ctx) -> Step {
    let invalid = ctx.invalid_access_parameters()?;
    let (spec, id) = phase_one(ctx).await?;
    let mut bad = spec.clone();
    bad.parameters = invalid;
    let result = ctx.grant_access(bad.grant_request(&id)).await;
    expect_invalid(GRANT, "the invalid parameters", &result)
}

pub(super) async fn grant_requires_fields(ctx: &mut Ctx) -> Step {
    let valid = one_bucket_spec(ctx).await?;
    let valid_id = account_id(ctx, &valid, &names::account_name()).await?;
    let mut problems = Vec::new();
    for m in access_mutations("account_id") {
        let (mut spec, mut id) = (valid.clone(), valid_id.clone());
        (m.apply)(&mut spec, &mut id);
        let result = ctx.grant_access(spec.grant_request(&id)).await;
        if let Err(e) = expect_code(GRANT, m.what, &result, Code::InvalidArgument) {
            problems.push(e);
        }
    }
    report(problems)
}

pub(super) async fn revoke_revokes(ctx: &mut Ctx) -> Step {
    let spec = one_bucket_spec(ctx).await?;
    let grant = ctx.grant(&spec).await?;
    let req = spec.revoke_request(&grant.account_id);
    ctx.revoke_access(req.clone())
        .await
        .map_err(answered(REVOKE))?;
    ctx.revoke_access(req).await.map_err(answered(
        "a second DriverRevokeBucketAccess of a revoked access",
    ))?;
    Ok(())
}

pub(super) async fn revoke_absent_is_ok(ctx: &mut Ctx) -> Step {
    let (spec, never_granted) = phase_one(ctx).await?;
    ctx.revoke_access(spec.revoke_request(&never_granted))
        .await
        .map_err(answered(
            "DriverRevokeBucketAccess of an access that was never granted",
        ))?;
    Ok(())
}

pub(super) async fn revoke_requires_fields(ctx: &mut Ctx) -> Step {
    let spec = one_bucket_spec(ctx).await?;
    let grant = ctx.grant(&spec).await?;
    let valid = spec.revoke_request(&grant.account_id);
    let mut problems = Vec::new();
    for (what, req) in revoke_mutations(&valid) {
        let result = ctx.revoke_access(req).await;
        if let Err(e) = expect_code(REVOKE, what, &result, Code::InvalidArgument) {
            problems.push(e);
        }
    }
    report(problems)
}
