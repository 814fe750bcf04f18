//! The shipped images, run as the manifests in `deploy/` run them.
//!
//! `scripts/images.sh --dev` builds every image from one static build and
//! pushes it to a registry on 127.0.0.1 (Debian's `docker-registry`); the
//! containers then run from the registry's copies. kube-sim runs on the
//! host with RBAC enforced and the manifests' RBAC applied; the controller
//! Pod and a driver Pod (the sidecar and the local driver, sharing the
//! driver socket on an emptyDir) run from the rendered Deployments with
//! each container's securityContext, volumes and ServiceAccount (see
//! [`pod`]). The KEP flow is driven from outside: claim, access, Secret,
//! S3 PUT and GET with the Secret's keys against the containerised driver,
//! reached by the host name in the Secret, then deletion until the backend
//! is empty. The controller and the sidecar reach the API server only by
//! name, so name lookup in the static binaries is part of the proof.
//!
//! Needs podman, runc, slirp4netns and docker-registry (the test fails
//! naming the Debian packages when they are missing) and kubectl.

#[path = "../e2e/host.rs"]
mod host;
mod pod;
mod podman;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_http_client::tls::Provider;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use aws_smithy_runtime_api::client::dns::{DnsFuture, ResolveDns, ResolveDnsError};
use cosi_api::{
    Bucket, BucketAccess, BucketAccessMode, BucketClaim, DeletionPolicy, MultiBucketAccess,
};
use cosi_cli::{manifests, s3, wait};
use cosi_driver::testing::kustomize;
use cosi_driver_local::{Config as DriverConfig, DEFAULT_DRIVER_NAME, LocalDriver};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::Value;

use pod::PodRun;
use podman::{Podman, Registry, free_port, http_get, workspace};

/// The namespace the components run in (deploy/'s).
const SYSTEM_NS: &str = "cosi-system";
/// The namespace of the user's claim and access.
const USER_NS: &str = "default";
/// The host name of the local driver's S3 endpoint, as a Service's DNS
/// name would be in a cluster.
const S3_HOST: &str = "s3.cosi.test";
/// The tag of the images this test builds.
const TAG: &str = "ci";
/// Where the local driver keeps its data in the container.
const DRIVER_DATA: &str = "/var/lib/cosi-driver-local";
/// How long one step of the flow may take.
const STEP: Duration = Duration::from_secs(60);

#[test]
fn the_images_run_the_kep_flow_as_the_manifests_run_them() {
    let podman = Podman::new();
    let registry = Registry::start();

    let build = Instant::now();
    let sizes = podman.build_images(TAG, Some(&registry.address));
    eprintln!(
        "images built and pushed in {:.0?}:\n{sizes}",
        build.elapsed()
    );
    let binaries: Vec<&str> = sizes
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|image| image.strip_prefix("cosi-rs/")?.strip_suffix(":ci"))
        .collect();
    for needed in [
        "cosi-controller",
        "cosi-sidecar",
        "cosi-driver-local",
        "cosi",
    ] {
        assert!(binaries.contains(&needed), "no image of {needed}: {sizes}");
    }
    let catalog = registry.catalog();
    for b in &binaries {
        assert!(
            catalog["repositories"]
                .as_array()
                .is_some_and(|r| r.iter().any(|x| x == &format!("cosi-rs/{b}"))),
            "cosi-rs/{b} was not pushed: {catalog}"
        );
    }

    // Run only what the registry serves: the local copies go.
    podman.ok(&["rmi", "--all", "--force"]);
    let remote = |b: &str| format!("{}/cosi-rs/{b}:{TAG}", registry.address);
    for b in &binaries {
        podman.ok(&["pull", "--quiet", "--tls-verify=false", &remote(b)]);
        check_image(&podman, &remote(b), b);
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let run = Instant::now();
    runtime.block_on(kep_flow(&podman, &|image: &str| {
        // cosi-rs/<binary>:<any tag> in the manifests → this run's image.
        let repository = image.rsplit_once(':').map_or(image, |(r, _)| r);
        let binary = repository
            .strip_prefix("cosi-rs/")
            .unwrap_or_else(|| panic!("image {image} is not one of cosi-rs/<binary>"));
        assert!(binaries.contains(&binary), "no image of {binary} was built");
        remote(binary)
    }));
    eprintln!("KEP flow through the containers: {:.0?}", run.elapsed());
}

