//! The data plane (S3, and Azure through the SAS URL): granted
//! credentials reach exactly what they were granted. Positive checks are retried until the propagation timeout
//! (new keys take seconds on some backends); a denial is asserted only
//! after the same credentials were seen working, so that "not yet valid"
//! is never mistaken for "denied".

use std::future::Future;
use std::time::Duration;

use cosi_driver::Code;
use cosi_driver::proto::*;
use tokio::time::Instant;

use crate::checks::protocol_name;
use crate::context::{Bucket, CaseContext, Ctx, Grant, GrantSpec, Step, Stop, fail, skip};
use crate::names;
use crate::s3::Access;
use crate::target::Target;

const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// What the data-plane checks write.
pub(crate) const BODY: &[u8] = b"written by cosi-sanity";

fn enabled(ctx: &Ctx) -> Step {
    if !ctx.config.data_plane {
        skip!("data-plane checks are off (enable with --data-plane)");
    }
    let protocol = ctx.protocol()?;
    if !matches!(protocol, ObjectProtocol::S3 | ObjectProtocol::Azure) {
        skip!(
            "data-plane checks exist for S3 and Azure only; the protocol under test is {}",
            protocol_name(protocol)
        );
    }
    Ok(())
}

/// What a polled request should give.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    Allowed,
    Denied,
}

/// Repeats `attempt` until it gives what is wanted or `timeout` passes;
/// returns the last answer.
pub(crate) async fn poll<T, F, Fut>(timeout: Duration, want: Want, mut attempt: F) -> Access<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Access<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let got = attempt().await;
        let done = matches!(
            (&got, want),
            (Access::Allowed(_), Want::Allowed) | (Access::Denied(_), Want::Denied)
        );
        if done || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

pub(crate) fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// Writes an object with `target` (retrying while the grant propagates)
/// and has `cleaner` delete it at cleanup; `failure` opens the message of
/// a write that does not succeed in time.
pub(crate) async fn write_object<D>(
    ctx: &mut CaseContext<D>,
    target: &Target,
    cleaner: &Target,
    failure: &str,
) -> Result<String, Stop> {
    let key = names::object_key();
    let timeout = ctx.config.propagation_timeout;
    match poll(timeout, Want::Allowed, || target.put(&key, BODY)).await {
        Access::Allowed(()) => {
            ctx.track_object(cleaner, &key);
            Ok(key)
        }
        Access::Denied(e) | Access::Failed(e) => {
            fail!("{failure} within {}: {}", secs(timeout), ctx.redact(&e))
        }
    }
}

/// [`write_object`] by `who`.
async fn write(
    ctx: &mut Ctx,
    who: &str,
    target: &Target,
    cleaner: &Target,
) -> Result<String, Stop> {
    let failure = format!("{who} could not write to bucket {:?}", target.bucket());
    write_object(ctx, target, cleaner, &failure).await
}

/// Reads `key` with `target` (retrying while the grant propagates) and
/// compares it with what was written.
async fn read(ctx: &Ctx, who: &str, target: &Target, key: &str) -> Step {
    let timeout = ctx.config.propagation_timeout;
    match poll(timeout, Want::Allowed, || target.get(key)).await {
        Access::Allowed(body) if body == BODY => Ok(()),
        Access::Allowed(body) => fail!(
            "{who} read {} bytes from {key:?} in bucket {:?}, not the {} bytes written",
            body.len(),
            target.bucket(),
            BODY.len()
        ),
        Access::Denied(e) | Access::Failed(e) => fail!(
            "{who} could not read {key:?} from bucket {:?} within {}: {}",
            target.bucket(),
            secs(timeout),
            ctx.redact(&e)
        ),
    }
}

