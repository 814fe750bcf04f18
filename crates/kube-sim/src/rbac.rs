//! RBAC authorization over the stored Role, ClusterRole, RoleBinding and
//! ClusterRoleBinding objects: verbs (with `*`), API groups, resources with
//! subresources (`buckets/status`, `*`, `*/status`), resourceNames and
//! non-resource URLs, ClusterRoles aggregated by label (`aggregationRule`,
//! as the built-in view, edit and admin are), with the forbidden messages
//! the real authorizer gives.

use crate::auth::Identity;
use crate::meta;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::State;
use serde_json::{Value, json};

/// What a request wants to do.
#[derive(Debug, Clone, Default)]
pub struct Attributes {
    /// Verb (`get`, `list`, `watch`, `create`, ...).
    pub verb: String,
    /// API group.
    pub group: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource (`status`), or "".
    pub subresource: String,
    /// Object name, or "".
    pub name: String,
    /// Namespace, or "" for cluster scope.
    pub namespace: String,
    /// For non-resource requests, the path.
    pub path: Option<String>,
}

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn subject_matches(subject: &Value, who: &Identity, binding_ns: &str) -> bool {
    let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
    match kind {
        "User" => name == who.user,
        "Group" => who.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = subject
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or(binding_ns);
            who.user == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

/// Whether one policy rule allows the request.
pub fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    let verbs = strs(rule.get("verbs"));
    if !verbs.iter().any(|v| *v == "*" || *v == attrs.verb) {
        return false;
    }
    if let Some(path) = &attrs.path {
        return strs(rule.get("nonResourceURLs")).iter().any(|u| {
            *u == "*"
                || *u == path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix))
        });
    }
    let groups = strs(rule.get("apiGroups"));
    if !groups.iter().any(|g| *g == "*" || *g == attrs.group) {
        return false;
    }
    let resources = strs(rule.get("resources"));
    let combined = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let resource_ok = resources.iter().any(|r| {
        *r == "*"
            || *r == combined
            || (!attrs.subresource.is_empty() && *r == format!("*/{}", attrs.subresource))
            || (attrs.subresource.is_empty()
                && r.strip_suffix("/*") == Some(attrs.resource.as_str()))
    });
    if !resource_ok {
        return false;
    }
    let names = strs(rule.get("resourceNames"));
    names.is_empty() || (!attrs.name.is_empty() && names.contains(&attrs.name.as_str()))
}

/// The name a list or watch is authorized with: the one its field selector
/// pins `metadata.name` to, when that is a valid path segment, as the real
/// request-info resolver takes it. Without one, no resourceNames rule
/// matches the request; other verbs on a collection (create,
/// deletecollection) never carry a name.
pub fn listed_name(fields: &FieldSelector) -> Option<&str> {
    fields
        .pinned_name()
        .filter(|n| !matches!(*n, "." | "..") && !n.contains(['/', '%']))
}

const CLUSTER_ROLES: &str = "clusterroles.rbac.authorization.k8s.io";

/// Whether a rule of the role a binding names allows the request.
fn role_allows(st: &State, kind: &str, name: &str, binding_ns: &str, attrs: &Attributes) -> bool {
    let role = match kind {
        "ClusterRole" => st.get_obj(CLUSTER_ROLES, "", name),
        "Role" => st.get_obj("roles.rbac.authorization.k8s.io", binding_ns, name),
        _ => None,
    };
    let Some(role) = role else {
        return false;
    };
    let own = |r: &Value| array(r.get("rules")).iter().any(|r| rule_allows(r, attrs));
    match role.pointer("/aggregationRule/clusterRoleSelectors") {
        None => own(&role),
        // The rules the clusterrole-aggregation controller would copy in:
        // those of every other ClusterRole a selector picks.
        Some(selectors) => st.objects_of(CLUSTER_ROLES, None).iter().any(|picked| {
            meta::name(picked) != meta::name(&role)
                && selects_any(selectors, meta::labels(picked))
                && own(picked)
        }),
    }
}

