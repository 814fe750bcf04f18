//! The HTTP face of kube-sim: one axum fallback handler that parses
//! Kubernetes REST paths (`/api/v1/...`, `/apis/<g>/<v>/...`, namespaced or
//! not, with subresources), authenticates, counts, injects faults,
//! authorizes, runs the operation on the store and renders the answer as
//! JSON, a Table, PartialObjectMetadata or a watch stream; plus discovery,
//! OpenAPI and health endpoints.
//!
//! Reading the request lives in `request`, authorization beyond the plain
//! RBAC check in `access`, and the operations in `read` and `write`.

mod access;
mod read;
mod request;
mod write;

use access::{authorize_path, impersonate};
pub use request::parse_query;
use request::{check_field_selector, parse_path, render_mode, verb_for, write_options};

use crate::auth::{Authenticator, Identity};
use crate::builtin::Builtin;
use crate::counters::Recorder;
use crate::discovery;
use crate::faults::Faults;
use crate::openapi;
use crate::rbac::{self, Attributes};
use crate::resource::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::Store;
use crate::store::write::WriteOptions;
use crate::table::IncludeObject;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch as tokio_watch;

/// Largest request body accepted (the real server's limit is 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// Everything the handler needs.
pub struct AppState {
    /// The store.
    pub store: Arc<Store>,
    /// Token table.
    pub auth: Arc<Authenticator>,
    /// Request counters.
    pub counters: Arc<Recorder>,
    /// Fault injection.
    pub faults: Faults,
    /// Whether RBAC is enforced.
    pub rbac: bool,
    /// Period of watch bookmarks.
    pub bookmark_interval: Duration,
    /// Flips to true on shutdown.
    pub shutdown: tokio_watch::Receiver<bool>,
    /// `host:port` the server listens on.
    pub address: String,
}

/// One listening port: the shared state plus the identity that requests
/// without credentials get on this port (None: `system:anonymous`).
struct Listener {
    app: Arc<AppState>,
    default_identity: Option<Identity>,
}

/// The router of the main port.
pub fn router(state: Arc<AppState>) -> axum::Router {
    router_as(state, None)
}

/// The router of a port whose requests without credentials act as
/// `identity` (kubectl sends no credentials over plain HTTP).
pub fn router_as(state: Arc<AppState>, identity: Option<Identity>) -> axum::Router {
    let listener = Arc::new(Listener {
        app: state,
        default_identity: identity,
    });
    axum::Router::new().fallback(handle).with_state(listener)
}

fn json_response(code: u16, body: impl Into<Body>, warnings: &[String]) -> Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

fn value_response(code: u16, v: &Value) -> Response {
    json_response(code, serde_json::to_vec(v).unwrap_or_default(), &[])
}

fn error_response(err: &ApiError) -> Response {
    let mut resp = value_response(err.code, &err.to_status());
    if let Some(secs) = err.retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// How the client wants objects rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Render {
    Full,
    Table(IncludeObject),
    Partial,
}

/// A parsed resource path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ResourcePath {
    group: String,
    version: String,
    namespace: Option<String>,
    plural: String,
    name: Option<String>,
    subresource: Option<String>,
}

enum Route {
    NonResource(String),
    Discovery { group: String, version: String },
    Resource(ResourcePath),
}

async fn handle(State(listener): State<Arc<Listener>>, req: Request) -> Response {
    match handle_inner(listener, req).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

async fn read_body(body: Body) -> Result<bytes::Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_BODY).await.map_err(|e| {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("request body too large or unreadable: {e}"),
        )
    })
}

