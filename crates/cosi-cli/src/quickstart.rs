//! `cosi quickstart`: the whole COSI system on this machine, once, checked
//! step by step. It starts kube-sim with the CRDs, the controller, the
//! sidecar and the local driver (or, with `--protocol azure`, the Azure
//! driver on an Azurite started for the run); creates classes, a
//! BucketClaim and two BucketAccesses (ReadWrite and ReadOnly); uses the
//! credentials through a real S3 client (or the SAS URL); deletes
//! everything; and checks the backend is empty.
//! Every step is shown with its status and elapsed time; the exit status is
//! 0 only if every step held, else the report names the failed step, why,
//! and what to look at.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_s3::primitives::ByteStream;
use cosi_api::{
    Bucket, BucketAccess, BucketAccessClass, BucketAccessMode, BucketClaim, BucketClass,
    DeletionPolicy, MultiBucketAccess,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Resource, ResourceExt};

use cosi_api::Protocol;
use cosi_api::constants::secret_keys::azure::AZURE_STORAGE_SAS_TOKEN;
use cosi_driver_azure::AzureDriver;
use cosi_driver_azure::testing::Azurite;
use cosi_runtime::Shutdown;
use cosi_sanity::azure::AzureTarget;
use cosi_sanity::s3::Access;

use crate::describe::{condition_lines, event_line, events_about, waiting_summary};
use crate::progress::{Progress, Step};
use crate::stack::{Stack, StackOptions};
use crate::{logs, manifests, s3, wait};

/// The namespace of the quickstart's claim and accesses.
pub const NAMESPACE: &str = "default";
/// The BucketClass and BucketAccessClass the quickstart creates.
pub const CLASS: &str = "quickstart";
/// The BucketClaim.
pub const CLAIM: &str = "quickstart";
/// The ReadWrite BucketAccess (and its Secret).
pub const RW_ACCESS: &str = "quickstart-rw";
/// The ReadOnly BucketAccess (and its Secret).
pub const RO_ACCESS: &str = "quickstart-ro";
/// The object written and read back.
pub const OBJECT_KEY: &str = "hello.txt";
const OBJECT_BODY: &[u8] = b"Hello from cosi quickstart\n";
/// How many steps a full run has.
pub const STEPS: usize = 15;

/// The protocol `cosi quickstart` exercises.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuickstartProtocol {
    /// S3, with the local driver.
    #[default]
    S3,
    /// Azure Blob, with the Azure driver on Azurite (npm install -g azurite@3.37.0).
    Azure,
}

/// Flags of `cosi quickstart`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The protocol to exercise: s3 (the local driver) or azure (the Azure
    /// driver on Azurite, Microsoft's Azure Storage emulator).
    #[arg(long, value_enum, default_value = "s3")]
    pub protocol: QuickstartProtocol,

    /// The azurite-blob executable for --protocol azure [default: azurite-blob on PATH].
    #[arg(long, env = "AZURITE_BIN", value_name = "FILE")]
    pub azurite_bin: Option<PathBuf>,

    /// Directory for the local driver's state, objects and socket.
    /// Default: a new temporary directory, removed at the end unless --keep.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Keep the temporary data directory instead of removing it (its path is printed).
    #[arg(long)]
    pub keep: bool,

    /// How long any one step may wait (e.g. 500ms, 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Show the components' info logs on stderr (default: warnings and errors only).
    /// RUST_LOG, when set, takes precedence.
    #[arg(short, long)]
    pub verbose: bool,
}

/// Parses `500ms`, `30s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a duration: use e.g. 500ms, 30s, 2m"))?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(format!("unknown unit `{unit}` in `{s}`: use ms, s, m or h")),
    };
    Ok(d)
}

