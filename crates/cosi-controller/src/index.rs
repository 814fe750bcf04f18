//! Which BucketAccesses name which BucketClaims, kept from the access watch.
//!
//! Every claim event and every Bucket event asks "which accesses name this
//! claim?". Scanning the access cache for it costs a pass over every access
//! in the cluster per event, so a burst of N pairs cost O(N²); this index
//! answers in O(accesses of the claim). It is fed the same watch events as
//! the access cache, at the same point of the stream, so a trigger mapped
//! through it sees what a scan of the cache would have seen. Like the
//! reflector, a relist keeps the old contents until the list is complete.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use cosi_api::BucketAccess;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;

/// (namespace, name) of a claim or an access.
type Key = (String, String);

#[derive(Debug, Default)]
struct Entries {
    /// claim → the accesses naming it.
    accesses: HashMap<Key, BTreeSet<String>>,
    /// access → the claims it names (to undo its entries on change).
    claims: HashMap<Key, Vec<String>>,
}

impl Entries {
    fn remove(&mut self, access: &Key) {
        let Some(claims) = self.claims.remove(access) else {
            return;
        };
        for claim in claims {
            let key = (access.0.clone(), claim);
            if let Some(set) = self.accesses.get_mut(&key) {
                set.remove(&access.1);
                if set.is_empty() {
                    self.accesses.remove(&key);
                }
            }
        }
    }

    fn insert(&mut self, access: &BucketAccess) {
        let key = (access.namespace().unwrap_or_default(), access.name_any());
        self.remove(&key);
        let claims: Vec<String> = access
            .spec
            .bucket_claims
            .iter()
            .map(|r| r.bucket_claim_name.clone())
            .collect();
        for claim in &claims {
            self.accesses
                .entry((key.0.clone(), claim.clone()))
                .or_default()
                .insert(key.1.clone());
        }
        self.claims.insert(key, claims);
    }
}

#[derive(Debug, Default)]
struct Inner {
    current: Entries,
    /// Filled during a relist; swapped in when it is complete.
    relist: Option<Entries>,
}

/// The claim → accesses index; clones share it.
#[derive(Clone, Debug, Default)]
pub struct ClaimAccesses(Arc<Mutex<Inner>>);

impl ClaimAccesses {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one event of the BucketAccess watch.
    pub fn observe(&self, event: &Event<BucketAccess>) {
        let mut inner = self.lock();
        match event {
            Event::Apply(a) => inner.current.insert(a),
            Event::Delete(a) => {
                let key = (a.namespace().unwrap_or_default(), a.name_any());
                inner.current.remove(&key);
            }
            Event::Init => inner.relist = Some(Entries::default()),
            Event::InitApply(a) => inner.relist.get_or_insert_default().insert(a),
            Event::InitDone => {
                if let Some(listed) = inner.relist.take() {
                    inner.current = listed;
                }
            }
        }
    }

    /// The accesses in `namespace` that name the claim `claim`.
    pub fn of(&self, namespace: &str, claim: &str) -> Vec<ObjectRef<BucketAccess>> {
        let inner = self.lock();
        inner
            .current
            .accesses
            .get(&(namespace.to_owned(), claim.to_owned()))
            .into_iter()
            .flatten()
            .map(|name| ObjectRef::new(name).within(namespace))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{NS, access};

    fn names(index: &ClaimAccesses, claim: &str) -> Vec<String> {
        index.of(NS, claim).into_iter().map(|r| r.name).collect()
    }

    #[test]
    fn accesses_are_found_by_the_claims_they_name() {
        let index = ClaimAccesses::default();
        index.observe(&Event::Apply(access("one", &["photos"])));
        index.observe(&Event::Apply(access("two", &["videos", "photos"])));
        let mut elsewhere = access("three", &["photos"]);
        elsewhere.metadata.namespace = Some("other".into());
        index.observe(&Event::Apply(elsewhere));
        assert_eq!(names(&index, "photos"), ["one", "two"]);
        assert_eq!(names(&index, "videos"), ["two"]);
        assert!(names(&index, "music").is_empty());
        assert_eq!(index.of("other", "photos").len(), 1);
    }

    #[test]
    fn changes_and_deletions_undo_old_entries() {
        let index = ClaimAccesses::default();
        index.observe(&Event::Apply(access("one", &["photos", "videos"])));
        index.observe(&Event::Apply(access("one", &["videos"])));
        assert!(names(&index, "photos").is_empty());
        assert_eq!(names(&index, "videos"), ["one"]);
        index.observe(&Event::Delete(access("one", &["videos"])));
        assert!(names(&index, "videos").is_empty());
        assert!(index.lock().current.claims.is_empty());
    }

    #[test]
    fn a_relist_replaces_the_contents_once_complete() {
        let index = ClaimAccesses::default();
        index.observe(&Event::Apply(access("gone", &["photos"])));
        index.observe(&Event::Init);
        index.observe(&Event::InitApply(access("kept", &["photos"])));
        // Until the list is done, the old contents answer.
        assert_eq!(names(&index, "photos"), ["gone"]);
        index.observe(&Event::InitDone);
        assert_eq!(names(&index, "photos"), ["kept"]);
    }
}
