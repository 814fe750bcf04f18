//! Patches: JSON, merge and strategic merge patches of an object or its
//! status, and server-side apply, which may create the object.

use super::super::State;
use super::admit::{check_type_meta, lists_for, scope_for};
use super::{Managed, WriteOptions, WriteResult};
use crate::builtin;
use crate::meta;
use crate::patch::{self, PatchType, apply, strategic};
use crate::resource::ResourceInfo;
use crate::status::{ApiError, FieldError};
use serde_json::{Value, json};
use std::sync::Arc;

impl State {
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
        self.replace_stored(info, ns, name, old, patched, status_write, opts)
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
        let scope = scope_for(info, status_write);
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
            // "using <apiVersion>" only when the manager wrote in another
            // version than this apply, as the API server words it.
            let with = |c: &apply::Conflict| {
                if c.api_version == api_version {
                    format!("conflict with \"{}\"", c.manager)
                } else {
                    format!("conflict with \"{}\" using {}", c.manager, c.api_version)
                }
            };
            let n = conflicts.len();
            let message = if n == 1 {
                format!(
                    "Apply failed with 1 conflict: {}: {}",
                    with(&conflicts[0]),
                    conflicts[0].field()
                )
            } else {
                format!(
                    "Apply failed with {n} conflicts: {}",
                    conflicts
                        .iter()
                        .map(|c| format!("{}: {}", with(c), c.field()))
                        .collect::<Vec<_>>()
                        .join("\n")
                )
            };
            let causes: Vec<Value> = conflicts
                .iter()
                .map(|c| json!({"reason": "FieldManagerConflict", "message": with(c), "field": c.field()}))
                .collect();
            let mut e = ApiError::new(409, "Conflict", message);
            e.details = Some(json!({"causes": causes}));
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
}