/// Runs `cosi quickstart`.
pub async fn run(args: Args) -> anyhow::Result<()> {
    logs::init(if args.verbose { "info" } else { "warn" });
    let (data_dir, temp) = match &args.data_dir {
        Some(dir) => (dir.clone(), None),
        None => {
            let t = tempfile::Builder::new()
                .prefix("cosi-quickstart-")
                .tempdir()
                .context("create a temporary data directory")?;
            (t.path().to_owned(), Some(t))
        }
    };
    let progress = Progress::new();
    progress.line("cosi quickstart: the whole COSI system on this machine, checked step by step");
    progress.line(&format!(
        "data directory: {}{}",
        data_dir.display(),
        match (&temp, args.keep) {
            (Some(_), false) => " (temporary: removed at the end, --keep keeps it)",
            _ => "",
        }
    ));
    progress.line("");

    let mut run = Run {
        progress,
        timeout: args.timeout,
        stack: None,
        seen: Seen::default(),
        azure: match args.protocol {
            QuickstartProtocol::S3 => None,
            QuickstartProtocol::Azure => Some(AzureRun {
                bin: args.azurite_bin.clone(),
                azurite: None,
                stop_driver: Shutdown::new(),
            }),
        },
    };
    let outcome = run.steps(&data_dir).await;
    if let Some(stack) = run.stack.take() {
        stack.shutdown().await;
    }
    if let Some(azure) = run.azure.take() {
        azure.stop_driver.trigger();
        drop(azure.azurite);
    }
    let Run { progress, .. } = run;
    progress.line("");
    let kept = match (temp, args.keep) {
        (Some(t), true) => Some(t.keep()),
        (Some(t), false) => {
            drop(t);
            None
        }
        (None, _) => None,
    };
    if let Some(dir) = &kept {
        progress.line(&format!("kept the data directory {}", dir.display()));
    }
    match outcome {
        Ok(()) => {
            progress.line(&format!(
                "quickstart passed: {} steps in {}.",
                progress.steps(),
                crate::progress::format_elapsed(progress.elapsed())
            ));
            progress.line(match args.protocol {
                QuickstartProtocol::S3 => {
                    "Next: `cosi dev` keeps this system running so you can use kubectl against it."
                }
                QuickstartProtocol::Azure => {
                    "Next: `cosi dev --driver azure` keeps this system running so you can use kubectl against it."
                }
            });
            Ok(())
        }
        Err(failure) => {
            for line in failure.report(STEPS) {
                progress.line(&line);
            }
            Err(anyhow!(
                "quickstart failed at step {} of {STEPS} ({})",
                failure.step,
                failure.name
            ))
        }
    }
}

/// A failed step: which, why, and what to look at.
#[derive(Debug)]
pub struct Failure {
    /// Its number, from 1.
    pub step: usize,
    /// Its name.
    pub name: String,
    /// Why it failed.
    pub reason: String,
    /// What a person should look at.
    pub look_at: Vec<String>,
}

impl Failure {
    /// The lines of the failure report.
    pub fn report(&self, total: usize) -> Vec<String> {
        let mut lines = vec![format!(
            "quickstart FAILED at step {} of {total}, \"{}\": {}",
            self.step, self.name, self.reason
        )];
        if !self.look_at.is_empty() {
            lines.push("look at:".to_owned());
            lines.extend(self.look_at.iter().map(|l| format!("  {l}")));
        }
        lines.push(
            "component logs: rerun with --verbose (or RUST_LOG=debug); --keep keeps the data directory"
                .to_owned(),
        );
        lines
    }
}

/// An error that carries what a person should look at.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
struct Explained {
    reason: String,
    look_at: Vec<String>,
}

fn explained(reason: impl Display, look_at: Vec<String>) -> anyhow::Error {
    anyhow::Error::new(Explained {
        reason: reason.to_string(),
        look_at,
    })
}

/// What earlier steps found and later ones check.
#[derive(Debug, Default)]
struct Seen {
    bucket_name: String,
    bucket_id: String,
    account_ids: Vec<String>,
    rw: BTreeMap<String, String>,
    ro: BTreeMap<String, String>,
}

struct Run {
    progress: Progress,
    timeout: Duration,
    stack: Option<Stack>,
    seen: Seen,
    /// Set with `--protocol azure`.
    azure: Option<AzureRun>,
}

/// The Azure flavor of a run: the emulator and the driver serving on it.
struct AzureRun {
    /// `--azurite-bin`.
    bin: Option<PathBuf>,
    /// Running from step 2 to the end.
    azurite: Option<Azurite>,
    /// Stops the Azure driver.
    stop_driver: Shutdown,
}

/// A client for the container of an Azure access Secret.
fn azure_target(data: &BTreeMap<String, String>) -> anyhow::Result<AzureTarget> {
    let url = data
        .get(AZURE_STORAGE_SAS_TOKEN)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| anyhow!("the access Secret lacks {AZURE_STORAGE_SAS_TOKEN}"))?;
    AzureTarget::new(url, None, Duration::from_secs(30)).map_err(|e| anyhow!("{e}"))
}

