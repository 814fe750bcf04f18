//! Lists: their options and answers, continue tokens, selector matching,
//! and reads at a past resourceVersion rebuilt from the event window.

use super::{EventType, ObjKey, State};
use crate::builtin::{self, Builtin};
use crate::meta;
use crate::resource::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use base64::Engine;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// Options of a list request.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0 = none).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
}

/// A list answer.
#[derive(Debug, Clone)]
pub struct ListResult {
    /// The objects (storage form).
    pub items: Vec<Arc<Value>>,
    /// The list's resourceVersion.
    pub resource_version: u64,
    /// Continue token, when more remain.
    pub continue_token: Option<String>,
    /// Remaining item count, when known.
    pub remaining: Option<u64>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    rv: u64,
    ns: String,
    name: String,
}

fn encode_continue(rv: u64, key: &ObjKey) -> String {
    let tok = ContinueToken {
        rv,
        ns: key.0.clone(),
        name: key.1.clone(),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&tok).unwrap_or_default())
}

fn decode_continue(s: &str) -> Result<ContinueToken, ApiError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| ApiError::bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))
}

/// Whether an object (storage form) passes a request's selectors, judged
/// on the representation the request sees.
pub fn selected(
    info: &ResourceInfo,
    obj: &Value,
    labels: &LabelSelector,
    fields: &FieldSelector,
) -> bool {
    if !labels.is_empty() && !labels.matches(meta::labels(obj)) {
        return false;
    }
    if fields.is_empty() {
        return true;
    }
    if info.builtin == Some(Builtin::EventV1) {
        fields.matches(&builtin::to_view(info, obj))
    } else {
        fields.matches(obj)
    }
}

impl State {
    /// The objects of a storage key as they were at `rv`, rebuilt from the
    /// event window; `None` when `rv` left the window.
    fn snapshot_at(&self, storage: &str, rv: u64) -> Option<BTreeMap<ObjKey, Arc<Value>>> {
        if rv < self.window_start {
            return None;
        }
        let mut map = self.objects.get(storage).cloned().unwrap_or_default();
        for ev in self.log.iter().rev() {
            if ev.rv <= rv {
                break;
            }
            if &*ev.storage != storage {
                continue;
            }
            let key = (
                meta::namespace(&ev.object).to_string(),
                meta::name(&ev.object).to_string(),
            );
            match (ev.etype, &ev.prev) {
                (EventType::Added, _) => {
                    map.remove(&key);
                }
                (_, Some(prev)) => {
                    map.insert(key, prev.clone());
                }
                (_, None) => {
                    map.remove(&key);
                }
            }
        }
        Some(map)
    }

    pub(super) fn list(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListResult, ApiError> {
        let current = self.rv;
        let (snapshot_rv, start_after) = match &opts.continue_token {
            Some(tok) if !tok.is_empty() => {
                let t = decode_continue(tok)?;
                (t.rv, Some((t.ns, t.name)))
            }
            _ => {
                let requested = opts
                    .resource_version
                    .as_deref()
                    .filter(|s| !s.is_empty())
                    .map(|s| {
                        s.parse::<u64>().map_err(|_| {
                            ApiError::bad_request(format!("invalid resource version: {s}"))
                        })
                    })
                    .transpose()?;
                match (requested, opts.resource_version_match.as_deref()) {
                    (None, Some(m)) if !m.is_empty() => {
                        return Err(ApiError::bad_request(
                            "resourceVersionMatch is forbidden unless resourceVersion is provided",
                        ));
                    }
                    (Some(0), Some("Exact")) => {
                        return Err(ApiError::bad_request(
                            "resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"",
                        ));
                    }
                    (Some(r), Some("Exact")) => {
                        if r > current {
                            return Err(too_large(r, current));
                        }
                        (r, None)
                    }
                    (Some(r), _) if r > current => return Err(too_large(r, current)),
                    _ => (current, None),
                }
            }
        };
        let owned;
        let map: &BTreeMap<ObjKey, Arc<Value>> = if snapshot_rv == current {
            static EMPTY: OnceLock<BTreeMap<ObjKey, Arc<Value>>> = OnceLock::new();
            self.objects
                .get(&*info.storage)
                .unwrap_or_else(|| EMPTY.get_or_init(BTreeMap::new))
        } else {
            owned = self.snapshot_at(&info.storage, snapshot_rv).ok_or_else(|| {
                if opts.continue_token.is_some() {
                    ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
                } else {
                    ApiError::expired(format!(
                        "too old resource version: {snapshot_rv} ({})",
                        self.window_start + 1
                    ))
                }
            })?;
            &owned
        };
        let lower = match (&start_after, ns) {
            (Some(k), _) => std::ops::Bound::Excluded(k.clone()),
            (None, Some(ns)) => std::ops::Bound::Included((ns.to_string(), String::new())),
            (None, None) => std::ops::Bound::Unbounded,
        };
        let mut items = Vec::new();
        let mut last_key: Option<&ObjKey> = None;
        let mut more = false;
        let mut remaining = 0u64;
        let selecting = !opts.labels.is_empty() || !opts.fields.is_empty();
        for (key, obj) in map.range((lower, std::ops::Bound::Unbounded)) {
            if let Some(ns) = ns
                && key.0 != ns
            {
                break;
            }
            if !selected(info, obj, &opts.labels, &opts.fields) {
                continue;
            }
            if opts.limit > 0 && items.len() >= opts.limit {
                more = true;
                if selecting {
                    break;
                }
                remaining += 1;
                continue;
            }
            items.push(obj.clone());
            last_key = Some(key);
        }
        let continue_token = if more {
            last_key.map(|k| encode_continue(snapshot_rv, k))
        } else {
            None
        };
        Ok(ListResult {
            items,
            resource_version: snapshot_rv,
            continue_token,
            remaining: (more && !selecting).then_some(remaining),
        })
    }
}

fn too_large(requested: u64, current: u64) -> ApiError {
    let mut e = ApiError::timeout(format!(
        "Timeout: Too large resource version: {requested}, current: {current}"
    ));
    e.details = Some(
        json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
    );
    e
}