/// The items of an optional JSON array (none when it is not one).
fn array(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// Whether one of the LabelSelectors `selectors` matches `labels`.
fn selects_any(selectors: &Value, labels: Option<&serde_json::Map<String, Value>>) -> bool {
    array(Some(selectors)).iter().any(|s| {
        let mut terms: Vec<String> = s["matchLabels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        for e in array(s.get("matchExpressions")) {
            let key = e["key"].as_str().unwrap_or_default();
            let values = strs(e.get("values")).join(",");
            terms.push(match e["operator"].as_str().unwrap_or_default() {
                "In" => format!("{key} in ({values})"),
                "NotIn" => format!("{key} notin ({values})"),
                "DoesNotExist" => format!("!{key}"),
                _ => key.to_owned(),
            });
        }
        LabelSelector::parse(&terms.join(",")).is_ok_and(|sel| sel.matches(labels))
    })
}

/// Whether RBAC grants the request.
pub fn allowed(st: &State, who: &Identity, attrs: &Attributes) -> bool {
    if who.is_admin() {
        return true;
    }
    let check = |binding: &Value, ns: &str| -> bool {
        let subjects = binding.get("subjects").and_then(Value::as_array);
        if !subjects.is_some_and(|s| s.iter().any(|s| subject_matches(s, who, ns))) {
            return false;
        }
        let role_ref = &binding["roleRef"];
        let kind = role_ref.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = role_ref.get("name").and_then(Value::as_str).unwrap_or("");
        role_allows(st, kind, name, ns, attrs)
    };
    for b in st.objects_of("clusterrolebindings.rbac.authorization.k8s.io", None) {
        if check(&b, "") {
            return true;
        }
    }
    if !attrs.namespace.is_empty() && attrs.path.is_none() {
        for b in st.objects_of(
            "rolebindings.rbac.authorization.k8s.io",
            Some(&attrs.namespace),
        ) {
            if check(&b, &attrs.namespace) {
                return true;
            }
        }
    }
    // Discovery and version information are open to everyone, as the
    // system:discovery and system:public-info-viewer roles make them.
    if let Some(path) = &attrs.path
        && attrs.verb == "get"
        && (path == "/version"
            || path == "/api"
            || path == "/apis"
            || path.starts_with("/api/")
            || path.starts_with("/apis/")
            || path.starts_with("/openapi")
            || path == "/healthz"
            || path == "/livez"
            || path == "/readyz")
    {
        return true;
    }
    false
}

/// The 403 the real authorizer returns.
pub fn forbidden(who: &Identity, attrs: &Attributes) -> ApiError {
    let reason = match &attrs.path {
        Some(path) => format!("User {:?} cannot {} path {:?}", who.user, attrs.verb, path),
        None => {
            let resource = if attrs.subresource.is_empty() {
                attrs.resource.clone()
            } else {
                format!("{}/{}", attrs.resource, attrs.subresource)
            };
            if attrs.namespace.is_empty() {
                format!(
                    "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
                    who.user, attrs.verb, resource, attrs.group
                )
            } else {
                format!(
                    "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
                    who.user, attrs.verb, resource, attrs.group, attrs.namespace
                )
            }
        }
    };
    let qualified = if attrs.path.is_some() {
        String::new()
    } else if attrs.group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.group)
    };
    let message = if qualified.is_empty() {
        format!("forbidden: {reason}")
    } else if attrs.name.is_empty() {
        format!("{qualified} is forbidden: {reason}")
    } else {
        format!("{qualified} {:?} is forbidden: {reason}", attrs.name)
    };
    ApiError::forbidden(
        message,
        json!({"name": attrs.name, "group": attrs.group, "kind": attrs.resource}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(
        verb: &str,
        group: &str,
        resource: &str,
        sub: &str,
        name: &str,
        ns: &str,
    ) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            namespace: ns.into(),
            path: None,
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_and_names() {
        let rule = json!({"apiGroups": ["example.com"], "resources": ["widgets", "widgets/status"], "verbs": ["get", "update"]});
        let star = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        let named = json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s1"], "verbs": ["get"]});
        let sub_star = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["update"]});
        let cases = [
            (
                &rule,
                ["get", "example.com", "widgets", "", "w", "ns"],
                true,
            ),
            (
                &rule,
                ["update", "example.com", "widgets", "status", "w", "ns"],
                true,
            ),
            (
                &rule,
                ["delete", "example.com", "widgets", "", "w", "ns"],
                false,
            ),
            (&rule, ["get", "other.com", "widgets", "", "w", "ns"], false),
            (
                &rule,
                ["get", "example.com", "gadgets", "", "w", "ns"],
                false,
            ),
            (&star, ["patch", "x", "y", "status", "", ""], true),
            (&named, ["get", "", "secrets", "", "s1", "ns"], true),
            (&named, ["get", "", "secrets", "", "s2", "ns"], false),
            (&named, ["get", "", "secrets", "", "", "ns"], false),
            (&sub_star, ["update", "a", "b", "status", "n", ""], true),
            (&sub_star, ["update", "a", "b", "", "n", ""], false),
        ];
        for (rule, [verb, group, resource, sub, name, ns], allowed) in cases {
            let request = attrs(verb, group, resource, sub, name, ns);
            assert_eq!(rule_allows(rule, &request), allowed, "{rule} {request:?}");
        }
    }

    #[test]
    fn only_a_field_selected_valid_name_names_a_list() {
        let name = |s: &str| {
            let fields = FieldSelector::parse(s).unwrap();
            listed_name(&fields).map(str::to_owned)
        };
        assert_eq!(name("metadata.name=a"), Some("a".into()));
        assert_eq!(
            name("metadata.namespace=ns,metadata.name==a"),
            Some("a".into())
        );
        assert_eq!(name(""), None);
        assert_eq!(name("metadata.name!=a"), None);
        assert_eq!(name("spec.holder=a"), None);
        assert_eq!(name("metadata.name=.."), None);
        assert_eq!(name("metadata.name=a%2Fb"), None);
    }

    #[test]
    fn forbidden_messages_match_the_real_authorizer() {
        let who = Identity::user("bob", &[]);
        let e = forbidden(
            &who,
            &attrs("delete", "example.com", "widgets", "", "w1", "ns1"),
        );
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "widgets.example.com \"w1\" is forbidden: User \"bob\" cannot delete resource \"widgets\" in API group \"example.com\" in the namespace \"ns1\""
        );
        let e = forbidden(&who, &attrs("list", "", "secrets", "", "", ""));
        assert_eq!(
            e.message,
            "secrets is forbidden: User \"bob\" cannot list resource \"secrets\" in API group \"\" at the cluster scope"
        );
    }
}
