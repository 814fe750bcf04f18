//! Each component, and each driver's sidecar, may touch only its own
//! leader-election Lease, with the manifests as shipped: `deploy/` (every
//! kustomization, rendered by kustomize) and the Helm chart (every driver
//! enabled), loaded into the test's API server (kube-sim with RBAC enforced,
//! or the real kube-apiserver's RBAC authorizer) with each identity's own
//! ServiceAccount token. No identity may
//! create, update, patch or delete another's Lease (so a sidecar cannot
//! stall the controller or another driver's sidecars, nor the controller a
//! sidecar), nor create, update or delete its own: the Leases are shipped,
//! since RBAC cannot limit a create to one name. Every one still leads on
//! its own Lease, a deleted Lease is named in the error until the install
//! is applied again, and re-applying the install leaves a held Lease alone.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::Duration;

use control_plane::ApiServer;
use cosi_cli::drift::parse;
use cosi_runtime::Shutdown;
use cosi_runtime::leader::{LeaderElection, LeaderError, run_as_leader};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::chart::{deploy_all, render, repo};

/// A Deployment whose Pods elect a leader: as which ServiceAccount, on
/// which Lease.
#[derive(Clone, Debug)]
struct Elector {
    deployment: String,
    namespace: String,
    service_account: String,
    lease: String,
}

impl Elector {
    async fn client(&self, server: &ApiServer) -> kube::Client {
        let token = server
            .service_account_token(&self.namespace, &self.service_account)
            .await
            .unwrap_or_else(|e| panic!("a token of {self:?}: {e}"));
        server.client_for_token(&token)
    }

    fn leases(&self, client: &kube::Client) -> Api<Lease> {
        Api::namespaced(client.clone(), &self.namespace)
    }
}

fn args(container: &Value) -> Vec<&str> {
    container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn flag<'a>(container: &'a Value, name: &str) -> Option<&'a str> {
    args(container)
        .into_iter()
        .find_map(|a| a.strip_prefix(name)?.strip_prefix('='))
}

/// The driver a driver container serves: its `--driver-name`, else the
/// default name of the driver its image runs.
fn driver_name(container: &Value) -> String {
    if let Some(name) = flag(container, "--driver-name") {
        return name.to_owned();
    }
    let image = container["image"].as_str().unwrap_or_default();
    let repository = image.rsplit_once(':').map_or(image, |(r, _)| r);
    match repository.rsplit('/').next().unwrap_or_default() {
        "cosi-driver-local" => cosi_driver_local::DEFAULT_DRIVER_NAME.to_owned(),
        "cosi-driver-ceph-rgw" => cosi_driver_ceph_rgw::config::DEFAULT_DRIVER_NAME.to_owned(),
        "cosi-driver-azure" => cosi_driver_azure::config::DEFAULT_DRIVER_NAME.to_owned(),
        // drivers/s3's DEFAULT_DRIVER_NAME (that crate is no dependency here).
        "cosi-driver-s3" => "s3.cosi-rs.dev".to_owned(),
        _ => panic!("no default driver name known for the image {image}"),
    }
}

/// Every Deployment that elects a leader, as its Pods would: in the
/// Deployment's namespace, as its ServiceAccount, on the Lease its
/// `--leader-election-lease-name` names or, for a driver's sidecar without
/// one, on the Lease named after the driver.
fn electors(docs: &[Value]) -> Vec<Elector> {
    let mut found = Vec::new();
    for d in docs.iter().filter(|d| d["kind"] == "Deployment") {
        let pod = &d["spec"]["template"]["spec"];
        let containers = pod["containers"].as_array().cloned().unwrap_or_default();
        let Some(elector) = containers.iter().find(|c| {
            args(c)
                .iter()
                .any(|a| matches!(*a, "--leader-election" | "--leader-election=true"))
        }) else {
            continue;
        };
        let lease = match flag(elector, "--leader-election-lease-name") {
            Some(lease) => lease.to_owned(),
            None => {
                let driver = containers
                    .iter()
                    .find(|c| c["name"] == "driver")
                    .expect("a sidecar's Pod runs its driver");
                cosi_sidecar::lease_name(&driver_name(driver))
            }
        };
        let text = |v: &Value, what: &str| {
            v.as_str()
                .unwrap_or_else(|| panic!("the Deployment {d} has no {what}"))
                .to_owned()
        };
        found.push(Elector {
            deployment: text(&d["metadata"]["name"], "name"),
            namespace: text(&d["metadata"]["namespace"], "namespace"),
            service_account: text(&pod["serviceAccountName"], "serviceAccountName"),
            lease,
        });
    }
    found
}