async fn handle_inner(listener: Arc<Listener>, req: Request) -> Result<Response, ApiError> {
    let app = listener.app.clone();
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = parse_query(parts.uri.query());
    let auth_header = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let who = match (auth_header, &listener.default_identity) {
        (None, Some(identity)) => identity.clone(),
        _ => app.auth.authenticate(auth_header)?,
    };
    let who = impersonate(&app, who, &parts.headers)?;
    let route = parse_path(&app.store, &path)?;
    let rp = match route {
        Route::NonResource(p) => return non_resource(&app, &who, &parts.method, &p),
        Route::Discovery { group, version } => {
            authorize_path(&app, &who, "get", &path)?;
            let st = app.store.lock();
            return discovery::resource_list(&st.registry, &group, &version)
                .map(|v| value_response(200, &v))
                .ok_or_else(ApiError::no_route);
        }
        Route::Resource(rp) => rp,
    };
    let info = app
        .store
        .lock()
        .registry
        .get(&rp.group, &rp.version, &rp.plural)
        .ok_or_else(ApiError::no_route)?;
    let verb = verb_for(&parts.method, &rp, &query).ok_or_else(ApiError::method_not_allowed)?;
    let sub = rp.subresource.clone().unwrap_or_default();
    let counted_resource = if sub.is_empty() {
        info.plural.clone()
    } else {
        format!("{}/{sub}", info.plural)
    };
    app.counters.record(verb, &counted_resource, &who.user);
    let decision = app.faults.decide(verb, &counted_resource, &who.user);
    if let Some(d) = decision.delay {
        tokio::time::sleep(d).await;
    }
    if let Some(e) = decision.error {
        return Err(e);
    }
    let fields = FieldSelector::parse(query.get("fieldSelector").map(String::as_str).unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let labels = LabelSelector::parse(query.get("labelSelector").map(String::as_str).unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let namespace = rp.namespace.clone().unwrap_or_default();
    if app.rbac {
        let attrs = Attributes {
            verb: verb.into(),
            group: if sub == "token" && info.builtin == Some(Builtin::ServiceAccount) {
                String::new()
            } else {
                info.group.clone()
            },
            resource: info.plural.clone(),
            subresource: sub.clone(),
            name: rp
                .name
                .clone()
                .or_else(|| {
                    matches!(verb, "list" | "watch")
                        .then(|| rbac::listed_name(&fields).map(String::from))
                        .flatten()
                })
                .unwrap_or_default(),
            // A namespace is authorized within itself, as the API server
            // does: a Role in namespace X may grant get on namespace X.
            namespace: match (&info.builtin, &rp.name) {
                (Some(Builtin::Namespace), Some(name)) => name.clone(),
                _ => namespace.clone(),
            },
            path: None,
        };
        let allowed = rbac::allowed(&app.store.lock(), &who, &attrs);
        if !allowed {
            return Err(rbac::forbidden(&who, &attrs));
        }
    }
    if info.namespaced && rp.namespace.is_none() && !matches!(verb, "list" | "watch") {
        return Err(ApiError::no_route());
    }
    if !info.namespaced && rp.namespace.is_some() {
        return Err(ApiError::no_route());
    }
    check_field_selector(&info, &fields)?;
    let render = render_mode(&parts.headers, &query);
    let user_agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let is_apply = verb == "patch" && content_type.starts_with("application/apply-patch");
    let mut opts = write_options(&query, user_agent, is_apply)?;
    opts.user = Some(who.clone());
    let body = read_body(body).await?;
    let body = if !body.is_empty() && content_type.contains("protobuf") {
        let decoded = crate::protobuf::decode(&body).map_err(|e| {
            ApiError::new(
                415,
                "UnsupportedMediaType",
                format!("cannot decode the protobuf body: {e}"),
            )
        })?;
        bytes::Bytes::from(
            serde_json::to_vec(&decoded).map_err(|e| ApiError::internal(e.to_string()))?,
        )
    } else {
        body
    };
    let ctx = OpCtx {
        app: &app,
        info,
        rp: &rp,
        namespace: &namespace,
        query: &query,
        render,
        opts,
        who: &who,
    };
    match (verb, sub.as_str()) {
        ("list", "") => ctx.list(labels, fields),
        ("watch", "") => ctx.watch(labels, fields),
        ("get", "" | "status") => ctx.get(),
        ("create", "") => ctx.create(&body),
        ("create", "token") if ctx.info.builtin == Some(Builtin::ServiceAccount) => {
            ctx.token_request(&body)
        }
        ("update", "" | "status") => ctx.update(&body, sub == "status"),
        ("patch", "" | "status") => ctx.patch(&body, &content_type, sub == "status"),
        ("delete", "") => ctx.delete(&body),
        ("deletecollection", "") => ctx.delete_collection(&body, labels, fields),
        (_, s) if !(s.is_empty() || s == "status" && ctx.info.status_subresource) => {
            Err(ApiError::no_route())
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn non_resource(
    app: &AppState,
    who: &Identity,
    method: &Method,
    path: &str,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::method_not_allowed());
    }
    authorize_path(app, who, "get", path)?;
    let st = app.store.lock();
    let v = match path.trim_end_matches('/') {
        "/version" => discovery::version(),
        "/healthz" | "/livez" | "/readyz" => {
            let mut r = Response::new(Body::from("ok"));
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            return Ok(r);
        }
        "/api" => discovery::core_versions(&app.address),
        "/apis" => discovery::group_list(&st.registry),
        "/openapi/v3" => openapi::v3_root(&st.registry),
        "/openapi/v2" => openapi::v2_document(&st.registry),
        p => {
            if let Some(rest) = p.strip_prefix("/openapi/v3/") {
                let segs: Vec<&str> = rest.split('/').collect();
                let doc = match segs.as_slice() {
                    ["api", v] => openapi::v3_document(&st.registry, "", v),
                    ["apis", g, v] => openapi::v3_document(&st.registry, g, v),
                    _ => None,
                };
                doc.ok_or_else(ApiError::no_route)?
            } else if let Some(g) = p.strip_prefix("/apis/") {
                discovery::group(&st.registry, g).ok_or_else(ApiError::no_route)?
            } else {
                return Err(ApiError::no_route());
            }
        }
    };
    Ok(value_response(200, &v))
}

struct OpCtx<'a> {
    app: &'a AppState,
    info: Arc<ResourceInfo>,
    rp: &'a ResourcePath,
    namespace: &'a str,
    query: &'a HashMap<String, String>,
    render: Render,
    opts: WriteOptions,
    who: &'a Identity,
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    crate::patch::parse_yaml(body)
}

impl OpCtx<'_> {
    fn name(&self) -> &str {
        self.rp.name.as_deref().unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_responses_carry_retry_after() {
        let mut e = ApiError::new(429, "TooManyRequests", "slow down");
        e.retry_after = Some(3);
        let r = error_response(&e);
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "3");
    }
}
