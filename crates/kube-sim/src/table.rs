//! Server-side printing: the `meta.k8s.io/v1 Table` that `kubectl get`
//! asks for (`Accept: ...;as=Table`), with the columns the real server shows
//! for each built-in kind and the `additionalPrinterColumns` of CRDs, and the
//! `PartialObjectMetadata` form of objects.

use crate::builtin::{self, Builtin};
use crate::jsonpath::JsonPath;
use crate::meta;
use crate::resource::ResourceInfo;
use serde_json::{Value, json};
use std::sync::Arc;

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` parameter.
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

enum Source {
    Name,
    Age,
    CreatedAt,
    Path(JsonPath, String),
    /// The value at a JSON pointer, null when absent.
    Pointer(&'static str),
    /// The object reference at a JSON pointer as `kind/name`, the kind
    /// lower-cased when `lowercase_kind` is set.
    Reference {
        at: &'static str,
        lowercase_kind: bool,
    },
    Func(fn(&Value) -> Value),
}

struct Column {
    name: String,
    ty: String,
    format: String,
    description: String,
    priority: i64,
    source: Source,
}

fn col(name: &str, ty: &str, description: &str, source: Source) -> Column {
    Column {
        name: name.into(),
        ty: ty.into(),
        format: if name == "Name" {
            "name".into()
        } else {
            String::new()
        },
        description: description.into(),
        priority: 0,
        source,
    }
}

const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DOC: &str =
    "CreationTimestamp is a timestamp representing the server time when this object was created.";

fn count_of(v: Option<&Value>) -> usize {
    match v {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

/// The `kind` and `name` of the object reference at a JSON pointer.
fn reference<'a>(obj: &'a Value, at: &str) -> (&'a str, &'a str) {
    let field = |k: &str| {
        obj.pointer(&format!("{at}/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    (field("kind"), field("name"))
}

fn columns(info: &ResourceInfo) -> Vec<Column> {
    let name = || col("Name", "string", NAME_DOC, Source::Name);
    let age = || col("Age", "string", AGE_DOC, Source::Age);
    match info.builtin {
        Some(Builtin::Namespace) => vec![
            name(),
            col(
                "Status",
                "string",
                "The status of the namespace",
                Source::Pointer("/status/phase"),
            ),
            age(),
        ],
        Some(Builtin::Secret) => vec![
            name(),
            col(
                "Type",
                "string",
                "The type of the secret",
                Source::Pointer("/type"),
            ),
            col(
                "Data",
                "integer",
                "The number of entries in the secret",
                Source::Func(|o| json!(count_of(o.get("data")))),
            ),
            age(),
        ],
        Some(Builtin::ConfigMap) => vec![
            name(),
            col(
                "Data",
                "integer",
                "The number of entries in the config map",
                Source::Func(|o| json!(count_of(o.get("data")) + count_of(o.get("binaryData")))),
            ),
            age(),
        ],
        Some(Builtin::ServiceAccount) => vec![
            name(),
            col(
                "Secrets",
                "string",
                "Secrets is the list of secrets allowed to be used by pods running using this ServiceAccount",
                Source::Func(|o| json!(count_of(o.get("secrets")))),
            ),
            age(),
        ],
        Some(Builtin::Event | Builtin::EventV1) => vec![
            col(
                "Last Seen",
                "string",
                "Time when this Event was last observed",
                Source::Func(|o| {
                    let t = o
                        .get("lastTimestamp")
                        .and_then(Value::as_str)
                        .or_else(|| {
                            o.pointer("/series/lastObservedTime")
                                .and_then(Value::as_str)
                        })
                        .or_else(|| o.get("eventTime").and_then(Value::as_str));
                    json!(meta::age_of(t))
                }),
            ),
            col(
                "Type",
                "string",
                "Type of this event (Normal, Warning)",
                Source::Pointer("/type"),
            ),
            col(
                "Reason",
                "string",
                "Why the action was taken",
                Source::Pointer("/reason"),
            ),
            col(
                "Object",
                "string",
                "The object this Event is about",
                Source::Reference {
                    at: "/involvedObject",
                    lowercase_kind: true,
                },
            ),
            col(
                "Message",
                "string",
                "A human-readable description of the status of this operation",
                Source::Pointer("/message"),
            ),
        ],
        Some(Builtin::Lease) => vec![
            name(),
            col(
                "Holder",
                "string",
                "The holder of the lease",
                Source::Func(|o| {
                    o.pointer("/spec/holderIdentity")
                        .cloned()
                        .unwrap_or(json!(""))
                }),
            ),
            age(),
        ],
        Some(Builtin::CustomResourceDefinition | Builtin::Role | Builtin::ClusterRole) => vec![
            name(),
            col("Created At", "date", AGE_DOC, Source::CreatedAt),
        ],
        Some(Builtin::RoleBinding | Builtin::ClusterRoleBinding) => vec![
            name(),
            col(
                "Role",
                "string",
                "Role",
                Source::Reference {
                    at: "/roleRef",
                    lowercase_kind: false,
                },
            ),
            age(),
        ],
        _ => {
            let mut cols = vec![name()];
            if let Some(crd) = &info.crd {
                for c in &crd.columns {
                    cols.push(Column {
                        name: c.name.clone(),
                        ty: c.ty.clone(),
                        format: c.format.clone(),
                        description: c.description.clone(),
                        priority: c.priority,
                        source: Source::Path(c.path.clone(), c.ty.clone()),
                    });
                }
            } else {
                cols.push(age());
            }
            cols
        }
    }
}

fn cell(source: &Source, obj: &Value) -> Value {
    match source {
        Source::Name => json!(meta::name(obj)),
        Source::Age => json!(meta::age_of(meta::meta_str(obj, "creationTimestamp"))),
        Source::CreatedAt => json!(meta::meta_str(obj, "creationTimestamp").unwrap_or("")),
        Source::Pointer(p) => obj.pointer(p).cloned().unwrap_or(Value::Null),
        Source::Reference { at, lowercase_kind } => {
            let (kind, name) = reference(obj, at);
            if *lowercase_kind {
                json!(format!("{}/{name}", kind.to_lowercase()))
            } else {
                json!(format!("{kind}/{name}"))
            }
        }
        Source::Func(f) => f(obj),
        Source::Path(path, ty) => {
            let Some(v) = path.find(obj).into_iter().next() else {
                return Value::Null;
            };
            match ty.as_str() {
                "integer" => v.as_f64().map(|f| json!(f as i64)).unwrap_or(Value::Null),
                "number" => v.as_f64().map(|f| json!(f)).unwrap_or(Value::Null),
                "boolean" => v.as_bool().map(|b| json!(b)).unwrap_or(Value::Null),
                "date" => match v.as_str() {
                    Some(s) if meta::parse_rfc3339(s).is_some() => json!(meta::age_of(Some(s))),
                    Some(_) => json!("<invalid>"),
                    None => Value::Null,
                },
                _ => match v {
                    Value::String(s) => json!(s),
                    Value::Null => Value::Null,
                    other => json!(other.to_string()),
                },
            }
        }
    }
}

/// The `PartialObjectMetadata` form of an object.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// A Table of objects (storage form) as the resource `info` presents them.
pub fn to_table(
    info: &ResourceInfo,
    objects: &[Arc<Value>],
    resource_version: Option<String>,
    continue_token: Option<String>,
    include: IncludeObject,
) -> Value {
    let cols = columns(info);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let view = builtin::to_view(info, o);
            let source = if info.builtin == Some(Builtin::EventV1) {
                o.as_ref()
            } else {
                &view
            };
            let cells: Vec<Value> = cols.iter().map(|c| cell(&c.source, source)).collect();
            let mut row = json!({"cells": cells});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => row["object"] = partial_metadata(&view),
                IncludeObject::Object => row["object"] = view,
            }
            row
        })
        .collect();
    let mut metadata = json!({});
    if let Some(rv) = resource_version {
        metadata["resourceVersion"] = json!(rv);
    }
    if let Some(c) = continue_token {
        metadata["continue"] = json!(c);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(plural: &str) -> ResourceInfo {
        builtin::builtin_resources()
            .into_iter()
            .find(|r| r.plural == plural && r.group.is_empty())
            .unwrap()
    }

    #[test]
    fn secrets_show_type_and_data_count() {
        let s = Arc::new(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "creationTimestamp": meta::now_rfc3339()}, "type": "Opaque", "data": {"a": "", "b": ""}}),
        );
        let t = to_table(
            &info("secrets"),
            &[s],
            Some("5".into()),
            None,
            IncludeObject::Metadata,
        );
        assert_eq!(t["columnDefinitions"][1]["name"], "Type");
        assert_eq!(t["rows"][0]["cells"], json!(["s", "Opaque", 2, "0s"]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["metadata"]["resourceVersion"], "5");
    }

    /// The cell of column `name` for `obj` of the built-in resource `plural`.
    fn cell_of(plural: &str, name: &str, obj: &Value) -> Value {
        let info = builtin::builtin_resources()
            .into_iter()
            .find(|r| r.plural == plural)
            .unwrap();
        let column = columns(&info).into_iter().find(|c| c.name == name).unwrap();
        cell(&column.source, obj)
    }

    #[test]
    fn references_show_as_kind_and_name() {
        let event = json!({"involvedObject": {"kind": "Widget", "name": "w"}});
        assert_eq!(cell_of("events", "Object", &event), "widget/w");
        let binding = json!({"roleRef": {"kind": "ClusterRole", "name": "view"}});
        assert_eq!(
            cell_of("rolebindings", "Role", &binding),
            "ClusterRole/view"
        );
    }
}