/// What a step body returns: lines shown under the step.
type Details = Vec<String>;

impl Run {
    /// Runs one step: shows it, and turns an error into a [`Failure`].
    async fn step<T>(
        &mut self,
        name: &str,
        body: impl AsyncFnOnce(&Step, &mut Ctx<'_>) -> anyhow::Result<(T, Details)>,
    ) -> Result<T, Failure> {
        let step = self.progress.step(name);
        let number = self.progress.steps();
        let mut ctx = Ctx {
            stack: &mut self.stack,
            seen: &mut self.seen,
            timeout: self.timeout,
            azure: self.azure.as_mut(),
        };
        match body(&step, &mut ctx).await {
            Ok((value, details)) => {
                step.ok(&details);
                Ok(value)
            }
            Err(e) => {
                let (reason, look_at) = match e.downcast_ref::<Explained>() {
                    Some(x) => (x.reason.clone(), x.look_at.clone()),
                    None => (format!("{e:#}"), Vec::new()),
                };
                step.fail(&[reason.as_str()]);
                Err(Failure {
                    step: number,
                    name: name.to_owned(),
                    reason,
                    look_at,
                })
            }
        }
    }

    async fn steps(&mut self, data_dir: &Path) -> Result<(), Failure> {
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
                let url = stack.sim().url();
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
                let pp = PostParams::default();
                let mut class = manifests::bucket_class(CLASS, &driver, DeletionPolicy::Delete);
                if azure {
                    // The object written below stays: the container goes with it.
                    class
                        .spec
                        .parameters
                        .insert("deleteNonEmptyContainers".into(), "true".into());
                }
                Api::<BucketClass>::all(client.clone())
                    .create(&pp, &class)
                    .await
                    .context("create the BucketClass")?;
                Api::<BucketAccessClass>::all(client)
                    .create(
                        &pp,
                        &manifests::access_class(CLASS, &driver, MultiBucketAccess::SingleBucket),
                    )
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
                let claims = claims(&ctx.stack()?.client());
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
                let timeout = ctx.timeout;
                let client = ctx.stack()?.client();
                let claim = await_claim_provisioned(&client, step, timeout).await?;
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
                let protocol = ctx.protocol();
                let accesses = accesses(&ctx.stack()?.client());
                let pp = PostParams::default();
                for (name, mode) in [
                    (RW_ACCESS, BucketAccessMode::ReadWrite),
                    (RO_ACCESS, BucketAccessMode::ReadOnly),
                ] {
                    let mut access =
                        manifests::access(NAMESPACE, name, CLASS, &[(CLAIM, name)], mode);
                    access.spec.protocol = protocol;
                    accesses
                        .create(&pp, &access)
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
                let timeout = ctx.timeout;
                let client = ctx.stack()?.client();
                let mut details = Vec::new();
                for name in [RW_ACCESS, RO_ACCESS] {
                    let access = await_access_provisioned(&client, name, step, timeout).await?;
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
                let secrets = secrets(&ctx.stack()?.client());
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
                let got = read_object(&client, &bucket).await?;
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
                let got = read_object(&client, &bucket).await?;
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
                let timeout = ctx.timeout;
                let client = ctx.stack()?.client();
                let api = accesses(&client);
                for name in [RW_ACCESS, RO_ACCESS] {
                    api.delete(name, &DeleteParams::default())
                        .await
                        .with_context(|| format!("delete BucketAccess {name}"))?;
                }
                for name in [RW_ACCESS, RO_ACCESS] {
                    step.waiting(format!("BucketAccess {name} to be gone"));
                    await_gone(&client, &api, "BucketAccess", name, timeout).await?;
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
                let timeout = ctx.timeout;
                let client = ctx.stack()?.client();
                let bucket_name = ctx.seen.bucket_name.clone();
                let claims = claims(&client);
                claims
                    .delete(CLAIM, &DeleteParams::default())
                    .await
                    .context("delete the BucketClaim")?;
                step.waiting(format!("BucketClaim {CLAIM} to be gone"));
                await_gone(&client, &claims, "BucketClaim", CLAIM, timeout).await?;
                step.waiting(format!("Bucket {bucket_name} to be gone"));
                let buckets: Api<Bucket> = Api::all(client.clone());
                await_gone(&client, &buckets, "Bucket", &bucket_name, timeout).await?;
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

/// What a step body may use.
struct Ctx<'a> {
    stack: &'a mut Option<Stack>,
    seen: &'a mut Seen,
    timeout: Duration,
    azure: Option<&'a mut AzureRun>,
}

impl Ctx<'_> {
    /// The protocol of the claim and accesses.
    fn protocol(&self) -> Protocol {
        if self.azure.is_some() {
            Protocol::Azure
        } else {
            Protocol::S3
        }
    }

    fn stack(&mut self) -> anyhow::Result<&mut Stack> {
        self.stack
            .as_mut()
            .ok_or_else(|| anyhow!("the stack is not running"))
    }
}

fn claims(client: &Client) -> Api<BucketClaim> {
    Api::namespaced(client.clone(), NAMESPACE)
}

fn accesses(client: &Client) -> Api<BucketAccess> {
    Api::namespaced(client.clone(), NAMESPACE)
}

fn secrets(client: &Client) -> Api<Secret> {
    Api::namespaced(client.clone(), NAMESPACE)
}

/// Waits until the driver answers DriverGetInfo on its socket.
pub(crate) async fn wait_for_driver(
    stack: &Stack,
    step: Option<&Step>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let endpoint = stack.driver_endpoint().clone();
    if let Some(step) = step {
        step.waiting(format!("DriverGetInfo on {endpoint}"));
    }
    let client = cosi_driver::DriverClient::connect_lazy(&endpoint);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match client.get_info().await {
            Ok(_) => return Ok(()),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(explained(
                    format!(
                        "the driver did not answer on {endpoint} within {timeout:?}: {}",
                        e.message()
                    ),
                    vec![format!("the driver's socket {endpoint}")],
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Waits until the controller's and the sidecar's readiness say ready,
/// showing why not meanwhile.
pub(crate) async fn wait_until_ready(
    stack: &Stack,
    step: Option<&Step>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let (controller, sidecar) = stack.readiness();
        let not_ready: Vec<String> = [("controller", controller.get()), ("sidecar", sidecar.get())]
            .into_iter()
            .filter_map(|(who, r)| r.err().map(|why| format!("{who}: {why}")))
            .collect();
        if not_ready.is_empty() {
            return Ok(());
        }
        if let Some(step) = step {
            step.waiting(not_ready.join("; "));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(explained(
                format!("not ready after {timeout:?}: {}", not_ready.join("; ")),
                vec!["the components' logs (--verbose)".to_owned()],
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn await_claim_provisioned(
    client: &Client,
    step: &Step,
    timeout: Duration,
) -> anyhow::Result<BucketClaim> {
    let mut last: Option<BucketClaim> = None;
    let result = wait::until_observed(
        &claims(client),
        CLAIM,
        &format!("BucketClaim {NAMESPACE}/{CLAIM} to be provisioned"),
        timeout,
        wait::provisioned(BucketClaim::conditions),
        |c: Option<&BucketClaim>| {
            step.waiting(match c {
                None => format!("BucketClaim {CLAIM}: not found"),
                Some(c) => format!("BucketClaim {CLAIM}: {}", waiting_summary(c.conditions())),
            });
            last = c.cloned();
        },
    )
    .await;
    match result {
        Ok(Some(claim)) => Ok(claim),
        Ok(None) => bail!("BucketClaim {CLAIM} disappeared"),
        Err(e) => {
            let mut look_at = Vec::new();
            if let Some(claim) = &last {
                look_at.extend(object_report(client, claim, "BucketClaim").await);
                if let Some(name) = claim.bound_bucket_name() {
                    if let Ok(Some(bucket)) = Api::<Bucket>::all(client.clone()).get_opt(name).await
                    {
                        look_at.extend(object_report(client, &bucket, "Bucket").await);
                    } else {
                        look_at.push(format!("Bucket {name}: not found"));
                    }
                }
            }
            Err(explained(e, look_at))
        }
    }
}

async fn await_access_provisioned(
    client: &Client,
    name: &str,
    step: &Step,
    timeout: Duration,
) -> anyhow::Result<BucketAccess> {
    let mut last: Option<BucketAccess> = None;
    let result = wait::until_observed(
        &accesses(client),
        name,
        &format!("BucketAccess {NAMESPACE}/{name} to be provisioned"),
        timeout,
        wait::provisioned(BucketAccess::conditions),
        |a: Option<&BucketAccess>| {
            step.waiting(match a {
                None => format!("BucketAccess {name}: not found"),
                Some(a) => format!("BucketAccess {name}: {}", waiting_summary(a.conditions())),
            });
            last = a.cloned();
        },
    )
    .await;
    match result {
        Ok(Some(access)) => Ok(access),
        Ok(None) => bail!("BucketAccess {name} disappeared"),
        Err(e) => {
            let look_at = match &last {
                Some(access) => object_report(client, access, "BucketAccess").await,
                None => Vec::new(),
            };
            Err(explained(e, look_at))
        }
    }
}

/// Waits until the object is gone; on a timeout, reports what holds it
/// (its finalizers and annotations, conditions, Events).
async fn await_gone<K>(
    client: &Client,
    api: &Api<K>,
    kind: &str,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let what = format!("{kind} {name} to be deleted");
    match wait::until(api, name, &what, timeout, wait::deleted()).await {
        Ok(_) => Ok(()),
        Err(e) => {
            let mut look_at = Vec::new();
            if let Ok(Some(obj)) = api.get_opt(name).await {
                let meta = obj.meta();
                look_at.push(format!(
                    "{kind} {name}: finalizers {:?}, annotations {:?}",
                    meta.finalizers.clone().unwrap_or_default(),
                    meta.annotations
                        .clone()
                        .unwrap_or_default()
                        .keys()
                        .collect::<Vec<_>>()
                ));
            }
            look_at.extend(event_report(client, kind, name).await);
            Err(explained(e, look_at))
        }
    }
}

/// Conditions and Events of a COSI object, for a failure report.
async fn object_report<K>(client: &Client, obj: &K, kind: &str) -> Vec<String>
where
    K: ResourceExt + HasConditions,
{
    let name = obj.name_any();
    let mut lines: Vec<String> = condition_lines(obj.conditions_of())
        .into_iter()
        .map(|l| format!("{kind} {name}: {l}"))
        .collect();
    lines.extend(event_report(client, kind, &name).await);
    lines
}

async fn event_report(client: &Client, kind: &str, name: &str) -> Vec<String> {
    match events_about(client, kind, name).await {
        Ok(events) => events
            .iter()
            .map(|e| format!("Event on {kind} {name}: {}", event_line(e)))
            .collect(),
        Err(e) => vec![format!("Events on {kind} {name}: cannot list ({e})")],
    }
}

/// The COSI kinds with conditions.
trait HasConditions {
    fn conditions_of(&self) -> &[cosi_api::Condition];
}

impl HasConditions for BucketClaim {
    fn conditions_of(&self) -> &[cosi_api::Condition] {
        self.conditions()
    }
}

impl HasConditions for Bucket {
    fn conditions_of(&self) -> &[cosi_api::Condition] {
        self.conditions()
    }
}

impl HasConditions for BucketAccess {
    fn conditions_of(&self) -> &[cosi_api::Condition] {
        self.conditions()
    }
}

async fn read_object(client: &aws_sdk_s3::Client, bucket: &str) -> anyhow::Result<Vec<u8>> {
    let got = client
        .get_object()
        .bucket(bucket)
        .key(OBJECT_KEY)
        .send()
        .await
        .map_err(|e| anyhow!("GetObject failed: {}", DisplayErrorContext(e)))?;
    Ok(got
        .body
        .collect()
        .await
        .context("read the object body")?
        .into_bytes()
        .to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_or_without_a_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn bad_durations_are_refused_with_a_hint() {
        assert!(parse_duration("fast").unwrap_err().contains("500ms"));
        assert!(parse_duration("3d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn failure_report_names_the_step_the_reason_and_what_to_look_at() {
        let failure = Failure {
            step: 6,
            name: "Wait for the BucketClaim to be provisioned".to_owned(),
            reason: "timed out".to_owned(),
            look_at: vec!["BucketClaim quickstart: Provisioned=Unknown".to_owned()],
        };
        let report = failure.report(STEPS);
        assert_eq!(
            report[0],
            "quickstart FAILED at step 6 of 15, \"Wait for the BucketClaim to be provisioned\": timed out"
        );
        assert_eq!(report[1], "look at:");
        assert_eq!(report[2], "  BucketClaim quickstart: Provisioned=Unknown");
        assert!(report.last().is_some_and(|l| l.contains("--verbose")));
    }
}