/// Checks that a write with `target` is denied; a write that succeeds
/// anyway is deleted by `cleaner`.
async fn write_denied(ctx: &mut Ctx, who: &str, target: &Target, cleaner: &Target) -> Step {
    let key = names::object_key();
    match target.put(&key, BODY).await {
        Access::Denied(_) => Ok(()),
        Access::Allowed(()) => {
            ctx.track_object(cleaner, &key);
            fail!("{who} wrote {key:?} to bucket {:?}", target.bucket())
        }
        Access::Failed(e) => fail!(
            "a write by {who} to bucket {:?} failed without a denial: {}",
            target.bucket(),
            ctx.redact(&e)
        ),
    }
}

/// Checks that reading `key` with `target` is denied.
async fn read_denied(ctx: &Ctx, who: &str, target: &Target, key: &str) -> Step {
    match target.get(key).await {
        Access::Denied(_) => Ok(()),
        Access::Allowed(_) => fail!("{who} read {key:?} from bucket {:?}", target.bucket()),
        Access::Failed(e) => fail!(
            "a read by {who} from bucket {:?} failed without a denial: {}",
            target.bucket(),
            ctx.redact(&e)
        ),
    }
}

/// Grants `mode` on `bucket_id` and returns a client of the bucket with
/// the credentials; a mode the driver refuses with InvalidArgument skips
/// the case.
async fn grant_mode(ctx: &mut Ctx, bucket_id: &str, mode: AccessMode) -> Result<Target, Stop> {
    let spec = ctx.spec(&[bucket_id], mode)?;
    match ctx.try_grant(&spec).await {
        Ok(grant) => ctx.target(&grant, bucket_id),
        Err(e) if e.status.code() == Code::InvalidArgument => Err(Stop::Skip(format!(
            "the driver does not grant {} access ({e})",
            mode.api_name().unwrap_or("this")
        ))),
        Err(e) => Err(e.setup("granting access")),
    }
}

/// What most data-plane cases start from: a fresh bucket, a ReadWrite
/// grant for it, and a client of the bucket with that grant's credentials.
struct ReadWriteBucket {
    bucket: Bucket,
    spec: GrantSpec,
    target: Target,
}

/// Checks that the data-plane cases are enabled, then sets up a
/// [`ReadWriteBucket`].
async fn read_write_bucket(ctx: &mut Ctx) -> Result<ReadWriteBucket, Stop> {
    enabled(ctx)?;
    let bucket = ctx.new_bucket().await?;
    let spec = ctx.spec(&[&bucket.id], AccessMode::ReadWrite)?;
    let grant = ctx.grant(&spec).await?;
    let target = ctx.target(&grant, &bucket.id)?;
    Ok(ReadWriteBucket {
        bucket,
        spec,
        target,
    })
}

/// Revokes the access `account_id` of `spec`.
async fn revoke(ctx: &mut Ctx, spec: &GrantSpec, account_id: &str) -> Step {
    ctx.revoke_access(spec.revoke_request(account_id))
        .await
        .map_err(super::answered("DriverRevokeBucketAccess"))?;
    Ok(())
}

pub(super) async fn read_write(ctx: &mut Ctx) -> Step {
    let ReadWriteBucket { target: rw, .. } = read_write_bucket(ctx).await?;
    let key = write(ctx, "ReadWrite credentials", &rw, &rw).await?;
    read(ctx, "ReadWrite credentials", &rw, &key).await
}

pub(super) async fn repeated_grant_works(ctx: &mut Ctx) -> Step {
    enabled(ctx)?;
    let bucket = ctx.new_bucket().await?;
    let spec = ctx.spec(&[&bucket.id], AccessMode::ReadWrite)?;
    let first = ctx.grant(&spec).await?;
    let response = ctx
        .grant_access(spec.grant_request(&first.account_id))
        .await
        .map_err(super::answered("a repeated DriverGrantBucketAccess"))?;
    let again = Grant { response, ..first };
    let target = ctx.target(&again, &bucket.id)?;
    let who = "the credentials of the repeated grant";
    let key = write(ctx, who, &target, &target).await?;
    read(ctx, who, &target, &key).await
}

