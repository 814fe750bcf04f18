//! Tenants, as the README's Security section describes them, with the
//! shipped `deploy/tenancy` on the test's API server (kube-sim enforces
//! admission policies and aggregates roles as kube-apiserver does): a
//! tenant is the ServiceAccount `tenant` of the claims' namespace, granted
//! the Kubernetes `edit` role there by a RoleBinding, with its own token.
//! It writes its BucketClaims and BucketAccesses and asks for rotations;
//! RBAC refuses it status; the admission policy refuses it COSI's
//! annotations, the protection finalizer and, when it was granted `*`,
//! status; admins and COSI's own ServiceAccounts are admitted. The
//! chart's rendering of the same objects is checked against deploy/'s.

use std::time::Duration;

use control_plane::ApiServer;
use cosi_api::constants::PROTECTION_FINALIZER;
use cosi_api::constants::annotations::{
    BUCKETCLAIM_BEING_DELETED, CLAIM_LOST_AT, HAS_BUCKETACCESS_REFERENCES,
    SIDECAR_CLEANUP_FINISHED, SIDECAR_GRANT_STARTED,
};
use cosi_api::rotation::{self, annotations as rotation_annotations};
use cosi_api::testing::HasConditions;
use cosi_api::*;
use cosi_cli::drift::parse;
use cosi_cli::stack::{CONTROLLER_SERVICE_ACCOUNT, SIDECAR_SERVICE_ACCOUNT, SYSTEM_NAMESPACE};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::chart::{render, repo};
use crate::cli_dev::{Kubectl, kubectl_path};
use crate::common::*;
use crate::deploy::{deploy_dir, kustomize};

/// The admission policy and its binding, as shipped.
const POLICY: &str = "cosi-protected-fields";
/// The ServiceAccount a tenant is, in [`NS`].
const TENANT: &str = "tenant";
/// Upstream COSI's spelling of [`BUCKETCLAIM_BEING_DELETED`], which the
/// policy keeps COSI's too.
const BUCKETCLAIM_BEING_DELETED_UPSTREAM: &str = "objectstorage.k8.io/bucketclaim-being-deleted";

/// Every annotation only COSI writes.
const COSI_ANNOTATIONS: [&str; 8] = [
    HAS_BUCKETACCESS_REFERENCES,
    SIDECAR_CLEANUP_FINISHED,
    BUCKETCLAIM_BEING_DELETED,
    BUCKETCLAIM_BEING_DELETED_UPSTREAM,
    SIDECAR_GRANT_STARTED,
    CLAIM_LOST_AT,
    rotation_annotations::LEGACY_ROTATION_STATE,
    rotation_annotations::LEGACY_CREDENTIALS_ROTATED_AT,
];

/// `deploy/tenancy`, rendered.
fn tenancy() -> String {
    kustomize(&deploy_dir().join("tenancy"))
}

/// A running stack with `deploy/tenancy` applied and a tenant in [`NS`].
struct Tenancy {
    env: Env,
    tenant: Client,
}

