//! ValidatingAdmissionPolicies, run on every create and update after the
//! object's own validation, as the API server's admission plugin runs
//! them: for each binding whose actions include `Deny` and whose policy
//! (and `matchResources`, when the binding has one) matches the write by
//! group, version, operation and resource or subresource, the match
//! conditions decide whether the policy applies, then the variables are
//! computed in order and the first failing validation refuses the write,
//! with the API server's message, reason and code. An expression that fails
//! to compile or evaluate refuses the write too, unless the policy's
//! `failurePolicy` is `Ignore`. Expressions are CEL, evaluated by the `cel`
//! crate with kube-cel's Kubernetes functions; `object`, `oldObject`,
//! `request` (operation, name, namespace, subResource, kind, resource,
//! userInfo, dryRun) and `variables` are bound. A policy whose expressions
//! do not parse is refused when written.
//!
//! Writes kube-sim makes itself (its garbage collector, `apply_manifest`)
//! are not checked. Unlike the API server, kube-sim computes every variable
//! up front (a failing variable no expression reads still refuses), does
//! not bound the cost of an expression, and does not support parameters
//! (`paramKind`), namespace and object selectors (a policy applies as if
//! it had none), the `Warn` and `Audit` actions, audit annotations or the
//! `authorizer` variable.

use crate::auth::Identity;
use crate::builtin::{POLICIES, POLICY_BINDINGS};
use crate::meta;
use crate::resource::ResourceInfo;
use crate::status::{ApiError, FieldError};
use crate::store::State;
use kube_cel::KubeCelExt;
use kube_cel::cel::{Context, Program, Value as Cel};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// A create or update, as policies see it.
pub struct Write<'a> {
    /// The resource written.
    pub info: &'a ResourceInfo,
    /// `status` for a write to the status subresource, else "".
    pub subresource: &'a str,
    /// The object to store.
    pub object: &'a Value,
    /// The stored object, on an update.
    pub old: Option<&'a Value>,
    /// Who writes.
    pub user: &'a Identity,
    /// `dryRun=All`.
    pub dry_run: bool,
}

impl Write<'_> {
    fn operation(&self) -> &'static str {
        if self.old.is_some() {
            "UPDATE"
        } else {
            "CREATE"
        }
    }

    /// Whether one of `rules` (resourceRules) names this write.
    fn matched_by(&self, rules: &Value) -> bool {
        let has = |list: &Value, want: &str| {
            list.as_array()
                .is_some_and(|l| l.iter().any(|v| v == "*" || v == want))
        };
        rules.as_array().into_iter().flatten().any(|rule| {
            has(&rule["apiGroups"], &self.info.group)
                && has(&rule["apiVersions"], &self.info.version)
                && has(&rule["operations"], self.operation())
                && rule["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .any(|r| {
                        // `*` is every resource but no subresource, `x/*`
                        // every subresource of x, `*/*` everything.
                        let (resource, sub) = r.split_once('/').unwrap_or((r, ""));
                        (resource == "*" || resource == self.info.plural)
                            && (sub == self.subresource
                                || sub == "*" && !self.subresource.is_empty())
                    })
        })
    }

    /// Whether `constraints` (matchConstraints or matchResources) name this write.
    fn matched(&self, constraints: &Value) -> bool {
        self.matched_by(&constraints["resourceRules"])
            && !self.matched_by(&constraints["excludeResourceRules"])
    }

    /// The `request` variable.
    fn request(&self) -> Value {
        let name = meta::name(self.object);
        json!({
            "operation": self.operation(),
            "name": name,
            "namespace": meta::namespace(self.object),
            "subResource": self.subresource,
            "dryRun": self.dry_run,
            "kind": {"group": self.info.group, "version": self.info.version, "kind": self.info.kind},
            "resource": {"group": self.info.group, "version": self.info.version, "resource": self.info.plural},
            "userInfo": {"username": self.user.user, "groups": self.user.groups},
        })
    }
}

/// Refuses `write` when a policy bound with the `Deny` action refuses it.
pub fn admit(st: &State, write: &Write<'_>) -> Result<(), ApiError> {
    for binding in st.objects_of(POLICY_BINDINGS, None) {
        let spec = &binding["spec"];
        let denies = spec["validationActions"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == "Deny"));
        let policy_name = spec["policyName"].as_str().unwrap_or_default();
        let Some(policy) = st.get_obj(POLICIES, "", policy_name) else {
            continue;
        };
        let policy_spec = &policy["spec"];
        let bound = spec.get("matchResources").is_none_or(|m| write.matched(m));
        if !denies || !bound || !write.matched(&policy_spec["matchConstraints"]) {
            continue;
        }
        let (message, reason) = match evaluate(policy_spec, write) {
            Ok(None) => continue,
            Ok(Some(refusal)) => refusal,
            Err(_) if policy_spec["failurePolicy"] == "Ignore" => continue,
            Err(error) => (error, "Invalid".to_owned()),
        };
        let binding_name = meta::name(&binding);
        let said = format!(
            "ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}' denied request: {message}"
        );
        let name = meta::name(write.object);
        let gr = &write.info.gr;
        let mut error = ApiError::forbidden(
            format!("{} \"{name}\" is forbidden: {said}", gr.qualified()),
            json!({"name": name, "group": gr.group, "kind": gr.resource, "causes": [{"message": said}]}),
        );
        error.code = match reason.as_str() {
            "Unauthorized" => 401,
            "Forbidden" => 403,
            "RequestEntityTooLarge" => 413,
            _ => 422,
        };
        error.reason = reason;
        return Err(error);
    }
    Ok(())
}

