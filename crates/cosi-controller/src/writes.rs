//! The controller's writes to the objects it reconciles. Each one patches
//! the object at the version it was decided on, names the reconcile step in
//! its error, and records what it wrote as our own write ([`OwnWrites`]), so
//! that a cache still showing the old version is known to be behind.
//!
//! [`OwnWrites`]: cosi_runtime::OwnWrites

use std::borrow::Cow;

use cosi_api::constants::PROTECTION_FINALIZER;
use cosi_runtime::{Object, patch};
use kube::ResourceExt;
use kube::api::Api;
use serde::Serialize;

use crate::context::{Context, describe};
use crate::error::Error;

/// The API error of patching `obj` (its status when `status`) in `step`;
/// the names are only built when the patch failed.
fn patch_failed<'a, K: Object>(
    obj: &'a K,
    status: bool,
    step: &'static str,
) -> impl FnOnce(kube::Error) -> Error + 'a {
    move |source| {
        let plural = K::plural(&());
        let resource: Cow<'static, str> = if status {
            format!("{plural}/status").into()
        } else {
            plural
        };
        Error::patch(step, resource, describe(obj))(source)
    }
}

impl Context {
    /// Adds the protection finalizer to `obj`; `None` when it was there.
    pub async fn add_finalizer<K: Object>(
        &self,
        api: &Api<K>,
        obj: &K,
    ) -> Result<Option<K>, Error> {
        let written = patch::add_finalizer(api, obj, PROTECTION_FINALIZER)
            .await
            .map_err(patch_failed(obj, false, "add finalizer"))?;
        self.recorded(obj, written)
    }

    /// Sets (`Some`) or removes (`None`) annotations of `obj` in `step`;
    /// `None` when they were already so.
    pub async fn annotate<K: Object>(
        &self,
        api: &Api<K>,
        obj: &K,
        changes: &[(&str, Option<&str>)],
        step: &'static str,
    ) -> Result<Option<K>, Error> {
        let written = patch::set_annotations(api, obj, changes)
            .await
            .map_err(patch_failed(obj, false, step))?;
        self.recorded(obj, written)
    }

    /// Merge-patches the status of `obj` with `status` in `step`.
    pub async fn write_status<K: Object, S: Serialize>(
        &self,
        api: &Api<K>,
        obj: &K,
        status: &S,
        step: &'static str,
    ) -> Result<K, Error> {
        let written = patch::patch_status(api, obj, status)
            .await
            .map_err(patch_failed(obj, true, step))?;
        self.own_writes.replaced(obj, &written);
        Ok(written)
    }

    /// Removes the protection finalizer from `obj`, whose versions need no
    /// tracking any more.
    pub async fn remove_finalizer<K: Object>(&self, api: &Api<K>, obj: &K) -> Result<(), Error> {
        patch::remove_finalizer(api, obj, PROTECTION_FINALIZER)
            .await
            .map_err(patch_failed(obj, false, "remove finalizer"))?;
        self.own_writes
            .forget::<K>(obj.namespace().as_deref(), &obj.name_any());
        Ok(())
    }

    fn recorded<K: Object>(&self, before: &K, written: Option<K>) -> Result<Option<K>, Error> {
        if let Some(w) = &written {
            self.own_writes.replaced(before, w);
        }
        Ok(written)
    }
}
