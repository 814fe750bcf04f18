//! OpenAPI publishing: `/openapi/v3` (the index of group/version documents)
//! and `/openapi/v3/<api|apis/g/v>` documents holding, for every resource,
//! its paths (with the `fieldValidation` parameter kubectl probes for and the
//! patch content types) and a component schema tagged with
//! `x-kubernetes-group-version-kind` (CRD schemas verbatim, so that
//! `kubectl explain` works on custom resources); `/openapi/v2` in JSON.

use crate::resource::{Registry, ResourceInfo};
use serde_json::{Map, Value, json};
use std::hash::{Hash, Hasher};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

fn reversed_domain(group: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    parts.join(".")
}

/// The component schema name of a resource's kind.
pub fn schema_name(info: &ResourceInfo) -> String {
    if info.is_custom() {
        format!(
            "{}.{}.{}",
            reversed_domain(&info.group),
            info.version,
            info.kind
        )
    } else if info.group == "apiextensions.k8s.io" {
        format!(
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{}.{}",
            info.version, info.kind
        )
    } else {
        let short = if info.group.is_empty() {
            "core"
        } else {
            info.group.split('.').next().unwrap_or("core")
        };
        format!("io.k8s.api.{short}.{}.{}", info.version, info.kind)
    }
}

fn gvk(info: &ResourceInfo) -> Value {
    json!({"group": info.group, "version": info.version, "kind": info.kind})
}

fn kind_schema(info: &ResourceInfo, refs: &str) -> Value {
    let mut schema = info
        .crd
        .as_ref()
        .and_then(|c| c.raw_schema.clone())
        .unwrap_or_else(|| {
            json!({
                "type": "object",
                "description": format!("{} is a built-in Kubernetes kind.", info.kind),
                "x-kubernetes-preserve-unknown-fields": true,
            })
        });
    if let Some(m) = schema.as_object_mut() {
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Some(p) = props.as_object_mut() {
            p.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}));
            p.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}));
            p.insert("metadata".into(), json!({"allOf": [{"$ref": format!("{refs}{OBJECT_META}")}], "default": {}, "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}));
        }
        m.insert("x-kubernetes-group-version-kind".into(), json!([gvk(info)]));
    }
    schema
}

fn list_schema(info: &ResourceInfo, refs: &str) -> Value {
    json!({
        "type": "object",
        "description": format!("{} is a list of {}", info.list_kind, info.kind),
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": format!("{refs}{}", schema_name(info))}},
            "metadata": {"allOf": [{"$ref": format!("{refs}{LIST_META}")}], "default": {}},
        },
        "x-kubernetes-group-version-kind": [{"group": info.group, "version": info.version, "kind": info.list_kind}],
    })
}

fn meta_schemas() -> Vec<(String, Value)> {
    vec![
        (
            OBJECT_META.to_string(),
            json!({
                "type": "object",
                "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
                "properties": {
                    "name": {"type": "string", "description": "Name must be unique within a namespace."},
                    "generateName": {"type": "string", "description": "GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."},
                    "namespace": {"type": "string", "description": "Namespace defines the space within which each name must be unique."},
                    "uid": {"type": "string", "description": "UID is the unique in time and space value for this object."},
                    "resourceVersion": {"type": "string", "description": "An opaque value that represents the internal version of this object."},
                    "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state."},
                    "creationTimestamp": {"type": "string", "format": "date-time", "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
                    "deletionTimestamp": {"type": "string", "format": "date-time", "description": "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."},
                    "deletionGracePeriodSeconds": {"type": "integer", "format": "int64", "description": "Number of seconds allowed for this object to gracefully terminate before it will be removed from the system."},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Map of string keys and values that can be used to organize and categorize (scope and select) objects."},
                    "annotations": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Annotations is an unstructured key value map stored with a resource."},
                    "finalizers": {"type": "array", "items": {"type": "string"}, "description": "Must be empty before the object is deleted from the registry."},
                    "ownerReferences": {"type": "array", "items": {"type": "object"}, "description": "List of objects depended by this object."},
                    "managedFields": {"type": "array", "items": {"type": "object"}, "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow."}
                }
            }),
        ),
        (
            LIST_META.to_string(),
            json!({
                "type": "object",
                "description": "ListMeta describes metadata that synthetic resources must have.",
                "properties": {
                    "resourceVersion": {"type": "string"},
                    "continue": {"type": "string"},
                    "remainingItemCount": {"type": "integer", "format": "int64"}
                }
            }),
        ),
    ]
}

fn param(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
}

