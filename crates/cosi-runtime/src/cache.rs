//! The watch caches of the controller and the sidecar: every object of a
//! kind, held compactly and decoded when read.
//!
//! kube's reflector store holds each object in its typed form. At 100,000
//! COSI objects that is 1.8–2.1 KB per object (an `ObjectMeta` of options,
//! a `String` per field, a vector of conditions), about 70 % of each
//! component's memory, for objects a reconcile reads a few times and that
//! otherwise wait. A [`Cache`] holds each object as its JSON, compressed
//! with zstd against a dictionary trained on the cache's first
//! [`TRAIN_AT`] objects (those are compressed again with it then).
//! Objects of one kind share most of their text (field names, class and
//! driver names, condition reasons and messages), which the dictionary
//! holds once, so what an entry keeps is mostly what is its own: name,
//! UID, resourceVersion, times.
//!
//! A read decodes the object anew: [`Cache::get`] returns an `Arc` no other
//! reader holds, so nothing a reconcile holds keeps the cache's memory
//! alive. The objects of a (re)list are handed to the loops as keys
//! ([`Changed::Listed`]) and decoded one at a time as each loop takes them,
//! so a restart never holds every object decoded at once.
//!
//! As in kube's store, a (re)list is buffered and swapped in whole once
//! complete ([`Writer::apply_watcher_event`]), and readiness
//! ([`Cache::wait_until_ready`]) wakes every task waiting for the first
//! list, not only the last one that asked.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use futures::{Stream, StreamExt as _};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;
use tokio::sync::watch;

use crate::Object;

/// The zstd level entries are compressed at: objects of a kind are mostly
/// the dictionary's text, and higher levels save a few bytes an object
/// for several times the CPU of each write.
const LEVEL: i32 = 3;

/// Objects a cache holds before it trains its dictionary on them: enough
/// to show what objects of the kind have in common in each of their
/// states. A smaller cache keeps objects uncompressed (under 1 MB of JSON
/// at this size). Training costs time in proportion to these samples.
const TRAIN_AT: usize = 500;

/// The largest dictionary trained: a few objects' worth, enough for what
/// objects of a kind repeat in each of their states.
const DICTIONARY_SIZE: usize = 8 * 1024;

/// Objects applied last that a cache also holds decoded: the reconciles a
/// change sets off read these, and read them without decoding. A few
/// hundred objects, about 1 MB.
const RECENT: usize = 512;

/// The first byte of an entry: how the rest is stored.
const RAW: u8 = 0;
/// A zstd frame against the cache's dictionary.
const ZSTD: u8 = 1;

/// Every object of `K` a watch has delivered, each compressed (see the
/// module docs). Cheap to clone: clones share the entries.
pub struct Cache<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for Cache<K> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<K> std::fmt::Debug for Cache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("objects", &self.shared.read().len())
            .finish_non_exhaustive()
    }
}

/// Entries by key (`namespace/name`, or `name` for a cluster-scoped kind).
type Entries = HashMap<Arc<str>, Arc<[u8]>>;

struct Shared<K> {
    entries: RwLock<Entries>,
    /// Written before `entries` (and removed from before it), so a read
    /// that finds an object here never finds an older one there after.
    recent: Mutex<Recent<K>>,
    codec: OnceLock<Codec>,
    state: watch::Sender<State>,
}

/// Whether a cache holds its first full list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Listing,
    Ready,
    /// The writer went before the first list was in.
    Closed,
}

