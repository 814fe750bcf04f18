//! Steps 9 to 15: use the credentials, delete everything, check the
//! backend is empty and stop the system.

use anyhow::{Context as _, anyhow, bail};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_s3::primitives::ByteStream;
use cosi_api::Bucket;
use kube::api::{Api, DeleteParams};

use cosi_sanity::s3::Access;

use crate::s3;

use super::run::{Run, accesses, azure_target, claims, secrets};
use super::waits::await_gone;
use super::{CLAIM, Failure, OBJECT_BODY, OBJECT_KEY, RO_ACCESS, RW_ACCESS};

impl Run {
    /// Uses the credentials, then deletes everything and checks nothing is left.
    pub(super) async fn exercise(&mut self) -> Result<(), Failure> {
        self.step(
            &format!("Write {OBJECT_KEY} and read it back (ReadWrite credentials)"),
            async |_, ctx| {
                if ctx.azure.is_some() {
                    let target = azure_target(&ctx.seen.rw)?;
                    if let Access::Denied(e) | Access::Failed(e) = target.put(OBJECT_KEY, OBJECT_BODY).await {
                        bail!("Put Blob failed: {e}");
                    }
                    match target.get(OBJECT_KEY).await {
                        Access::Allowed(got) if got == OBJECT_BODY => {}
                        Access::Allowed(got) => bail!(
                            "read back {} bytes that differ from the {} written",
                            got.len(),
                            OBJECT_BODY.len()
                        ),
                        Access::Denied(e) | Access::Failed(e) => bail!("Get Blob failed: {e}"),
                    }
                    return Ok((
                        (),
                        vec![format!(
                            "PUT {}/{OBJECT_KEY} with the SAS token ({} bytes), GET returned the same bytes",
                            target.bucket(),
                            OBJECT_BODY.len()
                        )],
                    ));
                }
                let (client, bucket) = s3::client_from_secret(&ctx.seen.rw)?;
                client
                    .put_object()
                    .bucket(&bucket)
                    .key(OBJECT_KEY)
                    .body(ByteStream::from_static(OBJECT_BODY))
                    .send()
                    .await
                    .map_err(|e| anyhow!("PutObject failed: {}", DisplayErrorContext(e)))?;
                let got = s3::read_object(&client, &bucket, OBJECT_KEY).await?;
                if got != OBJECT_BODY {
                    bail!(
                        "read back {} bytes that differ from the {} written",
                        got.len(),
                        OBJECT_BODY.len()
                    );
                }
                Ok((
                    (),
                    vec![format!(
                        "PUT s3://{bucket}/{OBJECT_KEY} ({} bytes), GET returned the same bytes",
                        OBJECT_BODY.len()
                    )],
                ))
            },
        )
        .await?;
        self.step(
            "ReadOnly credentials: read allowed, write refused",
            async |_, ctx| {
                if ctx.azure.is_some() {
                    let target = azure_target(&ctx.seen.ro)?;
                    match target.get(OBJECT_KEY).await {
                        Access::Allowed(got) if got == OBJECT_BODY => {}
                        Access::Allowed(_) => {
                            bail!("the ReadOnly token read other bytes than were written")
                        }
                        Access::Denied(e) | Access::Failed(e) => bail!("Get Blob failed: {e}"),
                    }
                    return match target.put("not-allowed.txt", b"no").await {
                        Access::Allowed(()) => bail!("the ReadOnly token could write a blob"),
                        Access::Denied(e) => Ok((
                            (),
                            vec![
                                format!("GET {OBJECT_KEY}: allowed"),
                                format!("PUT not-allowed.txt: {e}, as it should be"),
                            ],
                        )),
                        Access::Failed(e) => bail!("the write failed with {e} instead of a denial"),
                    };
                }
                let (client, bucket) = s3::client_from_secret(&ctx.seen.ro)?;
                let got = s3::read_object(&client, &bucket, OBJECT_KEY).await?;
                if got != OBJECT_BODY {
                    bail!("the ReadOnly credentials read other bytes than were written");
                }
                let put = client
                    .put_object()
                    .bucket(&bucket)
                    .key("not-allowed.txt")
                    .body(ByteStream::from_static(b"no"))
                    .send()
                    .await;
                match put {
                    Ok(_) => bail!("the ReadOnly credentials could write an object"),
                    Err(e) if e.code() == Some("AccessDenied") => Ok((
                        (),
                        vec![
                            format!("GET {OBJECT_KEY}: allowed"),
                            "PUT not-allowed.txt: AccessDenied, as it should be".to_owned(),
                        ],
                    )),
                    Err(e) => bail!(
                        "the write was refused with {} instead of AccessDenied",
                        DisplayErrorContext(e)
                    ),
                }
            },
        )
        .await?;
        self.step(
            "Delete the BucketAccesses: Secrets deleted, keys revoked",
            async |step, ctx| {
                let client = ctx.client()?;
                let api = accesses(&client);
                for name in [RW_ACCESS, RO_ACCESS] {
                    api.delete(name, &DeleteParams::default())
                        .await
                        .with_context(|| format!("delete BucketAccess {name}"))?;
                }
                for name in [RW_ACCESS, RO_ACCESS] {
                    step.waiting(format!("BucketAccess {name} to be gone"));
                    await_gone(&client, &api, "BucketAccess", name, ctx.timeout).await?;
                    if secrets(&client).get_opt(name).await?.is_some() {
                        bail!("Secret {name} still exists after its BucketAccess is gone");
                    }
                }
                if ctx.azure.is_some() {
                    let target = azure_target(&ctx.seen.rw)?;
                    return match target.get(OBJECT_KEY).await {
                        Access::Denied(e) => Ok((
                            (),
                            vec![
                                "both Secrets deleted".to_owned(),
                                format!("the old ReadWrite SAS token is now refused: {e}"),
                            ],
                        )),
                        Access::Allowed(_) => {
                            bail!("the deleted ReadWrite access's SAS token still works")
                        }
                        Access::Failed(e) => {
                            bail!("the revoked SAS token failed with {e} instead of a denial")
                        }
                    };
                }
                let (s3c, bucket) = s3::client_from_secret(&ctx.seen.rw)?;
                match s3c
                    .get_object()
                    .bucket(&bucket)
                    .key(OBJECT_KEY)
                    .send()
                    .await
                {
                    Ok(_) => bail!("the deleted ReadWrite access's credentials still work"),
                    Err(e) if e.code() == Some("InvalidAccessKeyId") => {}
                    Err(e) => bail!(
                        "the revoked credentials failed with {} instead of InvalidAccessKeyId",
                        DisplayErrorContext(e)
                    ),
                }
                Ok((
                    (),
                    vec![
                        "both Secrets deleted".to_owned(),
                        "the old ReadWrite key now gets InvalidAccessKeyId".to_owned(),
                    ],
                ))
            },
        )
        .await?;
        self.step(
            "Delete the BucketClaim: its Bucket goes too (Delete policy)",
            async |step, ctx| {
                let client = ctx.client()?;
                let bucket_name = ctx.seen.bucket_name.clone();
                let claims = claims(&client);
                claims
                    .delete(CLAIM, &DeleteParams::default())
                    .await
                    .context("delete the BucketClaim")?;
                step.waiting(format!("BucketClaim {CLAIM} to be gone"));
                await_gone(&client, &claims, "BucketClaim", CLAIM, ctx.timeout).await?;
                step.waiting(format!("Bucket {bucket_name} to be gone"));
                let buckets: Api<Bucket> = Api::all(client.clone());
                await_gone(&client, &buckets, "Bucket", &bucket_name, ctx.timeout).await?;
                Ok((
                    (),
                    vec![format!("BucketClaim and Bucket {bucket_name} deleted")],
                ))
            },
        )
        .await?;
        self.step(
            "Check the backend: bucket and accounts gone",
            async |_, ctx| {
                let bucket_id = ctx.seen.bucket_id.clone();
                let accounts = ctx.seen.account_ids.clone();
                if let Some(azurite) = ctx.azure.as_ref().and_then(|a| a.azurite.as_ref()) {
                    let api = azurite.api();
                    if api.container(&bucket_id).await?.is_some() {
                        bail!("Azurite still holds container {bucket_id}");
                    }
                    let left = api.container_names().await?;
                    return Ok((
                        (),
                        vec![format!(
                            "container {bucket_id} and its access policies gone; Azurite holds {} containers",
                            left.len()
                        )],
                    ));
                }
                let state = ctx.stack()?.backend_state()?;
                if state.buckets.iter().any(|b| b.id == bucket_id) {
                    bail!("the backend still holds bucket {bucket_id}");
                }
                if let Some(a) = state.accounts.iter().find(|a| accounts.contains(&a.id)) {
                    bail!("the backend still holds account {}", a.id);
                }
                Ok((
                    (),
                    vec![format!(
                        "backend holds {} buckets, {} accounts, {} access keys",
                        state.buckets.len(),
                        state.accounts.len(),
                        state.access_keys
                    )],
                ))
            },
        )
        .await?;
        self.step(
            "Stop the controller, sidecar, driver and API server",
            async |_, ctx| {
                let stack = ctx
                    .stack
                    .take()
                    .ok_or_else(|| anyhow!("the stack is not running"))?;
                stack.shutdown().await;
                Ok(((), vec![]))
            },
        )
        .await?;
        Ok(())
    }
}
