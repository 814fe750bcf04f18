//! Authorization beyond the plain RBAC check of a request: impersonation,
//! non-resource paths, creation by apply, and the access reviews.

use super::{AppState, OpCtx, value_response};
use crate::auth::Identity;
use crate::builtin::Builtin;
use crate::meta;
use crate::rbac::{self, Attributes};
use crate::status::ApiError;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

/// Applies `Impersonate-User` / `Impersonate-Group` headers (kubectl
/// `--as`, `--as-group`), which need the `impersonate` verb on `users` and
/// `groups` (or `serviceaccounts`) unless the caller is an admin.
pub(super) fn impersonate(
    app: &AppState,
    who: Identity,
    headers: &HeaderMap,
) -> Result<Identity, ApiError> {
    let Some(user) = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(who);
    };
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect();
    let target = match user
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
    {
        Some((ns, name)) => {
            let mut id = Identity::service_account(ns, name);
            id.groups.extend(groups.iter().cloned());
            id
        }
        None => {
            let refs: Vec<&str> = groups.iter().map(String::as_str).collect();
            Identity::user(user, &refs)
        }
    };
    if app.rbac && !who.is_admin() {
        let st = app.store.lock();
        let mut checks = vec![match user
            .strip_prefix("system:serviceaccount:")
            .and_then(|r| r.split_once(':'))
        {
            Some((ns, name)) => ("serviceaccounts", name.to_string(), ns.to_string()),
            None => ("users", user.to_string(), String::new()),
        }];
        checks.extend(groups.iter().map(|g| ("groups", g.clone(), String::new())));
        for (resource, name, namespace) in checks {
            let attrs = Attributes {
                verb: "impersonate".into(),
                group: String::new(),
                resource: resource.into(),
                subresource: String::new(),
                name,
                namespace,
                path: None,
            };
            if !rbac::allowed(&st, &who, &attrs) {
                return Err(rbac::forbidden(&who, &attrs));
            }
        }
    }
    Ok(target)
}

pub(super) fn authorize_path(
    app: &AppState,
    who: &Identity,
    verb: &str,
    path: &str,
) -> Result<(), ApiError> {
    if !app.rbac {
        return Ok(());
    }
    let attrs = Attributes {
        verb: verb.into(),
        path: Some(path.into()),
        ..Attributes::default()
    };
    if rbac::allowed(&app.store.lock(), who, &attrs) {
        Ok(())
    } else {
        Err(rbac::forbidden(who, &attrs))
    }
}

impl OpCtx<'_> {
    /// An apply patch that would create the object also needs `create`,
    /// authorized with the object's name, as the real patch handler checks
    /// it: `patch` alone never creates, and, unlike a POST (whose request
    /// names no object), this create does match a rule's resourceNames.
    pub(super) fn authorize_create_by_apply(
        &self,
        st: &crate::store::State,
    ) -> Result<(), ApiError> {
        if !self.app.rbac
            || st
                .get_obj(&self.info.storage, self.namespace, self.name())
                .is_some()
        {
            return Ok(());
        }
        let attrs = Attributes {
            verb: "create".into(),
            group: self.info.group.clone(),
            resource: self.info.plural.clone(),
            subresource: String::new(),
            name: self.name().to_owned(),
            namespace: self.namespace.to_owned(),
            path: None,
        };
        if rbac::allowed(st, self.who, &attrs) {
            Ok(())
        } else {
            Err(rbac::forbidden(self.who, &attrs))
        }
    }

    pub(super) fn review(&self, mut obj: Value) -> Result<Response, ApiError> {
        let spec = obj.get("spec").cloned().unwrap_or(json!({}));
        let subject = if self.info.builtin == Some(Builtin::SubjectAccessReview) {
            let user = spec
                .get("user")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let groups = meta::strings(spec.get("groups"));
            Identity { user, groups }
        } else {
            self.who.clone()
        };
        let attrs = if let Some(ra) = spec.get("resourceAttributes") {
            let s = |k: &str| ra.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            Attributes {
                verb: s("verb"),
                group: s("group"),
                resource: s("resource"),
                subresource: s("subresource"),
                name: s("name"),
                namespace: s("namespace"),
                path: None,
            }
        } else if let Some(na) = spec.get("nonResourceAttributes") {
            Attributes {
                verb: na.get("verb").and_then(Value::as_str).unwrap_or("").into(),
                path: Some(na.get("path").and_then(Value::as_str).unwrap_or("").into()),
                ..Attributes::default()
            }
        } else {
            return Err(ApiError::bad_request(
                "one of resourceAttributes or nonResourceAttributes is required",
            ));
        };
        let allowed = !self.app.rbac || rbac::allowed(&self.app.store.lock(), &subject, &attrs);
        obj["status"] = if allowed {
            json!({"allowed": true, "reason": "allowed by RBAC"})
        } else {
            json!({"allowed": false})
        };
        obj["apiVersion"] = json!(self.info.api_version());
        obj["kind"] = json!(self.info.kind);
        Ok(value_response(201, &obj))
    }
}
