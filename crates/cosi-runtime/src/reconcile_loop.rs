//! Stopping a kube-runtime reconcile loop promptly.
//!
//! After a graceful shutdown a `Controller` loop drains its in-flight
//! reconciles and ends by itself, except before its reader store has listed
//! once: kube-runtime holds every reconcile until then, and a shutdown that
//! comes first would wait forever. Nothing can be in flight in that case, so
//! the loop is dropped at once.

use std::future::Future;
use std::hash::Hash;

use futures::FutureExt as _;
use kube::runtime::reflector::Store;

use crate::shutdown::Shutdown;

/// Runs `run` (a `Controller::run(..).for_each(..)` future whose reader store
/// is `store`) until it ends, or until `shutdown` if the store never listed.
pub async fn until_stopped<K>(run: impl Future<Output = ()>, store: Store<K>, shutdown: Shutdown)
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    let stopped_unlisted = async {
        shutdown.wait().await;
        if store.wait_until_ready().now_or_never().is_some() {
            // Listed (or its watch is gone): the loop drains and ends by itself.
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = run => {}
        () = stopped_unlisted => tracing::debug!("stopped before the initial list"),
    }
}
