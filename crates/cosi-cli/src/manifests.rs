//! The objects the quickstart and the dev stack create: classes for the
//! local driver, and the claim and accesses of the quickstart.

use std::collections::BTreeMap;

use cosi_api::{
    AuthenticationType, BucketAccess, BucketAccessClaim, BucketAccessClass, BucketAccessClassSpec,
    BucketAccessMode, BucketAccessSpec, BucketClaim, BucketClaimSpec, BucketClass, BucketClassSpec,
    DeletionPolicy, MultiBucketAccess, Protocol,
};

/// Creates the cluster-wide `object` (a namespace or a class).
pub async fn create_cluster_object<K>(client: &kube::Client, object: &K) -> kube::Result<K>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    kube::Api::all(client.clone())
        .create(&kube::api::PostParams::default(), object)
        .await
}

/// A BucketClass for `driver` with `policy`.
pub fn bucket_class(name: &str, driver: &str, policy: DeletionPolicy) -> BucketClass {
    BucketClass::new(
        name,
        BucketClassSpec {
            driver_name: driver.to_owned(),
            deletion_policy: policy,
            parameters: BTreeMap::new(),
        },
    )
}

/// A Key-authenticated BucketAccessClass for `driver`.
pub fn access_class(name: &str, driver: &str, multi: MultiBucketAccess) -> BucketAccessClass {
    BucketAccessClass::new(
        name,
        BucketAccessClassSpec {
            driver_name: driver.to_owned(),
            authentication_type: AuthenticationType::Key,
            parameters: BTreeMap::new(),
            multi_bucket_access: Some(multi),
            disallowed_bucket_access_modes: Default::default(),
        },
    )
}

/// A namespaced S3 BucketClaim from `class`.
pub fn claim(namespace: &str, name: &str, class: &str) -> BucketClaim {
    let mut c = BucketClaim::new(
        name,
        BucketClaimSpec {
            bucket_class_name: class.to_owned(),
            protocols: vec![Protocol::S3],
            existing_bucket_name: String::new(),
        },
    );
    c.metadata.namespace = Some(namespace.to_owned());
    c
}

/// An S3 BucketAccess to `claims` (claim name, Secret name) with one mode
/// for object data and object metadata.
pub fn access(
    namespace: &str,
    name: &str,
    class: &str,
    claims: &[(&str, &str)],
    mode: BucketAccessMode,
) -> BucketAccess {
    let mut a = BucketAccess::new(
        name,
        BucketAccessSpec {
            bucket_claims: claims
                .iter()
                .map(|(claim, secret)| BucketAccessClaim::new(*claim, *secret, mode))
                .collect(),
            bucket_access_class_name: class.to_owned(),
            protocol: Protocol::S3,
            service_account_name: String::new(),
        },
    );
    a.metadata.namespace = Some(namespace.to_owned());
    a
}