fn names_of<'a>(docs: &'a [Value], kind: &str) -> BTreeSet<&'a str> {
    docs.iter()
        .filter(|d| d["kind"] == kind)
        .filter_map(|d| d["metadata"]["name"].as_str())
        .collect()
}

/// Every elector has a ServiceAccount of its own and a Lease of its own,
/// both shipped, and no Lease is shipped for nobody.
fn assert_one_identity_and_lease_each(docs: &[Value], electors: &[Elector]) {
    let accounts: BTreeSet<&str> = electors
        .iter()
        .map(|e| e.service_account.as_str())
        .collect();
    let leases: BTreeSet<&str> = electors.iter().map(|e| e.lease.as_str()).collect();
    assert_eq!(
        accounts.len(),
        electors.len(),
        "two Deployments share a ServiceAccount: {electors:#?}"
    );
    assert_eq!(
        leases.len(),
        electors.len(),
        "two Deployments share a Lease: {electors:#?}"
    );
    assert!(
        accounts.is_subset(&names_of(docs, "ServiceAccount")),
        "a ServiceAccount is not shipped: {electors:#?}"
    );
    assert_eq!(
        names_of(docs, "Lease"),
        leases,
        "the shipped Leases are not those the Pods lead on"
    );
}

/// The test's API server with the rendering's namespaces, RBAC and Leases
/// applied as an admin applies the install, once every elector may read
/// its Lease (a real authorizer learns new bindings a moment later).
async fn install(docs: &[Value], electors: &[Elector]) -> ApiServer {
    let server = crate::common::api_server().await;
    for ns in electors
        .iter()
        .map(|e| &e.namespace)
        .collect::<BTreeSet<_>>()
    {
        server
            .apply(
                &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
                    .to_string(),
            )
            .await
            .expect("create the namespace");
    }
    apply(
        &server,
        docs,
        &[
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Lease",
        ],
    )
    .await;
    for e in electors {
        let leases = e.leases(&e.client(&server).await);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while leases.get(&e.lease).await.is_err() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{e:?} may not read its Lease 30 s after the install"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    server
}

async fn apply(server: &ApiServer, docs: &[Value], kinds: &[&str]) {
    for doc in docs
        .iter()
        .filter(|d| kinds.iter().any(|k| d["kind"] == *k))
    {
        server
            .apply(&doc.to_string())
            .await
            .unwrap_or_else(|e| panic!("apply {doc}: {e:?}"));
    }
}

/// The HTTP status of a request's outcome (200 for any success).
fn status<T: Debug>(result: Result<T, kube::Error>) -> u16 {
    match result {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(e) => panic!("no API answer: {e}"),
    }
}

fn apply_patch(name: &str) -> Patch<Value> {
    Patch::Apply(json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "labels": {"probed": "true"}}
    }))
}

