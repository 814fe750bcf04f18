//! Writes, as the API server performs them: decode (typed round trip for
//! built-ins; prune and default for custom resources), the create/update
//! strategy (identity metadata, status subresource, generation), admission
//! (NamespaceLifecycle), validation (metadata, kind rules, schema, CEL),
//! field ownership, optimistic concurrency, finalizers and
//! deletionTimestamp, propagation policies, and the patch flavours.

use super::{Event, EventType, ListOptions, State};
use crate::builtin::{self, Builtin};
use crate::crd;
use crate::meta;
use crate::patch::fields::{BuiltinLists, ListTypes, SchemaLists, Scope, changed_paths};
use crate::patch::{self, PatchType, apply, managed, strategic};
use crate::resource::ResourceInfo;
use crate::status::{ApiError, FieldError, GroupResource};
use serde_json::{Value, json};
use std::sync::Arc;

/// How unknown fields in a request are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Dropped silently.
    Ignore,
    /// Dropped with a warning (the default).
    #[default]
    Warn,
    /// Refused with 400.
    Strict,
}

/// Options of a write request.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// `dryRun=All`: validate, do not store.
    pub dry_run: bool,
    /// The field manager.
    pub manager: String,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// `force` (apply only).
    pub force: bool,
}

impl WriteOptions {
    /// Options for writes kube-sim makes itself.
    pub fn internal() -> Self {
        WriteOptions {
            dry_run: false,
            manager: "kube-sim".into(),
            field_validation: FieldValidation::Ignore,
            force: false,
        }
    }
}

/// The result of a create, update or patch.
#[derive(Debug, Clone)]
pub struct WriteResult {
    /// The stored object (storage form).
    pub object: Arc<Value>,
    /// The change as watchers get it, when one was stored: the response
    /// shares its encoding.
    pub event: Option<Arc<Event>>,
    /// Whether the write created the object (201).
    pub created: bool,
    /// Warnings for the `Warning` header.
    pub warnings: Vec<String>,
}

/// `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Owner waits for its blocking dependents.
    Foreground,
    /// Dependents are collected after the owner goes.
    Background,
    /// Dependents lose their ownerReference and stay.
    Orphan,
}

/// DeleteOptions.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `propagationPolicy` (or the legacy `orphanDependents`).
    pub propagation: Option<Propagation>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// The result of a delete.
#[derive(Debug, Clone)]
pub struct DeleteResult {
    /// The object (last state, or marked for deletion).
    pub object: Arc<Value>,
    /// Whether it is gone (false: finalizers hold it).
    pub deleted: bool,
}

/// The finalizer foreground deletion puts on an owner.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer orphan deletion puts on an owner.
pub const ORPHAN: &str = "orphan";

fn lists_for(info: &ResourceInfo) -> Box<dyn ListTypes + '_> {
    match &info.crd {
        Some(c) => Box::new(SchemaLists(c.schema.as_ref())),
        None => Box::new(BuiltinLists),
    }
}

