//! kube-sim proven against the real kube-apiserver: one scenario of raw API
//! requests runs on both, and every answer is compared — status code,
//! reason, message, causes, field values and managedFields — after what
//! differs by nature is masked (UIDs, resourceVersions, timestamps,
//! continue tokens). Each difference is either fixed in kube-sim or listed
//! in [`KNOWN`] (and in kube-sim's README) with why COSI does not depend
//! on it; a difference not listed, or a listed one that is gone, fails the
//! test. The report is printed either way.
//!
//! The scenario: creates and updates; JSON, merge, strategic-merge and
//! apply patches (and apply conflicts); the status subresource; lists with
//! label and field selectors, limit and continue; watches from a
//! resourceVersion, with bookmarks and initial events, and from one long
//! gone; finalizers and deletion with each propagation policy; garbage
//! collection through owner references; CRD schema and CEL failures,
//! transition rules; RBAC denials; dry runs and field validation; the
//! Table kubectl prints.

use std::collections::BTreeMap;
use std::time::Duration;

use control_plane::{ApiServer, Kind, Options};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};

/// A difference kube-sim keeps, by step and JSON path (`*` ends a prefix),
/// and why COSI does not depend on it.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "CRD established",
        "/metadata/managedFields",
        "kube-sim sets a CRD's status itself when it is written; the API server's own controllers write it later, under managers of their own. COSI never reads a CRD's managedFields.",
    ),
    (
        "add a finalizer while deleting",
        "/details/causes",
        "the API server lists the same cause twice (it validates the metadata twice); kube-sim once. COSI never adds a finalizer to an object being deleted.",
    ),
    (
        "list, bad continue token",
        "/message",
        "continue tokens are opaque and each server's are its own; COSI only passes back the token it was given.",
    ),
];

/// What an API server answered to one step.
#[derive(Clone, Debug, PartialEq)]
struct Answer {
    status: u16,
    body: Value,
}

/// One API server under the scenario, and its answers so far.
struct Run {
    server: ApiServer,
    nobody: kube::Client,
    answers: Vec<(String, Answer)>,
}

const NS: &str = "diff";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/diff/widgets";
const CONFIGMAPS: &str = "/api/v1/namespaces/diff/configmaps";
const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["size"],
                            "x-kubernetes-validations": [
                                {"rule": "self.size <= 5 || self.mode == 'B'", "message": "a size above 5 needs mode B"}
                            ],
                            "properties": {
                                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                                "name": {
                                    "type": "string", "maxLength": 20, "pattern": "^[a-z]+$",
                                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "name is immutable"}]
                                },
                                "mode": {"type": "string", "enum": ["A", "B"], "default": "A"},
                                "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 10}},
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
                            }
                        },
                        "status": {
                            "type": "object",
                            "properties": {
                                "conditions": {"type": "array", "items": {
                                    "type": "object",
                                    "properties": {"type": {"type": "string"}, "status": {"type": "string"}}
                                }}
                            }
                        }
                    }
                }}
            }]
        }
    })
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "labels": {"app": "diff"}}, "spec": spec})
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

impl Run {
    async fn start(kind: Kind) -> Run {
        let server = match kind {
            Kind::KubeSim => ApiServer::start(kind).await,
            Kind::KubeApiserver => ApiServer::real(Options::default()).await,
        }
        .unwrap_or_else(|e| panic!("{kind:?} starts: {e}"));
        let admin = server.client();
        for (path, body) in [
            (
                "/api/v1/namespaces",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
            ),
            (
                "/api/v1/namespaces/diff/serviceaccounts",
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody"}}),
            ),
        ] {
            let (status, _) = send(&admin, "POST", path, Some((JSON, body)), None).await;
            assert_eq!(status, 201, "{kind:?}: create {path}");
        }
        let token = server
            .service_account_token(NS, "nobody")
            .await
            .expect("a token of diff/nobody");
        let nobody = server.client_for_token(&token);
        Run {
            server,
            nobody,
            answers: Vec::new(),
        }
    }

    /// Sends a request as the admin and records the answer under `step`.
    async fn step(
        &mut self,
        step: &str,
        method: &str,
        path: &str,
        body: Option<(&str, Value)>,
    ) -> Value {
        let (status, body) = send(&self.server.client(), method, path, body, None).await;
        self.record(step, status, body.clone());
        body
    }

