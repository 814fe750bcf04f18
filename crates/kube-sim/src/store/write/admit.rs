//! Admission of a create or update: type meta and metadata checks, the
//! decode and strategy steps, NamespaceLifecycle, validation, the
//! validating admission policies and the managedFields update.

use super::super::State;
use super::{FieldValidation, Managed, WriteOptions, spec_changed};
use crate::admission;
use crate::builtin::{self, Builtin};
use crate::crd;
use crate::meta;
use crate::patch::fields::{BuiltinLists, ListTypes, SchemaLists, Scope, changed_paths};
use crate::patch::managed;
use crate::resource::ResourceInfo;
use crate::status::{ApiError, FieldError, FieldErrorKind, GroupResource, comma_list};
use serde_json::{Value, json};

/// The part of an object a write may change: the status alone through the
/// status subresource, everything else when the kind has one, or all.
pub(super) fn scope_for(info: &ResourceInfo, status_write: bool) -> Scope {
    if status_write {
        Scope::OnlyStatus
    } else if info.status_subresource {
        Scope::NoStatus
    } else {
        Scope::All
    }
}

pub(super) fn lists_for(info: &ResourceInfo) -> Box<dyn ListTypes + '_> {
    match &info.crd {
        Some(c) => Box::new(SchemaLists(c.schema.as_ref())),
        None => Box::new(BuiltinLists),
    }
}

pub(super) fn go_string_slice(items: &[String]) -> String {
    format!("[]string{{{}}}", comma_list(items, |s| format!("{s:?}")))
}

/// Makes `obj` the stored `old` object with `obj`'s status: what a write
/// to the status subresource stores. Fields equal to the stored ones are
/// kept as they are instead of being copied again.
/// Whether objects of `info` carry `metadata.generation`: custom resources
/// and CRDs do; the built-in kinds kube-sim serves do not (their API server
/// strategies leave it unset).
fn tracks_generation(info: &ResourceInfo) -> bool {
    info.is_custom() || info.builtin == Some(Builtin::CustomResourceDefinition)
}

pub(super) fn keep_only_status(obj: &mut Value, old: &Value) {
    let (Some(new), Some(stored)) = (obj.as_object_mut(), old.as_object()) else {
        *obj = old.clone();
        if let Some(m) = obj.as_object_mut() {
            m.remove("status");
        }
        return;
    };
    new.retain(|k, _| k == "status" || stored.contains_key(k));
    for (k, v) in stored.iter().filter(|(k, _)| *k != "status") {
        if new.get(k) != Some(v) {
            new.insert(k.clone(), v.clone());
        }
    }
}

pub(super) fn validate_meta(
    info: &ResourceInfo,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = meta::name(obj);
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for e in builtin::name_errors(info.builtin, name) {
            errs.push(FieldError::invalid("metadata.name", &json!(name), e));
        }
    }
    if let Some(labels) = meta::labels(obj) {
        for (k, v) in labels {
            for e in meta::qualified_name_errors(k) {
                errs.push(FieldError::invalid("metadata.labels", &json!(k), e));
            }
            match v.as_str() {
                Some(s) => {
                    for e in meta::label_value_errors(s) {
                        errs.push(FieldError::invalid("metadata.labels", v, e));
                    }
                }
                None => errs.push(FieldError::invalid(
                    "metadata.labels",
                    v,
                    "label values must be strings",
                )),
            }
        }
    }
    if let Some(ann) = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        let mut total = 0;
        for (k, v) in ann {
            total += k.len() + v.as_str().map_or(0, str::len);
            for e in meta::qualified_name_errors(k) {
                errs.push(FieldError::invalid("metadata.annotations", &json!(k), e));
            }
        }
        if total > 256 * 1024 {
            errs.push(FieldError::new(
                crate::status::FieldErrorKind::TooLong,
                "metadata.annotations",
                None,
                "may not be more than 262144 bytes",
            ));
        }
    }
    let fins = meta::finalizers(obj);
    for (i, f) in fins.iter().enumerate() {
        for e in meta::qualified_name_errors(f) {
            errs.push(FieldError::invalid(
                &format!("metadata.finalizers[{i}]"),
                &json!(f),
                e,
            ));
        }
    }
    if let Some(refs) = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    {
        let mut controllers = 0;
        for r in refs {
            for field in ["apiVersion", "kind", "name", "uid"] {
                if r.get(field)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    errs.push(FieldError::invalid(
                        &format!("metadata.ownerReferences.{field}"),
                        &json!(""),
                        format!("{field} must not be empty"),
                    ));
                }
            }
            if r.get("controller") == Some(&json!(true)) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            errs.push(FieldError::invalid(
                "metadata.ownerReferences",
                &Value::Array(refs.clone()),
                "Only one reference can have Controller set to true",
            ));
        }
    }
    if let Some(old) = old
        && meta::is_deleting(old)
    {
        let old_fins = meta::finalizers(old);
        let added: Vec<String> = fins
            .iter()
            .filter(|f| !old_fins.contains(f))
            .cloned()
            .collect();
        if !added.is_empty() {
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    go_string_slice(&added)
                ),
            ));
        }
    }
    errs
}