/// What a policy says of `write`: `None` when it admits it (or its match
/// conditions leave it out), else the message and reason of the first
/// failing validation; `Err` when an expression fails.
fn evaluate(spec: &Value, write: &Write<'_>) -> Result<Option<(String, String)>, String> {
    let mut ctx = Context::default().with_all();
    ctx.add_variable_from_value("object", cel(write.object));
    ctx.add_variable_from_value("oldObject", write.old.map_or(Cel::Null, cel));
    ctx.add_variable_from_value("request", cel(&write.request()));
    for condition in items(&spec["matchConditions"]) {
        if !truth(&ctx, condition)? {
            return Ok(None);
        }
    }
    let mut variables: HashMap<String, Cel> = HashMap::new();
    for variable in items(&spec["variables"]) {
        ctx.add_variable_from_value("variables", variables.clone());
        let value = run(&ctx, text(&variable["expression"]))?;
        variables.insert(text(&variable["name"]).to_owned(), value);
    }
    ctx.add_variable_from_value("variables", variables);
    for validation in items(&spec["validations"]) {
        if truth(&ctx, validation)? {
            continue;
        }
        let expression = text(&validation["expression"]);
        let message = match run(&ctx, text(&validation["messageExpression"])) {
            Ok(Cel::String(s)) if !s.trim().is_empty() => s.to_string(),
            _ => match validation["message"].as_str() {
                Some(m) => m.to_owned(),
                None => format!("failed expression: {expression}"),
            },
        };
        let reason = validation["reason"].as_str().unwrap_or("Invalid");
        return Ok(Some((message, reason.to_owned())));
    }
    Ok(None)
}

/// The expressions of a policy that do not compile, as the API server
/// refuses such a policy (kube-sim checks the syntax only, not the types).
pub fn policy_errors(policy: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (list, fields) in [
        ("matchConditions", &["expression"][..]),
        ("variables", &["expression"]),
        ("validations", &["expression", "messageExpression"]),
    ] {
        for (i, item) in items(&policy["spec"][list]).enumerate() {
            for field in fields {
                let Some(expression) = item[field].as_str() else {
                    continue;
                };
                if let Err(e) = Program::compile(expression) {
                    errs.push(FieldError::invalid(
                        &format!("spec.{list}[{i}].{field}"),
                        &item[field],
                        format!("compilation failed: {e}"),
                    ));
                }
            }
        }
    }
    errs
}