/// The image runs its binary as user 65532:65532, carries the OCI labels,
/// and its static binary starts in a scratch image with nothing writable.
fn check_image(podman: &Podman, image: &str, binary: &str) {
    let config = podman.ok(&["image", "inspect", "--format", "{{json .Config}}", image]);
    let config: Value = serde_json::from_str(&config).expect("image config JSON");
    assert_eq!(config["User"], "65532:65532", "{image}: {config}");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!([format!("/usr/local/bin/{binary}")]),
        "{image}: {config}"
    );
    let labels = &config["Labels"];
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        labels["org.opencontainers.image.source"]
            .as_str()
            .is_some_and(|s| s.starts_with("https://")),
        "{image}: {labels}"
    );

    let name = format!("version-{binary}");
    podman.start(
        &name,
        &[
            "--network=none".into(),
            "--read-only".into(),
            "--read-only-tmpfs=false".into(),
            "--cap-drop=ALL".into(),
            "--security-opt=no-new-privileges".into(),
            image.into(),
            "--version".into(),
        ],
    );
    let code = podman.wait_exited(&name, Duration::from_secs(30));
    let out = podman.logs(&name);
    assert_eq!(code, 0, "{binary} --version in its image: {out}");
    assert!(
        out.contains(env!("CARGO_PKG_VERSION")),
        "{binary} --version: {out}"
    );
}

