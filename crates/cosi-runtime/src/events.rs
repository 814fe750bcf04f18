//! Kubernetes Events for users: a thin wrapper over kube-runtime's
//! Recorder (which folds repeats into a series) that never fails a
//! reconcile because an Event could not be written.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Publishes Events on behalf of one component.
#[derive(Clone)]
pub struct EventReporter {
    recorder: Recorder,
}

impl EventReporter {
    /// A reporter named `controller` (shown as the Event's reporting controller).
    pub fn new(client: Client, controller: &str) -> Self {
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// A `Normal` event about `regarding`.
    pub async fn normal(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(regarding, EventType::Normal, reason, action, note)
            .await;
    }

    /// A `Warning` event about `regarding`.
    pub async fn warning(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(regarding, EventType::Warning, reason, action, note)
            .await;
    }

    async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        mut note: String,
    ) {
        // The API refuses notes over 1 kB.
        if note.len() > 1024 {
            let mut cut = 1021;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push_str("...");
        }
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, regarding).await {
            tracing::warn!(reason, object = ?regarding.name, error = %e, "cannot publish event");
        }
    }
}