impl Tenancy {
    /// Starts a stack, applies `deploy/tenancy`, grants the tenant `edit`
    /// in [`NS`], and waits until the API server enforces both (a real
    /// one learns roles, bindings and policies a moment after they are
    /// written).
    async fn start() -> Tenancy {
        let env = Env::start().await;
        let server = env.stack.api_server();
        server
            .apply(&tenancy())
            .await
            .expect("deploy/tenancy applies");
        let admin = env.client.clone();
        create(
            &Api::<ServiceAccount>::namespaced(admin.clone(), NS),
            json!({"metadata": {"name": TENANT}}),
        )
        .await;
        create(
            &Api::<RoleBinding>::namespaced(admin, NS),
            json!({
                "metadata": {"name": "tenant-edit"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": NS}]
            }),
        )
        .await;
        let token = server
            .service_account_token(NS, TENANT)
            .await
            .expect("a token of the tenant");
        let tenant = server.client_for_token(&token);
        let t = Tenancy { env, tenant };
        t.wait_until_enforced().await;
        t
    }

    fn server(&self) -> &ApiServer {
        self.env.stack.api_server()
    }

    fn claims(&self) -> Api<BucketClaim> {
        Api::namespaced(self.tenant.clone(), NS)
    }

    fn accesses(&self) -> Api<BucketAccess> {
        Api::namespaced(self.tenant.clone(), NS)
    }

    /// Waits until the tenant may list claims (edit, aggregated) and the
    /// policy refuses it a claim carrying a COSI annotation (a dry run).
    async fn wait_until_enforced(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let mut claim = cosi_cli::manifests::claim(NS, "probe", DELETE);
        claim
            .annotations_mut()
            .insert(HAS_BUCKETACCESS_REFERENCES.into(), "true".into());
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        loop {
            let listed = self.claims().list(&Default::default()).await;
            let created = self.claims().create(&dry_run, &claim).await;
            match (&listed, &created) {
                (Ok(_), Err(kube::Error::Api(s))) if s.message.contains(POLICY) => return,
                _ if tokio::time::Instant::now() > deadline => panic!(
                    "60 s after deploy/tenancy was applied, the tenant lists claims: {listed:?}, \
                     creates one with a COSI annotation: {created:?}"
                ),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// A client of `user` in `groups`, impersonated by the admin.
    fn impersonating(&self, user: &str, groups: &[&str]) -> Client {
        let token = match self.server() {
            ApiServer::KubeSim(sim) => sim.admin_token().to_owned(),
            ApiServer::Real(plane) => plane.admin_token().to_owned(),
        };
        let mut config = self.server().client_config(&token);
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups =
            Some(groups.iter().map(|g| (*g).to_owned()).collect());
        Client::try_from(config).expect("a client of a local API server builds")
    }

    /// A client of the ServiceAccount `name` of the install's namespace.
    async fn cosi_service_account(&self, name: &str) -> Client {
        let token = self
            .server()
            .service_account_token(SYSTEM_NAMESPACE, name)
            .await
            .expect("a token of a COSI ServiceAccount");
        self.server().client_for_token(&token)
    }

    /// A claim `claim` of class [`DELETE`] and a ReadWrite access `access`
    /// to it, created by the tenant and provisioned by COSI.
    async fn provisioned_claim_and_access(&self, claim: &str, access: &str) -> BucketAccess {
        let pp = PostParams::default();
        self.claims()
            .create(&pp, &cosi_cli::manifests::claim(NS, claim, DELETE))
            .await
            .expect("the tenant creates a claim");
        self.env.wait_provisioned::<BucketClaim>(claim).await;
        self.accesses()
            .create(&pp, &rw_access(access, claim))
            .await
            .expect("the tenant creates an access");
        self.env.wait_provisioned::<BucketAccess>(access).await
    }
}

fn rw_access(name: &str, claim: &str) -> BucketAccess {
    cosi_cli::manifests::access(
        NS,
        name,
        SINGLE,
        &[(claim, name)],
        BucketAccessMode::ReadWrite,
    )
}

async fn create<K>(api: &Api<K>, object: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).expect("a valid object");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {object:?}: {e}"))
}

fn merge(patch: Value) -> Patch<Value> {
    Patch::Merge(patch)
}

fn annotation_patch(key: &str, value: Option<&str>) -> Patch<Value> {
    merge(json!({"metadata": {"annotations": {key: value}}}))
}

/// The message of `result`, which must be the policy's refusal: it names
/// the policy and binding, and ends saying whom to ask.
fn refused_by_policy<T: std::fmt::Debug>(result: kube::Result<T>, what: &str) -> String {
    match result {
        Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains(POLICY) => {
            assert!(
                s.message.contains(&format!(
                    "ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: "
                )) && s.message.ends_with("; ask an admin"),
                "{what}: {}",
                s.message
            );
            s.message
        }
        other => panic!("{what}: expected the policy's refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_with_edit_writes_its_claims_and_accesses_asks_for_rotations_and_deletes_them() {
    let t = Tenancy::start().await;
    let access = t.provisioned_claim_and_access("photos", "photos-rw").await;
    assert!(t.env.secret_exists("photos-rw").await);
    assert!(is_protected(&access), "COSI protects what it provisions");

    // A rotation, asked for as the README tells users to.
    let ask = merge(json!({"metadata": {"annotations": {
        rotation_annotations::ROTATE_CREDENTIALS: "1",
        rotation_annotations::ROTATION_GRACE: "1s",
    }}}));
    t.accesses()
        .patch("photos-rw", &PatchParams::default(), &ask)
        .await
        .expect("the tenant asks for a rotation");
    t.env
        .wait_until::<BucketAccess>(
            "photos-rw",
            "to have rotated its credentials",
            has_condition(BucketAccess::status_conditions, rotation::CONDITION, "True"),
        )
        .await;

    // kubectl apply (client-side, then again with a change) and a
    // server-side apply of the tenant's own manifest, over what COSI added.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("tenant.kubeconfig");
    let token = t
        .server()
        .service_account_token(NS, TENANT)
        .await
        .expect("a token of the tenant");
    t.server()
        .write_kubeconfig(&kubeconfig, Some(&token))
        .unwrap();
    let kubectl = Kubectl {
        bin: kubectl_path(),
        kubeconfig,
    };
    let mut manifest = cosi_cli::manifests::claim(NS, "videos", DELETE);
    kubectl.ok(
        &["apply", "-f", "-"],
        Some(&serde_json::to_string(&manifest).unwrap()),
    );
    t.env.wait_provisioned::<BucketClaim>("videos").await;
    manifest.labels_mut().insert("team".into(), "a".into());
    kubectl.ok(
        &["apply", "-f", "-"],
        Some(&serde_json::to_string(&manifest).unwrap()),
    );
    let mut applied = serde_json::to_value(rw_access("photos-rw", "photos")).unwrap();
    applied["metadata"]["labels"] = json!({"team": "a"});
    t.accesses()
        .patch(
            "photos-rw",
            &PatchParams::apply("tenant"),
            &Patch::Apply(&applied),
        )
        .await
        .expect("the tenant server-side applies its access");

    // A whole-object update of what the tenant read.
    let mut claim = t.claims().get("photos").await.unwrap();
    claim.labels_mut().insert("updated".into(), "yes".into());
    t.claims()
        .replace("photos", &PostParams::default(), &claim)
        .await
        .expect("the tenant updates its claim");

    // Deleted, each is cleaned up by COSI (whose writes are admitted).
    t.accesses()
        .delete("photos-rw", &DeleteParams::default())
        .await
        .expect("the tenant deletes its access");
    t.env
        .wait_gone(&t.env.accesses(), "BucketAccess", "photos-rw")
        .await;
    for claim in ["photos", "videos"] {
        let bucket = t.env.bucket_of(&t.claims().get(claim).await.unwrap()).await;
        t.claims()
            .delete(claim, &DeleteParams::default())
            .await
            .expect("the tenant deletes its claim");
        t.env.wait_claim_gone(claim).await;
        t.env.wait_bucket_gone(&bucket.name_any()).await;
    }
    t.env.stop_empty().await;
}

#[tokio::test]
async fn rbac_refuses_a_tenant_with_edit_every_status() {
    let t = Tenancy::start().await;
    t.provisioned_claim_and_access("photos", "photos-rw").await;
    let status = forged_status();
    let pp = PatchParams::default();
    for (resource, result) in [
        (
            "bucketaccesses",
            t.accesses()
                .patch_status("photos-rw", &pp, &status)
                .await
                .map(|_| ()),
        ),
        (
            "bucketclaims",
            t.claims()
                .patch_status("photos", &pp, &status)
                .await
                .map(|_| ()),
        ),
    ] {
        match result {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 403, "{s:?}");
                assert!(
                    s.message.contains(&format!(
                        "cannot patch resource \"{resource}/status\" in API group \"objectstorage.k8s.io\""
                    )),
                    "RBAC, not the policy, refuses it: {}",
                    s.message
                );
            }
            other => panic!("{resource}/status: expected RBAC's 403, got {other:?}"),
        }
    }
    t.env.stop().await;
}

#[tokio::test]
async fn the_policy_refuses_a_tenant_every_cosi_annotation_and_removing_the_protection_finalizer() {
    let t = Tenancy::start().await;
    let access = t.provisioned_claim_and_access("photos", "photos-rw").await;
    let pp = PatchParams::default();

    // Added, on an update and on a create.
    for key in COSI_ANNOTATIONS {
        let message = refused_by_policy(
            t.accesses()
                .patch("photos-rw", &pp, &annotation_patch(key, Some("true")))
                .await,
            key,
        );
        assert!(
            message.contains(&format!("annotation {key} is written by COSI only (")),
            "{message}"
        );
        let mut claim = cosi_cli::manifests::claim(NS, "annotated", DELETE);
        claim.annotations_mut().insert(key.into(), "true".into());
        refused_by_policy(t.claims().create(&PostParams::default(), &claim).await, key);
    }

    // Removed, and changed: the claim is annotated as used by the access.
    let claim = t
        .env
        .wait_for_object::<BucketClaim>(
            "photos",
            "to be marked as used",
            annotated(HAS_BUCKETACCESS_REFERENCES),
        )
        .await;
    let value = annotation(&claim, HAS_BUCKETACCESS_REFERENCES)
        .unwrap()
        .to_owned();
    refused_by_policy(
        t.claims()
            .patch(
                "photos",
                &pp,
                &annotation_patch(HAS_BUCKETACCESS_REFERENCES, None),
            )
            .await,
        "remove has-bucketaccess-references",
    );
    refused_by_policy(
        t.claims()
            .patch(
                "photos",
                &pp,
                &annotation_patch(
                    HAS_BUCKETACCESS_REFERENCES,
                    Some(&format!("{value}-changed")),
                ),
            )
            .await,
        "change has-bucketaccess-references",
    );

    // The protection finalizer removed, by a merge and by a JSON patch.
    assert!(is_protected(&access));
    let message = refused_by_policy(
        t.accesses()
            .patch(
                "photos-rw",
                &pp,
                &merge(json!({"metadata": {"finalizers": null}})),
            )
            .await,
        "remove the finalizer",
    );
    assert!(
        message.contains(&format!(
            "finalizer {PROTECTION_FINALIZER} is removed by COSI only"
        )),
        "{message}"
    );
    let remove_first = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": PROTECTION_FINALIZER},
        {"op": "remove", "path": "/metadata/finalizers/0"}
    ]))
    .unwrap();
    refused_by_policy(
        t.claims()
            .patch("photos", &pp, &Patch::<()>::Json(remove_first))
            .await,
        "remove the claim's finalizer",
    );
    let stored = t.env.accesses().get("photos-rw").await.unwrap();
    assert!(is_protected(&stored));
    assert!(
        COSI_ANNOTATIONS
            .iter()
            .all(|k| annotation(&stored, k).is_none())
    );