async fn kep_flow(podman: &Podman, image: &dyn Fn(&str) -> String) {
    let sim = kube_sim::KubeSim::builder()
        .rbac(true)
        .start()
        .await
        .expect("kube-sim starts");
    let s3_port = free_port();
    let rendered = render_deploy(podman, s3_port);
    let mut deployments = BTreeMap::new();
    for doc in rendered {
        if doc["kind"] == "Deployment" {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            deployments.insert(name.to_owned(), doc);
        } else if doc["kind"] == "PodDisruptionBudget" {
            // Node drains are not part of this flow (and kube-sim runs no Pods).
        } else {
            sim.apply_manifest(&doc.to_string())
                .unwrap_or_else(|e| panic!("apply {}: {e}", doc["metadata"]["name"]));
        }
    }
    let admin = sim.client();
    let driver = DEFAULT_DRIVER_NAME;
    let class = manifests::bucket_class("local", driver, DeletionPolicy::Delete);
    manifests::create_cluster_object(&admin, &class)
        .await
        .expect("create the BucketClass");
    let access_class = manifests::access_class("local", driver, MultiBucketAccess::SingleBucket);
    manifests::create_cluster_object(&admin, &access_class)
        .await
        .expect("create the BucketAccessClass");
    let pp = PostParams::default();

    // Each Pod runs as the ServiceAccount its Deployment names: the
    // controller's, and the driver template's own (with its own Lease).
    let token_of = |deployment: &str| {
        let account = pod::pod_spec(&deployments[deployment])["serviceAccountName"]
            .as_str()
            .unwrap_or_else(|| panic!("{deployment} names its ServiceAccount"))
            .to_owned();
        sim.service_account_token(SYSTEM_NS, &account)
    };
    let controller_token = token_of("cosi-controller");
    let sidecar_token = token_of("cosi-driver");
    // RBAC is enforced: the sidecar may not read claims.
    let denied = Api::<BucketClaim>::all(sim.client_for_token(&sidecar_token))
        .list(&ListParams::default())
        .await;
    assert!(
        matches!(&denied, Err(kube::Error::Api(s)) if s.code == 403),
        "the sidecar's ServiceAccount listed BucketClaims: {denied:?}"
    );

    let api_port = sim.addr().port();
    let controller_health = free_port();
    let sidecar_health = free_port();
    let controller = &deployments["cosi-controller"];
    let driver_pod = &deployments["cosi-driver"];
    let started = pod::start(
        podman,
        controller,
        &PodRun {
            name: "cosi-controller-0",
            namespace: SYSTEM_NS,
            image,
            api_port,
            token: &controller_token,
            publish: &[(8081, controller_health)],
        },
    );
    let started: Vec<String> = started
        .into_iter()
        .chain(pod::start(
            podman,
            driver_pod,
            &PodRun {
                name: "cosi-driver-0",
                namespace: SYSTEM_NS,
                image,
                api_port,
                token: &sidecar_token,
                publish: &[(s3_port, s3_port), (8081, sidecar_health)],
            },
        ))
        .collect();
    let fail = |what: &str| -> ! {
        panic!("{what}\ncontainer logs:\n{}", podman.all_logs());
    };
    for port in [controller_health, sidecar_health] {
        wait_ready(podman, &started, port).unwrap_or_else(|e| fail(&e));
    }

    // The user's side: a claim and an access.
    let claims: Api<BucketClaim> = Api::namespaced(admin.clone(), USER_NS);
    let accesses: Api<BucketAccess> = Api::namespaced(admin.clone(), USER_NS);
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), USER_NS);
    claims
        .create(&pp, &manifests::claim(USER_NS, "photos", "local"))
        .await
        .expect("create the claim");
    wait_for(
        podman,
        &claims,
        "photos",
        "the claim provisioned",
        wait::provisioned(BucketClaim::conditions),
    )
    .await;
    accesses
        .create(
            &pp,
            &manifests::access(
                USER_NS,
                "photos-rw",
                "local",
                &[("photos", "photos-rw")],
                BucketAccessMode::ReadWrite,
            ),
        )
        .await
        .expect("create the access");
    wait_for(
        podman,
        &accesses,
        "photos-rw",
        "the access provisioned",
        wait::provisioned(BucketAccess::conditions),
    )
    .await;

    let secret = secrets.get("photos-rw").await.expect("the access Secret");
    let data = s3::secret_data(&secret);
    let endpoint = format!("http://{S3_HOST}:{s3_port}");
    assert_eq!(
        data.get("AWS_ENDPOINT_URL"),
        Some(&endpoint),
        "the Secret's endpoint"
    );
    let (client, bucket) = s3::client_from_secret(&data).expect("an S3 client from the Secret");
    let client = resolving(&client, S3_HOST);
    let body = b"an object through the containerised driver".to_vec();
    client
        .put_object()
        .bucket(&bucket)
        .key("hello.txt")
        .body(ByteStream::from(body.clone()))
        .send()
        .await
        .unwrap_or_else(|e| {
            fail(&format!(
                "PUT: {}",
                aws_sdk_s3::error::DisplayErrorContext(e)
            ))
        });
    let got = s3::read_object(&client, &bucket, "hello.txt")
        .await
        .unwrap_or_else(|e| {
            fail(&format!(
                "GET: {}",
                aws_sdk_s3::error::DisplayErrorContext(e)
            ))
        });
    assert_eq!(got, body);
    client
        .delete_object()
        .bucket(&bucket)
        .key("hello.txt")
        .send()
        .await
        .expect("DELETE the object");

    // Deletion: the access (its Secret and key go), then the claim (its
    // Bucket and the backend bucket go).
    accesses
        .delete("photos-rw", &DeleteParams::default())
        .await
        .expect("delete the access");
    wait_deleted(podman, &accesses, "photos-rw", "the access deleted").await;
    wait_deleted(podman, &secrets, "photos-rw", "the Secret deleted").await;
    let refused = client.list_objects_v2().bucket(&bucket).send().await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.code() == Some("InvalidAccessKeyId")),
        "the revoked key still works: {refused:?}"
    );
    let bound_bucket = claims
        .get("photos")
        .await
        .expect("the claim")
        .bound_bucket_name()
        .expect("the claim is bound")
        .to_owned();
    claims
        .delete("photos", &DeleteParams::default())
        .await
        .expect("delete the claim");
    wait_deleted(podman, &claims, "photos", "the claim deleted").await;
    let buckets: Api<Bucket> = Api::all(admin.clone());
    wait_deleted(podman, &buckets, &bound_bucket, "the Bucket deleted").await;

    // Every container ran until now and stops cleanly on SIGTERM.
    for name in started.iter().rev() {
        let state = podman.state(name);
        if state != "running" {
            fail(&format!("{name} is {state}, not running"));
        }
        let code = podman.stop(name);
        if code != 0 {
            fail(&format!("{name} exited with {code} on SIGTERM"));
        }
    }
    let data_dir = podman.scratch("cosi-driver-0").join("volumes/data");
    let backend = backend_state(&data_dir);
    assert!(
        backend.buckets.is_empty()
            && backend.accounts.is_empty()
            && backend.access_keys == 0
            && backend.stray_directories.is_empty(),
        "the backend is not empty: {backend:?}"
    );
    sim.shutdown().await;
}

