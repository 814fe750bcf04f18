//! Authentication, RBAC, counters and fault injection.

use crate::common::*;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube_sim::{FaultRule, KubeSim};
use serde_json::json;
use std::time::Duration;

async fn grant(sim: &KubeSim, ns: &str, role: serde_json::Value, binding: serde_json::Value) {
    let roles: Api<Role> = Api::namespaced(sim.client(), ns);
    create_json(&roles, role).await;
    let bindings: Api<RoleBinding> = Api::namespaced(sim.client(), ns);
    create_json(&bindings, binding).await;
}

#[tokio::test]
async fn an_identity_without_a_verb_is_forbidden_and_with_it_succeeds() {
    let sim = KubeSim::builder().rbac(true).start().await.unwrap();
    let token = sim.add_user("alice", &["devs"]);
    let alice: Api<ConfigMap> = Api::namespaced(sim.client_for_token(&token), "default");
    let err = api_error(alice.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    grant(
        &sim,
        "default",
        json!({"metadata": {"name": "cm-reader"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
        json!({"metadata": {"name": "devs-read"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
               "subjects": [{"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"}]}),
    )
    .await;
    assert!(alice.list(&ListParams::default()).await.is_ok());
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    let err = refused(&alice, &cm).await;
    assert_eq!(err.code, 403);
    assert_mentions(&err, "cannot create resource \"configmaps\"");
    let other_ns: Api<ConfigMap> = Api::namespaced(sim.client_for_token(&token), "kube-system");
    assert_eq!(
        api_error(other_ns.list(&ListParams::default()).await.unwrap_err()).code,
        403
    );
    let bogus: Api<ConfigMap> = Api::namespaced(sim.client_for_token("not-a-token"), "default");
    assert_eq!(
        api_error(bogus.list(&ListParams::default()).await.unwrap_err()).code,
        401
    );
}

#[tokio::test]
async fn service_accounts_get_exactly_their_cluster_role_including_subresources_and_names() {
    let sim = sim_with_widgets().await;
    drop(sim);
    let sim = KubeSim::builder().rbac(true).start().await.unwrap();
    install_widgets(&sim).await;
    let sas: Api<ServiceAccount> = Api::namespaced(sim.client(), "default");
    create_json(&sas, json!({"metadata": {"name": "sidecar"}})).await;
    let cr: Api<ClusterRole> = Api::all(sim.client());
    create_json(&cr, json!({
        "metadata": {"name": "widget-status"},
        "rules": [
            {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["example.com"], "resources": ["widgets/status"], "verbs": ["patch"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["allowed"], "verbs": ["get"]}
        ]
    })).await;
    let crb: Api<ClusterRoleBinding> = Api::all(sim.client());
    create_json(&crb, json!({
        "metadata": {"name": "sidecar-widget-status"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "widget-status"},
        "subjects": [{"kind": "ServiceAccount", "name": "sidecar", "namespace": "default"}]
    })).await;
    let admin = widgets(&sim);
    admin
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();

    let token = sim.service_account_token("default", "sidecar");
    let sa: Api<Widget> = Api::namespaced(sim.client_for_token(&token), "default");
    assert!(sa.get("w").await.is_ok());
    assert!(
        sa.patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ok"}}))
        )
        .await
        .is_ok()
    );
    let err = merge_refused(&sa, "w", json!({"spec": {"size": 2}})).await;
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "widgets.example.com \"w\" is forbidden: User \"system:serviceaccount:default:sidecar\" cannot patch resource \"widgets\" in API group \"example.com\" in the namespace \"default\""
    );
    let secrets: Api<Secret> = Api::namespaced(sim.client_for_token(&token), "default");
    let admin_secrets: Api<Secret> = Api::namespaced(sim.client(), "default");
    for name in ["allowed", "denied"] {
        admin_secrets
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
            )
            .await
            .unwrap();
    }
    assert!(secrets.get("allowed").await.is_ok());
    assert_eq!(
        api_error(secrets.get("denied").await.unwrap_err()).code,
        403
    );
}

#[tokio::test]
async fn counters_count_requests_by_verb_resource_and_user() {
    let sim = sim_with_widgets().await;
    sim.reset_counters();
    let token = sim.add_user("ctrl", &[]);
    let api: Api<Widget> = Api::namespaced(sim.client_for_token(&token), "default");
    api.create(&PostParams::default(), &widget("c", 1))
        .await
        .unwrap();
    api.get("c").await.unwrap();
    api.patch_status(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "X"}})),
    )
    .await
    .unwrap();
    let before = sim.counters();
    api.delete("c", &Default::default()).await.unwrap();
    let c = sim.counters();
    assert_eq!(c.writes(), 3);
    assert_eq!(c.count("create", "widgets"), 1);
    assert_eq!(c.count("patch", "widgets/status"), 1);
    assert_eq!(c.count_for("get", "widgets", "ctrl"), 1);
    assert_eq!(c.writes_by_user("ctrl"), 3);
    assert_eq!(c.since(&before).writes(), 1);
    sim.reset_counters();
    assert_eq!(sim.counters().total(), 0);
}

