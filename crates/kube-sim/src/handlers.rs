//! The HTTP face of kube-sim: one axum fallback handler that parses
//! Kubernetes REST paths (`/api/v1/...`, `/apis/<g>/<v>/...`, namespaced or
//! not, with subresources), authenticates, counts, injects faults,
//! authorizes, runs the operation on the store and renders the answer as
//! JSON, a Table, PartialObjectMetadata or a watch stream; plus discovery,
//! OpenAPI and health endpoints.

use crate::auth::{Authenticator, Identity};
use crate::builtin::{self, Builtin};
use crate::counters::Recorder;
use crate::discovery;
use crate::faults::Faults;
use crate::meta;
use crate::openapi;
use crate::patch::PatchType;
use crate::rbac::{self, Attributes};
use crate::resource::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::write::{DeleteOptions, FieldValidation, Propagation, WriteOptions, WriteResult};
use crate::store::{ListOptions, Store};
use crate::table::{self, IncludeObject};
use crate::watch::{self, WatchContext, WatchParams};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
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

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string into a map (last value wins).
pub fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
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

fn render_mode(headers: &HeaderMap, query: &HashMap<String, String>) -> Render {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let first = accept.split(',').next().unwrap_or("");
    if first.contains("as=Table") {
        Render::Table(IncludeObject::parse(
            query.get("includeObject").map(String::as_str),
        ))
    } else if first.contains("as=PartialObjectMetadata") {
        Render::Partial
    } else {
        Render::Full
    }
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

fn parse_path(store: &Store, path: &str) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => (String::new(), "v1".to_string(), rest),
        ["apis", g, v, rest @ ..] => (g.to_string(), v.to_string(), rest),
        _ => return Ok(Route::NonResource(path.to_string())),
    };
    if rest.is_empty() {
        return Ok(Route::Discovery { group, version });
    }
    let namespaced_path = rest.len() >= 3
        && rest[0] == "namespaces"
        && store
            .lock()
            .registry
            .is_namespaced(&group, &version, rest[2]);
    let (namespace, rest) = if namespaced_path {
        (Some(percent_decode(rest[1])), &rest[2..])
    } else {
        (None, rest)
    };
    if rest.len() > 3 {
        return Err(ApiError::no_route());
    }
    Ok(Route::Resource(ResourcePath {
        group,
        version,
        namespace,
        plural: rest[0].to_string(),
        name: rest.get(1).map(|s| percent_decode(s)),
        subresource: rest.get(2).map(|s| s.to_string()),
    }))
}

fn verb_for(
    method: &Method,
    rp: &ResourcePath,
    query: &HashMap<String, String>,
) -> Option<&'static str> {
    let watching = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    Some(match (method.as_str(), rp.name.is_some()) {
        ("GET", false) if watching => "watch",
        ("GET", false) => "list",
        ("GET", true) if watching => "watch",
        ("GET", true) => "get",
        ("POST", false) => "create",
        ("POST", true) if rp.subresource.is_some() => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    })
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
            namespace: namespace.clone(),
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
    let opts = write_options(&query, user_agent)?;
    let body = read_body(body).await?;
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
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

/// Applies `Impersonate-User` / `Impersonate-Group` headers (kubectl
/// `--as`, `--as-group`), which need the `impersonate` verb on `users` and
/// `groups` (or `serviceaccounts`) unless the caller is an admin.
fn impersonate(app: &AppState, who: Identity, headers: &HeaderMap) -> Result<Identity, ApiError> {
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

fn check_field_selector(info: &ResourceInfo, fields: &FieldSelector) -> Result<(), ApiError> {
    let Some(crd) = &info.crd else {
        return Ok(());
    };
    for req in &fields.0 {
        let ok = req.path == "metadata.name"
            || req.path == "metadata.namespace"
            || crd.selectable_fields.contains(&req.path);
        if !ok {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                req.path
            )));
        }
    }
    Ok(())
}

fn write_options(
    query: &HashMap<String, String>,
    user_agent: &str,
) -> Result<WriteOptions, ApiError> {
    let field_validation = match query.get("fieldValidation").map(String::as_str) {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {other:?}"
            )));
        }
    };
    let manager = query
        .get("fieldManager")
        .filter(|m| !m.is_empty())
        .cloned()
        .unwrap_or_else(|| {
            let prefix = user_agent.split('/').next().unwrap_or("").trim();
            if prefix.is_empty() {
                "unknown".to_string()
            } else {
                prefix.to_string()
            }
        });
    Ok(WriteOptions {
        dry_run: query.get("dryRun").is_some_and(|v| v == "All"),
        manager,
        field_validation,
        force: query.get("force").is_some_and(|v| v == "true"),
    })
}

