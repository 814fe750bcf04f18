//! Writes, as the API server performs them: decode (typed round trip for
//! built-ins; prune and default for custom resources), the create/update
//! strategy (identity metadata, status subresource, generation), admission
//! (NamespaceLifecycle), validation (metadata, kind rules, schema, CEL),
//! validating admission policies ([`crate::admission`]),
//! field ownership, optimistic concurrency, finalizers and
//! deletionTimestamp, propagation policies, and the patch flavours.
//!
//! Admission lives in `admit`, patches in `patch` and deletion in `delete`;
//! this module holds the options and results and the create and update
//! paths that end every write.

mod admit;
mod delete;
mod patch;

use super::{Event, EventType, State};
use crate::auth::Identity;
use crate::builtin::{self, Builtin};
use crate::crd;
use crate::meta;
use crate::resource::ResourceInfo;
use crate::status::ApiError;
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
    /// Who writes, for the admission policies; `None` for writes kube-sim
    /// makes itself, which no policy checks.
    pub user: Option<Identity>,
}

impl WriteOptions {
    /// Options for writes kube-sim makes itself.
    pub fn internal() -> Self {
        WriteOptions {
            dry_run: false,
            manager: "kube-sim".into(),
            field_validation: FieldValidation::Ignore,
            force: false,
            user: None,
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

/// How managedFields are maintained for a write.
enum Managed {
    /// Record an Update by the request's manager.
    Update,
    /// Already computed (apply).
    Keep,
}

impl State {
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
        self.replace_stored(info, ns, name, old, body, status_write, opts)
    }

    /// Replaces the stored `old` with `body` (an update or a patched
    /// object): the resourceVersion precondition, admission and the write.
    #[allow(clippy::too_many_arguments)]
    fn replace_stored(
        &mut self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        old: Arc<Value>,
        body: Value,
        status_write: bool,
        opts: &WriteOptions,
    ) -> Result<WriteResult, ApiError> {
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
                self.set_served(&served, etype != EventType::Deleted);
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
}
