//! Kubernetes Events for users (`events.k8s.io/v1`). A repeat of an Event
//! (same type, action, reason, object and reporter) within six minutes is
//! folded into the first one's `series` instead of creating another, as
//! client-go's and kube-runtime's recorders do; publishing never fails a
//! reconcile because an Event could not be written.
//!
//! kube-runtime's `Recorder` scans its whole cache on every publish to
//! expire old entries, which makes a burst of N Events cost O(N²), and it
//! keeps a copy of every Event. Here entries expire in the order they were
//! last seen, from a queue, and only what a series patch needs is kept.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

/// How long a repeat is folded into an earlier Event's series.
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// The API refuses notes over 1 kB.
const MAX_NOTE: usize = 1024;

/// An Event's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something went as it should.
    Normal,
    /// Something the user may have to look at.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// What makes two Events the same Event repeated (the reporter is the same
/// for every Event of one [`EventReporter`]): type, action, reason, and
/// the apiVersion, kind, namespace, name and uid of the object, in one
/// shared string (NUL-separated; an absent part is empty). The window's
/// map and its expiry queue share it, so a burst of Events keeps one
/// allocation per Event, not two copies of seven strings.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key(Arc<str>);

impl Key {
    fn new(type_: EventType, action: &str, reason: &str, regarding: &ObjectReference) -> Self {
        fn part(p: &Option<String>) -> &str {
            p.as_deref().unwrap_or_default()
        }
        let parts = [
            type_.as_str(),
            action,
            reason,
            part(&regarding.api_version),
            part(&regarding.kind),
            part(&regarding.namespace),
            part(&regarding.name),
            part(&regarding.uid),
        ];
        Self(parts.join("\0").into())
    }
}

/// An Event written earlier, as far as a series patch needs it.
#[derive(Clone, Debug, PartialEq)]
struct Written {
    namespace: String,
    name: String,
    /// How often it happened (1 until it becomes a series).
    count: i32,
    last_observed: Timestamp,
}

/// The Events of the last [`SERIES_WINDOW`], and the order they expire in.
#[derive(Debug, Default)]
struct Recent {
    by_key: HashMap<Key, Written>,
    /// (last observed, key) in the order of observation; an entry seen
    /// again is queued again, and its older queue entries are skipped.
    expiry: VecDeque<(Timestamp, Key)>,
}

impl Recent {
    /// Forgets what was last observed a whole window before `now`.
    fn expire(&mut self, now: Timestamp) {
        while let Some((seen, _)) = self.expiry.front() {
            if *seen + SERIES_WINDOW > now {
                break;
            }
            let Some((seen, key)) = self.expiry.pop_front() else {
                break;
            };
            if self
                .by_key
                .get(&key)
                .is_some_and(|w| w.last_observed == seen)
            {
                self.by_key.remove(&key);
            }
        }
    }

    /// The Event `key` continues, if one was written within the window.
    fn get(&mut self, key: &Key, now: Timestamp) -> Option<Written> {
        self.expire(now);
        self.by_key.get(key).cloned()
    }

    fn record(&mut self, key: Key, written: Written) {
        self.expiry.push_back((written.last_observed, key.clone()));
        self.by_key.insert(key, written);
    }
}

/// Publishes Events on behalf of one component.
#[derive(Clone)]
pub struct EventReporter {
    client: Client,
    controller: String,
    instance: String,
    recent: Arc<Mutex<Recent>>,
}

impl EventReporter {
    /// A reporter named `controller` (the Events' reporting controller; the
    /// instance is `POD_NAME` when set).
    pub fn new(client: Client, controller: &str) -> Self {
        Self {
            client,
            controller: controller.to_owned(),
            instance: std::env::var("POD_NAME").unwrap_or_else(|_| controller.to_owned()),
            recent: Arc::default(),
        }
    }

