//! `cosi dev`: the whole COSI system on this machine, kept running until
//! Ctrl-C, for people and scripts to use with `kubectl`. Classes for the
//! driver are pre-created; an admin kubeconfig is written; the endpoint
//! the access Secrets name listens on 127.0.0.1: the local driver's S3
//! endpoint, or with `--driver azure` the Blob service of an Azurite (Azure
//! Storage emulator) started for the run.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use cosi_api::{DeletionPolicy, MultiBucketAccess};
use cosi_runtime::Shutdown;

use crate::stack::{Stack, StackOptions, data_dir_or_temp};
use crate::{logs, manifests, quickstart};
use cosi_driver_azure::AzureDriver;
use cosi_driver_azure::testing::{Azurite, find_bin, install_hint};

/// The BucketClass with deletion policy Delete.
pub const CLASS_DELETE: &str = "local";
/// The BucketClass with deletion policy Retain.
pub const CLASS_RETAIN: &str = "local-retain";
/// The BucketAccessClass (Key authentication, multi-bucket accesses allowed).
pub const ACCESS_CLASS: &str = "local";
/// Which driver `cosi dev` runs.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DevDriver {
    /// cosi-driver-local: buckets in --data-dir behind an S3 endpoint.
    #[default]
    Local,
    /// cosi-driver-azure on the Blob service of Azurite, Microsoft's Azure
    /// Storage emulator (the Azure protocol, SAS tokens).
    Azure,
}

/// What the stack of one driver pre-creates and shows.
#[derive(Debug, Clone, Copy)]
pub struct Flavor {
    /// The BucketClass with deletion policy Delete.
    pub class_delete: &'static str,
    /// The BucketClass with deletion policy Retain.
    pub class_retain: &'static str,
    /// The BucketAccessClass (Key authentication).
    pub access_class: &'static str,
    /// Whether the access class allows multi-bucket accesses.
    pub multi_bucket: bool,
    /// BucketClass parameters.
    pub bucket_parameters: &'static [(&'static str, &'static str)],
    /// What the banner calls the endpoint Secrets name.
    pub endpoint_label: &'static str,
    /// A claim and an access using the classes.
    pub example_manifest: &'static str,
    /// The Secret key the banner's example prints.
    pub secret_key: &'static str,
}

/// The local driver's classes and example.
pub const LOCAL: Flavor = Flavor {
    class_delete: CLASS_DELETE,
    class_retain: CLASS_RETAIN,
    access_class: ACCESS_CLASS,
    multi_bucket: true,
    bucket_parameters: &[],
    endpoint_label: "S3 endpoint",
    example_manifest: EXAMPLE_MANIFEST,
    secret_key: "BUCKET_NAME",
};

/// The Azure driver's classes and example: containers deleted with their
/// blobs (it is a development stack), single-bucket accesses (a SAS token
/// reaches one container).
pub const AZURE: Flavor = Flavor {
    class_delete: "azure",
    class_retain: "azure-retain",
    access_class: "azure",
    multi_bucket: false,
    bucket_parameters: &[("deleteNonEmptyContainers", "true")],
    endpoint_label: "Blob endpoint",
    example_manifest: AZURE_EXAMPLE_MANIFEST,
    secret_key: "AZURE_STORAGE_SAS_TOKEN",
};

impl DevDriver {
    /// The classes and example of this driver.
    pub fn flavor(self) -> &'static Flavor {
        match self {
            DevDriver::Local => &LOCAL,
            DevDriver::Azure => &AZURE,
        }
    }
}

/// The line printed once the stack is ready for kubectl.
pub const READY_LINE: &str = "cosi dev is ready.";

/// How long start-up may take before `cosi dev` gives up.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Flags of `cosi dev`.
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = "\
The API server is kube-sim, in memory: Kubernetes objects are gone when \
cosi dev stops. The local driver's buckets and objects live in --data-dir and \
stay there across runs when you name one.

kubectl sends no credentials over plain HTTP, so the kubeconfig points at a \
port of its own that serves the API as the admin; --api-port is the port of \
the API server for clients that send the kubeconfig's token.")]
pub struct Args {
    /// Write the admin kubeconfig for kubectl here [default: <data-dir>/kubeconfig].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig_out: Option<PathBuf>,