/// Waits until `/readyz` on host port `port` answers 200, failing early
/// when a container has stopped.
/// Waits up to [`STEP`] for `cond` on the object `name`; on failure
/// panics with the containers' logs.
async fn wait_for<K>(
    podman: &Podman,
    api: &Api<K>,
    name: &str,
    what: &str,
    cond: impl kube::runtime::wait::Condition<K>,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    if let Err(e) = wait::until(api, name, what, STEP, cond).await {
        panic!("{e}\ncontainer logs:\n{}", podman.all_logs());
    }
}

/// Waits up to [`STEP`] for the object `name` to be deleted; on failure
/// panics with the containers' logs.
async fn wait_deleted<K>(podman: &Podman, api: &Api<K>, name: &str, what: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    wait_for(podman, api, name, what, wait::deleted()).await;
}

fn wait_ready_inner(podman: &Podman, started: &[String], port: u16) -> Result<(), String> {
    let deadline = Instant::now() + STEP;
    let address = format!("127.0.0.1:{port}");
    loop {
        if http_get(&address, "/readyz").is_some_and(|(status, _)| status == 200) {
            return Ok(());
        }
        for name in started {
            let state = podman.state(name);
            if state != "running" {
                return Err(format!("{name} is {state}"));
            }
        }
        if Instant::now() > deadline {
            return Err(format!("/readyz on {address} not ready within {STEP:?}"));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn wait_ready(podman: &Podman, started: &[String], port: u16) -> Result<(), String> {
    tokio::task::block_in_place(|| wait_ready_inner(podman, started, port))
}

/// `deploy/` and the driver template (`deploy/examples/driver`) rendered by
/// kustomize through an overlay that makes the template a local-driver
/// Deployment: the driver image, where it keeps its data (an emptyDir) and
/// serves S3, and the URL workloads reach it by.
fn render_deploy(podman: &Podman, s3_port: u16) -> Vec<Value> {
    let overlay = podman.scratch("overlay");
    let deploy = workspace().join("deploy");
    let example = workspace().join("deploy/examples/driver");
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {deploy}
  - {example}
images:
  - {{name: registry.example.com/my-cosi-driver, newName: cosi-rs/cosi-driver-local, newTag: latest}}
patches:
  - target: {{kind: Deployment, name: cosi-driver}}
    patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata: {{name: cosi-driver}}
      spec:
        template:
          spec:
            containers:
              - name: driver
                env:
                  - {{name: DATA_DIR, value: {DRIVER_DATA}}}
                  - {{name: S3_ADDRESS, value: \"0.0.0.0:{s3_port}\"}}
                  - {{name: S3_ENDPOINT_URL, value: \"http://{S3_HOST}:{s3_port}\"}}
                volumeMounts:
                  - {{name: data, mountPath: {DRIVER_DATA}}}
            volumes:
              - {{name: data, emptyDir: {{}}}}
",
            deploy = host::relative_to(&deploy, &overlay).display(),
            example = host::relative_to(&example, &overlay).display()
        ),
    )
    .expect("write the overlay");
    let yaml = kustomize(&kubectl(), &overlay);
    serde_saphyr::from_multiple::<Value>(&yaml)
        .expect("valid YAML")
        .into_iter()
        .filter(Value::is_object)
        .collect()
}

fn kubectl() -> PathBuf {
    host::program("kubectl")
        .expect("kubectl is installed (the manifests are rendered with kubectl kustomize)")
}

/// Resolves one host name to 127.0.0.1, where the driver's S3 port is
/// published: what the cluster's DNS does for the Service's name.
#[derive(Clone, Debug)]
struct PublishedHost(&'static str);

impl ResolveDns for PublishedHost {
    fn resolve_dns<'a>(&'a self, name: &'a str) -> DnsFuture<'a> {
        DnsFuture::ready(if name == self.0 {
            Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
        } else {
            Err(ResolveDnsError::new(format!("no such host: {name}")))
        })
    }
}

/// `client` resolving `host` to the published port.
fn resolving(client: &aws_sdk_s3::Client, host: &'static str) -> aws_sdk_s3::Client {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
        .build_with_resolver(PublishedHost(host));
    aws_sdk_s3::Client::from_conf(client.config().to_builder().http_client(http).build())
}

/// The local driver's backend, read from its data directory once the
/// driver has stopped.
fn backend_state(data_dir: &Path) -> cosi_driver_local::BackendState {
    LocalDriver::open(&DriverConfig::new(data_dir))
        .and_then(|d| d.backend_state())
        .expect("read the local driver's backend")
}