    // Without the policy, RBAC alone would have let the tenant do it.
    let bindings: Api<kube::api::DynamicObject> = Api::all_with(
        t.env.client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicyBinding",
            ),
            "validatingadmissionpolicybindings",
        ),
    );
    bindings
        .delete(POLICY, &DeleteParams::default())
        .await
        .expect("the admin deletes the policy's binding");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let patch = annotation_patch(rotation_annotations::LEGACY_ROTATION_STATE, Some("forged"));
    while let Err(e) = t.accesses().patch("photos-rw", &pp, &patch).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "without the policy's binding, the tenant is still refused: {e}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    t.env.stop().await;
}

/// A status saying the object is not provisioned, in terms the CRDs accept.
fn forged_status() -> Patch<Value> {
    merge(json!({"status": {"conditions": [{
        "type": "Provisioned", "status": "False", "reason": "Forged",
        "message": "written by a tenant", "lastTransitionTime": "2020-01-01T00:00:00Z"
    }]}}))
}

#[tokio::test]
async fn a_tenant_granted_everything_is_still_refused_status_by_the_policy() {
    let t = Tenancy::start().await;
    t.provisioned_claim_and_access("photos", "photos-rw").await;
    let admin = t.env.client.clone();
    // Everything in its namespace, and Buckets (cluster-scoped) too.
    create(
        &Api::<Role>::namespaced(admin.clone(), NS),
        json!({"metadata": {"name": "everything"},
               "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
    )
    .await;
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), NS),
        json!({"metadata": {"name": "tenant-everything"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "everything"},
               "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": NS}]}),
    )
    .await;
    create(
        &Api::<ClusterRole>::all(admin.clone()),
        json!({"metadata": {"name": "bucket-writer"},
               "rules": [{"apiGroups": ["objectstorage.k8s.io"], "resources": ["buckets", "buckets/status"], "verbs": ["*"]}]}),
    )
    .await;
    create(
        &Api::<ClusterRoleBinding>::all(admin),
        json!({"metadata": {"name": "tenant-bucket-writer"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bucket-writer"},
               "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": NS}]}),
    )
    .await;
    let claim = t.env.claims().get("photos").await.unwrap();
    let bucket = claim.bound_bucket_name().expect("bound").to_owned();
    let buckets: Api<Bucket> = Api::all(t.tenant.clone());
    let pp = PatchParams::default();
    let forged = forged_status();
    // RBAC now allows it: the policy is what refuses (once the authorizer
    // has seen the new bindings).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let message = loop {
        match t.accesses().patch_status("photos-rw", &pp, &forged).await {
            Err(kube::Error::Api(s)) if s.code == 403 && !s.message.contains(POLICY) => {
                assert!(tokio::time::Instant::now() < deadline, "{s:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => break refused_by_policy(other, "bucketaccesses/status"),
        }
    };
    assert!(
        message.contains("status is written by COSI only"),
        "{message}"
    );
    refused_by_policy(
        t.claims().patch_status("photos", &pp, &forged).await,
        "bucketclaims/status",
    );
    refused_by_policy(
        buckets.patch_status(&bucket, &pp, &forged).await,
        "buckets/status",
    );
    for key in [
        BUCKETCLAIM_BEING_DELETED,
        BUCKETCLAIM_BEING_DELETED_UPSTREAM,
        CLAIM_LOST_AT,
    ] {
        refused_by_policy(
            buckets
                .patch(&bucket, &pp, &annotation_patch(key, Some("true")))
                .await,
            key,
        );
    }
    let access = t.env.accesses().get("photos-rw").await.unwrap();
    assert!(provisioned(access.status_conditions()));
    assert!(
        access
            .status_conditions()
            .iter()
            .all(|c| c.reason != "Forged")
    );
    // The rest of a Bucket is no business of the policy's: a label is
    // admitted.
    buckets
        .patch(
            &bucket,
            &pp,
            &merge(json!({"metadata": {"labels": {"seen": "yes"}}})),
        )
        .await
        .expect("a label on the Bucket");
    t.env.stop().await;
}