    /// Port of the API server on 127.0.0.1 (0 picks a free one).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    pub api_port: u16,

    /// Address of the S3 endpoint, written into access Secrets (port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9000")]
    pub s3_address: SocketAddr,

    /// The driver to run: local, or azure (needs Azurite: npm install -g azurite@3.37.0).
    #[arg(long, value_enum, default_value = "local")]
    pub driver: DevDriver,

    /// The azurite-blob executable for --driver azure [default: azurite-blob on PATH].
    #[arg(long, env = "AZURITE_BIN", value_name = "FILE")]
    pub azurite_bin: Option<PathBuf>,

    /// Directory for the local driver's buckets, objects and socket, kept across runs.
    /// Default: a new temporary directory, removed when cosi dev stops.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Show the components' info logs on stderr (default: warnings and errors only).
    /// RUST_LOG, when set, takes precedence.
    #[arg(short, long)]
    pub verbose: bool,
}

/// Runs `cosi dev` until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<()> {
    logs::init(if args.verbose { "info" } else { "warn" });
    let shutdown = Shutdown::on_signals();
    let (data_dir, temp) = data_dir_or_temp(args.data_dir.as_deref(), "cosi-dev-")
        .context("create a temporary data directory")?;
    let kubeconfig = args
        .kubeconfig_out
        .clone()
        .unwrap_or_else(|| data_dir.join("kubeconfig"));

    let mut opts = StackOptions::new(&data_dir);
    opts.api_port = args.api_port;
    opts.s3_address = match args.driver {
        DevDriver::Local => args.s3_address,
        // No S3 endpoint is served: do not hold the S3 port.
        DevDriver::Azure => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let flavor = args.driver.flavor();
    // Azurite runs until `cosi dev` ends (dropped last).
    let azurite = match args.driver {
        DevDriver::Local => None,
        DevDriver::Azure => Some(start_azurite(args.azurite_bin.clone()).await?),
    };
    let stack = start(opts, &kubeconfig, azurite.as_ref(), flavor, &shutdown).await?;
    let endpoint = match &azurite {
        Some(a) => a.endpoint(),
        None => stack.s3_endpoint_url().to_owned(),
    };
    let leftovers = stack
        .backend_state()
        .map(|s| s.buckets.into_iter().map(|b| b.id).collect::<Vec<_>>())
        .unwrap_or_default();
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    let (controller_readiness, sidecar_readiness) = stack.readiness();
    let mut endpoints = Vec::new();
    for (component, registry, readiness) in [
        (
            "controller",
            stack.controller_registry(),
            controller_readiness,
        ),
        ("sidecar", stack.sidecar_registry(), sidecar_readiness),
    ] {
        let (bound, _task) = cosi_runtime::http::serve(
            local,
            local,
            registry.clone(),
            readiness.clone(),
            cosi_runtime::http::Router::new(),
            shutdown.clone(),
        )
        .await
        .with_context(|| format!("serve the {component}'s metrics and health endpoints"))?;
        endpoints.push(Endpoints {
            component,
            metrics: bound.metrics,
            health: bound.health,
        });
    }
    println!(
        "{}",
        banner(&Banner {
            api_url: &stack.api_server().url(),
            kubeconfig: &kubeconfig,
            endpoint: &endpoint,
            flavor,
            driver: stack.driver_name(),
            data_dir: &data_dir,
            temporary: temp.is_some(),
            leftover_buckets: &leftovers,
            endpoints: &endpoints,
        })
    );

    shutdown.wait().await;
    println!("cosi dev: stopping...");
    stack.shutdown().await;
    drop(azurite);
    drop(temp);
    println!("cosi dev: stopped.");
    Ok(())
}

