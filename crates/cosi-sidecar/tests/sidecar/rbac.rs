//! The sidecar under RBAC enforcement with exactly the ClusterRole of
//! deploy/sidecar/ and the driver template's (deploy/examples/driver) ServiceAccount, Lease and
//! leader-election Role, leading on the Lease the template's Deployment
//! names.

use std::sync::Arc;
use std::time::Duration;

use cosi_driver::DriverClient;
use cosi_runtime::leader::{LeaderElection, run_as_leader};
use cosi_runtime::metrics::SidecarMetrics;
use cosi_runtime::{Readiness, Shutdown};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube_sim::KubeSim;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::common::fake::*;
use crate::common::*;

const SYSTEM_NS: &str = "cosi-system";
const SA_USER: &str = "system:serviceaccount:cosi-system:cosi-driver";

const RBAC_FILES: [&str; 2] = [
    include_str!("../../../../deploy/sidecar/clusterrole.yaml"),
    include_str!("../../../../deploy/examples/driver/rbac.yaml"),
];
const TEMPLATE: &str = include_str!("../../../../deploy/examples/driver/deployment.yaml");

/// The template Deployment's ServiceAccount and the Lease its sidecar's
/// `--leader-election-lease-name` names.
fn template_identity() -> (String, String) {
    let d: Value = serde_saphyr::from_str(TEMPLATE).expect("the template parses");
    let pod = &d["spec"]["template"]["spec"];
    let account = pod["serviceAccountName"].as_str().unwrap().to_owned();
    let lease = pod["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["name"] == "sidecar")
        .flat_map(|c| c["args"].as_array().cloned().unwrap_or_default())
        .find_map(|a| {
            a.as_str()?
                .strip_prefix("--leader-election-lease-name=")
                .map(str::to_owned)
        })
        .expect("the sidecar names its Lease");
    (account, lease)
}

/// Applies the deploy/ RBAC (namespaced objects into cosi-system, as the
/// kustomization does), letting `edit` change the ClusterRole's rules.
fn apply_rbac(sim: &KubeSim, edit: impl Fn(&mut Vec<Value>)) {
    for file in RBAC_FILES {
        let docs: Vec<Value> = serde_saphyr::from_multiple(file).expect("deploy YAML parses");
        for mut doc in docs {
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            if matches!(
                kind.as_str(),
                "ServiceAccount" | "Role" | "RoleBinding" | "Lease"
            ) {
                doc["metadata"]["namespace"] = Value::from(SYSTEM_NS);
            }
            if kind == "ClusterRole" {
                let mut rules = doc["rules"].as_array().cloned().unwrap_or_default();
                edit(&mut rules);
                doc["rules"] = Value::Array(rules);
            }
            sim.apply_manifest(&doc.to_string()).expect("apply RBAC");
        }
    }
}

struct Elected {
    task: tokio::task::JoinHandle<()>,
    shutdown: Shutdown,
    readiness: Readiness,
    result: Arc<Mutex<Option<Result<(), cosi_sidecar::Error>>>>,
}

/// The sidecar as the binary runs it: leader election on its Lease, then `run`.
fn start_elected(h: &Harness, client: kube::Client) -> Elected {
    let registry = prometheus::Registry::new();
    let readiness = Readiness::new("starting");
    let config = test_config(
        SidecarMetrics::register(&registry).unwrap(),
        readiness.clone(),
    );
    let shutdown = Shutdown::new();
    let driver = DriverClient::connect_lazy(&h.endpoint);
    let result = Arc::new(Mutex::new(None));
    let (s, slot) = (shutdown.clone(), result.clone());
    let task = tokio::spawn(async move {
        let election = LeaderElection::new(SYSTEM_NS, template_identity().1);
        let c = client.clone();
        let r = run_as_leader(client, election, &s, |leading| async move {
            let r = cosi_sidecar::run(c, driver, config, leading).await;
            *slot.lock().await = Some(r);
        })
        .await;
        if let Err(e) = r {
            panic!("leader election failed: {e}");
        }
    });
    Elected {
        task,
        shutdown,
        readiness,
        result,
    }
}

async fn rbac_harness(edit: impl Fn(&mut Vec<Value>)) -> (Harness, kube::Client) {
    let sim = KubeSim::builder()
        .rbac(true)
        .start()
        .await
        .expect("start kube-sim");
    let h = Harness::with_sim(sim).await;
    apply_rbac(&h.sim, edit);
    let token = h
        .sim
        .service_account_token(SYSTEM_NS, &template_identity().0);
    let client = h.sim.client_for_token(&token);
    (h, client)
}

#[tokio::test]
async fn the_deploy_cluster_role_is_enough_for_every_sidecar_step() {
    let (h, client) = rbac_harness(|_| {}).await;
    h.fake.expect(&PROVISION_BOTH);
    h.fake.expect(&[REVOKE, DELETE_BUCKET, GET_BUCKET]);
    let sidecar = start_elected(&h, client);

    h.provision_bucket("bc-rbac").await;
    h.fake.lock().existing.insert("legacy-rbac".into());
    h.create_bucket(&static_bucket("static-rbac", "legacy-rbac"))
        .await;
    h.provisioned_bucket("static-rbac").await;
    h.grant("ba-rbac", &[("claim", "bc-rbac", "creds-rbac")])
        .await;
    assert!(h.secret("creds-rbac").await.is_some());
    h.event_seen(NS, "ba-rbac", "AccessGranted").await;

    h.delete_access("ba-rbac").await;
    h.access_cleaned_up("ba-rbac").await;
    assert!(h.secret("creds-rbac").await.is_none());
    h.claim_deleted("bc-rbac", true).await;
    h.bucket_gone("bc-rbac").await;

    let lease: Api<Lease> = Api::namespaced(h.admin.clone(), SYSTEM_NS);
    let lease = lease
        .get(&template_identity().1)
        .await
        .expect("the sidecar holds its Lease");
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some());
    assert_eq!(sidecar.readiness.get(), Ok(()));
    assert!(h.sim.counters().writes_by_user(SA_USER) > 0);
    let forbidden = logs::captured()
        .lines()
        .filter(|l| l.contains("permission denied") && l.contains("rbac"))
        .count();
    assert_eq!(forbidden, 0);

    sidecar.shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(20), sidecar.task)
        .await
        .expect("stops")
        .expect("no panic");
    assert!(matches!(*sidecar.result.lock().await, Some(Ok(()))));
    h.fake.assert_no_unexpected_calls();
}