#[tokio::test]
async fn injected_errors_follow_the_rules_and_carry_retry_after() {
    let (sim, api) = sim_in_default::<ConfigMap>().await;
    // kube's client retries 429 itself, honouring Retry-After: the request
    // that got the injected 429 is retried once and then succeeds.
    sim.faults().inject(
        FaultRule::new(429)
            .verb("create")
            .resource("configmaps")
            .retry_after(1)
            .times(1),
    );
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "f"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(sim.counters().count("create", "configmaps"), 2);
    sim.faults()
        .inject(FaultRule::new(500).verb("delete").times(1));
    assert_eq!(
        api_error(api.delete("f", &Default::default()).await.unwrap_err()).code,
        500
    );
    sim.faults().inject(FaultRule::new(500).verb("get"));
    assert_eq!(api_error(api.get("f").await.unwrap_err()).code, 500);
    sim.faults().clear();
    assert!(api.get("f").await.is_ok());
    sim.faults().seed(7);
    sim.faults()
        .inject(FaultRule::new(409).verb("patch").rate(0.5));
    let mut failures = 0;
    for _ in 0..40 {
        if api
            .patch(
                "f",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"k": "v"}})),
            )
            .await
            .is_err()
        {
            failures += 1;
        }
    }
    assert!((5..35).contains(&failures), "{failures}");
}

#[tokio::test]
async fn watches_can_be_dropped_now_or_after_n_events() {
    let (sim, api) = sim_in_default::<ConfigMap>().await;
    let mut stream = watch_from_start(&api).await;
    assert!(eventually(5, || async { sim.open_watches() == 1 }).await);
    sim.faults().drop_watches();
    let end = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap();
    assert!(end.is_none(), "the stream ended");

    sim.faults().drop_watches_after(Some(2));
    let mut stream = watch_from_start(&api).await;
    for i in 0..3 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("n{i}")}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let mut seen = 0;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
    {
        assert!(matches!(ev.unwrap(), WatchEvent::Added(_)));
        seen += 1;
    }
    assert_eq!(seen, 2);
}

#[tokio::test]
async fn token_requests_issue_service_account_tokens() {
    let sim = KubeSim::builder().rbac(true).start().await.unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(sim.client(), "default");
    create_json(&sas, json!({"metadata": {"name": "bot"}})).await;
    let req = k8s_openapi::api::authentication::v1::TokenRequest::default();
    let tr = sas
        .create_token_request("bot", &PostParams::default(), &req)
        .await
        .unwrap();
    let token = tr.status.unwrap().token.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(sim.client_for_token(&token), "default");
    let err = api_error(api.list(&ListParams::default()).await.unwrap_err());
    assert_mentions(&err, "system:serviceaccount:default:bot");
}