#[tokio::test]
async fn admins_and_cosis_service_accounts_write_what_tenants_may_not() {
    let t = Tenancy::start().await;
    t.provisioned_claim_and_access("photos", "photos-rw").await;
    let pp = PatchParams::default();
    let legacy = rotation_annotations::LEGACY_CREDENTIALS_ROTATED_AT;

    // system:masters, and kubeadm's admin group (bound to cluster-admin,
    // as kubeadm binds it).
    create(
        &Api::<ClusterRoleBinding>::all(t.env.client.clone()),
        json!({"metadata": {"name": "kubeadm:cluster-admins"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "kubeadm:cluster-admins"}]}),
    )
    .await;
    let kubeadm_admin = t.impersonating("kubernetes-admin", &["kubeadm:cluster-admins"]);
    let masters: Api<BucketAccess> = Api::namespaced(t.env.client.clone(), NS);
    let kubeadm: Api<BucketAccess> = Api::namespaced(kubeadm_admin, NS);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for (who, api) in [
        ("system:masters", &masters),
        ("kubeadm:cluster-admins", &kubeadm),
    ] {
        loop {
            match api
                .patch("photos-rw", &pp, &annotation_patch(legacy, Some(who)))
                .await
            {
                Ok(a) => {
                    assert_eq!(annotation(&a, legacy), Some(who));
                    break;
                }
                // A real authorizer sees the new binding a moment later.
                Err(kube::Error::Api(s)) if s.code == 403 && !s.message.contains(POLICY) => {
                    assert!(tokio::time::Instant::now() < deadline, "{who}: {s:?}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{who} was refused: {e}"),
            }
        }
    }
    masters
        .patch("photos-rw", &pp, &annotation_patch(legacy, None))
        .await
        .expect("an admin removes it");

    // Any other group is a tenant's: the same impersonated user without
    // the group is refused by RBAC, and with a group bound to
    // cluster-admin that is not an admin group, by the policy.
    create(
        &Api::<ClusterRoleBinding>::all(t.env.client.clone()),
        json!({"metadata": {"name": "operators"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "operators"}]}),
    )
    .await;
    let operator: Api<BucketAccess> =
        Api::namespaced(t.impersonating("operator", &["operators"]), NS);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let message = loop {
        match operator
            .patch("photos-rw", &pp, &annotation_patch(legacy, Some("x")))
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 403 && !s.message.contains(POLICY) => {
                assert!(tokio::time::Instant::now() < deadline, "{s:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => break refused_by_policy(other, "a cluster-admin outside the admin groups"),
        }
    };
    assert!(message.contains(legacy), "{message}");

    // COSI's ServiceAccounts: the controller and the sidecar, each within
    // its RBAC (annotations nothing reads any more, put back as they were).
    for account in [CONTROLLER_SERVICE_ACCOUNT, SIDECAR_SERVICE_ACCOUNT] {
        let cosi: Api<BucketAccess> = Api::namespaced(t.cosi_service_account(account).await, NS);
        let written = cosi
            .patch("photos-rw", &pp, &annotation_patch(legacy, Some(account)))
            .await
            .unwrap_or_else(|e| panic!("{account} was refused: {e}"));
        assert_eq!(annotation(&written, legacy), Some(account));
        cosi.patch("photos-rw", &pp, &annotation_patch(legacy, None))
            .await
            .unwrap_or_else(|e| panic!("{account} was refused: {e}"));
    }
    // And every status write of theirs: the claim and the access got theirs.
    let access = t.env.accesses().get("photos-rw").await.unwrap();
    assert!(provisioned(access.status_conditions()));
    t.env.remove_access_and_claim("photos-rw", "photos").await;
    t.env.stop_empty().await;
}