pub(super) fn check_type_meta(info: &ResourceInfo, body: &Value) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the object provided is not a JSON object",
        ));
    }
    if let Some(kind) = body.get("kind").and_then(Value::as_str)
        && !kind.is_empty()
        && kind != info.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            info.kind
        )));
    }
    if let Some(av) = body.get("apiVersion").and_then(Value::as_str)
        && !av.is_empty()
        && av != info.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            info.api_version()
        )));
    }
    Ok(())
}

impl State {
    /// Decodes, prepares and validates an object for create (`old` None) or
    /// update; returns the object to store and warnings.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn admit(
        &mut self,
        info: &ResourceInfo,
        ns: &str,
        body: Value,
        old: Option<&Value>,
        status_write: bool,
        opts: &WriteOptions,
        managed_op: Managed,
    ) -> Result<(Value, Vec<String>), ApiError> {
        check_type_meta(info, &body)?;
        let reset_managed = body
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty);
        let mut obj = builtin::to_storage(info, body);
        obj["kind"] = json!(info.kind);
        let dropped = match (info.builtin, &info.crd) {
            (Some(b), _) => builtin::normalize(b, &mut obj)?,
            (None, Some(c)) => match &c.schema {
                Some(schema) => {
                    let dropped = schema.prune_object(&mut obj);
                    schema.default_object(&mut obj);
                    dropped
                }
                None => Vec::new(),
            },
            (None, None) => Vec::new(),
        };
        let mut warnings = Vec::new();
        if !dropped.is_empty() {
            match opts.field_validation {
                FieldValidation::Strict => {
                    return Err(ApiError::bad_request(format!(
                        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                        comma_list(&dropped, |p| format!("unknown field \"{p}\"")),
                        kind = info.kind,
                        version = info.version,
                    )));
                }
                FieldValidation::Warn => {
                    warnings.extend(dropped.iter().map(|p| format!("unknown field \"{p}\"")));
                }
                FieldValidation::Ignore => {}
            }
        }
        let body_ns = meta::namespace(&obj).to_string();
        if info.namespaced {
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta::set_meta(&mut obj, "namespace", Some(json!(ns)));
        } else {
            meta::set_meta(&mut obj, "namespace", None);
        }
        meta::set_meta(&mut obj, "selfLink", None);
        let ignore_status = info.status_subresource;
        match old {
            None => {
                if meta::name(&obj).is_empty()
                    && let Some(prefix) = meta::meta_str(&obj, "generateName").map(String::from)
                    && !prefix.is_empty()
                {
                    let mut name = format!("{prefix}{}", meta::random_suffix());
                    for _ in 0..8 {
                        if self.get_obj(&info.storage, ns, &name).is_none() {
                            break;
                        }
                        name = format!("{prefix}{}", meta::random_suffix());
                    }
                    meta::set_meta(&mut obj, "name", Some(json!(name)));
                }
                meta::set_meta(
                    &mut obj,
                    "uid",
                    Some(json!(uuid::Uuid::new_v4().to_string())),
                );
                meta::set_meta(
                    &mut obj,
                    "creationTimestamp",
                    Some(json!(meta::now_rfc3339())),
                );
                if tracks_generation(info) {
                    meta::set_meta(&mut obj, "generation", Some(json!(1)));
                }
                meta::set_meta(&mut obj, "deletionTimestamp", None);
                meta::set_meta(&mut obj, "deletionGracePeriodSeconds", None);
                meta::set_meta(&mut obj, "resourceVersion", None);
                if info.status_subresource
                    && info.is_custom()
                    && let Some(m) = obj.as_object_mut()
                {
                    m.remove("status");
                }
            }
            Some(old) => {
                let url_name = meta::name(old);
                let body_name = meta::name(&obj);
                if !body_name.is_empty() && body_name != url_name {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({body_name}) does not match the name on the URL ({url_name})"
                    )));
                }
                meta::set_meta(&mut obj, "name", Some(json!(url_name)));
                for field in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ] {
                    let v = old.get("metadata").and_then(|m| m.get(field)).cloned();
                    meta::set_meta(&mut obj, field, v);
                }
                if status_write {
                    let mf = match managed_op {
                        Managed::Keep => Some(obj.pointer("/metadata/managedFields").cloned()),
                        Managed::Update => None,
                    };
                    keep_only_status(&mut obj, old);
                    if let Some(mf) = mf {
                        meta::set_meta(&mut obj, "managedFields", mf);
                    }
                } else if info.status_subresource {
                    let m = obj.as_object_mut().expect("checked object");
                    match old.get("status") {
                        Some(s) => {
                            m.insert("status".into(), s.clone());
                        }
                        None => {
                            m.remove("status");
                        }
                    }
                }
                if tracks_generation(info) && spec_changed(old, &obj, ignore_status) {
                    let generation = old
                        .pointer("/metadata/generation")
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    meta::set_meta(&mut obj, "generation", Some(json!(generation + 1)));
                }
            }
        }
        let mut errs = validate_meta(info, &obj, old);
        match (info.builtin, &info.crd) {
            (Some(Builtin::CustomResourceDefinition), _) => {
                errs.extend(crd::validate_crd(&obj, old));
                if errs.is_empty() {
                    let status = crd::established_status(&obj, meta::is_deleting(&obj));
                    obj["status"] = status;
                }
            }
            (Some(b), _) => {
                let view_for_validation;
                let target = if b == Builtin::EventV1 {
                    view_for_validation = obj.clone();
                    &view_for_validation
                } else {
                    &obj
                };
                errs.extend(builtin::validate(b, target, old));
            }
            (None, Some(c)) => {
                if let Some(schema) = &c.schema {
                    errs.extend(schema.validate_object(&obj, old));
                }
                // As the API server: CEL rules run unless the object is too
                // broken for them (a required field missing, a value not
                // supported, too long or many, of another type), which a
                // last error says.
                if let Some(cel) = &c.cel {
                    if errs.iter().any(|e| e.kind.blocks_cel()) {
                        errs.push(FieldError::new(
                            FieldErrorKind::Invalid,
                            "<nil>",
                            Some("null".into()),
                            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
                        ));
                    } else {
                        errs.extend(cel.validate(&obj, old, c.schema.as_ref()));
                    }
                }
            }
            (None, None) => {}
        }
        if !errs.is_empty() {
            let name = meta::name(&obj).to_string();
            return Err(ApiError::invalid(&info.kind, &info.group, &name, &errs));
        }
        if let Some(user) = &opts.user {
            admission::admit(
                self,
                &admission::Write {
                    info,
                    subresource: if status_write { "status" } else { "" },
                    object: &obj,
                    old,
                    user,
                    dry_run: opts.dry_run,
                },
            )?;
        }
        if let Managed::Update = managed_op {
            let scope = scope_for(info, status_write);
            let lists = lists_for(info);
            let empty = json!({});
            let before = old.unwrap_or(&empty);
            let changed = changed_paths(before, &obj, lists.as_ref(), scope);
            let sub = if status_write { "status" } else { "" };
            managed::record_update_on(
                old.filter(|_| !reset_managed),
                &mut obj,
                &opts.manager,
                &info.api_version(),
                sub,
                &changed,
            );
        }
        Ok((obj, warnings))
    }

    pub(super) fn check_namespace(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        if !info.namespaced {
            return Ok(());
        }
        if ns.is_empty() {
            return Err(ApiError::bad_request(
                "the server could not find the requested resource: namespace is required",
            ));
        }
        match self.get_obj(builtin::NAMESPACES, "", ns) {
            None => Err(ApiError::not_found(
                &GroupResource::new("", "namespaces"),
                ns,
            )),
            Some(n) if meta::is_deleting(&n) => Err(ApiError::forbidden(
                format!(
                    "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    info.gr.qualified()
                ),
                json!({"name": name, "group": info.group, "kind": info.plural, "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]}),
            )),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_write_stores_the_old_object_with_the_new_status() {
        let old = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"v": 1}, "status": {"s": 1}, "gone": true});
        let mut obj = json!({"metadata": {"name": "a", "labels": {"x": "2"}}, "spec": {"v": 1}, "status": {"s": 2}, "added": 1});
        keep_only_status(&mut obj, &old);
        assert_eq!(
            obj,
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"v": 1}, "status": {"s": 2}, "gone": true})
        );
        let mut without = json!({"metadata": {"name": "a"}, "spec": {"v": 3}});
        keep_only_status(&mut without, &old);
        assert_eq!(
            without,
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"v": 1}, "gone": true})
        );
    }

    #[test]
    fn go_slices_render_like_fmt_percent_hash_v() {
        assert_eq!(
            go_string_slice(&["a".into(), "b".into()]),
            "[]string{\"a\", \"b\"}"
        );
    }
}
