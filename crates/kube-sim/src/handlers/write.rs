//! The writing operations: create, update, patch, delete, delete of a
//! collection, and the service-account token request.

use super::{OpCtx, parse_body, value_response};
use crate::builtin;
use crate::meta;
use crate::patch::PatchType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::write::{DeleteOptions, Propagation};
use axum::response::Response;
use serde_json::{Value, json};

impl OpCtx<'_> {
    pub(super) fn create(&self, body: &[u8]) -> Result<Response, ApiError> {
        let obj = parse_body(body)?;
        if self.info.create_only {
            return self.review(obj);
        }
        let result = {
            let mut st = self.app.store.lock();
            st.create(&self.info, self.namespace, obj, &self.opts)
        };
        self.app.store.notify_if_pending();
        let r = result?;
        Ok(self.written_response(201, &r))
    }

    pub(super) fn update(&self, body: &[u8], status: bool) -> Result<Response, ApiError> {
        let obj = parse_body(body)?;
        let result = {
            let mut st = self.app.store.lock();
            st.update(
                &self.info,
                self.namespace,
                self.name(),
                obj,
                status,
                &self.opts,
            )
        };
        self.app.store.notify_if_pending();
        let r = result?;
        Ok(self.written_response(200, &r))
    }

    pub(super) fn patch(
        &self,
        body: &[u8],
        content_type: &str,
        status: bool,
    ) -> Result<Response, ApiError> {
        let ptype = PatchType::from_content_type(content_type).ok_or_else(|| {
            ApiError::unsupported_patch(&[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
                "application/apply-patch+yaml",
            ])
        })?;
        if ptype != PatchType::Apply && self.opts.force {
            return Err(ApiError::bad_request(
                "force may only be set for apply patches",
            ));
        }
        let result = {
            let mut st = self.app.store.lock();
            if ptype == PatchType::Apply && !status {
                self.authorize_create_by_apply(&st)?;
            }
            st.patch(
                &self.info,
                self.namespace,
                self.name(),
                ptype,
                body,
                status,
                &self.opts,
            )
        };
        self.app.store.notify_if_pending();
        let r = result?;
        Ok(self.written_response(if r.created { 201 } else { 200 }, &r))
    }

    pub(super) fn delete_options(&self, body: &[u8]) -> Result<DeleteOptions, ApiError> {
        let v: Value = if body.is_empty() {
            json!({})
        } else {
            serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
        };
        let policy = v
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from)
            .or_else(|| self.query.get("propagationPolicy").cloned());
        let propagation = match policy.as_deref() {
            Some("Foreground") => Some(Propagation::Foreground),
            Some("Background") => Some(Propagation::Background),
            Some("Orphan") => Some(Propagation::Orphan),
            Some(other) => {
                return Err(ApiError::invalid(
                    "DeleteOptions",
                    "meta.k8s.io",
                    "",
                    &[crate::status::FieldError::new(
                        crate::status::FieldErrorKind::NotSupported,
                        "propagationPolicy",
                        Some(format!("{other:?}")),
                        "supported values: \"Foreground\", \"Background\", \"Orphan\"",
                    )],
                ));
            }
            None => match v.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => Some(Propagation::Orphan),
                Some(false) => Some(Propagation::Background),
                None => None,
            },
        };
        let dry_run = self.opts.dry_run
            || v.get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|x| x == "All"));
        Ok(DeleteOptions {
            uid: v
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(String::from),
            resource_version: v
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from),
            propagation,
            dry_run,
        })
    }

    pub(super) fn delete(&self, body: &[u8]) -> Result<Response, ApiError> {
        let dopts = self.delete_options(body)?;
        let result = {
            let mut st = self.app.store.lock();
            st.delete(&self.info, self.namespace, self.name(), &dopts)
        };
        self.app.store.notify_if_pending();
        let r = result?;
        // Gone at once: a Status, as for every kind kube-sim serves (the API
        // server returns the object only for a few kinds of resource.k8s.io).
        if r.deleted {
            let mut details =
                json!({"name": self.name(), "kind": self.info.plural, "uid": meta::uid(&r.object)});
            if !self.info.group.is_empty() {
                details["group"] = json!(self.info.group);
            }
            let status = json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": details,
            });
            return Ok(value_response(200, &status));
        }
        Ok(self.object_response(200, &r.object, &[]))
    }

    pub(super) fn delete_collection(
        &self,
        body: &[u8],
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> Result<Response, ApiError> {
        let dopts = self.delete_options(body)?;
        let list = self.list_options(labels, fields)?;
        let result = {
            let mut st = self.app.store.lock();
            st.delete_collection(&self.info, self.rp.namespace.as_deref(), &list, &dopts)
        };
        self.app.store.notify_if_pending();
        let items: Vec<Value> = result?
            .iter()
            .map(|o| builtin::to_view(&self.info, o))
            .collect();
        let rv = self.app.store.lock().rv.to_string();
        let mut metadata = json!({"resourceVersion": rv});
        if self.info.is_custom() {
            // A custom resource list (unstructured) says it has no more.
            metadata["continue"] = json!("");
        }
        Ok(value_response(
            200,
            &json!({"apiVersion": self.info.api_version(), "kind": self.info.list_kind, "metadata": metadata, "items": items}),
        ))
    }

    pub(super) fn token_request(&self, body: &[u8]) -> Result<Response, ApiError> {
        let req: Value = if body.is_empty() {
            json!({})
        } else {
            parse_body(body)?
        };
        self.app
            .store
            .get(&self.info, self.namespace, self.name())?;
        let token = self
            .app
            .auth
            .service_account_token(self.namespace, self.name());
        let seconds = req
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(3600);
        let mut spec = req.get("spec").cloned().unwrap_or(json!({}));
        spec["expirationSeconds"] = json!(seconds);
        if spec.get("audiences").is_none() {
            spec["audiences"] = json!(["https://kubernetes.default.svc"]);
        }
        let out = json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": self.name(), "namespace": self.namespace, "creationTimestamp": meta::now_rfc3339()},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": meta::format_rfc3339(meta::now_secs() + seconds)},
        });
        Ok(value_response(201, &out))
    }
}