/// A Role granting `verbs` on the Lease `mine` only, bound to user `who`.
async fn grant_on_lease_mine(sim: &KubeSim, who: &str, verbs: &[&str]) -> Api<Lease> {
    grant(
        sim,
        "default",
        json!({"metadata": {"name": format!("{who}-lease")}, "rules": [{
            "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "resourceNames": ["mine"], "verbs": verbs}]}),
        json!({"metadata": {"name": format!("{who}-lease")},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{who}-lease")},
               "subjects": [{"kind": "User", "name": who, "apiGroup": "rbac.authorization.k8s.io"}]}),
    )
    .await;
    let token = sim.add_user(who, &[]);
    Api::namespaced(sim.client_for_token(&token), "default")
}

fn apply_lease(name: &str) -> Patch<serde_json::Value> {
    Patch::Apply(json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": "me"}
    }))
}

/// The error of an apply of the named Lease that must be refused.
async fn apply_refused(api: &Api<Lease>, name: &str) -> kube::core::Status {
    api_error(
        api.patch(name, &PatchParams::apply("test"), &apply_lease(name))
            .await
            .unwrap_err(),
    )
}

/// As the real authorizer: a POST names no object, so a create rule with
/// resourceNames never allows one; an apply patch that creates the object is
/// authorized as a create of its name, so `patch` alone does not create.
#[tokio::test]
async fn resource_names_never_allow_a_post_and_an_apply_that_creates_needs_create() {
    let sim = KubeSim::builder().rbac(true).start().await.unwrap();
    let pp = PostParams::default();
    let ssa = PatchParams::apply("test");
    let lease = |name: &str| -> Lease {
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    };

    let creator = grant_on_lease_mine(&sim, "creator", &["get", "create", "patch"]).await;
    let err = api_error(creator.create(&pp, &lease("mine")).await.unwrap_err());
    assert_eq!(err.code, 403, "{}", err.message);
    creator
        .patch("mine", &ssa, &apply_lease("mine"))
        .await
        .expect("an apply creating the named Lease is a create of that name");
    let err = apply_refused(&creator, "other").await;
    assert_eq!(err.code, 403, "{}", err.message);

    let patcher = grant_on_lease_mine(&sim, "patcher", &["get", "patch"]).await;
    let admin: Api<Lease> = Api::namespaced(sim.client(), "default");
    admin
        .delete("mine", &Default::default())
        .await
        .expect("delete the Lease");
    let err = apply_refused(&patcher, "mine").await;
    assert_eq!(err.code, 403, "{}", err.message);
    assert_mentions(&err, "cannot create resource \"leases\"");
    assert!(admin.get_opt("mine").await.unwrap().is_none());
    admin.create(&pp, &lease("mine")).await.unwrap();
    patcher
        .patch("mine", &ssa, &apply_lease("mine"))
        .await
        .expect("an apply to the existing named Lease is a patch");
}

/// List and watch carry a name only when a field selector pins
/// `metadata.name` to one; deletecollection never carries one.
#[tokio::test]
async fn resource_names_match_a_list_or_watch_only_for_one_field_selected_name() {
    let sim = KubeSim::builder().rbac(true).start().await.unwrap();
    let reader = grant_on_lease_mine(&sim, "reader", &["list", "watch", "deletecollection"]).await;
    let forbidden = |r: Result<_, kube::Error>| {
        let e = api_error(r.expect_err("forbidden"));
        assert_eq!(e.code, 403, "{}", e.message);
    };
    forbidden(reader.list(&ListParams::default()).await.map(drop));
    forbidden(
        reader
            .list(&ListParams::default().fields("metadata.name=other"))
            .await
            .map(drop),
    );
    forbidden(
        reader
            .list(&ListParams::default().fields("metadata.name!=other"))
            .await
            .map(drop),
    );
    assert!(
        reader
            .list(&ListParams::default().fields("metadata.name=mine"))
            .await
            .is_ok()
    );
    assert!(
        reader
            .watch(&WatchParams::default().fields("metadata.name=mine"), "0")
            .await
            .is_ok()
    );
    forbidden(reader.watch(&WatchParams::default(), "0").await.map(drop));
    forbidden(
        reader
            .delete_collection(
                &Default::default(),
                &ListParams::default().fields("metadata.name=mine"),
            )
            .await
            .map(drop),
    );
}