/// The objects of kind `kind` in `docs`, by name.
fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<(&'a str, &'a Value)> {
    let mut found: Vec<_> = docs
        .iter()
        .filter(|d| d["kind"] == kind)
        .map(|d| (d["metadata"]["name"].as_str().unwrap_or_default(), d))
        .collect();
    found.sort_by_key(|(name, _)| *name);
    found
}

/// What must be the same in the chart and in deploy/: the roles' rules and
/// aggregation labels, the policy's and the binding's specs.
fn tenancy_essentials(docs: &[Value]) -> Value {
    let labels = |d: &Value| {
        let mut l = d["metadata"]["labels"].clone();
        if let Some(m) = l.as_object_mut() {
            m.retain(|k, _| k.starts_with("rbac.authorization.k8s.io/"));
        }
        l
    };
    let roles: Vec<Value> = of_kind(docs, "ClusterRole")
        .into_iter()
        .filter(|(_, d)| d["metadata"]["labels"]["app.kubernetes.io/name"] == "cosi-tenancy")
        .map(|(name, d)| json!({"name": name, "labels": labels(d), "rules": d["rules"]}))
        .collect();
    let specs = |kind| -> Vec<Value> {
        of_kind(docs, kind)
            .into_iter()
            .map(|(name, d)| json!({"name": name, "spec": d["spec"]}))
            .collect()
    };
    json!({
        "roles": roles,
        "policies": specs("ValidatingAdmissionPolicy"),
        "bindings": specs("ValidatingAdmissionPolicyBinding"),
    })
}