fn operation(info: &ResourceInfo, action: &str, op_id: &str, refs: &str) -> Value {
    let mut op = json!({
        "operationId": op_id,
        "tags": [info.api_version().replace(['/', '.'], "_")],
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(info),
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("{refs}{}", schema_name(info))}}}}},
    });
    let mut params = vec![param("pretty")];
    if matches!(action, "post" | "put" | "patch") {
        params.extend([
            param("dryRun"),
            param("fieldManager"),
            param("fieldValidation"),
        ]);
    }
    if action == "patch" {
        params.push(param("force"));
        let mut content = Map::new();
        for ct in [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ] {
            content.insert(ct.into(), json!({"schema": {"type": "object"}}));
        }
        op["requestBody"] = json!({"required": true, "content": content});
    }
    if matches!(action, "post" | "put") {
        op["requestBody"] = json!({"required": true, "content": {"*/*": {"schema": {"$ref": format!("{refs}{}", schema_name(info))}}}});
    }
    op["parameters"] = Value::Array(params);
    op
}

fn paths_for(info: &ResourceInfo, refs: &str) -> Vec<(String, Value)> {
    let prefix = if info.group.is_empty() {
        "/api/v1".to_string()
    } else {
        format!("/apis/{}/{}", info.group, info.version)
    };
    let scope = if info.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let collection = format!("{prefix}{scope}/{}", info.plural);
    let item = format!("{collection}/{{name}}");
    let k = &info.kind;
    let mut out = vec![(
        collection,
        json!({
            "get": operation(info, "list", &format!("list{k}"), refs),
            "post": operation(info, "post", &format!("create{k}"), refs),
            "delete": operation(info, "deletecollection", &format!("deleteCollection{k}"), refs),
        }),
    )];
    if !info.create_only {
        out.push((
            item.clone(),
            json!({
                "get": operation(info, "get", &format!("read{k}"), refs),
                "put": operation(info, "put", &format!("replace{k}"), refs),
                "patch": operation(info, "patch", &format!("patch{k}"), refs),
                "delete": operation(info, "delete", &format!("delete{k}"), refs),
            }),
        ));
        if info.status_subresource {
            out.push((
                format!("{item}/status"),
                json!({
                    "get": operation(info, "get", &format!("read{k}Status"), refs),
                    "put": operation(info, "put", &format!("replace{k}Status"), refs),
                    "patch": operation(info, "patch", &format!("patch{k}Status"), refs),
                }),
            ));
        }
    }
    out
}

/// The OpenAPI v3 document of one group/version.
pub fn v3_document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let refs = "#/components/schemas/";
    let infos: Vec<_> = registry.in_group_version(group, version).collect();
    if infos.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for (name, s) in meta_schemas() {
        schemas.insert(name, s);
    }
    for info in infos {
        for (p, v) in paths_for(info, refs) {
            paths.insert(p, v);
        }
        schemas.insert(schema_name(info), kind_schema(info, refs));
        schemas.insert(
            format!("{}List", schema_name(info)),
            list_schema(info, refs),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", crate::discovery::KUBE_MINOR)},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: every group/version with a URL carrying a content hash.
pub fn v3_root(registry: &Registry) -> Value {
    let mut gvs: Vec<(String, String)> = registry
        .all()
        .map(|i| (i.group.clone(), i.version.clone()))
        .collect();
    gvs.dedup();
    let mut paths = Map::new();
    for (g, v) in gvs {
        let Some(doc) = v3_document(registry, &g, &v) else {
            continue;
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        doc.to_string().hash(&mut h);
        let key = gv_key(&g, &v);
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={:016X}", h.finish())}),
        );
    }
    json!({"paths": paths})
}

fn rewrite_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "$ref"
                    && let Some(s) = x.as_str()
                {
                    *x = json!(s.replace("#/components/schemas/", "#/definitions/"));
                } else {
                    rewrite_refs(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// `/openapi/v2` (JSON): the definitions of every served kind.
pub fn v2_document(registry: &Registry) -> Value {
    let refs = "#/definitions/";
    let mut defs = Map::new();
    for (name, s) in meta_schemas() {
        defs.insert(name, s);
    }
    for info in registry.all() {
        let mut s = kind_schema(info, refs);
        rewrite_refs(&mut s);
        defs.insert(schema_name(info), s);
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", crate::discovery::KUBE_MINOR)},
        "paths": {},
        "definitions": defs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::builtin_resources;

    #[test]
    fn documents_advertise_field_validation_on_patch() {
        let mut r = Registry::default();
        for i in builtin_resources() {
            r.insert(i);
        }
        let doc = v3_document(&r, "", "v1").unwrap();
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/secrets/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Secret");
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(
            patch["requestBody"]["content"]
                .get("application/strategic-merge-patch+json")
                .is_none()
        );
        let root = v3_root(&r);
        assert!(
            root["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/api/v1?hash=")
        );
        assert_eq!(
            schema_name(
                r.get("coordination.k8s.io", "v1", "leases")
                    .as_deref()
                    .unwrap()
            ),
            "io.k8s.api.coordination.v1.Lease"
        );
    }
}
