//! Deletion of one object or a collection: preconditions, finalizers and
//! the propagation policies.

use super::super::{ListOptions, State};
use super::{DeleteOptions, DeleteResult, FOREGROUND, ORPHAN, Propagation};
use crate::builtin::Builtin;
use crate::crd;
use crate::meta;
use crate::resource::ResourceInfo;
use crate::status::ApiError;
use serde_json::{Value, json};
use std::sync::Arc;

impl State {
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
        let preconditions = [
            ("UID", &dopts.uid, meta::uid(&old)),
            (
                "ResourceVersion",
                &dopts.resource_version,
                meta::resource_version(&old),
            ),
        ];
        for (field, wanted, actual) in preconditions {
            if let Some(wanted) = wanted
                && wanted != actual
            {
                return Err(ApiError::conflict(
                    &info.gr,
                    name,
                    &format!(
                        "Precondition failed: {field} in precondition: {wanted}, {field} in object meta: {actual}"
                    ),
                ));
            }
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
        // A CRD goes only once its objects are gone: the API server adds
        // the cleanup finalizer when it is deleted.
        if info.builtin == Some(Builtin::CustomResourceDefinition)
            && !fins.iter().any(|f| f == crd::CLEANUP_FINALIZER)
        {
            fins.push(crd::CLEANUP_FINALIZER.into());
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
        meta::set_finalizers(&mut obj, fins);
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
}