/// Starts Azurite from `bin`, or from the one found on `PATH`.
async fn start_azurite(bin: Option<PathBuf>) -> anyhow::Result<Azurite> {
    let bin = bin
        .or_else(find_bin)
        .ok_or_else(|| anyhow::anyhow!(install_hint()))?;
    let started = tokio::task::spawn_blocking(move || Azurite::start_with(&bin))
        .await
        .context("start Azurite")?;
    started.map_err(|e| anyhow::anyhow!("start Azurite: {e}"))
}

/// Starts every component (the driver on `azurite` when given, else the
/// local driver), creates the classes and writes the kubeconfig.
async fn start(
    mut opts: StackOptions,
    kubeconfig: &Path,
    azurite: Option<&Azurite>,
    flavor: &Flavor,
    shutdown: &Shutdown,
) -> anyhow::Result<Stack> {
    let s3_address = opts.s3_address;
    let azure = match azurite {
        Some(a) => {
            let driver = AzureDriver::connect(a.config(), a.key())
                .await
                .map_err(|e| anyhow::anyhow!("start the Azure driver: {e}"))?;
            opts.driver_name = driver.config().driver_name.clone();
            Some(driver)
        }
        None => None,
    };
    let mut stack = Stack::start_api(opts).await.with_context(|| {
        format!("start the API server and reserve the S3 address {s3_address} (taken? pass --s3-address 127.0.0.1:0)")
    })?;
    match azure {
        Some(driver) => {
            let endpoint = stack.driver_endpoint().clone();
            let stopped = shutdown.stopped();
            tokio::spawn(async move {
                if let Err(e) = cosi_driver::serve(&endpoint, driver.clone(), driver, stopped).await
                {
                    tracing::error!("the Azure driver stopped: {e}");
                }
            });
        }
        None => stack
            .start_driver()
            .await
            .context("start the local driver")?,
    }
    quickstart::wait_for_driver(&stack, None, STARTUP_TIMEOUT).await?;
    stack.start_sidecar()?;
    stack.start_controller()?;
    quickstart::wait_until_ready(&stack, None, STARTUP_TIMEOUT).await?;
    create_classes(&stack, flavor).await?;
    if let Some(dir) = kubeconfig.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    stack
        .write_kubeconfig(kubeconfig)
        .with_context(|| format!("write the kubeconfig {}", kubeconfig.display()))?;
    Ok(stack)
}

async fn create_classes(stack: &Stack, flavor: &Flavor) -> anyhow::Result<()> {
    let client = stack.client();
    let driver = stack.driver_name();
    for (name, policy) in [
        (flavor.class_delete, DeletionPolicy::Delete),
        (flavor.class_retain, DeletionPolicy::Retain),
    ] {
        let mut class = manifests::bucket_class(name, driver, policy);
        for (k, v) in flavor.bucket_parameters {
            class.spec.parameters.insert((*k).into(), (*v).into());
        }
        manifests::create_cluster_object(&client, &class)
            .await
            .with_context(|| format!("create BucketClass {name}"))?;
    }
    let multi = if flavor.multi_bucket {
        MultiBucketAccess::MultipleBuckets
    } else {
        MultiBucketAccess::SingleBucket
    };
    let access_class = manifests::access_class(flavor.access_class, driver, multi);
    manifests::create_cluster_object(&client, &access_class)
        .await
        .with_context(|| format!("create BucketAccessClass {}", flavor.access_class))?;
    Ok(())
}