impl<K> Shared<K> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries> {
        self.entries.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries> {
        self.entries.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, Recent<K>> {
        self.recent.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The objects applied last, decoded, at most [`RECENT`] of them; the
/// oldest leaves first.
struct Recent<K> {
    objects: HashMap<Arc<str>, (u64, Arc<K>)>,
    /// Keys in the order applied; an object applied again is queued again,
    /// and its older place is passed over.
    order: VecDeque<(u64, Arc<str>)>,
    next: u64,
}

impl<K> Default for Recent<K> {
    fn default() -> Self {
        Self {
            objects: HashMap::new(),
            order: VecDeque::new(),
            next: 0,
        }
    }
}

impl<K> Recent<K> {
    fn get(&self, key: &str) -> Option<Arc<K>> {
        self.objects.get(key).map(|(_, obj)| obj.clone())
    }

    fn put(&mut self, key: Arc<str>, obj: Arc<K>) {
        let applied = self.next;
        self.next += 1;
        self.order.push_back((applied, key.clone()));
        self.objects.insert(key, (applied, obj));
        while self.objects.len() > RECENT || self.order.len() > 2 * RECENT {
            let Some((applied, key)) = self.order.pop_front() else {
                break;
            };
            if self.objects.get(&key).is_some_and(|(a, _)| *a == applied) {
                self.objects.remove(&key);
            }
        }
    }

    fn remove(&mut self, key: &str) {
        self.objects.remove(key);
    }

    fn clear(&mut self) {
        self.objects.clear();
        self.order.clear();
    }
}

/// An empty cache of `K` and the writer that fills it from watch events.
pub fn store<K>() -> (Cache<K>, Writer<K>) {
    let shared = Arc::new(Shared {
        entries: RwLock::default(),
        recent: Mutex::default(),
        codec: OnceLock::new(),
        state: watch::Sender::new(State::Listing),
    });
    let cache = Cache {
        shared: shared.clone(),
    };
    let writer = Writer {
        shared,
        relist: None,
        train_at: TRAIN_AT,
    };
    (cache, writer)
}

/// The key of the object `name` in `namespace` (none: cluster-scoped).
/// Names hold no `/`, so keys of different objects never meet.
fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

fn key_of<K: Object>(obj: &K) -> String {
    let meta = obj.meta();
    key(
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

impl<K: Object> Cache<K> {
    /// The object `r` names, decoded from the cache; `None` when the cache
    /// does not hold it.
    pub fn get(&self, r: &ObjectRef<K>) -> Option<Arc<K>> {
        self.get_key(&key(r.namespace.as_deref(), &r.name))
    }

    /// True when the cache holds the object `r` names (nothing decoded).
    pub fn contains(&self, r: &ObjectRef<K>) -> bool {
        let key = key(r.namespace.as_deref(), &r.name);
        self.shared.read().contains_key(key.as_str())
    }

    fn get_key(&self, key: &str) -> Option<Arc<K>> {
        if let Some(obj) = self.shared.recent().get(key) {
            return Some(obj);
        }
        let entry = self.shared.read().get(key).cloned()?;
        self.decode(&entry).map(Arc::new)
    }

    /// Every object the cache holds, decoded one at a time as the iterator
    /// is advanced (from a snapshot of the entries taken now).
    pub fn objects(&self) -> impl Iterator<Item = Arc<K>> + Send + 'static {
        let entries: Vec<Arc<[u8]>> = self.shared.read().values().cloned().collect();
        let cache = self.clone();
        entries
            .into_iter()
            .filter_map(move |entry| cache.decode(&entry).map(Arc::new))
    }

    /// Every object the cache holds in `namespace`, decoded (only those).
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        let prefix = format!("{namespace}/");
        let entries: Vec<Arc<[u8]>> = self
            .shared
            .read()
            .iter()
            .filter(|(key, _)| key.starts_with(&prefix))
            .map(|(_, entry)| entry.clone())
            .collect();
        entries
            .iter()
            .filter_map(|entry| self.decode(entry).map(Arc::new))
            .collect()
    }

    fn decode(&self, entry: &[u8]) -> Option<K> {
        let json = match entry.split_first() {
            Some((&RAW, json)) => Cow::Borrowed(json),
            Some((&ZSTD, frame)) => Cow::Owned(self.shared.codec.get()?.decompress(frame)?),
            _ => return None,
        };
        match serde_json::from_slice(&json) {
            Ok(obj) => Some(obj),
            Err(e) => {
                // Only a type whose JSON does not read back gets here.
                tracing::error!(kind = %K::kind(&()), error = %e, "a cached object does not decode");
                None
            }
        }
    }
}

impl<K> Cache<K> {
    /// How many objects the cache holds.
    pub fn len(&self) -> usize {
        self.shared.read().len()
    }

    /// True when the cache holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the entries take (keys and compressed objects, without the
    /// table around them): what [`Cache::len`] objects cost.
    pub fn entry_bytes(&self) -> usize {
        self.shared
            .read()
            .iter()
            .map(|(key, entry)| key.len() + entry.len())
            .sum()
    }

    /// The keys of every object the cache holds, each shared with it.
    fn keys(&self) -> Vec<Arc<str>> {
        self.shared.read().keys().cloned().collect()
    }

    /// Waits until the cache holds its first full list; `false` if its
    /// writer is gone before that. Any number of tasks may wait.
    pub async fn wait_until_ready(&self) -> bool {
        let mut state = self.shared.state.subscribe();
        let state = state.wait_for(|s| *s != State::Listing).await;
        state.is_ok_and(|s| *s == State::Ready)
    }

    /// True once the cache holds its first full list.
    pub fn is_ready(&self) -> bool {
        *self.shared.state.borrow() == State::Ready
    }
}

/// Fills a [`Cache`] from the events of a watch, in order.
pub struct Writer<K> {
    shared: Arc<Shared<K>>,
    /// The objects of a (re)list in progress, swapped in when it is done.
    relist: Option<Entries>,
    /// How many objects the cache holds when a dictionary is next trained
    /// (doubled after a training that failed).
    train_at: usize,
}

impl<K: Object> Writer<K> {
    /// Applies one watch event to the cache: an applied object replaces
    /// its entry, a deleted one leaves, and the objects of a (re)list
    /// replace every entry at once when it is done.
    pub fn apply_watcher_event(&mut self, event: &Event<K>) {
        match event {
            Event::Apply(obj) => {
                let entry = self.encode(obj);
                let key: Arc<str> = key_of(obj).into();
                self.shared.recent().put(key.clone(), Arc::new(obj.clone()));
                self.shared.write().insert(key, entry);
            }
            Event::Delete(obj) => {
                let key = key_of(obj);
                self.shared.recent().remove(&key);
                self.shared.write().remove(key.as_str());
            }
            Event::Init => self.relist = Some(Entries::new()),
            Event::InitApply(obj) => {
                let entry = self.encode(obj);
                self.relist
                    .get_or_insert_with(Entries::new)
                    .insert(key_of(obj).into(), entry);
            }
            Event::InitDone => {
                let mut listed = self.relist.take().unwrap_or_default();
                listed.shrink_to_fit();
                // What was applied before the list may be gone or older.
                self.shared.recent().clear();
                *self.shared.write() = listed;
                self.shared.state.send_replace(State::Ready);
            }
        }
        self.train_when_due();
    }

    fn encode(&self, obj: &K) -> Arc<[u8]> {
        let json = match serde_json::to_vec(obj) {
            Ok(json) => json,
            Err(e) => {
                // k8s-openapi's and the COSI types' JSON cannot fail; the
                // object is kept with what is known of it rather than lost.
                tracing::error!(kind = %K::kind(&()), error = %e, "an object does not encode");
                Vec::new()
            }
        };
        encoded(self.shared.codec.get(), &json)
    }

    /// Once the cache holds [`TRAIN_AT`] objects: trains the dictionary
    /// on them and compresses every entry with it.
    fn train_when_due(&mut self) {
        if self.shared.codec.get().is_some() {
            return;
        }
        let held = self.shared.read().len() + self.relist.as_ref().map_or(0, Entries::len);
        if held < self.train_at {
            return;
        }
        let samples: Vec<Arc<[u8]>> = {
            let entries = self.shared.read();
            let listed = self.relist.iter().flat_map(Entries::values);
            entries.values().chain(listed).cloned().collect()
        };
        let samples: Vec<&[u8]> = samples.iter().filter_map(|e| raw(e)).collect();
        let Some(codec) = Codec::trained(&samples) else {
            self.train_at = held.saturating_mul(2);
            return;
        };
        let codec = self.shared.codec.get_or_init(|| codec);
        let recode = |entries: &mut Entries| {
            for entry in entries.values_mut() {
                if let Some(json) = raw(entry) {
                    *entry = encoded(Some(codec), json);
                }
            }
        };
        recode(&mut self.shared.write());
        if let Some(listed) = self.relist.as_mut() {
            recode(listed);
        }
    }
}

impl<K> Drop for Writer<K> {
    fn drop(&mut self) {
        // Wakes the tasks waiting for a first list that will never come.
        self.shared.state.send_if_modified(|state| {
            let listing = *state == State::Listing;
            if listing {
                *state = State::Closed;
            }
            listing
        });
    }
}

/// The entry of `json`: compressed when there is a codec and that makes
/// it smaller, else as it is.
fn encoded(codec: Option<&Codec>, json: &[u8]) -> Arc<[u8]> {
    match codec.and_then(|c| c.compress(json)) {
        Some(frame) if frame.len() < json.len() => tagged(ZSTD, &frame),
        _ => tagged(RAW, json),
    }
}

/// The JSON of an entry kept as it is.
fn raw(entry: &[u8]) -> Option<&[u8]> {
    match entry.split_first() {
        Some((&RAW, json)) => Some(json),
        _ => None,
    }
}

fn tagged(tag: u8, bytes: &[u8]) -> Arc<[u8]> {
    let mut entry = Vec::with_capacity(bytes.len() + 1);
    entry.push(tag);
    entry.extend_from_slice(bytes);
    entry.into()
}

/// A compressor and a decompressor loaded with one cache's dictionary.
struct Codec {
    compressor: Mutex<zstd::bulk::Compressor<'static>>,
    decompressor: Mutex<zstd::bulk::Decompressor<'static>>,
}

impl Codec {
    /// A codec with a dictionary trained on `samples` (objects' JSON);
    /// `None` when zstd cannot train one from them (too few, or too
    /// alike), logged.
    fn trained(samples: &[&[u8]]) -> Option<Self> {
        let codec = zstd::dict::from_samples(samples, DICTIONARY_SIZE).and_then(|dictionary| {
            Ok(Self {
                compressor: Mutex::new(zstd::bulk::Compressor::with_dictionary(
                    LEVEL,
                    &dictionary,
                )?),
                decompressor: Mutex::new(zstd::bulk::Decompressor::with_dictionary(&dictionary)?),
            })
        });
        match codec {
            Ok(codec) => Some(codec),
            Err(e) => {
                tracing::info!(samples = samples.len(), error = %e, "no cache dictionary trained yet; objects stay uncompressed until the cache doubles");
                None
            }
        }
    }

    fn compress(&self, json: &[u8]) -> Option<Vec<u8>> {
        let mut compressor = self
            .compressor
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        compressor.compress(json).ok()
    }

    fn decompress(&self, frame: &[u8]) -> Option<Vec<u8>> {
        // Every frame the compressor writes records its content's size.
        let size = zstd::zstd_safe::get_frame_content_size(frame).ok()??;
        let mut decompressor = self
            .decompressor
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        decompressor
            .decompress(frame, usize::try_from(size).ok()?)
            .ok()
    }
}

/// An object that changed, as a trigger of the reconcile loops: one a
/// watch event brought, or one of a (re)list, read from the cache only
/// when a loop takes it.
pub enum Changed<K> {
    /// An applied or deleted object, as the watch delivered it.
    Object(Arc<K>),
    /// A listed object: its cache and key.
    Listed(Cache<K>, Arc<str>),
}

impl<K> Clone for Changed<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Object(obj) => Self::Object(obj.clone()),
            Self::Listed(cache, key) => Self::Listed(cache.clone(), key.clone()),
        }
    }
}