fn items(list: &Value) -> impl Iterator<Item = &Value> {
    list.as_array().into_iter().flatten()
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// Evaluates the `expression` of `item`, which must be a boolean.
fn truth(ctx: &Context<'_>, item: &Value) -> Result<bool, String> {
    let expression = text(&item["expression"]);
    match run(ctx, expression)? {
        Cel::Bool(b) => Ok(b),
        other => Err(format!(
            "expression '{expression}' resulted in error: expected a bool, got {other:?}"
        )),
    }
}

fn run(ctx: &Context<'_>, expression: &str) -> Result<Cel, String> {
    let fail = |e: String| format!("expression '{expression}' resulted in error: {e}");
    let program = Program::compile(expression).map_err(|e| fail(e.to_string()))?;
    program.execute(ctx).map_err(|e| fail(e.to_string()))
}

/// A JSON value as CEL sees an object's: numbers without a fraction are ints.
fn cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => n
            .as_i64()
            .map_or_else(|| Cel::Float(n.as_f64().unwrap_or_default()), Cel::Int),
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(cel).collect())),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), cel(v)))
            .collect::<HashMap<_, _>>()
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_maps() -> ResourceInfo {
        crate::builtin::builtin_resources()
            .into_iter()
            .find(|i| i.plural == "configmaps")
            .expect("configmaps are built in")
    }

    /// A policy on ConfigMaps: the annotation `owner` is the controllers'
    /// (a list of maps, filtered and joined as in a real policy).
    fn spec() -> Value {
        json!({
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "matchConditions": [{"name": "not-a-controller", "expression": "!request.userInfo.groups.exists(g, g in [\"controllers\"])"}],
            "variables": [
                {"name": "guarded", "expression": "[{\"key\": \"owner\", \"by\": \"the controller\"}, {\"key\": \"state\", \"by\": \"the sidecar\"}]"},
                {"name": "annotations", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
                {"name": "old", "expression": "request.operation == \"UPDATE\" && has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"},
                {"name": "changed", "expression": "variables.guarded.filter(a, (a.key in variables.annotations) != (a.key in variables.old) || (a.key in variables.annotations && variables.annotations[a.key] != variables.old[a.key]))"}
            ],
            "validations": [
                {"expression": "size(variables.changed) == 0", "reason": "Forbidden",
                 "messageExpression": "variables.changed.map(a, a.key + \" is written by \" + a.by).join(\"; \")"},
                {"expression": "object.data.size != \"0\"", "message": "size may not be 0"}
            ]
        })
    }

    fn cm(annotations: Value) -> Value {
        json!({"metadata": {"name": "c", "namespace": "ns", "annotations": annotations}, "data": {"size": "1"}})
    }

    fn judge(
        object: &Value,
        old: Option<&Value>,
        user: &Identity,
    ) -> Result<Option<(String, String)>, String> {
        let info = config_maps();
        let write = Write {
            info: &info,
            subresource: "",
            object,
            old,
            user,
            dry_run: false,
        };
        evaluate(&spec(), &write)
    }

    #[test]
    fn guarded_annotations_are_refused_on_create_and_on_change_with_the_message_expression() {
        let alice = Identity::user("alice", &[]);
        let refused = judge(
            &cm(json!({"owner": "x", "state": "y", "free": "z"})),
            None,
            &alice,
        );
        assert_eq!(
            refused,
            Ok(Some((
                "owner is written by the controller; state is written by the sidecar".into(),
                "Forbidden".into()
            )))
        );
        let stored = cm(json!({"owner": "x"}));
        assert_eq!(
            judge(
                &cm(json!({"owner": "x", "free": "1"})),
                Some(&stored),
                &alice
            ),
            Ok(None)
        );
        assert!(
            judge(&cm(json!({"owner": "y"})), Some(&stored), &alice)
                .unwrap()
                .is_some()
        );
        assert!(
            judge(&cm(json!({})), Some(&stored), &alice)
                .unwrap()
                .is_some()
        );
        let bare = json!({"metadata": {"name": "c"}, "data": {"size": "1"}});
        assert_eq!(judge(&bare, None, &alice), Ok(None));
        assert_eq!(judge(&bare, Some(&bare), &alice), Ok(None));
    }

    #[test]
    fn match_conditions_leave_out_whom_they_exempt() {
        let controller = Identity::user("c", &["controllers"]);
        assert_eq!(
            judge(&cm(json!({"owner": "x"})), None, &controller),
            Ok(None)
        );
    }

    #[test]
    fn a_static_message_and_the_default_reason_invalid() {
        let mut zero = cm(json!({}));
        zero["data"]["size"] = json!("0");
        assert_eq!(
            judge(&zero, None, &Identity::user("alice", &[])),
            Ok(Some(("size may not be 0".into(), "Invalid".into())))
        );
    }

    #[test]
    fn an_expression_that_fails_is_an_error() {
        let no_data = json!({"metadata": {"name": "c"}});
        let err = judge(&no_data, None, &Identity::user("alice", &[])).unwrap_err();
        assert!(
            err.starts_with("expression 'object.data.size != \"0\"' resulted in error"),
            "{err}"
        );
    }

    #[test]
    fn resource_rules_name_resources_and_subresources_as_the_api_server_does() {
        let info = config_maps();
        let object = cm(json!({}));
        let user = Identity::user("alice", &[]);
        let write = |subresource, old| Write {
            info: &info,
            subresource,
            object: &object,
            old,
            user: &user,
            dry_run: false,
        };
        let rules = |resources: Value, operations: Value| json!([{"apiGroups": ["*"], "apiVersions": ["*"], "operations": operations, "resources": resources}]);
        let all = json!(["*"]);
        assert!(write("", None).matched_by(&rules(json!(["configmaps"]), all.clone())));
        assert!(write("", None).matched_by(&rules(json!(["*"]), all.clone())));
        assert!(!write("status", None).matched_by(&rules(json!(["*"]), all.clone())));
        assert!(
            write("status", None).matched_by(&rules(json!(["configmaps/status"]), all.clone()))
        );
        assert!(write("status", None).matched_by(&rules(json!(["*/*"]), all.clone())));
        assert!(!write("", None).matched_by(&rules(json!(["configmaps/*"]), all.clone())));
        assert!(!write("", None).matched_by(&rules(json!(["secrets"]), all.clone())));
        assert!(!write("", None).matched_by(&rules(json!(["*"]), json!(["UPDATE"]))));
        assert!(write("", Some(&object)).matched_by(&rules(json!(["*"]), json!(["UPDATE"]))));
        let constraints = json!({"resourceRules": rules(json!(["*"]), all.clone()), "excludeResourceRules": rules(json!(["configmaps"]), all)});
        assert!(!write("", None).matched(&constraints));
    }
}