/// Every request `who` can make on the (existing) Lease of `owner`, with
/// the status the API server answers.
async fn try_everything(
    who: &kube::Client,
    admin: &kube::Client,
    owner: &Elector,
) -> Vec<(&'static str, u16)> {
    let api = owner.leases(who);
    let name = owner.lease.as_str();
    let current = owner
        .leases(admin)
        .get(name)
        .await
        .expect("the Lease is shipped");
    let fresh: Lease = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    let label = json!({"metadata": {"labels": {"probed": "true"}}});
    let pp = PostParams::default();
    vec![
        ("get", status(api.get(name).await)),
        ("create", status(api.create(&pp, &fresh).await)),
        ("update", status(api.replace(name, &pp, &current).await)),
        (
            "merge patch",
            status(
                api.patch(name, &PatchParams::default(), &Patch::Merge(&label))
                    .await,
            ),
        ),
        (
            "strategic patch",
            status(
                api.patch(name, &PatchParams::default(), &Patch::Strategic(&label))
                    .await,
            ),
        ),
        (
            "apply patch",
            status(
                api.patch(name, &PatchParams::apply("probe"), &apply_patch(name))
                    .await,
            ),
        ),
        (
            "delete",
            status(api.delete(name, &DeleteParams::default()).await),
        ),
    ]
}