impl<K: Object> Changed<K> {
    /// The object: as the watch delivered it, or a listed one as the cache
    /// holds it now (`None` once it has left the cache; its deletion is a
    /// trigger of its own).
    pub fn object(self) -> Option<Arc<K>> {
        match self {
            Self::Object(obj) => Some(obj),
            Self::Listed(cache, key) => cache.get_key(&key),
        }
    }
}

/// The objects of a stream of [`Changed`], each read as the stream is
/// polled (listed objects gone since are skipped); errors pass through.
pub fn taken<K: Object, E>(
    changed: impl Stream<Item = Result<Changed<K>, E>>,
) -> impl Stream<Item = Result<Arc<K>, E>> {
    changed.filter_map(|item| {
        std::future::ready(match item {
            Ok(changed) => changed.object().map(Ok),
            Err(e) => Some(Err(e)),
        })
    })
}

/// The objects a watch event triggers reconciles of, once `cache` has
/// applied it: an applied or deleted object, and at the end of a (re)list
/// every object listed, as keys into the cache.
pub fn triggered<K>(cache: &Cache<K>, event: Event<K>) -> Vec<Changed<K>> {
    match event {
        Event::Apply(obj) | Event::Delete(obj) => vec![Changed::Object(Arc::new(obj))],
        Event::Init | Event::InitApply(_) => Vec::new(),
        Event::InitDone => cache
            .keys()
            .into_iter()
            .map(|key| Changed::Listed(cache.clone(), key))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(name: &str, data: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("apps".into());
        cm.metadata.uid = Some(format!("uid-of-{name}"));
        cm.data = Some([("k".to_owned(), data.to_owned())].into());
        cm
    }

    fn at(name: &str) -> ObjectRef<ConfigMap> {
        ObjectRef::new(name).within("apps")
    }

    #[test]
    fn objects_read_back_as_they_were_written() {
        let (cache, mut writer) = store::<ConfigMap>();
        let long = "the same text again and again ".repeat(20);
        for (name, data) in [("a", long.as_str()), ("b", "short"), ("c", "")] {
            writer.apply_watcher_event(&Event::Apply(cm(name, data)));
        }
        for (name, data) in [("a", long.as_str()), ("b", "short"), ("c", "")] {
            assert_eq!(*cache.get(&at(name)).unwrap(), cm(name, data));
        }
        assert_eq!(cache.get(&at("d")), None);
        assert_eq!(cache.get(&ObjectRef::new("a")), None, "another scope");
        assert_eq!(cache.len(), 3);
    }

    /// A ConfigMap like the objects of one kind: the same text, and what
    /// is its own (name, a UID-like string, a number).
    fn like_the_others(i: usize) -> ConfigMap {
        let text = "a condition message every object of the kind repeats; ".repeat(8);
        let mut obj = cm(&format!("object-{i}"), &text);
        obj.metadata.uid = Some(format!(
            "{:032x}",
            (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c)
        ));
        obj.metadata.resource_version = Some((1_000_000 + 7 * i).to_string());
        obj
    }

    #[test]
    fn objects_stay_as_they_are_until_a_dictionary_is_trained_on_them() {
        let (cache, mut writer) = store::<ConfigMap>();
        for i in 0..TRAIN_AT - 1 {
            writer.apply_watcher_event(&Event::Apply(like_the_others(i)));
        }
        let json: usize = (0..TRAIN_AT - 1)
            .map(|i| serde_json::to_vec(&like_the_others(i)).unwrap().len())
            .sum();
        let keys: usize = (0..TRAIN_AT - 1)
            .map(|i| format!("apps/object-{i}").len())
            .sum();
        assert_eq!(
            cache.entry_bytes(),
            json + keys + TRAIN_AT - 1,
            "one tag byte each"
        );
        // The object that makes TRAIN_AT: every entry is compressed.
        writer.apply_watcher_event(&Event::Apply(like_the_others(TRAIN_AT - 1)));
        let compressed = cache.entry_bytes();
        assert!(compressed * 4 < json, "{compressed} bytes of {json}");
        for i in [0, TRAIN_AT / 2, TRAIN_AT - 1] {
            assert_eq!(
                *cache.get(&at(&format!("object-{i}"))).unwrap(),
                like_the_others(i)
            );
        }
        // Later objects are compressed when written.
        let later = like_the_others(TRAIN_AT + 5);
        writer.apply_watcher_event(&Event::Apply(later.clone()));
        let kept = cache.entry_bytes() - compressed;
        let its_json = serde_json::to_vec(&later).unwrap().len();
        assert!(kept * 4 < its_json, "{kept} bytes of {its_json}");
        assert_eq!(
            *cache.get(&at(&format!("object-{}", TRAIN_AT + 5))).unwrap(),
            later
        );
    }

    #[test]
    fn a_list_is_trained_on_before_it_is_swapped_in() {
        let (cache, mut writer) = store::<ConfigMap>();
        writer.apply_watcher_event(&Event::Init);
        for i in 0..TRAIN_AT + 10 {
            writer.apply_watcher_event(&Event::InitApply(like_the_others(i)));
        }
        assert!(cache.is_empty());
        writer.apply_watcher_event(&Event::InitDone);
        let json: usize = (0..TRAIN_AT + 10)
            .map(|i| serde_json::to_vec(&like_the_others(i)).unwrap().len())
            .sum();
        assert!(cache.entry_bytes() * 4 < json);
        assert_eq!(cache.objects().count(), TRAIN_AT + 10);
        assert_eq!(*cache.get(&at("object-3")).unwrap(), like_the_others(3));
    }

    #[test]
    fn the_objects_applied_last_are_read_without_decoding() {
        let (cache, mut writer) = store::<ConfigMap>();
        let name = |i: usize| format!("o-{i}");
        for i in 0..RECENT + 10 {
            writer.apply_watcher_event(&Event::Apply(cm(&name(i), "x")));
        }
        let last = at(&name(RECENT + 9));
        let (a, b) = (cache.get(&last).unwrap(), cache.get(&last).unwrap());
        assert!(Arc::ptr_eq(&a, &b), "one decoded object for both reads");
        let first = at(&name(0));
        let (a, b) = (cache.get(&first).unwrap(), cache.get(&first).unwrap());
        assert!(
            !Arc::ptr_eq(&a, &b),
            "left the recent ones: decoded per read"
        );
        assert_eq!(*a, cm(&name(0), "x"));
        assert_eq!(cache.shared.recent().objects.len(), RECENT);
        // Applied again, an object is read as it is now; deleted, not at all.
        writer.apply_watcher_event(&Event::Apply(cm(&name(0), "y")));
        assert_eq!(cache.get(&first).unwrap().data.as_ref().unwrap()["k"], "y");
        writer.apply_watcher_event(&Event::Delete(cm(&name(RECENT + 9), "x")));
        assert!(cache.get(&last).is_none());
        // A list replaces them all: none is kept decoded from before it.
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(cm(&name(0), "z")));
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(cache.get(&first).unwrap().data.as_ref().unwrap()["k"], "z");
        assert!(cache.get(&at(&name(1))).is_none());
        for i in 0..10 * RECENT {
            writer.apply_watcher_event(&Event::Apply(cm(&name(i % 3), "again")));
        }
        let recent = cache.shared.recent();
        assert_eq!(recent.objects.len(), 3);
        assert!(
            recent.order.len() <= 2 * RECENT,
            "places passed over are dropped"
        );
    }

    #[test]
    fn a_relist_replaces_everything_when_it_is_done() {
        let (cache, mut writer) = store::<ConfigMap>();
        writer.apply_watcher_event(&Event::Apply(cm("old", "x")));
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(cm("new", "y")));
        assert!(
            cache.get(&at("old")).is_some(),
            "kept until the list is done"
        );
        assert!(cache.get(&at("new")).is_none());
        assert!(!cache.is_ready());
        writer.apply_watcher_event(&Event::InitDone);
        assert!(cache.get(&at("old")).is_none());
        assert_eq!(
            cache.get(&at("new")).unwrap().metadata.name.as_deref(),
            Some("new")
        );
        assert!(cache.is_ready());
        writer.apply_watcher_event(&Event::Delete(cm("new", "y")));
        assert!(cache.is_empty());
    }

    #[test]
    fn a_namespace_is_read_alone() {
        let (cache, mut writer) = store::<ConfigMap>();
        let mut other = cm("a", "x");
        other.metadata.namespace = Some("apps-2".into());
        writer.apply_watcher_event(&Event::Apply(cm("a", "x")));
        writer.apply_watcher_event(&Event::Apply(other));
        let names: Vec<_> = cache
            .in_namespace("apps")
            .iter()
            .map(|o| o.metadata.namespace.clone().unwrap())
            .collect();
        assert_eq!(names, ["apps"]);
        assert_eq!(cache.objects().count(), 2);
    }

    #[test]
    fn a_list_triggers_keys_read_when_taken() {
        let (cache, mut writer) = store::<ConfigMap>();
        let mut apply = |event: Event<ConfigMap>| {
            writer.apply_watcher_event(&event);
            triggered(&cache, event)
        };
        assert!(apply(Event::Init).is_empty());
        assert!(apply(Event::InitApply(cm("a", "1"))).is_empty());
        assert!(apply(Event::InitApply(cm("b", "2"))).is_empty());
        let listed = apply(Event::InitDone);
        assert!(listed.iter().all(|c| matches!(c, Changed::Listed(..))));
        let changed = apply(Event::Apply(cm("a", "3")));
        let mut names: Vec<_> = listed
            .into_iter()
            .filter_map(Changed::object)
            .map(|o| {
                (
                    o.metadata.name.clone().unwrap(),
                    o.data.clone().unwrap()["k"].clone(),
                )
            })
            .collect();
        names.sort();
        // A listed object is read when taken: "a" as it is now.
        assert_eq!(names, [("a".into(), "3".into()), ("b".into(), "2".into())]);
        assert_eq!(
            changed[0].clone().object().unwrap().data.as_ref().unwrap()["k"],
            "3"
        );
        let gone = apply(Event::Delete(cm("b", "2")));
        assert_eq!(
            gone[0].clone().object().unwrap().metadata.name.as_deref(),
            Some("b")
        );
        let taken_late = Changed::Listed(cache.clone(), "apps/b".into());
        assert!(taken_late.object().is_none(), "gone since the list");
    }

    #[tokio::test]
    async fn every_waiter_wakes_when_the_first_list_is_in() {
        let (cache, mut writer) = store::<ConfigMap>();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                tokio::spawn({
                    let cache = cache.clone();
                    async move { cache.wait_until_ready().await }
                })
            })
            .collect();
        tokio::task::yield_now().await;
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        for waiter in waiters {
            assert!(waiter.await.unwrap());
        }
        let (never, writer) = store::<ConfigMap>();
        drop(writer);
        assert!(!never.wait_until_ready().await, "the writer is gone");
    }
}