    fn recent(&self) -> MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An Event of `type_` about `regarding`; a repeat of a recent Event
    /// (same type, action, reason and object) updates its series instead.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let now = Timestamp::now();
        let key = Key::new(type_, action, reason, regarding);
        let earlier = self.recent().get(&key, now);
        let repeated = match earlier {
            Some(earlier) => match self.repeat(&earlier, now).await {
                // The earlier Event is gone (expired on the server): start anew.
                Err(kube::Error::Api(s)) if s.code == 404 => None,
                other => Some(other),
            },
            None => None,
        };
        let result = match repeated {
            Some(result) => result,
            None => {
                self.create(regarding, type_, action, reason, note, now)
                    .await
            }
        };
        match result {
            Ok(written) => self.recent().record(key, written),
            Err(e) => {
                tracing::warn!(reason, object = ?regarding.name, error = %e, "cannot publish event");
            }
        }
    }

    /// Creates the first Event of `type_`, `action` and `reason` about `regarding`.
    async fn create(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        action: &str,
        reason: &str,
        note: String,
        now: Timestamp,
    ) -> Result<Written, kube::Error> {
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or(&self.controller),
            now.as_nanosecond()
        );
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            action: Some(action.to_owned()),
            reason: Some(reason.to_owned()),
            note: Some(truncated(note)),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(type_.as_str().to_owned()),
            ..Event::default()
        };
        Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await?;
        Ok(Written {
            namespace,
            name,
            count: 1,
            last_observed: now,
        })
    }

    /// Counts one more occurrence in the series of `earlier`.
    async fn repeat(&self, earlier: &Written, now: Timestamp) -> Result<Written, kube::Error> {
        let count = earlier.count + 1;
        let patch = json!({
            "series": { "count": count, "lastObservedTime": MicroTime(now) }
        });
        Api::<Event>::namespaced(self.client.clone(), &earlier.namespace)
            .patch(
                &earlier.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        Ok(Written {
            count,
            last_observed: now,
            ..earlier.clone()
        })
    }
}

/// `note` cut to what the API accepts, marked with "...".
fn truncated(mut note: String) -> String {
    if note.len() > MAX_NOTE {
        let mut cut = MAX_NOTE - 3;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        let regarding = ObjectReference {
            name: Some(name.to_owned()),
            ..ObjectReference::default()
        };
        Key::new(EventType::Normal, "Provision", "Provisioned", &regarding)
    }

    fn written(name: &str, count: i32, at: Timestamp) -> Written {
        Written {
            namespace: "ns".into(),
            name: name.into(),
            count,
            last_observed: at,
        }
    }

    #[test]
    fn a_repeat_within_the_window_continues_the_series() {
        let t0 = Timestamp::UNIX_EPOCH;
        let mut recent = Recent::default();
        recent.record(key("a"), written("a.1", 1, t0));
        let later = t0 + SignedDuration::from_mins(5);
        assert_eq!(recent.get(&key("a"), later), Some(written("a.1", 1, t0)));
        assert_eq!(recent.get(&key("b"), later), None);
    }

    #[test]
    fn an_event_not_seen_for_a_whole_window_is_forgotten() {
        let t0 = Timestamp::UNIX_EPOCH;
        let mut recent = Recent::default();
        recent.record(key("a"), written("a.1", 1, t0));
        recent.record(
            key("b"),
            written("b.1", 1, t0 + SignedDuration::from_mins(3)),
        );
        let t6 = t0 + SERIES_WINDOW;
        assert_eq!(recent.get(&key("a"), t6), None);
        assert!(recent.get(&key("b"), t6).is_some());
        assert_eq!(recent.by_key.len(), 1);
        assert_eq!(recent.expiry.len(), 1);
    }

    #[test]
    fn an_event_seen_again_expires_from_its_last_observation() {
        let t0 = Timestamp::UNIX_EPOCH;
        let t4 = t0 + SignedDuration::from_mins(4);
        let mut recent = Recent::default();
        recent.record(key("a"), written("a.1", 1, t0));
        recent.record(key("a"), written("a.1", 2, t4));
        // The first observation's queue entry passes; the series stays.
        let t7 = t0 + SignedDuration::from_mins(7);
        assert_eq!(recent.get(&key("a"), t7), Some(written("a.1", 2, t4)));
        assert_eq!(recent.expiry.len(), 1);
        assert_eq!(recent.get(&key("a"), t4 + SERIES_WINDOW), None);
        assert!(recent.expiry.is_empty());
    }

    #[test]
    fn a_long_note_is_cut_on_a_character_boundary() {
        let note = "é".repeat(MAX_NOTE);
        let cut = truncated(note);
        assert!(cut.len() <= MAX_NOTE);
        assert!(cut.ends_with("..."));
        assert_eq!(truncated("short".into()), "short");
    }
}