fn authorize_path(app: &AppState, who: &Identity, verb: &str, path: &str) -> Result<(), ApiError> {
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

    /// The response of a write: the stored object, encoded once for the
    /// response and the watchers alike.
    fn written_response(&self, code: u16, r: &WriteResult) -> Response {
        match &r.event {
            Some(ev) if self.render == Render::Full && builtin::view_is_identity(&self.info) => {
                json_response(code, ev.encoded().clone(), &r.warnings)
            }
            _ => self.object_response(code, &r.object, &r.warnings),
        }
    }

    fn object_response(&self, code: u16, obj: &Arc<Value>, warnings: &[String]) -> Response {
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

    fn list_options(
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

    fn list(&self, labels: LabelSelector, fields: FieldSelector) -> Result<Response, ApiError> {
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

    fn watch(
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

    fn get(&self) -> Result<Response, ApiError> {
        let obj = self
            .app
            .store
            .get(&self.info, self.namespace, self.name())?;
        Ok(self.object_response(200, &obj, &[]))
    }

    fn create(&self, body: &[u8]) -> Result<Response, ApiError> {
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

    fn update(&self, body: &[u8], status: bool) -> Result<Response, ApiError> {
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

    fn patch(&self, body: &[u8], content_type: &str, status: bool) -> Result<Response, ApiError> {
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

    /// An apply patch that would create the object also needs `create`,
    /// authorized with the object's name, as the real patch handler checks
    /// it: `patch` alone never creates, and, unlike a POST (whose request
    /// names no object), this create does match a rule's resourceNames.
    fn authorize_create_by_apply(&self, st: &crate::store::State) -> Result<(), ApiError> {
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

    fn delete_options(&self, body: &[u8]) -> Result<DeleteOptions, ApiError> {
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

    fn delete(&self, body: &[u8]) -> Result<Response, ApiError> {
        let dopts = self.delete_options(body)?;
        let result = {
            let mut st = self.app.store.lock();
            st.delete(&self.info, self.namespace, self.name(), &dopts)
        };
        self.app.store.notify_if_pending();
        let r = result?;
        if r.deleted && !self.info.is_custom() {
            let status = json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": self.name(), "group": self.info.group, "kind": self.info.plural, "uid": meta::uid(&r.object)},
            });
            return Ok(value_response(200, &status));
        }
        Ok(self.object_response(200, &r.object, &[]))
    }

    fn delete_collection(
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
        Ok(value_response(
            200,
            &json!({"apiVersion": self.info.api_version(), "kind": self.info.list_kind, "metadata": {"resourceVersion": rv}, "items": items}),
        ))
    }

    fn token_request(&self, body: &[u8]) -> Result<Response, ApiError> {
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

    fn review(&self, mut obj: Value) -> Result<Response, ApiError> {
        let spec = obj.get("spec").cloned().unwrap_or(json!({}));
        let subject = if self.info.builtin == Some(Builtin::SubjectAccessReview) {
            let user = spec
                .get("user")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let groups: Vec<String> = spec
                .get("groups")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|g| g.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
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

    #[test]
    fn query_strings_are_percent_decoded() {
        let q = parse_query(Some("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=1&x"));
        assert_eq!(q["labelSelector"], "app=web,tier in (a)");
        assert_eq!(q["watch"], "1");
        assert_eq!(q["x"], "");
        assert_eq!(percent_decode("100%"), "100%");
    }

    #[test]
    fn resource_paths_are_parsed_with_namespaces_and_subresources() {
        let store = Store::new(10);
        let Route::Resource(rp) = parse_path(&store, "/api/v1/namespaces/ns1/secrets/s1").unwrap()
        else {
            panic!("not a resource route")
        };
        assert_eq!(rp.namespace.as_deref(), Some("ns1"));
        assert_eq!(rp.plural, "secrets");
        assert_eq!(rp.name.as_deref(), Some("s1"));
        let Route::Resource(rp) = parse_path(&store, "/api/v1/namespaces/ns1/status").unwrap()
        else {
            panic!("not a resource route")
        };
        assert_eq!(rp.plural, "namespaces");
        assert_eq!(rp.name.as_deref(), Some("ns1"));
        assert_eq!(rp.subresource.as_deref(), Some("status"));
        let Route::Resource(rp) =
            parse_path(&store, "/apis/coordination.k8s.io/v1/leases").unwrap()
        else {
            panic!("not a resource route")
        };
        assert_eq!(rp.namespace, None);
        assert!(matches!(
            parse_path(&store, "/apis/x.io/v1").unwrap(),
            Route::Discovery { .. }
        ));
        assert!(matches!(
            parse_path(&store, "/version").unwrap(),
            Route::NonResource(_)
        ));
    }
}
