//! Steps 1 to 8: start the system, create the classes, the claim and the
//! accesses, and read the access Secrets.

use std::path::Path;

use anyhow::{Context as _, anyhow, bail};
use cosi_api::{Bucket, BucketAccessMode, DeletionPolicy, MultiBucketAccess};
use kube::api::{Api, PostParams};

use cosi_api::constants::secret_keys::azure::AZURE_STORAGE_SAS_TOKEN;
use cosi_driver_azure::AzureDriver;
use cosi_driver_azure::testing::Azurite;

use crate::stack::{Stack, StackOptions};
use crate::{manifests, s3};

use super::run::{Run, accesses, claims, secrets};
use super::waits::{
    await_access_provisioned, await_claim_provisioned, wait_for_driver, wait_until_ready,
};
use super::{CLAIM, CLASS, Failure, NAMESPACE, RO_ACCESS, RW_ACCESS};

impl Run {
    /// Starts the system and provisions a bucket and two accesses.
    pub(super) async fn provision(&mut self, data_dir: &Path) -> Result<(), Failure> {
        let dir = data_dir.to_owned();
        self.step(
            "Start the API server (kube-sim), install the CRDs and RBAC",
            async |_, ctx| {
                let mut opts = StackOptions::new(&dir);
                if ctx.azure.is_some() {
                    cosi_driver_azure::config::DEFAULT_DRIVER_NAME
                        .clone_into(&mut opts.driver_name);
                }
                let stack = Stack::start_api(opts).await?;
                let url = stack.api_server().url();
                *ctx.stack = Some(stack);
                Ok((
                    (),
                    vec![format!("API server {url}, 5 CRDs, deploy/ RBAC enforced")],
                ))
            },
        )
        .await?;
        let driver_step = if self.azure.is_some() {
            "Start Azurite (Azure Storage emulator) and the Azure driver"
        } else {
            "Start the local driver and its S3 endpoint"
        };
        self.step(driver_step, async |step, ctx| {
            let timeout = ctx.timeout;
            if let Some(azure) = ctx.azure.as_deref_mut() {
                let bin = azure
                    .bin
                    .clone()
                    .or_else(cosi_driver_azure::testing::find_bin)
                    .ok_or_else(|| anyhow!(cosi_driver_azure::testing::install_hint()))?;
                let azurite = tokio::task::spawn_blocking(move || Azurite::start_with(&bin))
                    .await?
                    .map_err(|e| anyhow!("start Azurite: {e}"))?;
                let driver = AzureDriver::connect(azurite.config(), azurite.key())
                    .await
                    .map_err(|e| anyhow!("start the Azure driver: {e}"))?;
                let blob_endpoint = azurite.endpoint();
                azure.azurite = Some(azurite);
                let stopped = azure.stop_driver.stopped();
                let stack = ctx.stack()?;
                let endpoint = stack.driver_endpoint().clone();
                tokio::spawn(async move {
                    if let Err(e) =
                        cosi_driver::serve(&endpoint, driver.clone(), driver, stopped).await
                    {
                        tracing::error!("the Azure driver stopped: {e}");
                    }
                });
                wait_for_driver(stack, Some(step), timeout).await?;
                return Ok((
                    (),
                    vec![format!(
                        "driver {}, Azurite's Blob endpoint {blob_endpoint}",
                        stack.driver_name()
                    )],
                ));
            }
            let stack = ctx.stack()?;
            stack.start_driver().await?;
            wait_for_driver(stack, Some(step), timeout).await?;
            Ok((
                (),
                vec![format!(
                    "driver {}, S3 endpoint {}",
                    stack.driver_name(),
                    stack.s3_endpoint_url()
                )],
            ))
        })
        .await?;
        self.step("Start the sidecar and the controller", async |step, ctx| {
            let timeout = ctx.timeout;
            let stack = ctx.stack()?;
            stack.start_sidecar()?;
            stack.start_controller()?;
            wait_until_ready(stack, Some(step), timeout).await?;
            Ok(((), vec![]))
        })
        .await?;
        self.step(
            &format!("Create BucketClass and BucketAccessClass \"{CLASS}\""),
            async |_, ctx| {
                let azure = ctx.azure.is_some();
                let stack = ctx.stack()?;
                let client = stack.client();
                let driver = stack.driver_name().to_owned();
                let mut class = manifests::bucket_class(CLASS, &driver, DeletionPolicy::Delete);
                if azure {
                    // The object written below stays: the container goes with it.
                    class
                        .spec
                        .parameters
                        .insert("deleteNonEmptyContainers".into(), "true".into());
                }
                manifests::create_cluster_object(&client, &class)
                    .await
                    .context("create the BucketClass")?;
                let access_class =
                    manifests::access_class(CLASS, &driver, MultiBucketAccess::SingleBucket);
                manifests::create_cluster_object(&client, &access_class)
                    .await
                    .context("create the BucketAccessClass")?;
                Ok((
                    (),
                    vec![
                        format!("BucketClass {CLASS}: driver {driver}, deletionPolicy Delete"),
                        format!(
                            "BucketAccessClass {CLASS}: driver {driver}, authenticationType Key"
                        ),
                    ],
                ))
            },
        )
        .await?;
        self.step(
            &format!("Create BucketClaim {NAMESPACE}/{CLAIM}"),
            async |_, ctx| {
                let protocol = ctx.protocol();
                let claims = claims(&ctx.client()?);
                let mut claim = manifests::claim(NAMESPACE, CLAIM, CLASS);
                claim.spec.protocols = vec![protocol];
                claims
                    .create(&PostParams::default(), &claim)
                    .await
                    .context("create the BucketClaim")?;
                Ok(((), vec![format!("class {CLASS}, protocols [{protocol}]")]))
            },
        )
        .await?;
        self.step(
            "Wait for the BucketClaim to be provisioned",
            async |step, ctx| {
                let client = ctx.client()?;
                let claim = await_claim_provisioned(&client, step, ctx.timeout).await?;
                let bucket_name = claim.bound_bucket_name().unwrap_or_default().to_owned();
                let bucket = Api::<Bucket>::all(client)
                    .get(&bucket_name)
                    .await
                    .with_context(|| format!("read Bucket {bucket_name}"))?;
                let bucket_id = bucket.bucket_id().unwrap_or_default().to_owned();
                ctx.seen.bucket_name.clone_from(&bucket_name);
                ctx.seen.bucket_id.clone_from(&bucket_id);
                Ok((
                    (),
                    vec![format!(
                        "bound to Bucket {bucket_name}, bucket ID {bucket_id}"
                    )],
                ))
            },
        )
        .await?;
        self.step(
            &format!("Create BucketAccesses {RW_ACCESS} and {RO_ACCESS}"),
            async |_, ctx| {
                let accesses = accesses(&ctx.client()?);
                for (name, mode) in [
                    (RW_ACCESS, BucketAccessMode::ReadWrite),
                    (RO_ACCESS, BucketAccessMode::ReadOnly),
                ] {
                    let mut access =
                        manifests::access(NAMESPACE, name, CLASS, &[(CLAIM, name)], mode);
                    access.spec.protocol = ctx.protocol();
                    accesses
                        .create(&PostParams::default(), &access)
                        .await
                        .with_context(|| format!("create BucketAccess {name}"))?;
                }
                Ok((
                    (),
                    vec![
                        format!("{RW_ACCESS}: claim {CLAIM}, mode ReadWrite, Secret {RW_ACCESS}"),
                        format!("{RO_ACCESS}: claim {CLAIM}, mode ReadOnly, Secret {RO_ACCESS}"),
                    ],
                ))
            },
        )
        .await?;
        self.step(
            "Wait for both BucketAccesses to be provisioned",
            async |step, ctx| {
                let client = ctx.client()?;
                let mut details = Vec::new();
                for name in [RW_ACCESS, RO_ACCESS] {
                    let access = await_access_provisioned(&client, name, step, ctx.timeout).await?;
                    let account = access.account_id().unwrap_or_default().to_owned();
                    details.push(format!("{name}: account {account}"));
                    ctx.seen.account_ids.push(account);
                }
                Ok(((), details))
            },
        )
        .await?;
        self.step(
            "Read the access Secrets (credentials redacted)",
            async |_, ctx| {
                let secrets = secrets(&ctx.client()?);
                let rw = s3::secret_data(&secrets.get(RW_ACCESS).await.context("read Secret")?);
                let ro = s3::secret_data(&secrets.get(RO_ACCESS).await.context("read Secret")?);
                let mut details = vec![format!("Secret {NAMESPACE}/{RW_ACCESS}:")];
                details.extend(
                    s3::redacted(&rw)
                        .into_iter()
                        .map(|(k, v)| format!("  {k:<24} {v}")),
                );
                let key = if ctx.azure.is_some() {
                    AZURE_STORAGE_SAS_TOKEN
                } else {
                    cosi_api::constants::secret_keys::s3::AWS_ACCESS_KEY_ID
                };
                if rw.get(key) == ro.get(key) {
                    bail!(
                        "both accesses got the same access key: each BucketAccess must get its own"
                    );
                }
                details.push(format!(
                    "Secret {NAMESPACE}/{RO_ACCESS}: the same keys, with credentials of its own"
                ));
                ctx.seen.rw = rw;
                ctx.seen.ro = ro;
                Ok(((), details))
            },
        )
        .await?;
        Ok(())
    }
}
