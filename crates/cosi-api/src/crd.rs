//! CustomResourceDefinitions generated from the types, and their YAML form as
//! checked in under `deploy/crds/`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{Bucket, BucketAccess, BucketAccessClass, BucketClaim, BucketClass};

/// Every COSI CRD with the file name it is checked in under, in install order.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("bucketclasses.yaml", BucketClass::crd()),
        ("bucketaccessclasses.yaml", BucketAccessClass::crd()),
        ("buckets.yaml", Bucket::crd()),
        ("bucketclaims.yaml", BucketClaim::crd()),
        ("bucketaccesses.yaml", BucketAccess::crd()),
    ]
}

/// Renders a CRD as the YAML document checked in under `deploy/crds/`.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::ser::Error> {
    let body = serde_saphyr::to_string(crd)?;
    Ok(format!(
        "# Generated from the types in crates/cosi-api; do not edit.\n# Regenerate with: UPDATE_CRDS=1 cargo test -p cosi-api --test crds\n{body}"
    ))
}

/// All CRDs as one multi-document YAML stream, ready for `kubectl apply -f -`.
pub fn all_yaml() -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for (_, crd) in all() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}
