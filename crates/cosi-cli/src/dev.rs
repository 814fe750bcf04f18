//! `cosi dev`: the whole COSI system on this machine, kept running until
//! Ctrl-C, for people and scripts to use with `kubectl`. Classes for the
//! local driver are pre-created; an admin kubeconfig is written; the S3
//! endpoint the access Secrets name listens on 127.0.0.1.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use cosi_api::{BucketAccessClass, BucketClass, DeletionPolicy, MultiBucketAccess};
use cosi_runtime::Shutdown;
use kube::api::{Api, PostParams};

use crate::stack::{Stack, StackOptions};
use crate::{logs, manifests, quickstart};

/// The BucketClass with deletion policy Delete.
pub const CLASS_DELETE: &str = "local";
/// The BucketClass with deletion policy Retain.
pub const CLASS_RETAIN: &str = "local-retain";
/// The BucketAccessClass (Key authentication, multi-bucket accesses allowed).
pub const ACCESS_CLASS: &str = "local";
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
    let (data_dir, temp) = match &args.data_dir {
        Some(dir) => (dir.clone(), None),
        None => {
            let t = tempfile::Builder::new()
                .prefix("cosi-dev-")
                .tempdir()
                .context("create a temporary data directory")?;
            (t.path().to_owned(), Some(t))
        }
    };
    let kubeconfig = args
        .kubeconfig_out
        .clone()
        .unwrap_or_else(|| data_dir.join("kubeconfig"));

    let mut opts = StackOptions::new(&data_dir);
    opts.api_port = args.api_port;
    opts.s3_address = args.s3_address;
    let stack = start(opts, &kubeconfig).await?;
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
            api_url: &stack.sim().url(),
            kubeconfig: &kubeconfig,
            s3_endpoint: stack.s3_endpoint_url(),
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
    drop(temp);
    println!("cosi dev: stopped.");
    Ok(())
}

/// Starts every component, creates the classes and writes the kubeconfig.
async fn start(opts: StackOptions, kubeconfig: &Path) -> anyhow::Result<Stack> {
    let s3_address = opts.s3_address;
    let mut stack = Stack::start_api(opts).await.with_context(|| {
        format!("start the API server and reserve the S3 address {s3_address} (taken? pass --s3-address 127.0.0.1:0)")
    })?;
    stack
        .start_driver()
        .await
        .context("start the local driver")?;
    quickstart::wait_for_driver(&stack, None, STARTUP_TIMEOUT).await?;
    stack.start_sidecar()?;
    stack.start_controller()?;
    quickstart::wait_until_ready(&stack, None, STARTUP_TIMEOUT).await?;
    create_classes(&stack).await?;
    if let Some(dir) = kubeconfig.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    stack
        .write_kubeconfig(kubeconfig)
        .with_context(|| format!("write the kubeconfig {}", kubeconfig.display()))?;
    Ok(stack)
}

async fn create_classes(stack: &Stack) -> anyhow::Result<()> {
    let client = stack.client();
    let driver = stack.driver_name();
    let pp = PostParams::default();
    let classes: Api<BucketClass> = Api::all(client.clone());
    for (name, policy) in [
        (CLASS_DELETE, DeletionPolicy::Delete),
        (CLASS_RETAIN, DeletionPolicy::Retain),
    ] {
        classes
            .create(&pp, &manifests::bucket_class(name, driver, policy))
            .await
            .with_context(|| format!("create BucketClass {name}"))?;
    }
    Api::<BucketAccessClass>::all(client)
        .create(
            &pp,
            &manifests::access_class(ACCESS_CLASS, driver, MultiBucketAccess::MultipleBuckets),
        )
        .await
        .with_context(|| format!("create BucketAccessClass {ACCESS_CLASS}"))?;
    Ok(())
}

/// A BucketClaim and a ReadWrite BucketAccess using the pre-created
/// classes: what the banner suggests applying.
pub const EXAMPLE_MANIFEST: &str = "\
apiVersion: objectstorage.k8s.io/v1alpha2
kind: BucketClaim
metadata:
  name: photos
spec:
  bucketClassName: local
  protocols: [S3]
---
apiVersion: objectstorage.k8s.io/v1alpha2
kind: BucketAccess
metadata:
  name: photos-rw
spec:
  bucketAccessClassName: local
  protocol: S3
  bucketClaims:
    - bucketClaimName: photos
      accessSecretName: photos-rw
      accessModes: {objectData: ReadWrite, objectMetadata: ReadWrite}
";

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
    /// The S3 endpoint URL.
    pub s3_endpoint: &'a str,
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
    let mut text = format!(
        "{READY_LINE}
  API server   {api} (kube-sim, in memory)
  kubeconfig   {kubeconfig}
  S3 endpoint  {s3}
  driver       {driver}, data in {data}
  classes      BucketClass {CLASS_DELETE} (Delete), BucketClass {CLASS_RETAIN} (Retain),
               BucketAccessClass {ACCESS_CLASS} (Key, MultipleBuckets)
",
        api = b.api_url,
        s3 = b.s3_endpoint,
        driver = b.driver,
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
  kubectl get secret photos-rw -o jsonpath='{{.data.BUCKET_NAME}}' | base64 -d; echo
  kubectl delete bucketaccess photos-rw && kubectl delete bucketclaim photos

Stop with Ctrl-C.",
        manifest = EXAMPLE_MANIFEST,
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn banner_with(leftovers: &[String]) -> String {
        banner(&Banner {
            api_url: "http://127.0.0.1:1234",
            kubeconfig: Path::new("/tmp/k/kubeconfig"),
            s3_endpoint: "http://127.0.0.1:9000",
            driver: "local.cosi-rs.dev",
            data_dir: Path::new("/tmp/k"),
            temporary: true,
            leftover_buckets: leftovers,
            endpoints: &[Endpoints {
                component: "sidecar",
                metrics: "127.0.0.1:8080".parse().unwrap(),
                health: "127.0.0.1:8081".parse().unwrap(),
            }],
        })
    }

    #[test]
    fn banner_starts_with_the_ready_line_and_names_every_address() {
        let text = banner_with(&[]);
        assert!(text.starts_with(READY_LINE));
        for needle in [
            "http://127.0.0.1:1234",
            "export KUBECONFIG=/tmp/k/kubeconfig",
            "S3 endpoint  http://127.0.0.1:9000",
            "BucketClass local-retain (Retain)",
            "(temporary, removed at exit)",
            "kubectl wait --for=condition=Provisioned",
            "  sidecar      metrics http://127.0.0.1:8080/metrics, health http://127.0.0.1:8081/readyz",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
        assert!(!text.contains("earlier run"));
    }

    #[test]
    fn banner_names_buckets_left_by_an_earlier_run() {
        let text = banner_with(&["bc-1".to_owned(), "bc-2".to_owned()]);
        assert!(text.contains("the backend holds 2 bucket(s) with no Bucket object: bc-1, bc-2"));
    }

    #[test]
    fn example_manifest_is_a_claim_and_an_access_using_the_precreated_classes() {
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(EXAMPLE_MANIFEST).expect("valid YAML");
        assert_eq!(docs.len(), 2);
        let claim: cosi_api::BucketClaim =
            serde_json::from_value(docs[0].clone()).expect("a BucketClaim");
        assert_eq!(claim.spec.bucket_class_name, CLASS_DELETE);
        let access: cosi_api::BucketAccess =
            serde_json::from_value(docs[1].clone()).expect("a BucketAccess");
        assert_eq!(access.spec.bucket_access_class_name, ACCESS_CLASS);
        assert_eq!(access.spec.bucket_claims[0].bucket_claim_name, "photos");
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