/// The example the banner suggests applying: a BucketClaim `photos` of
/// class `$class` and a ReadWrite BucketAccess `photos-rw` to it of access
/// class `$class`, both for `$protocol`.
macro_rules! example_manifest {
    ($class:literal, $protocol:literal) => {
        concat!(
            "\
apiVersion: objectstorage.k8s.io/v1alpha2
kind: BucketClaim
metadata:
  name: photos
spec:
  bucketClassName: ",
            $class,
            "
  protocols: [",
            $protocol,
            "]
---
apiVersion: objectstorage.k8s.io/v1alpha2
kind: BucketAccess
metadata:
  name: photos-rw
spec:
  bucketAccessClassName: ",
            $class,
            "
  protocol: ",
            $protocol,
            "
  bucketClaims:
    - bucketClaimName: photos
      accessSecretName: photos-rw
      accessModes: {objectData: ReadWrite, objectMetadata: ReadWrite}
"
        )
    };
}

/// A BucketClaim and a ReadWrite BucketAccess using the pre-created
/// classes: what the banner suggests applying.
pub const EXAMPLE_MANIFEST: &str = example_manifest!("local", "S3");

/// The Azure flavor of [`EXAMPLE_MANIFEST`]: an Azure claim and a ReadWrite
/// access, whose Secret holds the container's SAS URL.
pub const AZURE_EXAMPLE_MANIFEST: &str = example_manifest!("azure", "Azure");

/// Where a component serves its metrics and health endpoints.
#[derive(Debug, Clone, Copy)]
pub struct Endpoints {
    /// `controller` or `sidecar`.
    pub component: &'static str,
    /// `/metrics`.
    pub metrics: SocketAddr,
    /// `/healthz` and `/readyz`.
    pub health: SocketAddr,
}

/// What the banner shows.
#[derive(Debug)]
pub struct Banner<'a> {
    /// The API server's URL.
    pub api_url: &'a str,
    /// The kubeconfig written.
    pub kubeconfig: &'a Path,
    /// The endpoint Secrets name (S3, or Azurite's Blob service).
    pub endpoint: &'a str,
    /// The driver's classes and example.
    pub flavor: &'a Flavor,
    /// The driver's name.
    pub driver: &'a str,
    /// The data directory.
    pub data_dir: &'a Path,
    /// Whether the data directory is removed at exit.
    pub temporary: bool,
    /// Bucket IDs the backend held before this run (a kept data directory).
    pub leftover_buckets: &'a [String],
    /// The components' metrics and health endpoints.
    pub endpoints: &'a [Endpoints],
}