fn go_string_slice(items: &[String]) -> String {
    format!(
        "[]string{{{}}}",
        items
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Whether anything but metadata (and status, when `ignore_status`) differs.
pub fn spec_changed(old: &Value, new: &Value, ignore_status: bool) -> bool {
    let (Some(a), Some(b)) = (old.as_object(), new.as_object()) else {
        return old != new;
    };
    let skip = |k: &str| {
        k == "metadata" || k == "apiVersion" || k == "kind" || (ignore_status && k == "status")
    };
    a.iter()
        .filter(|(k, _)| !skip(k))
        .any(|(k, v)| b.get(k) != Some(v))
        || b.iter()
            .filter(|(k, _)| !skip(k))
            .any(|(k, _)| !a.contains_key(k))
}

/// Makes `obj` the stored `old` object with `obj`'s status: what a write
/// to the status subresource stores. Fields equal to the stored ones are
/// kept as they are instead of being copied again.
fn keep_only_status(obj: &mut Value, old: &Value) {
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

fn validate_meta(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
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

fn check_type_meta(info: &ResourceInfo, body: &Value) -> Result<(), ApiError> {
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

/// How managedFields are maintained for a write.
enum Managed {
    /// Record an Update by the request's manager.
    Update,
    /// Already computed (apply).
    Keep,
}

impl State {
    /// Decodes, prepares and validates an object for create (`old` None) or
    /// update; returns the object to store and warnings.
    #[allow(clippy::too_many_arguments)]
    fn admit(
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
                        "strict decoding error: {}",
                        dropped
                            .iter()
                            .map(|p| format!("unknown field \"{p}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
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
                meta::set_meta(&mut obj, "generation", Some(json!(1)));
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
                if spec_changed(old, &obj, ignore_status) {
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
                if old.is_none() {
                    let mut fins = meta::finalizers(&obj);
                    if !fins.iter().any(|f| f == crd::CLEANUP_FINALIZER) {
                        fins.push(crd::CLEANUP_FINALIZER.into());
                        meta::set_meta(&mut obj, "finalizers", Some(json!(fins)));
                    }
                }
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
                if errs.is_empty()
                    && let Some(cel) = &c.cel
                {
                    errs.extend(cel.validate(&obj, old, c.schema.as_ref()));
                }
            }
            (None, None) => {}
        }
        if !errs.is_empty() {
            let name = meta::name(&obj).to_string();
            return Err(ApiError::invalid(&info.kind, &info.group, &name, &errs));
        }
        if let Managed::Update = managed_op {
            let scope = if status_write {
                Scope::OnlyStatus
            } else if info.status_subresource {
                Scope::NoStatus
            } else {
                Scope::All
            };
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

    fn check_namespace(&self, info: &ResourceInfo, ns: &str, name: &str) -> Result<(), ApiError> {
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

    /// Creates an object.
    pub fn create(
        &mut self,
        info: &ResourceInfo,
        ns: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<WriteResult, ApiError> {
        self.check_namespace(info, ns, meta::name(&body))?;
        let (obj, warnings) = self.admit(info, ns, body, None, false, opts, Managed::Update)?;
        self.finish_create(info, ns, obj, warnings, opts)
    }

    fn finish_create(
        &mut self,
        info: &ResourceInfo,
        ns: &str,
        obj: Value,
        warnings: Vec<String>,
        opts: &WriteOptions,
    ) -> Result<WriteResult, ApiError> {
        let name = meta::name(&obj).to_string();
        if self
            .get_obj(&info.storage, if info.namespaced { ns } else { "" }, &name)
            .is_some()
        {
            return Err(ApiError::already_exists(&info.gr, &name));
        }
        if opts.dry_run {
            return Ok(WriteResult {
                object: Arc::new(obj),
                event: None,
                created: true,
                warnings,
            });
        }
        let event = self.persist(info, None, obj);
        Ok(WriteResult {
            object: event.object.clone(),
            event: Some(event),
            created: true,
            warnings,
        })
    }

    /// Replaces an object (PUT), or its status (`status_write`).
    pub fn update(
        &mut self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        body: Value,
        status_write: bool,
        opts: &WriteOptions,
    ) -> Result<WriteResult, ApiError> {
        let old = self
            .get_obj(&info.storage, ns, name)
            .ok_or_else(|| ApiError::not_found(&info.gr, name))?;
        let rv = meta::resource_version(&body);
        if !rv.is_empty() && rv != meta::resource_version(&old) {
            return Err(ApiError::stale(&info.gr, name));
        }
        let (obj, warnings) = self.admit(
            info,
            ns,
            body,
            Some(&old),
            status_write,
            opts,
            Managed::Update,
        )?;
        Ok(self.finish_update(info, old, obj, warnings, opts))
    }

    fn finish_update(
        &mut self,
        info: &ResourceInfo,
        old: Arc<Value>,
        mut obj: Value,
        warnings: Vec<String>,
        opts: &WriteOptions,
    ) -> WriteResult {
        meta::set_meta(
            &mut obj,
            "resourceVersion",
            Some(json!(meta::resource_version(&old))),
        );
        if obj == *old {
            return WriteResult {
                object: old,
                event: None,
                created: false,
                warnings,
            };
        }
        if opts.dry_run {
            return WriteResult {
                object: Arc::new(obj),
                event: None,
                created: false,
                warnings,
            };
        }
        let event = self.persist(info, Some(old), obj);
        WriteResult {
            object: event.object.clone(),
            event: Some(event),
            created: false,
            warnings,
        }
    }

    /// Patches an object (or its status); apply patches may create it.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: &[u8],
        status_write: bool,
        opts: &WriteOptions,
    ) -> Result<WriteResult, ApiError> {
        let old = self.get_obj(&info.storage, ns, name);
        if ptype == PatchType::Apply {
            return self.apply_patch(info, ns, name, old, body, status_write, opts);
        }
        let old = old.ok_or_else(|| ApiError::not_found(&info.gr, name))?;
        let view = builtin::to_view(info, &old);
        let patched = match ptype {
            PatchType::Json => patch::json_patch(&view, body)?,
            PatchType::Merge => {
                let p = patch::parse_json(body)?;
                let mut v = view;
                patch::merge_patch(&mut v, &p);
                v
            }
            PatchType::Strategic => {
                let Some(b) = info.builtin else {
                    return Err(ApiError::unsupported_patch(&[
                        "application/json-patch+json",
                        "application/merge-patch+json",
                        "application/apply-patch+yaml",
                    ]));
                };
                let p = patch::parse_json(body)?;
                let mut v = view;
                strategic::apply(&mut v, &p, &|path: &[&str]| {
                    strategic::strategy_for(b, path)
                });
                v
            }
            PatchType::Apply => unreachable!("handled above"),
        };
        let rv = meta::resource_version(&patched);
        if !rv.is_empty() && rv != meta::resource_version(&old) {
            return Err(ApiError::stale(&info.gr, name));
        }
        let (obj, warnings) = self.admit(
            info,
            ns,
            patched,
            Some(&old),
            status_write,
            opts,
            Managed::Update,
        )?;
        Ok(self.finish_update(info, old, obj, warnings, opts))
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_patch(
        &mut self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        old: Option<Arc<Value>>,
        body: &[u8],
        status_write: bool,
        opts: &WriteOptions,
    ) -> Result<WriteResult, ApiError> {
        if opts.manager.is_empty() {
            return Err(ApiError::invalid(
                "PatchOptions",
                "meta.k8s.io",
                "",
                &[FieldError::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            ));
        }
        let mut applied = patch::parse_yaml(body)?;
        if applied
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
            || applied
                .get("kind")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            return Err(ApiError::bad_request("invalid object type: /, Kind="));
        }
        check_type_meta(info, &applied)?;
        let applied_name = meta::name(&applied).to_string();
        if !applied_name.is_empty() && applied_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({applied_name}) does not match the name on the URL ({name})"
            )));
        }
        meta::set_meta(&mut applied, "name", Some(json!(name)));
        let live_view = old.as_ref().map(|o| builtin::to_view(info, o));
        let lists = lists_for(info);
        let scope = if status_write {
            Scope::OnlyStatus
        } else if info.status_subresource {
            Scope::NoStatus
        } else {
            Scope::All
        };
        let api_version = info.api_version();
        let merged = apply::apply(&apply::ApplyRequest {
            live: live_view.as_ref(),
            applied: &applied,
            manager: &opts.manager,
            force: opts.force,
            lists: lists.as_ref(),
            scope,
            api_version: &api_version,
            subresource: if status_write { "status" } else { "" },
        })
        .map_err(|conflicts| {
            let n = conflicts.len();
            let message = if n == 1 {
                format!(
                    "Apply failed with 1 conflict: conflict with \"{}\" using {}: {}",
                    conflicts[0].manager,
                    conflicts[0].api_version,
                    conflicts[0].field()
                )
            } else {
                format!(
                    "Apply failed with {n} conflicts: {}",
                    conflicts
                        .iter()
                        .map(|c| format!("conflict with \"{}\" using {}: {}", c.manager, c.api_version, c.field()))
                        .collect::<Vec<_>>()
                        .join("\n")
                )
            };
            let causes: Vec<Value> = conflicts
                .iter()
                .map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{}\" using {}", c.manager, c.api_version), "field": c.field()}))
                .collect();
            let mut e = ApiError::new(409, "Conflict", message);
            e.details = Some(json!({"name": name, "group": info.group, "kind": info.plural, "causes": causes}));
            e
        })?;
        match old {
            None => {
                if status_write {
                    return Err(ApiError::not_found(&info.gr, name));
                }
                self.check_namespace(info, ns, name)?;
                let (obj, warnings) =
                    self.admit(info, ns, merged, None, false, opts, Managed::Keep)?;
                self.finish_create(info, ns, obj, warnings, opts)
            }
            Some(old) => {
                let (obj, warnings) = self.admit(
                    info,
                    ns,
                    merged,
                    Some(&old),
                    status_write,
                    opts,
                    Managed::Keep,
                )?;
                Ok(self.finish_update(info, old, obj, warnings, opts))
            }
        }
    }

    /// Deletes an object, honouring preconditions, finalizers and the
    /// propagation policy.
    pub fn delete(
        &mut self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        dopts: &DeleteOptions,
    ) -> Result<DeleteResult, ApiError> {
        let old = self
            .get_obj(&info.storage, ns, name)
            .ok_or_else(|| ApiError::not_found(&info.gr, name))?;
        if let Some(uid) = &dopts.uid
            && uid != meta::uid(&old)
        {
            return Err(ApiError::conflict(
                &info.gr,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta::uid(&old)
                ),
            ));
        }
        if let Some(rv) = &dopts.resource_version
            && rv != meta::resource_version(&old)
        {
            return Err(ApiError::conflict(
                &info.gr,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta::resource_version(&old)
                ),
            ));
        }
        let mut obj = (*old).clone();
        let mut fins = meta::finalizers(&obj);
        let has_dependents = !self.dependents_of(meta::uid(&old)).is_empty();
        match dopts.propagation {
            Some(Propagation::Foreground)
                if has_dependents && !fins.iter().any(|f| f == FOREGROUND) =>
            {
                fins.push(FOREGROUND.into())
            }
            Some(Propagation::Orphan) if has_dependents && !fins.iter().any(|f| f == ORPHAN) => {
                fins.push(ORPHAN.into())
            }
            _ => {}
        }
        let is_namespace = info.builtin == Some(Builtin::Namespace);
        if is_namespace && matches!(name, "default" | "kube-system" | "kube-public") {
            return Err(ApiError::forbidden(
                format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
                json!({"name": name, "kind": "namespaces"}),
            ));
        }
        if fins.is_empty() && !is_namespace {
            if dopts.dry_run {
                return Ok(DeleteResult {
                    object: old,
                    deleted: true,
                });
            }
            let object = self.persist_delete(info, old);
            return Ok(DeleteResult {
                object,
                deleted: true,
            });
        }
        let already = meta::is_deleting(&obj);
        if already && fins == meta::finalizers(&obj) {
            return Ok(DeleteResult {
                object: old,
                deleted: false,
            });
        }
        meta::set_meta(
            &mut obj,
            "finalizers",
            if fins.is_empty() {
                None
            } else {
                Some(json!(fins))
            },
        );
        if !already {
            meta::set_meta(
                &mut obj,
                "deletionTimestamp",
                Some(json!(meta::now_rfc3339())),
            );
            meta::set_meta(&mut obj, "deletionGracePeriodSeconds", Some(json!(0)));
            let generation = obj
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if generation > 0 {
                meta::set_meta(&mut obj, "generation", Some(json!(generation + 1)));
            }
        }
        if is_namespace {
            obj["status"] = json!({"phase": "Terminating"});
        }
        if info.builtin == Some(Builtin::CustomResourceDefinition) {
            obj["status"] = crd::established_status(&obj, true);
        }
        if dopts.dry_run {
            return Ok(DeleteResult {
                object: Arc::new(obj),
                deleted: false,
            });
        }
        let object = self.persist(info, Some(old), obj).object.clone();
        Ok(DeleteResult {
            object,
            deleted: false,
        })
    }

    /// Deletes every object a list request selects.
    pub fn delete_collection(
        &mut self,
        info: &ResourceInfo,
        ns: Option<&str>,
        list: &ListOptions,
        dopts: &DeleteOptions,
    ) -> Result<Vec<Arc<Value>>, ApiError> {
        let mut opts = list.clone();
        opts.limit = 0;
        opts.continue_token = None;
        let items = self.list(info, ns, &opts)?.items;
        let mut out = Vec::new();
        for item in items {
            let r = self.delete(info, meta::namespace(&item), meta::name(&item), dopts)?;
            out.push(r.object);
        }
        Ok(out)
    }

    /// Stores a created or updated object; an object that is being deleted
    /// and has no finalizers left is removed instead.
    pub fn persist(
        &mut self,
        info: &ResourceInfo,
        old: Option<Arc<Value>>,
        obj: Value,
    ) -> Arc<Event> {
        let storage = info.storage.clone();
        let namespace_held = info.builtin == Some(Builtin::Namespace)
            && obj
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
        let gone = meta::is_deleting(&obj) && meta::finalizers(&obj).is_empty() && !namespace_held;
        let etype = if gone {
            EventType::Deleted
        } else if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        let event = self.commit(&storage, etype, obj, old);
        self.after_commit(&storage, &event.object, etype);
        event
    }

    /// Removes an object for good.
    pub fn persist_delete(&mut self, info: &ResourceInfo, old: Arc<Value>) -> Arc<Value> {
        let storage = info.storage.clone();
        let obj = (*old).clone();
        let stored = self
            .commit(&storage, EventType::Deleted, obj, Some(old))
            .object
            .clone();
        self.after_commit(&storage, &stored, EventType::Deleted);
        stored
    }

    fn after_commit(&mut self, storage: &Arc<str>, obj: &Arc<Value>, etype: EventType) {
        match &**storage {
            builtin::CRDS => {
                let served = meta::name(obj).to_string();
                self.registry.remove_storage(&served);
                if etype == EventType::Deleted {
                    self.objects.remove(served.as_str());
                } else {
                    for info in crd::resources_for(obj) {
                        self.registry.insert(info);
                    }
                }
            }
            s if s.ends_with(".rbac.authorization.k8s.io") => self.rbac_epoch += 1,
            _ => {}
        }
        if etype != EventType::Deleted && meta::is_deleting(obj) {
            self.controllers_pending = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_changes_ignore_metadata_and_optionally_status() {
        let a = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}, "status": {"s": 1}});
        let b = json!({"metadata": {"labels": {"a": "2"}}, "spec": {"x": 1}, "status": {"s": 2}});
        assert!(!spec_changed(&a, &b, true));
        assert!(spec_changed(&a, &b, false));
        let c = json!({"metadata": {}, "spec": {"x": 2}, "status": {"s": 1}});
        assert!(spec_changed(&a, &c, true));
        let d = json!({"metadata": {}, "spec": {"x": 1}, "status": {"s": 1}, "extra": 1});
        assert!(spec_changed(&a, &d, true));
    }

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
