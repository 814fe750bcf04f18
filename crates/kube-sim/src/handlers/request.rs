//! Reading a request: query strings, REST paths, verbs, the rendering the
//! client asks for and the write options of its query.

use super::{Render, ResourcePath, Route};
use crate::resource::ResourceInfo;
use crate::selector::FieldSelector;
use crate::status::ApiError;
use crate::store::Store;
use crate::store::write::{FieldValidation, WriteOptions};
use crate::table::IncludeObject;
use axum::http::{HeaderMap, Method, header};
use std::collections::HashMap;

/// Decodes one percent-encoded path segment (`%2F` and the like).
fn decode_segment(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Parses a query string into a map (last value wins).
pub fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(q.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}
pub(super) fn render_mode(headers: &HeaderMap, query: &HashMap<String, String>) -> Render {
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

pub(super) fn parse_path(store: &Store, path: &str) -> Result<Route, ApiError> {
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
        (Some(decode_segment(rest[1])), &rest[2..])
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
        name: rest.get(1).map(|s| decode_segment(s)),
        subresource: rest.get(2).map(|s| s.to_string()),
    }))
}

pub(super) fn verb_for(
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

pub(super) fn check_field_selector(
    info: &ResourceInfo,
    fields: &FieldSelector,
) -> Result<(), ApiError> {
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

pub(super) fn write_options(
    query: &HashMap<String, String>,
    user_agent: &str,
    is_apply: bool,
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
            // An apply names its manager, or is refused (an empty one).
            if is_apply {
                return String::new();
            }
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
        user: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_percent_decoded() {
        let q = parse_query(Some("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=1&x"));
        assert_eq!(q["labelSelector"], "app=web,tier in (a)");
        assert_eq!(q["watch"], "1");
        assert_eq!(q["x"], "");
        assert_eq!(parse_query(Some("p=100%"))["p"], "100%");
        assert_eq!(decode_segment("my%2Dbucket"), "my-bucket");
        // A path keeps `+` (only a query means a space by it) and a `%`
        // that starts no escape.
        assert_eq!(decode_segment("a+b"), "a+b");
        assert_eq!(decode_segment("100%"), "100%");
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
