//! The reading operations (get, list, watch) and how objects are rendered
//! in responses.

use super::{OpCtx, Render, json_response, value_response};
use crate::builtin;
use crate::meta;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::ListOptions;
use crate::store::write::WriteResult;
use crate::table;
use crate::watch::{self, WatchContext, WatchParams};
use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

impl OpCtx<'_> {
    /// The response of a write: the stored object, encoded once for the
    /// response and the watchers alike.
    pub(super) fn written_response(&self, code: u16, r: &WriteResult) -> Response {
        match &r.event {
            Some(ev) if self.render == Render::Full && builtin::view_is_identity(&self.info) => {
                json_response(code, ev.encoded().clone(), &r.warnings)
            }
            _ => self.object_response(code, &r.object, &r.warnings),
        }
    }

    pub(super) fn object_response(
        &self,
        code: u16,
        obj: &Arc<Value>,
        warnings: &[String],
    ) -> Response {
        let bytes = match self.render {
            Render::Table(include) => serde_json::to_vec(&table::to_table(
                &self.info,
                std::slice::from_ref(obj),
                Some(meta::resource_version(obj).to_string()),
                None,
                include,
            )),
            Render::Partial => {
                serde_json::to_vec(&table::partial_metadata(&builtin::to_view(&self.info, obj)))
            }
            Render::Full if builtin::view_is_identity(&self.info) => serde_json::to_vec(&**obj),
            Render::Full => serde_json::to_vec(&builtin::to_view(&self.info, obj)),
        };
        json_response(code, bytes.unwrap_or_default(), warnings)
    }

    pub(super) fn list_options(
        &self,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> Result<ListOptions, ApiError> {
        let limit = match self.query.get("limit").filter(|s| !s.is_empty()) {
            Some(s) => s
                .parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {s:?}")))?
                .max(0) as usize,
            None => 0,
        };
        Ok(ListOptions {
            labels,
            fields,
            limit,
            continue_token: self
                .query
                .get("continue")
                .filter(|s| !s.is_empty())
                .cloned(),
            resource_version: self.query.get("resourceVersion").cloned(),
            resource_version_match: self.query.get("resourceVersionMatch").cloned(),
        })
    }

    pub(super) fn list(
        &self,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> Result<Response, ApiError> {
        let opts = self.list_options(labels, fields)?;
        let ns = self.rp.namespace.as_deref();
        let result = self.app.store.list(&self.info, ns, &opts)?;
        let rv = result.resource_version.to_string();
        if let Render::Table(include) = self.render {
            let mut t = table::to_table(
                &self.info,
                &result.items,
                Some(rv),
                result.continue_token,
                include,
            );
            if let Some(n) = result.remaining {
                t["metadata"]["remainingItemCount"] = json!(n);
            }
            return Ok(value_response(200, &t));
        }
        let mut metadata = json!({"resourceVersion": rv});
        if let Some(c) = &result.continue_token {
            metadata["continue"] = json!(c);
        } else if self.info.is_custom() && self.render != Render::Partial {
            // A custom resource list (unstructured) says it has no more.
            metadata["continue"] = json!("");
        }
        if let Some(n) = result.remaining {
            metadata["remainingItemCount"] = json!(n);
        }
        let (kind, api_version) = if self.render == Render::Partial {
            (
                "PartialObjectMetadataList".to_string(),
                "meta.k8s.io/v1".to_string(),
            )
        } else {
            (self.info.list_kind.clone(), self.info.api_version())
        };
        let mut out = Vec::with_capacity(256 + result.items.len() * 512);
        out.extend_from_slice(b"{\"apiVersion\":");
        out.extend_from_slice(&serde_json::to_vec(&api_version).unwrap_or_default());
        out.extend_from_slice(b",\"kind\":");
        out.extend_from_slice(&serde_json::to_vec(&kind).unwrap_or_default());
        out.extend_from_slice(b",\"metadata\":");
        out.extend_from_slice(&serde_json::to_vec(&metadata).unwrap_or_default());
        out.extend_from_slice(b",\"items\":[");
        let identity = builtin::view_is_identity(&self.info);
        for (i, item) in result.items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let r = match self.render {
                Render::Partial => serde_json::to_writer(&mut out, &table::partial_metadata(item)),
                _ if identity => serde_json::to_writer(&mut out, &**item),
                _ => serde_json::to_writer(&mut out, &builtin::to_view(&self.info, item)),
            };
            r.map_err(|e| ApiError::internal(e.to_string()))?;
        }
        out.extend_from_slice(b"]}");
        Ok(json_response(200, out, &[]))
    }

    pub(super) fn watch(
        &self,
        labels: LabelSelector,
        mut fields: FieldSelector,
    ) -> Result<Response, ApiError> {
        if let Some(name) = &self.rp.name {
            fields.0.push(crate::selector::FieldReq {
                path: "metadata.name".into(),
                value: name.clone(),
                negate: false,
            });
        }
        let timeout = self
            .query
            .get("timeoutSeconds")
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|s| *s > 0)
            .map(Duration::from_secs);
        let params = WatchParams {
            labels,
            fields,
            resource_version: self.query.get("resourceVersion").cloned(),
            send_initial_events: self
                .query
                .get("sendInitialEvents")
                .is_some_and(|v| v == "true"),
            bookmarks: self
                .query
                .get("allowWatchBookmarks")
                .is_some_and(|v| v == "true"),
            timeout,
            table: match self.render {
                Render::Table(include) => Some(include),
                _ => None,
            },
        };
        let ctx = WatchContext {
            store: self.app.store.clone(),
            faults: self.app.faults.clone(),
            bookmark_interval: self.app.bookmark_interval,
            shutdown: self.app.shutdown.clone(),
        };
        let stream = watch::start(ctx, self.info.clone(), self.rp.namespace.clone(), params)?;
        let mut resp = Response::new(Body::from_stream(stream));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        resp.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        );
        Ok(resp)
    }

    pub(super) fn get(&self) -> Result<Response, ApiError> {
        let obj = self
            .app
            .store
            .get(&self.info, self.namespace, self.name())?;
        Ok(self.object_response(200, &obj, &[]))
    }
}