fn chart(sets: &[&str]) -> Vec<Value> {
    parse(&render(&repo().join("charts/cosi-rs"), sets)).unwrap()
}

#[test]
fn the_chart_ships_the_tenancy_of_deploy() {
    let deploy = tenancy_essentials(&parse(&tenancy()).unwrap());
    assert_eq!(
        deploy["roles"].as_array().map(Vec::len),
        Some(3),
        "cosi-view, cosi-edit, cosi-class-reader: {deploy:#}"
    );
    assert_eq!(deploy["policies"].as_array().map(Vec::len), Some(1));
    assert_eq!(tenancy_essentials(&chart(&[])), deploy);
    // And deploy/ itself includes it.
    let whole = parse(&kustomize(&deploy_dir())).unwrap();
    assert_eq!(tenancy_essentials(&whole), deploy);
}

#[test]
fn the_charts_policy_admits_the_release_namespace_the_listed_ones_and_the_admin_groups() {
    let mut cmd = std::process::Command::new(crate::chart::helm());
    cmd.args(["template", "cosi", "--namespace", "storage"])
        .arg(repo().join("charts/cosi-rs"))
        .args([
            "--set",
            "tenancy.admissionPolicy.serviceAccountNamespaces={vendor-driver}",
            "--set",
            "tenancy.admissionPolicy.adminGroups={platform-admins}",
        ]);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs = parse(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let (_, policy) = of_kind(&docs, "ValidatingAdmissionPolicy")[0];
    let conditions: Vec<&str> = policy["spec"]["matchConditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["expression"].as_str().unwrap())
        .collect();
    assert_eq!(
        conditions,
        [
            r#"!request.userInfo.groups.exists(g, g in ["system:serviceaccounts:storage","system:serviceaccounts:vendor-driver"])"#,
            r#"!request.userInfo.groups.exists(g, g in ["platform-admins"])"#,
        ]
    );
}

#[test]
fn the_charts_roles_and_policy_can_each_be_turned_off() {
    let kinds = |docs: &[Value]| -> Vec<String> {
        let mut k: Vec<String> = docs
            .iter()
            .filter(|d| d["metadata"]["labels"]["app.kubernetes.io/name"] == "cosi-tenancy")
            .map(|d| {
                format!(
                    "{}/{}",
                    d["kind"].as_str().unwrap(),
                    d["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        k.sort();
        k
    };
    assert_eq!(
        kinds(&chart(&["tenancy.roles.enabled=false"])),
        [
            "ValidatingAdmissionPolicy/cosi-protected-fields",
            "ValidatingAdmissionPolicyBinding/cosi-protected-fields"
        ]
    );
    assert_eq!(
        kinds(&chart(&["tenancy.admissionPolicy.enabled=false"])),
        [
            "ClusterRole/cosi-class-reader",
            "ClusterRole/cosi-edit",
            "ClusterRole/cosi-view"
        ]
    );
}
