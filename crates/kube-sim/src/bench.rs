//! Raw write throughput of a running API server (kube-sim, or any other a
//! client reaches), measured through the HTTP API with kube-rs, for
//! benchmarks that want the server's own ceiling in the same run as their
//! end-to-end figures.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, PostParams};
use std::collections::BTreeMap;
use std::time::Instant;

/// Concurrent writers used by [`raw_write_rate`].
pub const WRITERS: usize = 16;

/// Creates `n` ConfigMaps in a fresh namespace with [`WRITERS`] concurrent
/// clients and returns writes per second (the namespace is deleted after).
/// Returns 0.0 when `n` is 0 or a write fails. `client` must be allowed to
/// create and delete namespaces and ConfigMaps.
pub async fn raw_write_rate(client: kube::Client, n: usize) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let ns_name = format!("kube-sim-bench-{}", crate::meta::random_suffix());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(ns_name.clone());
    if namespaces
        .create(&PostParams::default(), &ns)
        .await
        .is_err()
    {
        return 0.0;
    }
    let api: Api<ConfigMap> = Api::namespaced(client, &ns_name);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let api = api.clone();
        let count = n / WRITERS + usize::from(w < n % WRITERS);
        tasks.push(tokio::spawn(async move {
            for i in 0..count {
                let mut cm = ConfigMap::default();
                cm.metadata.name = Some(format!("w{w}-{i}"));
                cm.data = Some(BTreeMap::from([("key".to_string(), format!("value-{i}"))]));
                if api.create(&PostParams::default(), &cm).await.is_err() {
                    return false;
                }
            }
            true
        }));
    }
    let mut ok = true;
    for t in tasks {
        ok &= t.await.unwrap_or(false);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let _ = namespaces.delete(&ns_name, &DeleteParams::default()).await;
    if !ok || elapsed <= 0.0 {
        return 0.0;
    }
    n as f64 / elapsed
}