fn drop_rule(rules: &mut Vec<Value>, resource: &str) {
    rules.retain(|r| {
        !r["resources"]
            .as_array()
            .is_some_and(|rs| rs.iter().any(|x| x == resource))
    });
}

#[tokio::test]
async fn a_missing_status_permission_is_reported_by_verb_and_resource() {
    let (h, client) = rbac_harness(|rules| drop_rule(rules, "buckets/status")).await;
    h.fake.expect(&PROVISION_BUCKET);
    let sidecar = start_elected(&h, client);
    h.create_bucket(&dynamic_bucket("bc-denied")).await;

    let reason = unready(&sidecar.readiness, "permission denied").await;
    assert!(
        reason.contains("cannot patch buckets/status bc-denied"),
        "{reason}"
    );
    assert!(reason.contains("ClusterRole"), "{reason}");
    let e = h
        .event_seen("default", "bc-denied", "PermissionDenied")
        .await;
    assert!(e.note.unwrap_or_default().contains("buckets/status"));
    assert!(logs::captured().contains("permission denied: cannot patch buckets/status bc-denied"));
}

#[tokio::test]
async fn a_missing_list_permission_is_reported_on_readiness() {
    let (h, client) = rbac_harness(|rules| {
        for r in rules.iter_mut() {
            if r["resources"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|x| x == "buckets"))
            {
                r["resources"] = serde_json::json!(["bucketaccesses"]);
            }
        }
        rules.push(serde_json::json!({
            "apiGroups": ["objectstorage.k8s.io"],
            "resources": ["buckets"],
            "verbs": ["get", "update", "patch"],
        }));
    })
    .await;
    let sidecar = start_elected(&h, client);
    let reason = unready(&sidecar.readiness, "list/watch").await;
    assert!(reason.contains("cannot list/watch buckets"), "{reason}");
    assert!(logs::captured().contains("cannot list/watch buckets"));
    sidecar.task.abort();
}

#[tokio::test]
async fn a_secret_the_sidecar_may_not_create_is_reported_on_the_access_until_allowed() {
    let without_create = |rules: &mut Vec<Value>| {
        for r in rules.iter_mut() {
            if r["resources"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|x| x == "secrets"))
            {
                r["verbs"] = serde_json::json!(["get", "update", "patch", "delete"]);
            }
        }
    };
    let (h, client) = rbac_harness(without_create).await;
    h.fake.expect(&PROVISION_BOTH);
    let sidecar = start_elected(&h, client);
    h.provision_bucket("bc-nocreate").await;
    h.handed_off_access("ba-nocreate", "claim", "creds-nocreate", "bc-nocreate")
        .await;

    let (a, rv) = h.invalid::<BucketAccess>("ba-nocreate").await;
    assert_eq!(rv.reason, "SecretWriteFailed");
    assert!(
        rv.message
            .starts_with("cannot create Secret apps/creds-nocreate:"),
        "{}",
        rv.message
    );
    assert_contains(&rv.message, "ClusterRole must allow create on secrets");
    let p = condition(
        a.conditions(),
        cosi_api::constants::condition_types::PROVISIONED,
    )
    .unwrap();
    assert_eq!(
        (p.status.as_str(), p.reason.as_str()),
        ("False", "SecretWriteFailed")
    );
    let e = h.event_seen(NS, "ba-nocreate", "SecretWriteFailed").await;
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    let note = e.note.unwrap_or_default();
    assert_eq!(note, rv.message);
    // The grant succeeded; its credentials appear nowhere but in a Secret.
    let (id, key) = FakeDriver::credentials(1);
    for text in [&rv.message, &p.message, &note, &logs::captured()] {
        assert!(!text.contains(&key) && !text.contains(&id));
    }
    assert!(h.secret("creds-nocreate").await.is_none());

    // Once the ClusterRole allows it, the retry writes the Secret.
    apply_rbac(&h.sim, |_| {});
    let a = h.granted_access("ba-nocreate").await;
    assert!(has(
        a.conditions(),
        cosi_api::constants::condition_types::RESOURCES_VALIDATED,
        "True"
    ));
    assert!(h.secret("creds-nocreate").await.is_some());
    sidecar.task.abort();
}
