//! ValidatingAdmissionPolicies and the aggregated user-facing roles: a
//! user granted `edit` in a namespace (through a ClusterRole labelled
//! aggregate-to-edit) writes Widgets, and a bound policy refuses what it
//! says, with the API server's message, to everyone its match conditions
//! do not leave out.

use crate::common::*;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube_sim::KubeSim;
use serde_json::json;

/// A policy keeping the annotation `example.com/owner` and Widget status
/// to the group `controllers`, and its binding.
fn policy() -> [serde_json::Value; 2] {
    [
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "owned"},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": ["example.com"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                    "resources": ["widgets", "widgets/status"]
                }]},
                "matchConditions": [{"name": "not-a-controller", "expression": "!request.userInfo.groups.exists(g, g in [\"controllers\"])"}],
                "variables": [{"name": "owner", "expression": "has(object.metadata.annotations) && \"example.com/owner\" in object.metadata.annotations"}],
                "validations": [
                    {"expression": "!variables.owner", "message": "example.com/owner is the controllers'", "reason": "Forbidden"},
                    {"expression": "request.subResource != \"status\"", "messageExpression": "\"status of \" + request.name + \" is the controllers'\""}
                ]
            }
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "owned-binding"},
            "spec": {"policyName": "owned", "validationActions": ["Deny"]}
        }),
    ]
}

/// kube-sim with Widgets, the policy, and a token for `alice`, who may
/// edit in `default` and is in `controllers` when `controller`.
async fn sim_for(controller: bool) -> (KubeSim, Api<Widget>) {
    let sim = KubeSim::builder().rbac(true).start().await.unwrap();
    install_widgets(&sim).await;
    for doc in policy() {
        sim.apply_manifest(&doc.to_string())
            .expect("the policy applies");
    }
    create_json(
        &Api::<ClusterRole>::all(sim.client()),
        json!({"metadata": {"name": "widget-editor", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
               "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["*"]},
                         {"apiGroups": ["example.com"], "resources": ["widgets/status"], "verbs": ["*"]}]}),
    )
    .await;
    create_json(
        &Api::<RoleBinding>::namespaced(sim.client(), "default"),
        json!({"metadata": {"name": "alice-edit"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
               "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]}),
    )
    .await;
    let groups: &[&str] = if controller { &["controllers"] } else { &[] };
    let token = sim.add_user("alice", groups);
    let alice = Api::namespaced(sim.client_for_token(&token), "default");
    (sim, alice)
}

fn owned(name: &str) -> Widget {
    let mut w = widget(name, 1);
    w.metadata.annotations = Some([("example.com/owner".to_owned(), "me".to_owned())].into());
    w
}

#[tokio::test]
async fn a_policy_is_stored_as_written_and_one_that_does_not_parse_is_refused() {
    let (sim, _) = sim_for(false).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
        ),
        "validatingadmissionpolicies",
    );
    let policies = Api::<DynamicObject>::all_with(sim.client(), &ar);
    let stored = policies.get("owned").await.unwrap();
    assert_eq!(stored.data["spec"]["validations"][0]["reason"], "Forbidden");
    let mut broken = policy()[0].clone();
    broken["metadata"]["name"] = json!("broken");
    broken["spec"]["validations"][0]["expression"] = json!("!variables.owner &&");
    let broken: DynamicObject = serde_json::from_value(broken).unwrap();
    let refused = api_error(
        policies
            .create(&PostParams::default(), &broken)
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 422);
    assert_mentions(
        &refused,
        "spec.validations[0].expression: Invalid value: \"!variables.owner &&\": compilation failed",
    );
}

#[tokio::test]
async fn a_user_granted_edit_through_aggregation_writes_and_the_policy_refuses_what_it_guards() {
    let (_sim, alice) = sim_for(false).await;
    let pp = PostParams::default();
    alice
        .create(&pp, &widget("w", 1))
        .await
        .expect("edit, aggregated, allows a create");
    let refused = api_error(alice.create(&pp, &owned("o")).await.unwrap_err());
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        refused.message,
        "widgets.example.com \"o\" is forbidden: ValidatingAdmissionPolicy 'owned' with binding 'owned-binding' denied request: example.com/owner is the controllers'"
    );
    let patch = Patch::Merge(json!({"metadata": {"annotations": {"example.com/owner": "me"}}}));
    let refused = api_error(
        alice
            .patch("w", &PatchParams::default(), &patch)
            .await
            .unwrap_err(),
    );
    assert_mentions(&refused, "example.com/owner is the controllers'");
    let status = Patch::Merge(json!({"status": {"phase": "Done"}}));
    let refused = api_error(
        alice
            .patch_status("w", &PatchParams::default(), &status)
            .await
            .unwrap_err(),
    );
    assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
    assert_message_ends(&refused, "denied request: status of w is the controllers'");
    let label = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    alice
        .patch("w", &PatchParams::default(), &label)
        .await
        .expect("what the policy does not guard is written");
}

#[tokio::test]
async fn whom_the_match_conditions_leave_out_is_not_checked() {
    let (sim, alice) = sim_for(true).await;
    let pp = PostParams::default();
    alice
        .create(&pp, &owned("o"))
        .await
        .expect("a controller sets the annotation");
    let status = Patch::Merge(json!({"status": {"phase": "Done"}}));
    alice
        .patch_status("o", &PatchParams::default(), &status)
        .await
        .expect("and the status");
    // system:masters bypasses RBAC, not admission policies.
    let refused = api_error(
        widgets(&sim)
            .create(&pp, &owned("admin"))
            .await
            .unwrap_err(),
    );
    assert_mentions(&refused, "example.com/owner is the controllers'");
}