/// The text printed once the stack is ready: where everything is, and
/// kubectl commands to try.
pub fn banner(b: &Banner<'_>) -> String {
    let kubeconfig = b.kubeconfig.display();
    let data = format!(
        "{}{}",
        b.data_dir.display(),
        if b.temporary {
            " (temporary, removed at exit)"
        } else {
            ""
        }
    );
    let f = b.flavor;
    let mut text = format!(
        "{READY_LINE}
  API server   {api} (kube-sim, in memory)
  kubeconfig   {kubeconfig}
  {label:<12} {endpoint}
  driver       {driver}, data in {data}
  classes      BucketClass {delete} (Delete), BucketClass {retain} (Retain),
               BucketAccessClass {access} (Key, {multi})
",
        api = b.api_url,
        label = f.endpoint_label,
        endpoint = b.endpoint,
        driver = b.driver,
        delete = f.class_delete,
        retain = f.class_retain,
        access = f.access_class,
        multi = if f.multi_bucket {
            "MultipleBuckets"
        } else {
            "SingleBucket"
        },
    );
    for e in b.endpoints {
        text.push_str(&format!(
            "  {:<12} metrics http://{}/metrics, health http://{}/readyz\n",
            e.component, e.metrics, e.health
        ));
    }
    if !b.leftover_buckets.is_empty() {
        text.push_str(&format!(
            "  earlier run  the backend holds {} bucket(s) with no Bucket object: {}
               (import one as a static Bucket with existingBucketID; see README.md)
",
            b.leftover_buckets.len(),
            b.leftover_buckets.join(", ")
        ));
    }
    text.push_str(&format!(
        "
Try:
  export KUBECONFIG={kubeconfig}
  kubectl get bucketclasses,bucketaccessclasses
  kubectl apply -f - <<'EOF'
{manifest}EOF
  kubectl wait --for=condition=Provisioned bucketclaim/photos bucketaccess/photos-rw
  kubectl describe bucketclaim photos
  kubectl get secret photos-rw -o jsonpath='{{.data.{key}}}' | base64 -d; echo
  kubectl delete bucketaccess photos-rw && kubectl delete bucketclaim photos

Stop with Ctrl-C.",
        manifest = f.example_manifest,
        key = f.secret_key,
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::assert_mentions_all;

    fn banner_with(leftovers: &[String]) -> String {
        banner(&Banner {
            leftover_buckets: leftovers,
            endpoints: &[Endpoints {
                component: "sidecar",
                metrics: "127.0.0.1:8080".parse().unwrap(),
                health: "127.0.0.1:8081".parse().unwrap(),
            }],
            ..banner_fields()
        })
    }

    /// How many documents an example manifest holds, and its claim and access.
    fn example_objects(manifest: &str) -> (usize, cosi_api::BucketClaim, cosi_api::BucketAccess) {
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(manifest).expect("valid YAML");
        let claim = serde_json::from_value(docs[0].clone()).expect("a BucketClaim");
        let access = serde_json::from_value(docs[1].clone()).expect("a BucketAccess");
        (docs.len(), claim, access)
    }

    #[test]
    fn banner_starts_with_the_ready_line_and_names_every_address() {
        let text = banner_with(&[]);
        assert!(text.starts_with(READY_LINE));
        assert_mentions_all(
            &text,
            &[
                "http://127.0.0.1:1234",
                "export KUBECONFIG=/tmp/k/kubeconfig",
                "S3 endpoint  http://127.0.0.1:9000",
                "BucketClass local-retain (Retain)",
                "(temporary, removed at exit)",
                "kubectl wait --for=condition=Provisioned",
                "  sidecar      metrics http://127.0.0.1:8080/metrics, health http://127.0.0.1:8081/readyz",
            ],
        );
        assert!(!text.contains("earlier run"));
    }

    #[test]
    fn banner_names_buckets_left_by_an_earlier_run() {
        let text = banner_with(&["bc-1".to_owned(), "bc-2".to_owned()]);
        assert!(text.contains("the backend holds 2 bucket(s) with no Bucket object: bc-1, bc-2"));
    }

    #[test]
    fn example_manifest_is_a_claim_and_an_access_using_the_precreated_classes() {
        let (docs, claim, access) = example_objects(EXAMPLE_MANIFEST);
        assert_eq!(docs, 2);
        assert_eq!(claim.spec.bucket_class_name, CLASS_DELETE);
        assert_eq!(access.spec.bucket_access_class_name, ACCESS_CLASS);
        assert_eq!(access.spec.bucket_claims[0].bucket_claim_name, "photos");
    }

    #[test]
    fn the_azure_example_uses_the_azure_classes_and_protocol() {
        let (_, claim, access) = example_objects(AZURE_EXAMPLE_MANIFEST);
        assert_eq!(claim.spec.bucket_class_name, AZURE.class_delete);
        assert_eq!(claim.spec.protocols, [cosi_api::Protocol::Azure]);
        assert_eq!(access.spec.bucket_access_class_name, AZURE.access_class);
        assert_eq!(access.spec.protocol, cosi_api::Protocol::Azure);
        let text = banner(&Banner {
            endpoint: "http://127.0.0.1:10000/devstoreaccount1",
            flavor: &AZURE,
            ..banner_fields()
        });
        assert_mentions_all(
            &text,
            &[
                "Blob endpoint http://127.0.0.1:10000/devstoreaccount1",
                "BucketAccessClass azure (Key, SingleBucket)",
                "protocols: [Azure]",
                "{.data.AZURE_STORAGE_SAS_TOKEN}",
            ],
        );
    }

    fn banner_fields() -> Banner<'static> {
        Banner {
            api_url: "http://127.0.0.1:1234",
            kubeconfig: Path::new("/tmp/k/kubeconfig"),
            endpoint: "http://127.0.0.1:9000",
            flavor: &LOCAL,
            driver: "local.cosi-rs.dev",
            data_dir: Path::new("/tmp/k"),
            temporary: true,
            leftover_buckets: &[],
            endpoints: &[],
        }
    }

    #[test]
    fn example_manifest_sits_unindented_inside_the_heredoc() {
        // A YAML document separator and the heredoc's end must start their lines.
        let text = banner_with(&[]);
        assert!(text.contains("<<'EOF'\napiVersion: objectstorage.k8s.io/v1alpha2\n"));
        assert!(text.contains("\n---\n"));
        assert!(text.contains("objectMetadata: ReadWrite}\nEOF\n"));
    }
}
