//! The v1alpha1 cases: the rules of the v1alpha1 driver specification
//! (idempotency by name, error codes, size limits, credential hygiene) and
//! what the v1alpha1 sidecars read from replies.

use cosi_driver::Code;
use cosi_driver::v1alpha1::{DriverGetInfoRequest, credential_keys};

use crate::cases::data_plane::{BODY, Want, poll, secs, write_object};
use crate::cases::{answered, same_name};
use crate::checks::describe;
use crate::context::{
    OrFail, Step, Stop, expect_already_exists, expect_invalid, fail, proto_map, skip,
};
use crate::names;
use crate::s3::Access;
use crate::target::Target;

use super::context::{Created, Ctx1, setup};

const CREATE: &str = "DriverCreateBucket";
const DELETE: &str = "DriverDeleteBucket";
const GRANT: &str = "DriverGrantBucketAccess";
const REVOKE: &str = "DriverRevokeBucketAccess";

/// The v1alpha1 specification's limit on string fields.
pub const MAX_STRING_BYTES: usize = 128;
/// The v1alpha1 specification's limit on a `map<string, string>`.
pub const MAX_MAP_BYTES: usize = 4096;

pub(super) async fn name_is_a_domain_name(ctx: &mut Ctx1) -> Step {
    cosi_driver::validate::driver_name(&ctx.driver.name).or_fail("")
}

pub(super) async fn answers_the_same(ctx: &mut Ctx1) -> Step {
    let again = ctx
        .send(DriverGetInfoRequest {})
        .await
        .map_err(answered("a second DriverGetInfo"))?;
    same_name(&ctx.driver.name, &again.name)
}

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

pub(super) async fn created_ids_are_unique(ctx: &mut Ctx1) -> Step {
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

pub(super) async fn created_id_is_well_formed(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    cosi_driver::validate::identifier_within("bucket_id", &b.id, MAX_STRING_BYTES)
        .map_err(|s| Stop::Fail(s.message().to_owned()))
}

pub(super) async fn create_refuses_incompatible_repeat(ctx: &mut Ctx1) -> Step {
    let Some(other) = ctx.config.bucket.incompatible.clone() else {
        skip!("no incompatibleParameters configured (see --parameters)");
    };
    let b = ctx.new_bucket().await?;
    let mut req = ctx.create_request(&b.name);
    req.parameters = proto_map(&other);
    let result = ctx.create(req).await;
    expect_already_exists(CREATE, "the same name and incompatible parameters", &result)
}

pub(super) async fn create_refuses_invalid_parameters(ctx: &mut Ctx1) -> Step {
    let Some(invalid) = ctx.config.bucket.invalid.clone() else {
        skip!("no invalidParameters configured (see --parameters)");
    };
    let mut req = ctx.create_request(&names::bucket_name());
    req.parameters = proto_map(&invalid);
    let result = ctx.create(req).await;
    expect_invalid(CREATE, "invalid parameters", &result)
}

pub(super) async fn create_requires_a_name(ctx: &mut Ctx1) -> Step {
    let result = ctx.create(ctx.create_request("")).await;
    expect_invalid(CREATE, "an empty name", &result)
}

pub(super) async fn delete_deletes(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    ctx.delete(&b.id).await.map_err(answered(DELETE))?;
    ctx.delete(&b.id)
        .await
        .map_err(answered("a repeated DriverDeleteBucket"))
}

pub(super) async fn delete_absent_is_ok(ctx: &mut Ctx1) -> Step {
    ctx.delete(&format!("absent-{}", names::bucket_name()))
        .await
        .map_err(answered("DriverDeleteBucket of an absent bucket"))
}

pub(super) async fn delete_requires_a_bucket_id(ctx: &mut Ctx1) -> Step {
    let result = ctx.delete("").await;
    expect_invalid(DELETE, "an empty bucket_id", &result)
}

/// Checks the credentials of a grant for S3: `credentials["s3"]` with the
/// keys the v1alpha1 sidecar reads, within the specification's map limit.
fn s3_credentials(resp: &cosi_driver::v1alpha1::DriverGrantBucketAccessResponse) -> Step {
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

pub(super) async fn granted_ids_are_unique(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    let one = ctx.new_grant(&b.id).await?;
    let two = ctx.new_grant(&b.id).await?;
    if one.account_id == two.account_id {
        fail!("two names got the same account_id {:?}", one.account_id);
    }
    Ok(())
}

pub(super) async fn grant_refuses_incompatible_repeat(ctx: &mut Ctx1) -> Step {
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

pub(super) async fn grant_requires_fields(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    let no_bucket = ctx
        .grant(ctx.grant_request("", &names::account_name()))
        .await;
    expect_invalid(GRANT, "an empty bucket_id", &no_bucket)?;
    let no_name = ctx.grant(ctx.grant_request(&b.id, "")).await;
    expect_invalid(GRANT, "an empty name", &no_name)
}

pub(super) async fn revoke_revokes(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    let resp = ctx.new_grant(&b.id).await?;
    ctx.revoke(&b.id, &resp.account_id)
        .await
        .map_err(answered(REVOKE))?;
    ctx.revoke(&b.id, &resp.account_id)
        .await
        .map_err(answered("a repeated DriverRevokeBucketAccess"))
}

pub(super) async fn revoke_absent_is_ok(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    ctx.revoke(&b.id, &format!("absent-{}", names::account_name()))
        .await
        .map_err(answered("DriverRevokeBucketAccess of an absent account"))
}

pub(super) async fn revoke_requires_fields(ctx: &mut Ctx1) -> Step {
    let b = ctx.new_bucket().await?;
    let no_account = ctx.revoke(&b.id, "").await;
    expect_invalid(REVOKE, "an empty account_id", &no_account)?;
    let no_bucket = ctx.revoke("", "some-account").await;
    expect_invalid(REVOKE, "an empty bucket_id", &no_bucket)
}

pub(super) async fn no_credential_in_errors(ctx: &mut Ctx1) -> Step {
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

fn data_plane_enabled(ctx: &Ctx1) -> Step {
    if !ctx.config.data_plane {
        skip!("data-plane checks are off (enable with --data-plane)");
    }
    Ok(())
}

/// With the data plane on: a new bucket, an account granted access to it,
/// and an S3 client with the account's credentials.
async fn granted_target(ctx: &mut Ctx1) -> Result<(Created, String, Target), Stop> {
    data_plane_enabled(ctx)?;
    let b = ctx.new_bucket().await?;
    let resp = ctx.new_grant(&b.id).await?;
    s3_credentials(&resp)?;
    let target = ctx.s3_target(&b.name, &resp)?;
    Ok((b, resp.account_id, target))
}

pub(super) async fn data_plane_read_write(ctx: &mut Ctx1) -> Step {
    let (b, _, target) = granted_target(ctx).await?;
    let failure = format!(
        "the granted credentials could not write to bucket {:?} (the name sent)",
        b.name
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

pub(super) async fn data_plane_revoked_fail(ctx: &mut Ctx1) -> Step {
    let (b, account_id, target) = granted_target(ctx).await?;
    // A second account removes the object at cleanup.
    let cleaner = ctx.new_grant(&b.id).await?;
    let cleaner = ctx.s3_target(&b.name, &cleaner)?;
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
            b.name,
            secs(timeout)
        ),
        Access::Failed(e) => fail!(
            "reading with revoked credentials failed without a denial: {}",
            ctx.redact(&e)
        ),
    }
}
