//! Credential hygiene: after a grant, errors about that very account must
//! not quote its credentials (every call of every case is watched as well;
//! this case provokes errors on purpose).

use cosi_driver::proto::*;

use cosi_driver::Code;

use crate::checks::{self, describe};
use crate::context::{Ctx, Step, Stop, fail, proto_map, skip};
use crate::names;
use crate::secrets::SecretSet;

pub(super) async fn no_credential_in_errors(ctx: &mut Ctx) -> Step {
    let bucket = ctx.new_bucket().await?;
    let spec = ctx.spec(&[&bucket.id], AccessMode::ReadWrite)?;
    let grant = ctx.grant(&spec).await?;
    let mut own = SecretSet::default();
    if let Some(creds) = &grant.response.credentials {
        own.collect(creds);
    }
    if own.is_empty() {
        skip!(
            "the grant returned no credential of at least {} characters to look for",
            crate::secrets::MIN_SECRET_LEN
        );
    }
    let id = grant.account_id.clone();
    let mut provoked = 0usize;
    let mut count = |failed: bool| provoked += usize::from(failed);

    let mut no_protocol = spec.clone();
    no_protocol.protocol = ObjectProtocol::Unspecified;
    count(
        ctx.grant_access(no_protocol.grant_request(&id))
            .await
            .is_err(),
    );

    let mut no_mode = spec.clone();
    no_mode.buckets[0].access_mode = None;
    count(ctx.grant_access(no_mode.grant_request(&id)).await.is_err());

    if let Some(unsupported) = checks::unsupported_protocol(&ctx.driver.info.supported_protocols) {
        let mut other = spec.clone();
        other.protocol = unsupported;
        count(ctx.grant_access(other.grant_request(&id)).await.is_err());
    }
    for params in [
        ctx.config.access.incompatible.clone(),
        ctx.config.access.invalid.clone(),
    ]
    .into_iter()
    .flatten()
    {
        let mut other = spec.clone();
        other.parameters = proto_map(&params);
        count(ctx.grant_access(other.grant_request(&id)).await.is_err());
    }

    let mut no_buckets = spec.clone();
    no_buckets.buckets.clear();
    count(
        ctx.generate_access_id(no_buckets.generate_request(&grant.account_name))
            .await
            .is_err(),
    );
    let mut revoke = spec.revoke_request(&id);
    revoke.buckets.clear();
    count(ctx.revoke_access(revoke).await.is_err());

    let (_, unknown) = ctx.new_bucket_id().await?;
    let get = DriverGetBucketRequest {
        bucket_id: unknown,
        protocols: vec![spec.protocol as i32],
        parameters: ctx.bucket_parameters(),
    };
    count(ctx.get_bucket(get).await.is_err());
    let create = DriverCreateBucketRequest {
        bucket_id: String::new(),
        protocols: vec![spec.protocol as i32],
        parameters: ctx.bucket_parameters(),
    };
    count(ctx.create_bucket(create).await.is_err());
    let again = names::account_name();
    let mut empty_bucket = spec.clone();
    empty_bucket.buckets[0].bucket_id.clear();
    count(
        ctx.generate_access_id(empty_bucket.generate_request(&again))
            .await
            .is_err(),
    );

    let leaks = ctx.take_violations();
    if !leaks.is_empty() {
        return Err(Stop::Fail(leaks.join("; ")));
    }
    if provoked == 0 {
        fail!(
            "none of the malformed requests sent after the grant was refused, so no error message could be checked"
        );
    }
    Ok(())
}

/// A request that does not decode is an invalid request: InvalidArgument
/// (the driver specification), which the sidecar does not retry. grpc-go and
/// prost answer Internal by default, which the sidecar retries forever: a
/// warning, a failure under `--strict`.
pub(super) async fn undecodable_request_is_invalid_argument(ctx: &mut Ctx) -> Step {
    let status = ctx
        .call_undecodable(
            "DriverGenerateBucketId",
            "/cosi.v1alpha2.Provisioner/DriverGenerateBucketId",
        )
        .await;
    match status.code() {
        Code::InvalidArgument => Ok(()),
        Code::Internal => Err(Stop::Warn(format!(
            "a DriverGenerateBucketId request that does not decode answered {}; invalid requests must be \
             InvalidArgument, or the sidecar retries them forever (grpc-go and prost answer Internal by default)",
            describe(&status)
        ))),
        Code::Ok => fail!("a DriverGenerateBucketId request that does not decode succeeded"),
        _ => fail!(
            "a DriverGenerateBucketId request that does not decode answered {}; expected InvalidArgument",
            describe(&status)
        ),
    }
}