/// A [`ReadWriteBucket`]'s target (the keeper's) and a target on the same
/// bucket with credentials granted `mode`.
async fn keeper_and_grant(ctx: &mut Ctx, mode: AccessMode) -> Result<(Target, Target), Stop> {
    let ReadWriteBucket {
        bucket,
        target: keeper,
        ..
    } = read_write_bucket(ctx).await?;
    let granted = grant_mode(ctx, &bucket.id, mode).await?;
    Ok((keeper, granted))
}

pub(super) async fn read_only_cannot_write(ctx: &mut Ctx) -> Step {
    let (keeper, ro) = keeper_and_grant(ctx, AccessMode::ReadOnly).await?;
    let key = write(ctx, "ReadWrite credentials", &keeper, &keeper).await?;
    read(ctx, "ReadOnly credentials", &ro, &key).await?;
    write_denied(ctx, "ReadOnly credentials", &ro, &keeper).await
}

pub(super) async fn write_only_cannot_read(ctx: &mut Ctx) -> Step {
    let (keeper, wo) = keeper_and_grant(ctx, AccessMode::WriteOnly).await?;
    let key = write(ctx, "WriteOnly credentials", &wo, &keeper).await?;
    read(ctx, "ReadWrite credentials", &keeper, &key).await?;
    read_denied(ctx, "WriteOnly credentials", &wo, &key).await
}

pub(super) async fn other_bucket_is_denied(ctx: &mut Ctx) -> Step {
    enabled(ctx)?;
    let a = ctx.new_bucket().await?;
    let b = ctx.new_bucket().await?;
    let spec_a = ctx.spec(&[&a.id], AccessMode::ReadWrite)?;
    let spec_b = ctx.spec(&[&b.id], AccessMode::ReadWrite)?;
    let grant_a = ctx.grant(&spec_a).await?;
    let grant_b = ctx.grant(&spec_b).await?;
    let a_on_a = ctx.target(&grant_a, &a.id)?;
    let b_on_b = ctx.target(&grant_b, &b.id)?;
    let a_on_b = match (&a_on_a, &b_on_b) {
        // A's SAS token aimed at container B, as a workload holding only
        // A's Secret would try.
        (Target::Azure(a), Target::Azure(b)) => Target::Azure(a.aimed_at(b.bucket())),
        _ => {
            // Bucket B as a workload holding only A's Secret would address it.
            let b_info = grant_b
                .bucket_info(&b.id)
                .and_then(|i| i.s3.as_ref())
                .ok_or_else(|| {
                    Stop::Fail("setup: the grant has no S3 info for the other bucket".into())
                })?;
            let a_creds = grant_a.response.credentials.as_ref();
            let a_s3 = a_creds
                .and_then(|c| c.s3.as_ref())
                .ok_or_else(|| Stop::Fail("setup: the grant has no S3 credentials".into()))?;
            Target::S3(ctx.s3_client(
                b_info,
                a_s3,
                a_creds.map(|c| c.certificate_authority.as_str()),
            )?)
        }
    };

    let key_b = write(ctx, "the other bucket's credentials", &b_on_b, &b_on_b).await?;
    let key_a = write(ctx, "the credentials", &a_on_a, &a_on_a).await?;
    read(ctx, "the credentials", &a_on_a, &key_a).await?;
    let who = "credentials granted for another bucket";
    read_denied(ctx, who, &a_on_b, &key_b).await?;
    write_denied(ctx, who, &a_on_b, &b_on_b).await
}

pub(super) async fn multi_bucket_credential(ctx: &mut Ctx) -> Step {
    enabled(ctx)?;
    let a = ctx.new_bucket().await?;
    let b = ctx.new_bucket().await?;
    let spec = ctx.spec(&[&a.id, &b.id], AccessMode::ReadWrite)?;
    let grant = match ctx.try_grant(&spec).await {
        Ok(grant) => grant,
        Err(e) if e.status.code() == Code::OutOfRange => {
            skip!("the driver does not grant several buckets with one credential (OutOfRange)")
        }
        Err(e) => return Err(e.setup("granting access to two buckets")),
    };
    for id in [&a.id, &b.id] {
        let target = ctx.target(&grant, id)?;
        let who = "the multi-bucket credentials";
        let key = write(ctx, who, &target, &target).await?;
        read(ctx, who, &target, &key).await?;
    }
    Ok(())
}

