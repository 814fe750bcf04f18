//! The migration record: a ConfigMap `cosi-migrate-<source>` in the COSI
//! namespace holding what a step must remember across runs and that the
//! live objects no longer show once a step has changed them — a source
//! bucket's original deletion policy, an old access's account ID. Tenants
//! cannot write there, so nothing they own can forge it. Each entry is
//! written once, before the change it remembers, and never overwritten:
//! the first value seen is the original one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

use super::Source;

/// The label every object `cosi migrate` writes carries: the source.
pub const MIGRATED_FROM: &str = "objectstorage.cosi-rs.dev/migrated-from";

/// The name of the record of `source`.
pub fn name(source: Source) -> String {
    format!("cosi-migrate-{}", source.as_str())
}

/// The record of one source, as read at the start of a step.
#[derive(Clone, Debug)]
pub struct Record {
    api: Api<ConfigMap>,
    name: String,
    entries: BTreeMap<String, String>,
}

impl Record {
    /// Reads the record of `source` in `namespace` (empty when none exists).
    pub async fn read(
        client: &kube::Client,
        namespace: &str,
        source: Source,
    ) -> kube::Result<Self> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let name = name(source);
        let entries = api
            .get_opt(&name)
            .await?
            .and_then(|cm| cm.data)
            .unwrap_or_default();
        Ok(Self { api, name, entries })
    }

    /// The entry `key`, if recorded.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    /// Every entry.
    pub fn entries(&self) -> &BTreeMap<String, String> {
        &self.entries
    }

    /// Records the entries of `new` not recorded yet (one write for all of
    /// them; none when every key is there already), creating the
    /// namespace and the ConfigMap if needed.
    pub async fn remember(&mut self, new: BTreeMap<String, String>) -> kube::Result<()> {
        let missing: BTreeMap<String, String> = new
            .into_iter()
            .filter(|(k, _)| !self.entries.contains_key(k))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let namespace = self.api.namespace().unwrap_or_default().to_owned();
        if self.api.get_opt(&self.name).await?.is_none() {
            ensure_namespace(&self.api, &namespace).await?;
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(namespace),
                    labels: Some([(MIGRATED_FROM.to_owned(), "record".to_owned())].into()),
                    ..Default::default()
                },
                data: Some(missing.clone()),
                ..Default::default()
            };
            match self.api.create(&PostParams::default(), &cm).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    self.patch(&missing).await?;
                }
                Err(e) => return Err(e),
            }
        } else {
            self.patch(&missing).await?;
        }
        self.entries.extend(missing);
        Ok(())
    }

    async fn patch(&self, missing: &BTreeMap<String, String>) -> kube::Result<()> {
        // Keys already present keep their first value: the live map wins.
        let live = self.api.get(&self.name).await?.data.unwrap_or_default();
        let data: BTreeMap<&String, &String> = missing
            .iter()
            .filter(|(k, _)| !live.contains_key(*k))
            .collect();
        if data.is_empty() {
            return Ok(());
        }
        self.api
            .patch(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "data": data })),
            )
            .await
            .map(drop)
    }
}

async fn ensure_namespace(api: &Api<ConfigMap>, namespace: &str) -> kube::Result<()> {
    let namespaces: Api<Namespace> = Api::all(api.clone().into_client());
    if namespaces.get_opt(namespace).await?.is_some() {
        return Ok(());
    }
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
