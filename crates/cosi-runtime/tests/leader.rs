//! Leader election against kube-sim with RBAC enforced: an identity allowed
//! only `get` and `patch` on its own Lease leads on that Lease when it
//! exists, a missing Lease is created only where the identity may create
//! it, and otherwise the error names the Lease to create.

use std::time::Duration;

use cosi_runtime::Shutdown;
use cosi_runtime::leader::{LeaderElection, LeaderError, run_as_leader};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use kube_sim::KubeSim;

const NS: &str = "cosi-system";
const LEASE: &str = "cosi-sidecar-example-com";

/// kube-sim with RBAC on, and a client of a ServiceAccount whose only
/// grant is `get` and `patch` on the Lease `LEASE`, as the install's Roles.
async fn sim_with_lease_role() -> (KubeSim, kube::Client) {
    let sim = KubeSim::builder().rbac(true).start().await.unwrap();
    sim.apply_manifest(&format!(
        "apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: leader, namespace: {NS}}}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [{LEASE}]
    verbs: [get, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: leader, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: leader}}
subjects: [{{kind: ServiceAccount, name: component, namespace: {NS}}}]
"
    ))
    .expect("apply the Role");
    let client = sim.client_for_token(&sim.service_account_token(NS, "component"));
    (sim, client)
}

fn holder(lease: &Lease) -> Option<String> {
    lease.spec.as_ref().and_then(|s| s.holder_identity.clone())
}

/// Leads on `LEASE` as `client`; returns what leading ended with and the
/// Lease as seen while leading (None if it never led).
async fn lead_once(
    client: kube::Client,
    admin: kube::Client,
) -> (Result<(), LeaderError>, Option<Lease>) {
    let shutdown = Shutdown::new();
    let stop = shutdown.clone();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let slot = seen.clone();
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        run_as_leader(
            client,
            LeaderElection::new(NS, LEASE),
            &shutdown,
            |_| async move {
                let lease = Api::<Lease>::namespaced(admin, NS).get(LEASE).await;
                *slot.lock().unwrap() = lease.ok();
                stop.trigger();
            },
        ),
    )
    .await
    .expect("leader election ends");
    let lease = seen.lock().unwrap().take();
    (result, lease)
}

#[tokio::test]
async fn an_existing_lease_is_led_with_get_and_patch_on_it_alone() {
    let (sim, client) = sim_with_lease_role().await;
    let leases: Api<Lease> = Api::namespaced(sim.client(), NS);
    leases
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": LEASE}})).unwrap(),
        )
        .await
        .unwrap();
    let (result, lease) = lead_once(client, sim.client()).await;
    result.expect("leads and stops cleanly");
    let lease = lease.expect("the work ran while leading");
    assert!(holder(&lease).is_some_and(|h| !h.is_empty()));
    assert_eq!(
        holder(&leases.get(LEASE).await.unwrap()),
        None,
        "released on shutdown"
    );
}

#[tokio::test]
async fn a_missing_lease_is_created_where_the_identity_may_create_it() {
    let sim = KubeSim::start().await.unwrap();
    sim.apply_manifest(&format!(
        "{{apiVersion: v1, kind: Namespace, metadata: {{name: {NS}}}}}"
    ))
    .unwrap();
    let (result, lease) = lead_once(sim.client(), sim.client()).await;
    result.expect("leads and stops cleanly");
    assert!(lease.as_ref().and_then(holder).is_some());
}

#[tokio::test]
async fn a_missing_lease_the_identity_may_not_create_is_named_in_the_error() {
    let (sim, client) = sim_with_lease_role().await;
    let (result, lease) = lead_once(client, sim.client()).await;
    assert!(lease.is_none(), "never led");
    let err = result.expect_err("cannot lead without the Lease");
    assert!(
        matches!(&err, LeaderError::Missing { namespace, name } if namespace == NS && name == LEASE),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!("{NS}/{LEASE} does not exist")),
        "{message}"
    );
    assert!(message.contains("deploy/ and the Helm chart ship it"));
    let leases: Api<Lease> = Api::namespaced(sim.client(), NS);
    assert!(leases.get_opt(LEASE).await.unwrap().is_none());
}