    fn record(&mut self, step: &str, status: u16, body: Value) {
        self.answers.push((
            step.to_owned(),
            Answer {
                status,
                body: masked(body),
            },
        ));
    }

    /// The object at `path` now, as the admin reads it.
    async fn get(&self, path: &str) -> (u16, Value) {
        send(&self.server.client(), "GET", path, None, None).await
    }

    /// Polls `path` until `done` holds (at most 90 s), then records the
    /// answer under `step`: what garbage collection and finalizers lead to.
    async fn eventually(&mut self, step: &str, path: &str, done: impl Fn(u16, &Value) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            let (status, body) = self.get(path).await;
            if done(status, &body) || tokio::time::Instant::now() > deadline {
                self.record(step, status, body);
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// One raw request; the status and the body (a watch's events as a list).
async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<(&str, Value)>,
    accept: Option<&str>,
) -> (u16, Value) {
    let mut request = http::Request::builder().method(method).uri(path);
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    let bytes = match &body {
        Some((content_type, value)) => {
            request = request.header("content-type", *content_type);
            if *content_type == APPLY {
                serde_saphyr::to_string(value).unwrap().into_bytes()
            } else {
                value.to_string().into_bytes()
            }
        }
        None => Vec::new(),
    };
    let reply = client
        .send(request.body(kube::client::Body::from(bytes)).unwrap())
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = reply.status().as_u16();
    let raw = reply.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&raw).unwrap_or_else(|_| {
        // A watch: one JSON event per line.
        Value::Array(
            raw.split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| {
                    serde_json::from_slice(l)
                        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(l).into_owned()))
                })
                .collect(),
        )
    });
    (status, value)
}

/// `value` with what differs by nature between two servers masked: UIDs
/// (also in managedFields keys), resourceVersions (also in a 410's
/// message), timestamps, continue tokens.
fn masked(mut value: Value) -> Value {
    fn walk(key: Option<&str>, v: &mut Value) {
        match v {
            Value::Object(fields) => {
                let renamed: serde_json::Map<String, Value> = std::mem::take(fields)
                    .into_iter()
                    .map(|(k, mut child)| {
                        walk(Some(&k), &mut child);
                        (without_uuids(&k), child)
                    })
                    .collect();
                *fields = renamed;
            }
            Value::String(s) if s.starts_with("too old resource version: ") => {
                *s = "too old resource version: <rv> (<rv>)".to_owned();
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(None, i)),
            Value::String(s) if !s.is_empty() => {
                let mask = match key {
                    Some("uid") => Some("<uid>"),
                    Some("resourceVersion") => Some("<rv>"),
                    Some("continue") => Some("<token>"),
                    Some(
                        "creationTimestamp" | "deletionTimestamp" | "time" | "lastTransitionTime",
                    ) => Some("<time>"),
                    _ => None,
                };
                if let Some(m) = mask {
                    *s = m.to_owned();
                }
            }
            _ => {}
        }
    }
    walk(None, &mut value);
    sort_causes(&mut value);
    value
}

/// The causes of an error in one order, and its message listing them in
/// that order: the API server lists schema errors in no fixed order (it
/// walks a Go map).
fn sort_causes(value: &mut Value) {
    let Some(causes) = value
        .pointer_mut("/details/causes")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    if causes.len() < 2 {
        return;
    }
    causes.sort_by_key(|c| c.to_string());
    let listed: Vec<String> = causes
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    if let Some(message) = value["message"].as_str()
        && let Some((head, _)) = message.split_once(" is invalid: [")
    {
        value["message"] = json!(format!("{head} is invalid: [{}]", listed.join(", ")));
    }
}

/// `text` with every UUID replaced by `<uid>`.
fn without_uuids(text: &str) -> String {
    let shape = |s: &str| {
        s.len() == 36
            && s.char_indices().all(|(i, c)| {
                if matches!(i, 8 | 13 | 18 | 23) {
                    c == '-'
                } else {
                    c.is_ascii_hexdigit()
                }
            })
    };
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest
        .char_indices()
        .map(|(i, _)| i)
        .find(|&i| rest.get(i..i + 36).is_some_and(shape))
    {
        out.push_str(&rest[..i]);
        out.push_str("<uid>");
        rest = &rest[i + 36..];
    }
    out.push_str(rest);
    out
}

