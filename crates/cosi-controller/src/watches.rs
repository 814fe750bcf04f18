//! Which objects to reconcile when a related object changes. Buckets are
//! cluster-scoped, so claims do not own them: a Bucket maps to its claim
//! through `spec.bucketClaimRef`, a claim to the accesses naming it through
//! an index of what each access names, a class to the objects still waiting on it.

use std::sync::Arc;

use cosi_api::{
    Bucket, BucketAccess, BucketAccessClaim, BucketAccessClass, BucketClaim, BucketClass,
};
use cosi_runtime::cache::Cache;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use cosi_runtime::ref_index::{Key, RefIndex};

/// The claim a Bucket names in `spec.bucketClaimRef` (bound or reserved).
pub fn bucket_to_claim(bucket: &Bucket) -> Option<ObjectRef<BucketClaim>> {
    let r = &bucket.spec.bucket_claim_ref;
    (!r.name.is_empty() && !r.namespace.is_empty())
        .then(|| ObjectRef::new(&r.name).within(&r.namespace))
}

/// The claims of `class` not bound yet: only they still read their class.
pub fn class_to_claims(
    class: &BucketClass,
    claims: impl IntoIterator<Item = Arc<BucketClaim>>,
) -> Vec<ObjectRef<BucketClaim>> {
    let name = class.name_any();
    refs_where(claims, |c| {
        c.spec.bucket_class_name == name && c.bound_bucket_name().is_none()
    })
}

/// References to those of `objects` that `keep` holds for.
fn refs_where<K>(
    objects: impl IntoIterator<Item = Arc<K>>,
    keep: impl Fn(&K) -> bool,
) -> Vec<ObjectRef<K>>
where
    K: kube::Resource<DynamicType = ()>,
{
    objects
        .into_iter()
        .filter(|o| keep(o))
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

/// The claims an access names (the key of the claim → accesses index).
pub fn claims_named(access: &BucketAccess) -> Vec<Key> {
    keys_named(access, |r| &r.bucket_claim_name)
}

/// The Secrets an access names (the key of the Secret name → accesses
/// index).
pub fn secrets_named(access: &BucketAccess) -> Vec<Key> {
    keys_named(access, |r| &r.access_secret_name)
}

/// The key of the name `field` picks from each claim entry of `access`.
fn keys_named(access: &BucketAccess, field: impl Fn(&BucketAccessClaim) -> &String) -> Vec<Key> {
    let namespace = access.namespace().unwrap_or_default();
    access
        .spec
        .bucket_claims
        .iter()
        .map(|r| (namespace.clone(), field(r).clone()))
        .collect()
}

/// The other accesses naming a Secret `access` names: when one changes or
/// goes, an access refused for sharing its Secret name decides again.
pub fn accesses_sharing_secrets(
    access: &BucketAccess,
    index: &RefIndex<BucketAccess>,
) -> Vec<ObjectRef<BucketAccess>> {
    let name = access.name_any();
    secrets_named(access)
        .iter()
        .flat_map(|(ns, secret)| index.naming(ns, secret))
        .filter(|r| r.name != name)
        .collect()
}

/// The claims an access names that are being deleted: their conditions
/// name the accesses their deletion waits for, which this one may have
/// just stopped being.
pub fn access_to_deleting_claims(
    access: &BucketAccess,
    claims: &Cache<BucketClaim>,
) -> Vec<ObjectRef<BucketClaim>> {
    claims_named(access)
        .into_iter()
        .map(|(ns, name)| ObjectRef::new(&name).within(&ns))
        .filter(|r| {
            claims
                .get(r)
                .is_some_and(|c| c.metadata.deletion_timestamp.is_some())
        })
        .collect()
}

/// The accesses naming the claim a Bucket is bound to.
pub fn bucket_to_accesses(
    bucket: &Bucket,
    index: &RefIndex<BucketAccess>,
) -> Vec<ObjectRef<BucketAccess>> {
    let r = &bucket.spec.bucket_claim_ref;
    if r.name.is_empty() {
        return Vec::new();
    }
    index.naming(&r.namespace, &r.name)
}

/// The accesses of `class` not handed to a sidecar yet (only they still
/// read their class), and those its credential rotation policy concerns.
pub fn access_class_to_accesses(
    class: &BucketAccessClass,
    accesses: impl IntoIterator<Item = Arc<BucketAccess>>,
) -> Vec<ObjectRef<BucketAccess>> {
    let name = class.name_any();
    refs_where(accesses, |a| {
        a.spec.bucket_access_class_name == name
            && (!a.is_handed_to_sidecar()
                || crate::bucket_access::rotation::follows_class(class, a))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use cosi_api::DeletionPolicy;

    #[test]
    fn a_bucket_maps_to_the_claim_it_names() {
        let b = static_bucket("brownfield", "apps", "legacy");
        let r = bucket_to_claim(&b).unwrap();
        assert_eq!(
            (r.name.as_str(), r.namespace.as_deref()),
            ("legacy", Some("apps"))
        );
    }

    #[test]
    fn a_class_maps_only_to_its_unbound_claims() {
        let waiting = claim("waiting");
        let c = claim("bound").finalized();
        let bound = c.clone().bound_to(&bucket_for(&c));
        let mut other = claim("other");
        other.spec.bucket_class_name = "premium".into();
        let claims: Vec<_> = [waiting, bound, other].into_iter().map(Arc::new).collect();
        let refs = class_to_claims(&class(DeletionPolicy::Delete), claims);
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].name, "waiting");
    }

    #[test]
    fn a_bucket_maps_to_the_accesses_naming_its_claim() {
        let index = RefIndex::new(claims_named);
        for a in [
            access("one", &["photos"]),
            access("two", &["videos", "photos"]),
            access("three", &["videos"]),
        ] {
            index.observe(&kube::runtime::watcher::Event::Apply(a));
        }
        let b = bucket_for(&claim("photos"));
        let mut names: Vec<_> = bucket_to_accesses(&b, &index)
            .into_iter()
            .map(|r| r.name)
            .collect();
        names.sort();
        assert_eq!(names, ["one", "two"]);
    }

    #[test]
    fn an_access_class_maps_only_to_accesses_not_handed_off() {
        let mut handed = access("handed", &["photos"]);
        handed.status = Some(cosi_api::BucketAccessStatus {
            driver_name: DRIVER.into(),
            authentication_type: Some(cosi_api::AuthenticationType::Key),
            accessed_buckets: vec![cosi_api::AccessedBucket::default()],
            ..Default::default()
        });
        let accesses: Vec<_> = [access("new", &["photos"]), handed]
            .into_iter()
            .map(Arc::new)
            .collect();
        let refs = access_class_to_accesses(&access_class(), accesses);
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].name, "new");
    }
}