pub(super) async fn revoked_credentials_fail(ctx: &mut Ctx) -> Step {
    let rw = read_write_bucket(ctx).await?;
    let keeper = &rw.target;
    let probe = ctx.grant(&rw.spec).await?;
    let probe_target = ctx.target(&probe, &rw.bucket.id)?;
    let key = write(ctx, "ReadWrite credentials", keeper, keeper).await?;
    read(ctx, "the credentials to be revoked", &probe_target, &key).await?;
    revoke(ctx, &rw.spec, &probe.account_id).await?;
    let timeout = ctx.config.propagation_timeout;
    match poll(timeout, Want::Denied, || probe_target.get(&key)).await {
        Access::Denied(_) => {}
        Access::Allowed(_) => fail!(
            "revoked credentials still read bucket {:?} {} after DriverRevokeBucketAccess returned OK",
            probe_target.bucket(),
            secs(timeout)
        ),
        Access::Failed(e) => fail!(
            "a read with revoked credentials failed without a denial: {}",
            ctx.redact(&e)
        ),
    }
    write_denied(ctx, "revoked credentials", &probe_target, keeper).await
}

/// How many grants for one account [`repeated_grants_then_revoke_refuse_every_key`] makes.
const REPEATED_GRANTS: usize = 3;

/// The KEP: repeated grants for one account never make more than one
/// backend access. A driver that makes a new one per repeat still answers
/// every grant with working credentials, and its revoke removes only the
/// last; so every key any of the grants returned is checked after one
/// revoke, not only the last. Before the revoke only the last key must
/// work: a driver may rotate the account's key on a repeat, which refuses
/// the earlier ones at once.
pub(super) async fn repeated_grants_then_revoke_refuse_every_key(ctx: &mut Ctx) -> Step {
    let rw = read_write_bucket(ctx).await?;
    let (spec, keeper) = (&rw.spec, &rw.target);
    let first = ctx.grant(spec).await?;
    let mut grants = vec![first.clone()];
    while grants.len() < REPEATED_GRANTS {
        let response = ctx
            .grant_access(spec.grant_request(&first.account_id))
            .await
            .map_err(super::answered("a repeated DriverGrantBucketAccess"))?;
        grants.push(Grant {
            response,
            ..first.clone()
        });
    }
    let key = write(ctx, "ReadWrite credentials", keeper, keeper).await?;
    let targets = grants
        .iter()
        .map(|g| ctx.target(g, &rw.bucket.id))
        .collect::<Result<Vec<_>, Stop>>()?;
    if let Some(last) = targets.last() {
        // Seen working first, so that its later denial means the revoke.
        read(ctx, &grant_name(targets.len()), last, &key).await?;
    }
    revoke(ctx, spec, &first.account_id).await?;
    let timeout = ctx.config.propagation_timeout;
    for (n, target) in (1..).zip(&targets) {
        match poll(timeout, Want::Denied, || target.get(&key)).await {
            Access::Denied(_) => {}
            Access::Allowed(_) => fail!(
                "{} still read bucket {:?} {} after DriverRevokeBucketAccess of account {:?} returned OK: \
                 {} grants for that one account made more than one backend access, which the KEP forbids",
                grant_name(n),
                target.bucket(),
                secs(timeout),
                first.account_id,
                grants.len()
            ),
            Access::Failed(e) => fail!(
                "a read with {} after the revoke failed without a denial: {}",
                grant_name(n),
                ctx.redact(&e)
            ),
        }
        write_denied(ctx, &grant_name(n), target, keeper).await?;
    }
    Ok(())
}

/// "the key of grant <n> of <total>", for messages.
fn grant_name(n: usize) -> String {
    format!("the key of grant {n} of {REPEATED_GRANTS}")
}