/// Where `sim` and `real` differ, as `path: kube-sim … | kube-apiserver …`.
fn differences(path: &str, sim: &Value, real: &Value, out: &mut Vec<(String, String)>) {
    match (sim, real) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let null = Value::Null;
                differences(
                    &format!("{path}/{k}"),
                    a.get(k).unwrap_or(&null),
                    b.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(&format!("{path}/{i}"), x, y, out);
            }
        }
        (a, b) if a != b => out.push((
            path.to_owned(),
            format!("kube-sim {} | kube-apiserver {}", short(a), short(b)),
        )),
        _ => {}
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 300 {
        format!("{}…", &s[..300])
    } else {
        s
    }
}

/// The scenario, on one server.
async fn scenario(run: &mut Run) {
    let w = |name: &str| format!("{WIDGETS}/{name}");
    let cm = |name: &str| format!("{CONFIGMAPS}/{name}");

    // A CRD with a schema, defaults, CEL and a status subresource.
    let admin = run.server.client();
    let (status, _) = send(
        &admin,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some((JSON, widget_crd())),
        None,
    )
    .await;
    assert_eq!(status, 201);
    run.eventually(
        "CRD established",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com",
        |_, crd| {
            crd["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            })
        },
    )
    .await;
    run.eventually("Widgets served", WIDGETS, |status, _| status == 200)
        .await;

    // Creates: valid (defaulted), schema failures, a CEL failure, a duplicate,
    // a dry run, unknown fields.
    run.step(
        "create",
        "POST",
        WIDGETS,
        Some((JSON, widget("a", json!({"size": 2, "name": "alpha"})))),
    )
    .await;
    run.step(
        "create with schema errors",
        "POST",
        WIDGETS,
        Some((
            JSON,
            widget(
                "bad",
                json!({"size": 0, "name": "Not_OK", "mode": "C", "tags": ["1", "2", "3", "4"]}),
            ),
        )),
    )
    .await;
    run.step(
        "create without a required field",
        "POST",
        WIDGETS,
        Some((JSON, widget("bad", json!({"name": "x"})))),
    )
    .await;
    run.step(
        "create failing a CEL rule",
        "POST",
        WIDGETS,
        Some((JSON, widget("bad", json!({"size": 7})))),
    )
    .await;
    run.step(
        "create a duplicate",
        "POST",
        WIDGETS,
        Some((JSON, widget("a", json!({"size": 1})))),
    )
    .await;
    run.step(
        "create, dry run",
        "POST",
        &format!("{WIDGETS}?dryRun=All"),
        Some((JSON, widget("dry", json!({"size": 1})))),
    )
    .await;
    run.step("get after a dry run", "GET", &w("dry"), None)
        .await;
    let mut unknown = widget("unknown", json!({"size": 1, "colour": "red"}));
    unknown["extra"] = json!(true);
    run.step(
        "create with unknown fields, Strict",
        "POST",
        &format!("{WIDGETS}?fieldValidation=Strict"),
        Some((JSON, unknown.clone())),
    )
    .await;
    run.step(
        "create with unknown fields, Ignore",
        "POST",
        &format!("{WIDGETS}?fieldValidation=Ignore"),
        Some((JSON, unknown)),
    )
    .await;

    // Updates: a stale resourceVersion, a good one, a transition rule.
    let current = run.step("get", "GET", &w("a"), None).await;
    let mut stale = current.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    run.step(
        "update with a stale resourceVersion",
        "PUT",
        &w("a"),
        Some((JSON, stale)),
    )
    .await;
    let (_, current) = run.get(&w("a")).await;
    let mut changed = current.clone();
    changed["spec"]["size"] = json!(3);
    run.step("update", "PUT", &w("a"), Some((JSON, changed)))
        .await;
    run.step(
        "merge patch changing an immutable field",
        "PATCH",
        &w("a"),
        Some((MERGE, json!({"spec": {"name": "beta"}}))),
    )
    .await;

    // Patches.
    run.step(
        "JSON patch",
        "PATCH",
        &w("a"),
        Some((
            JSON_PATCH,
            json!([{"op": "replace", "path": "/spec/size", "value": 4}]),
        )),
    )
    .await;
    run.step(
        "JSON patch with a failing test",
        "PATCH",
        &w("a"),
        Some((JSON_PATCH, json!([{"op": "test", "path": "/spec/size", "value": 9}, {"op": "replace", "path": "/spec/size", "value": 1}]))),
    )
    .await;
    run.step(
        "merge patch",
        "PATCH",
        &w("a"),
        Some((
            MERGE,
            json!({"spec": {"tags": ["x", "y"], "labels": {"k": "v"}}}),
        )),
    )
    .await;
    run.step(
        "merge patch removing a key",
        "PATCH",
        &w("a"),
        Some((MERGE, json!({"spec": {"labels": null}}))),
    )
    .await;
    run.step(
        "strategic merge patch of a custom resource",
        "PATCH",
        &w("a"),
        Some((STRATEGIC, json!({"spec": {"size": 2}}))),
    )
    .await;
    run.step(
        "create a ConfigMap",
        "POST",
        CONFIGMAPS,
        Some((JSON, configmap("c", json!({"a": "1", "b": "2"})))),
    )
    .await;
    run.step(
        "strategic merge patch of a ConfigMap",
        "PATCH",
        &cm("c"),
        Some((STRATEGIC, json!({"data": {"b": null, "c": "3"}}))),
    )
    .await;

    // Server-side apply: managedFields, conflicts, force.
    let applied = |size: i64| widget("b", json!({"size": size, "tags": ["one"]}));
    run.step(
        "apply (create)",
        "PATCH",
        &format!("{}?fieldManager=first", w("b")),
        Some((APPLY, applied(1))),
    )
    .await;
    run.step(
        "apply by another manager, conflicting",
        "PATCH",
        &format!("{}?fieldManager=second", w("b")),
        Some((APPLY, applied(2))),
    )
    .await;
    run.step(
        "apply by another manager, forced",
        "PATCH",
        &format!("{}?fieldManager=second&force=true", w("b")),
        Some((APPLY, applied(2))),
    )
    .await;
    run.step(
        "apply dropping a field the manager owned",
        "PATCH",
        &format!("{}?fieldManager=second", w("b")),
        Some((APPLY, widget("b", json!({"size": 2})))),
    )
    .await;
    run.step(
        "apply without a field manager",
        "PATCH",
        &w("b"),
        Some((APPLY, applied(1))),
    )
    .await;

    // The status subresource.
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    run.step(
        "status patch",
        "PATCH",
        &format!("{}/status", w("a")),
        Some((MERGE, status.clone())),
    )
    .await;
    run.step(
        "spec patch through /status is ignored",
        "PATCH",
        &format!("{}/status", w("a")),
        Some((MERGE, json!({"spec": {"size": 1}}))),
    )
    .await;
    run.step(
        "status patch through the main resource is ignored",
        "PATCH",
        &w("a"),
        Some((
            MERGE,
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        )),
    )
    .await;
    run.step("get status", "GET", &format!("{}/status", w("a")), None)
        .await;

    // Lists: selectors, limit and continue.
    for name in ["c", "d", "e"] {
        let mut obj = widget(name, json!({"size": 1}));
        obj["metadata"]["labels"]["tier"] = json!(name);
        run.step(
            &format!("create {name}"),
            "POST",
            WIDGETS,
            Some((JSON, obj)),
        )
        .await;
    }
    run.step("list", "GET", WIDGETS, None).await;
    run.step(
        "list, label selector",
        "GET",
        &format!("{WIDGETS}?labelSelector=tier%20in%20(c,e)"),
        None,
    )
    .await;
    run.step(
        "list, label selector on existence",
        "GET",
        &format!("{WIDGETS}?labelSelector=!tier"),
        None,
    )
    .await;
    run.step(
        "list, field selector",
        "GET",
        &format!("{WIDGETS}?fieldSelector=metadata.name%3Dd"),
        None,
    )
    .await;
    run.step(
        "list, unsupported field selector",
        "GET",
        &format!("{WIDGETS}?fieldSelector=spec.size%3D1"),
        None,
    )
    .await;
    let first = run
        .step("list, limit 2", "GET", &format!("{WIDGETS}?limit=2"), None)
        .await;
    let token = first["metadata"]["continue"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    run.step(
        "list, continue",
        "GET",
        &format!("{WIDGETS}?limit=2&continue={token}"),
        None,
    )
    .await;
    run.step(
        "list, bad continue token",
        "GET",
        &format!("{WIDGETS}?limit=2&continue=notatoken"),
        None,
    )
    .await;
    run.step(
        "list across namespaces",
        "GET",
        "/apis/example.com/v1/widgets?labelSelector=tier%3Dd",
        None,
    )
    .await;

    // Watches: from a resourceVersion, with initial events, from one gone.
    let (_, list) = run.get(WIDGETS).await;
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    run.step(
        "change for the watch",
        "PATCH",
        &w("c"),
        Some((MERGE, json!({"spec": {"size": 2}}))),
    )
    .await;
    run.step("delete for the watch", "DELETE", &w("e"), None)
        .await;
    run.step(
        "watch from a resourceVersion",
        "GET",
        &format!("{WIDGETS}?watch=true&resourceVersion={from}&timeoutSeconds=1"),
        None,
    )
    .await;
    run.step(
        "watch with initial events and bookmarks",
        "GET",
        &format!("{WIDGETS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&labelSelector=tier&timeoutSeconds=1"),
        None,
    )
    .await;
    run.step(
        "watch from a resourceVersion long gone",
        "GET",
        &format!("{WIDGETS}?watch=true&resourceVersion=2&timeoutSeconds=1"),
        None,
    )
    .await;

    // Finalizers.
    let mut kept = widget("kept", json!({"size": 1}));
    kept["metadata"]["finalizers"] = json!(["example.com/keep"]);
    run.step(
        "create with a finalizer",
        "POST",
        WIDGETS,
        Some((JSON, kept)),
    )
    .await;
    run.step("delete with a finalizer", "DELETE", &w("kept"), None)
        .await;
    run.step("get while deleting", "GET", &w("kept"), None)
        .await;
    run.step(
        "add a finalizer while deleting",
        "PATCH",
        &w("kept"),
        Some((
            MERGE,
            json!({"metadata": {"finalizers": ["example.com/keep", "example.com/new"]}}),
        )),
    )
    .await;
    run.step(
        "remove the finalizers",
        "PATCH",
        &w("kept"),
        Some((MERGE, json!({"metadata": {"finalizers": null}}))),
    )
    .await;
    run.step("get after the finalizers", "GET", &w("kept"), None)
        .await;
    run.step("delete what is gone", "DELETE", &w("kept"), None)
        .await;

    // Deletion propagation and garbage collection through owner references.
    for policy in ["Foreground", "Background", "Orphan"] {
        let owner = format!("owner-{}", policy.to_lowercase());
        let dependent = format!("dependent-{}", policy.to_lowercase());
        let (_, created) = send(
            &admin,
            "POST",
            CONFIGMAPS,
            Some((JSON, configmap(&owner, json!({})))),
            None,
        )
        .await;
        let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();
        let mut dep = configmap(&dependent, json!({}));
        dep["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid, "blockOwnerDeletion": true}]);
        run.step(
            &format!("create a dependent ({policy})"),
            "POST",
            CONFIGMAPS,
            Some((JSON, dep)),
        )
        .await;
        run.step(
            &format!("delete the owner ({policy})"),
            "DELETE",
            &cm(&owner),
            Some((
                JSON,
                json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy}),
            )),
        )
        .await;
        run.eventually(
            &format!("the owner, eventually ({policy})"),
            &cm(&owner),
            |s, _| s == 404,
        )
        .await;
        let orphan = policy == "Orphan";
        run.eventually(
            &format!("the dependent, eventually ({policy})"),
            &cm(&dependent),
            |s, d| {
                if orphan {
                    d["metadata"].get("ownerReferences").is_none()
                } else {
                    s == 404
                }
            },
        )
        .await;
    }
    run.step(
        "delete a collection by label",
        "DELETE",
        &format!("{WIDGETS}?labelSelector=tier"),
        None,
    )
    .await;
    run.step("list after the collection", "GET", WIDGETS, None)
        .await;

    // RBAC denials.
    for (step, method, path) in [
        ("forbidden get", "GET", cm("c")),
        (
            "forbidden list across namespaces",
            "GET",
            "/apis/example.com/v1/widgets".to_owned(),
        ),
        ("forbidden create", "POST", CONFIGMAPS.to_owned()),
        (
            "forbidden cluster-scoped get",
            "GET",
            "/api/v1/namespaces/diff".to_owned(),
        ),
    ] {
        let body = (method == "POST").then(|| (JSON, configmap("x", json!({}))));
        let (status, answer) = send(&run.nobody.clone(), method, &path, body, None).await;
        run.record(step, status, answer);
    }

    // What kubectl prints: the Table.
    let (status, mut table) = send(&admin, "GET", &w("a"), None, Some(TABLE)).await;
    // The Age cell is the object's age, which no two runs share.
    if let Some(rows) = table["rows"].as_array_mut() {
        for row in rows {
            if let Some(age) = row["cells"].as_array_mut().and_then(|c| c.last_mut()) {
                *age = json!("<age>");
            }
            row["object"] = Value::Null;
        }
    }
    run.record("Table", status, table);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_sim_answers_the_scenario_as_kube_apiserver_does_but_for_the_known_differences() {
    let (mut sim, mut real) =
        tokio::join!(Run::start(Kind::KubeSim), Run::start(Kind::KubeApiserver));
    let version = real.server.describe();
    tokio::join!(scenario(&mut sim), scenario(&mut real));
    assert_eq!(
        sim.answers.iter().map(|(s, _)| s).collect::<Vec<_>>(),
        real.answers.iter().map(|(s, _)| s).collect::<Vec<_>>(),
        "both ran the same steps"
    );
    // DIFFERENTIAL_DUMP=DIR writes both servers' answers there, to read whole.
    if let Some(dir) = std::env::var_os("DIFFERENTIAL_DUMP") {
        for (name, run) in [("kube-sim", &sim), ("kube-apiserver", &real)] {
            let answers: Vec<Value> = run
                .answers
                .iter()
                .map(|(step, a)| json!({"step": step, "status": a.status, "body": a.body}))
                .collect();
            let path = std::path::Path::new(&dir).join(format!("{name}.json"));
            std::fs::write(path, serde_json::to_string_pretty(&answers).unwrap()).unwrap();
        }
    }
    let mut found: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for ((step, a), (_, b)) in sim.answers.iter().zip(&real.answers) {
        let mut out = Vec::new();
        if a.status != b.status {
            out.push((
                "status".to_owned(),
                format!("kube-sim {} | kube-apiserver {}", a.status, b.status),
            ));
        }
        differences("", &a.body, &b.body, &mut out);
        if !out.is_empty() {
            found.insert(step.clone(), out);
        }
    }
    let known = |step: &str, path: &str| {
        KNOWN.iter().any(|(s, p, _)| {
            *s == step
                && p.strip_suffix('*')
                    .map_or(*p == path, |prefix| path.starts_with(prefix))
        })
    };
    let mut report = format!(
        "kube-sim against {version}: {} steps, {} with differences\n",
        sim.answers.len(),
        found.len()
    );
    let mut unexpected = Vec::new();
    for (step, diffs) in &found {
        report.push_str(&format!("  {step}\n"));
        for (path, what) in diffs {
            let mark = if known(step, path) { "known" } else { "NEW" };
            report.push_str(&format!("    [{mark}] {path}: {what}\n"));
            if mark == "NEW" {
                unexpected.push(format!("{step} {path}"));
            }
        }
    }
    let stale: Vec<_> = KNOWN
        .iter()
        .filter(|(s, p, _)| {
            !found.get(*s).is_some_and(|d| {
                d.iter().any(|(path, _)| {
                    p.strip_suffix('*')
                        .map_or(*p == path, |prefix| path.starts_with(prefix))
                })
            })
        })
        .map(|(s, p, _)| format!("{s} {p}"))
        .collect();
    eprintln!("{report}");
    assert!(unexpected.is_empty(), "differences not known:\n{report}");
    assert!(
        stale.is_empty(),
        "known differences no longer seen (remove them): {stale:?}"
    );
    sim.server.shutdown().await;
    real.server.shutdown().await;
}
