//! The bound every reconciled, watched or written object meets.

use std::fmt::Debug;

use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A Kubernetes object of a kind known at compile time (every COSI kind,
/// Secrets, Events, ...) that can be read, watched, cached and written
/// from any task.
pub trait Object:
    Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Object for K where
    K: Resource<DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}