/// All that each elector may do to its own Lease is read and patch it;
/// to another's, nothing.
async fn assert_each_touches_only_its_own_lease(server: &ApiServer, electors: &[Elector]) {
    let admin = server.client();
    let mut wrong = Vec::new();
    for who in electors {
        let client = who.client(server).await;
        for owner in electors {
            let own = owner.lease == who.lease;
            for (request, got) in try_everything(&client, &admin, owner).await {
                let allowed = own
                    && matches!(
                        request,
                        "get" | "merge patch" | "strategic patch" | "apply patch"
                    );
                let expected = if allowed { 200 } else { 403 };
                if got != expected {
                    wrong.push(format!(
                        "{} ({}) {request} the Lease {}: {got}, expected {expected}",
                        who.deployment, who.service_account, owner.lease
                    ));
                }
            }
        }
        let listed = status(
            Api::<Lease>::namespaced(client.clone(), &who.namespace)
                .list(&Default::default())
                .await,
        );
        if listed != 403 {
            wrong.push(format!("{} lists every Lease: {listed}", who.deployment));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// With its Lease deleted, no elector can create it back (neither POST
/// nor apply), and leading fails naming the Lease to create.
async fn assert_a_deleted_lease_is_named_and_not_recreated(
    server: &ApiServer,
    electors: &[Elector],
) {
    for e in electors {
        e.leases(&server.client())
            .delete(&e.lease, &DeleteParams::default())
            .await
            .expect("an admin deletes the Lease");
    }
    for e in electors {
        let client = e.client(server).await;
        let api = e.leases(&client);
        let fresh: Lease = serde_json::from_value(json!({"metadata": {"name": e.lease}})).unwrap();
        assert_eq!(
            status(api.create(&PostParams::default(), &fresh).await),
            403,
            "{e:?} created its Lease"
        );
        assert_eq!(
            status(
                api.patch(
                    &e.lease,
                    &PatchParams::apply("probe"),
                    &apply_patch(&e.lease)
                )
                .await
            ),
            403,
            "{e:?} created its Lease by an apply"
        );
        let shutdown = Shutdown::new();
        let result = tokio::time::timeout(
            Duration::from_secs(30),
            run_as_leader(
                client,
                LeaderElection::new(&e.namespace, &e.lease),
                &shutdown,
                |_| async { panic!("led without its Lease") },
            ),
        )
        .await
        .expect("leader election ends");
        match result {
            Err(LeaderError::Missing { namespace, name }) => {
                assert_eq!(
                    (namespace.as_str(), name.as_str()),
                    (e.namespace.as_str(), e.lease.as_str())
                );
            }
            other => panic!("{e:?}: expected the missing Lease named, got {other:?}"),
        }
    }
}

/// Every elector leads on its own Lease at once; re-applying the install
/// leaves the held Leases alone; stopping releases them.
async fn assert_every_elector_leads(server: &ApiServer, docs: &[Value], electors: &[Elector]) {
    let shutdown = Shutdown::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for e in electors {
        let mut election = LeaderElection::new(&e.namespace, &e.lease);
        election.identity = format!("{}-0", e.deployment);
        let (client, stop, tx, name) = (
            e.client(server).await,
            shutdown.clone(),
            tx.clone(),
            e.deployment.clone(),
        );
        tasks.push(tokio::spawn(async move {
            run_as_leader(client, election, &stop, |leading| async move {
                tx.send(name).expect("the test listens");
                leading.wait().await;
            })
            .await
        }));
    }
    let mut leading = BTreeSet::new();
    while leading.len() < electors.len() {
        let name = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("only {leading:?} lead"))
            .expect("an elector");
        leading.insert(name);
    }
    let admin = server.client();
    let holder = |l: Lease| l.spec.and_then(|s| s.holder_identity);
    for e in electors {
        let lease = e.leases(&admin).get(&e.lease).await.unwrap();
        assert_eq!(holder(lease), Some(format!("{}-0", e.deployment)));
    }
    apply(server, docs, &["Lease"]).await;
    for e in electors {
        let lease = e.leases(&admin).get(&e.lease).await.unwrap();
        assert_eq!(
            holder(lease),
            Some(format!("{}-0", e.deployment)),
            "re-applying the install changed a held Lease"
        );
    }
    shutdown.trigger();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("stops")
            .expect("no panic")
            .expect("leader election ends cleanly");
    }
    for e in electors {
        let lease = e.leases(&admin).get(&e.lease).await.unwrap();
        assert_eq!(holder(lease), None, "released on shutdown");
    }
}

async fn assert_leases_are_isolated(docs: Vec<Value>) -> Vec<Elector> {
    let electors = electors(&docs);
    assert_one_identity_and_lease_each(&docs, &electors);
    let server = install(&docs, &electors).await;
    assert_each_touches_only_its_own_lease(&server, &electors).await;
    assert_every_elector_leads(&server, &docs, &electors).await;
    assert_a_deleted_lease_is_named_and_not_recreated(&server, &electors).await;
    apply(&server, &docs, &["Lease"]).await;
    assert_every_elector_leads(&server, &docs, &electors).await;
    server.shutdown().await;
    electors
}

#[tokio::test]
async fn with_deploy_each_component_and_driver_sidecar_touches_only_its_own_lease() {
    let electors = assert_leases_are_isolated(parse(&deploy_all()).unwrap()).await;
    let deployments: BTreeSet<&str> = electors.iter().map(|e| e.deployment.as_str()).collect();
    assert_eq!(
        deployments,
        [
            "cosi-controller",
            "cosi-driver",
            "cosi-driver-azure",
            "cosi-driver-ceph-rgw",
            "cosi-driver-local",
            "cosi-driver-s3"
        ]
        .into()
    );
    // The stack runs its components as deploy/ does.
    let account = |d: &str| {
        electors
            .iter()
            .find(|e| e.deployment == d)
            .unwrap()
            .service_account
            .clone()
    };
    assert_eq!(
        account("cosi-controller"),
        cosi_cli::stack::CONTROLLER_SERVICE_ACCOUNT
    );
    assert_eq!(
        account("cosi-driver-local"),
        cosi_cli::stack::SIDECAR_SERVICE_ACCOUNT
    );
}

#[tokio::test]
async fn with_the_chart_each_component_and_driver_sidecar_touches_only_its_own_lease() {
    let chart = repo().join("charts/cosi-rs");
    let rendered = render(
        &chart,
        &[
            "drivers.local.enabled=true",
            "drivers.s3.enabled=true",
            "drivers.cephRgw.enabled=true",
            "drivers.azure.enabled=true",
            "drivers.azure.accountName=mystorageaccount",
            // The Lease follows a driver's name.
            "drivers.s3.driverName=objects.example.com",
        ],
    );
    let electors = assert_leases_are_isolated(parse(&rendered).unwrap()).await;
    let leases: BTreeSet<&str> = electors.iter().map(|e| e.lease.as_str()).collect();
    assert_eq!(
        leases,
        [
            "cosi-controller",
            "cosi-sidecar-azure-cosi-rs-dev",
            "cosi-sidecar-ceph-rgw-cosi-rs-dev",
            "cosi-sidecar-local-cosi-rs-dev",
            "cosi-sidecar-objects-example-com",
        ]
        .into()
    );
}
