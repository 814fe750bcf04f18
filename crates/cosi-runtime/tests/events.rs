//! `EventReporter` against kube-sim: an Event is created once, its repeats
//! become a series on it, and different objects or reasons get Events of
//! their own; an Event deleted on the server is created anew.

use cosi_runtime::{EventReporter, EventType};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams};

fn claim(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("objectstorage.k8s.io/v1alpha2".into()),
        kind: Some("BucketClaim".into()),
        namespace: Some("default".into()),
        name: Some(name.into()),
        uid: Some(format!("uid-{name}")),
        ..ObjectReference::default()
    }
}

async fn events(api: &Api<Event>) -> Vec<Event> {
    let mut list = api.list(&ListParams::default()).await.unwrap().items;
    list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    list
}

/// A fresh API server, a reporter for `controller` on it, and its Events of
/// the `default` namespace.
async fn start(controller: &str) -> (kube_sim::KubeSim, EventReporter, Api<Event>) {
    let sim = kube_sim::KubeSim::start().await.unwrap();
    let reporter = EventReporter::new(sim.client(), controller);
    let api = Api::namespaced(sim.client(), "default");
    (sim, reporter, api)
}

fn count(e: &Event) -> Option<i32> {
    e.series.as_ref().map(|s| s.count)
}

/// Reports about claim `name`: `Provisioned` as a Normal Event, or
/// `ProvisionFailed` as a Warning, with `note`.
async fn report(reporter: &EventReporter, type_: EventType, name: &str, note: &str) {
    let reason = match type_ {
        EventType::Normal => "Provisioned",
        EventType::Warning => "ProvisionFailed",
    };
    reporter
        .publish(&claim(name), type_, reason, "Provision", note.to_owned())
        .await;
}

#[tokio::test]
async fn repeats_fold_into_a_series_and_distinct_events_stay_apart() {
    let (_sim, reporter, api) = start("cosi-controller").await;

    report(&reporter, EventType::Normal, "a", "ready").await;
    let first = events(&api).await;
    assert_eq!(first.len(), 1);
    assert_eq!(count(&first[0]), None);
    assert_eq!(first[0].reason.as_deref(), Some("Provisioned"));
    assert_eq!(first[0].type_.as_deref(), Some("Normal"));
    assert_eq!(
        first[0].reporting_controller.as_deref(),
        Some("cosi-controller")
    );

    for _ in 0..2 {
        report(&reporter, EventType::Normal, "a", "ready").await;
    }
    let repeated = events(&api).await;
    assert_eq!(repeated.len(), 1, "repeats patch the first Event");
    assert_eq!(count(&repeated[0]), Some(3));
    assert_eq!(repeated[0].note, first[0].note);

    report(&reporter, EventType::Warning, "a", "no").await;
    report(&reporter, EventType::Normal, "b", "ready").await;
    assert_eq!(events(&api).await.len(), 3);

    // The series' Event is gone on the server: the next repeat starts anew.
    let name = repeated[0].metadata.name.clone().unwrap();
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    report(&reporter, EventType::Normal, "a", "ready").await;
    let after = events(&api).await;
    assert_eq!(after.len(), 3);
    let fresh = after
        .iter()
        .find(|e| {
            e.reason.as_deref() == Some("Provisioned")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("a")
        })
        .unwrap();
    assert_ne!(fresh.metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(count(fresh), None);
}

#[tokio::test]
async fn a_long_note_is_cut_to_what_the_api_accepts() {
    let (_sim, reporter, api) = start("cosi-sidecar").await;
    report(&reporter, EventType::Warning, "a", &"x".repeat(5000)).await;
    let list = events(&api).await;
    assert_eq!(list.len(), 1, "the Event was written");
    let note = list[0].note.as_deref().unwrap();
    assert_eq!(note.len(), 1024);
    assert!(note.ends_with("..."));
}
