//! List and watch: selectors, pagination, resourceVersion semantics, watch
//! resume, bookmarks, 410 Gone and the kube-rs watcher recovering from it,
//! timeouts, and kube-rs Controller, finalizer helper and Recorder.

use crate::common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent};
use kube::api::{
    Api, ListParams, Patch, PatchParams, PostParams, VersionMatch, WatchEvent, WatchParams,
};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use kube_sim::KubeSim;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    c
}

/// Creates a ConfigMap with these labels in `api`'s namespace.
async fn add(api: &Api<ConfigMap>, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    api.create(&PostParams::default(), &cm(name, labels))
        .await
        .unwrap()
}

/// Sets a ConfigMap's `app` label with a merge patch.
async fn relabel(api: &Api<ConfigMap>, name: &str, app: &str) {
    let patch = Patch::Merge(json!({"metadata": {"labels": {"app": app}}}));
    api.patch(name, &PatchParams::default(), &patch)
        .await
        .unwrap();
}

/// Runs a reflector over `api` with `config` until aborted; its store is
/// what it has seen.
fn reflect(
    api: &Api<ConfigMap>,
    config: watcher::Config,
    backoff: bool,
) -> (Store<ConfigMap>, tokio::task::JoinHandle<()>) {
    let (reader, writer) = kube::runtime::reflector::store();
    let events = watcher(api.clone(), config);
    let task = if backoff {
        drain(kube::runtime::reflector(writer, events.default_backoff()).applied_objects())
    } else {
        drain(kube::runtime::reflector(writer, events).applied_objects())
    };
    (reader, task)
}

/// Polls the stream to its end on a task of its own.
fn drain<S: futures::Stream + Send + 'static>(stream: S) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut s = std::pin::pin!(stream);
        while s.next().await.is_some() {}
    })
}

/// Whether the reflector's store comes to hold `n` objects within `secs`.
async fn holds(reader: &Store<ConfigMap>, n: usize, secs: u64) -> bool {
    eventually(secs, || {
        let r = reader.clone();
        async move { r.state().len() == n }
    })
    .await
}

async fn seed(api: &Api<ConfigMap>) {
    for (name, app, tier) in [
        ("a", "web", "front"),
        ("b", "web", "back"),
        ("c", "db", "back"),
        ("d", "cache", ""),
    ] {
        let mut labels = vec![("app", app)];
        if !tier.is_empty() {
            labels.push(("tier", tier));
        }
        add(api, name, &labels).await;
    }
}

async fn names(api: &Api<ConfigMap>, lp: &ListParams) -> Vec<String> {
    api.list(lp)
        .await
        .unwrap()
        .iter()
        .map(|c| c.name_any())
        .collect()
}

#[tokio::test]
async fn a_write_answers_with_the_object_its_watchers_receive() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let mut events = watch_from_start(&api).await;
    let mut written = vec![add(&api, "a", &[("app", "web")]).await];
    let patch = Patch::Merge(json!({"data": {"k": "v"}}));
    written.push(
        api.patch("a", &PatchParams::default(), &patch)
            .await
            .unwrap(),
    );
    let mut replaced = written[1].clone();
    replaced.data = Some(BTreeMap::from([("k".into(), "w".into())]));
    written.push(
        api.replace("a", &PostParams::default(), &replaced)
            .await
            .unwrap(),
    );
    // A write that changes nothing answers with the stored object, no event.
    assert_eq!(
        api.patch("a", &PatchParams::default(), &patch_of(&written[2]))
            .await
            .unwrap(),
        written[2]
    );
    for w in &written {
        let seen = match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => o,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(&seen, w);
    }
    assert_eq!(api.get("a").await.unwrap(), written[2]);
}

/// A merge patch that sets what `c` already holds.
fn patch_of(c: &ConfigMap) -> Patch<serde_json::Value> {
    Patch::Merge(json!({"data": c.data}))
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let (sim, api) = sim_in_default::<ConfigMap>().await;
    seed(&api).await;
    let cases = [
        ("app=web", vec!["a", "b"]),
        ("app!=web", vec!["c", "d"]),
        ("app in (db,cache)", vec!["c", "d"]),
        ("app notin (web)", vec!["c", "d"]),
        ("tier", vec!["a", "b", "c"]),
        ("!tier", vec!["d"]),
        ("app=web,tier=back", vec!["b"]),
    ];
    for (sel, want) in cases {
        assert_eq!(
            names(&api, &ListParams::default().labels(sel)).await,
            want,
            "{sel}"
        );
    }
    assert_eq!(
        names(&api, &ListParams::default().fields("metadata.name=c")).await,
        vec!["c"]
    );
    assert_eq!(
        names(
            &api,
            &ListParams::default()
                .fields("metadata.namespace=default,metadata.name!=a")
                .labels("app=web")
        )
        .await,
        vec!["b"]
    );
    let all: Api<ConfigMap> = Api::all(sim.client());
    assert_eq!(
        names(
            &all,
            &ListParams::default().fields("metadata.namespace=kube-system")
        )
        .await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn lists_paginate_with_limit_and_continue() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    for i in 0..7 {
        add(&api, &format!("p{i}"), &[]).await;
    }
    let first = api.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.metadata.remaining_item_count, Some(4));
    let token = first.metadata.continue_.clone().unwrap();
    add(&api, "p9", &[]).await;
    let second = api
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    let third = api
        .list(
            &ListParams::default()
                .limit(3)
                .continue_token(second.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    let mut all: Vec<String> = first
        .iter()
        .chain(second.iter())
        .chain(third.iter())
        .map(|c| c.name_any())
        .collect();
    all.dedup();
    assert_eq!(
        all,
        (0..7).map(|i| format!("p{i}")).collect::<Vec<_>>(),
        "pages are a consistent snapshot"
    );
    assert!(third.metadata.continue_.is_none());
}

#[tokio::test]
async fn lists_at_an_exact_resource_version_see_the_past_until_it_leaves_the_window() {
    let sim = KubeSim::builder().watch_window(20).start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    add(&api, "x", &[]).await;
    let rv = list_version(&api).await;
    add(&api, "y", &[]).await;
    let exact = ListParams::default().at(&rv).matching(VersionMatch::Exact);
    assert_eq!(names(&api, &exact).await, vec!["x"]);
    assert_eq!(
        names(
            &api,
            &ListParams::default()
                .at(&rv)
                .matching(VersionMatch::NotOlderThan)
        )
        .await,
        vec!["x", "y"]
    );
    for i in 0..25 {
        add(&api, &format!("f{i}"), &[]).await;
    }
    let err = api_error(api.list(&exact).await.unwrap_err());
    assert_eq!(err.code, 410);
}

#[tokio::test]
async fn watches_resume_from_a_resource_version_and_honour_selectors() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let rv = list_version(&api).await;
    add(&api, "w1", &[("app", "web")]).await;
    add(&api, "w2", &[("app", "db")]).await;
    let wp = WatchParams::default().labels("app=web").timeout(5);
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    match next_event(&mut stream).await {
        WatchEvent::Added(c) => assert_eq!(c.name_any(), "w1"),
        other => panic!("unexpected {other:?}"),
    }
    relabel(&api, "w2", "web").await;
    match next_event(&mut stream).await {
        WatchEvent::Added(c) => assert_eq!(c.name_any(), "w2", "entering the selector is ADDED"),
        other => panic!("unexpected {other:?}"),
    }
    relabel(&api, "w1", "gone").await;
    match next_event(&mut stream).await {
        WatchEvent::Deleted(c) => assert_eq!(c.name_any(), "w1", "leaving the selector is DELETED"),
        other => panic!("unexpected {other:?}"),
    }
}

/// Events queued for a watcher go out together in one chunk; a burst of
/// writes still reaches the client as whole events, filtered and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_events_arrives_whole_filtered_and_in_order() {
    const N: usize = 200;
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let wp = WatchParams::default().labels("app=web").timeout(30);
    let mut stream = api.watch(&wp, "0").await.unwrap().boxed();
    futures::stream::iter(0..N)
        .map(|i| {
            let api = api.clone();
            async move {
                let app = if i % 2 == 0 { "web" } else { "db" };
                api.create(
                    &PostParams::default(),
                    &cm(&format!("b{i}"), &[("app", app)]),
                )
                .await
                .unwrap()
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    let mut versions = Vec::new();
    while versions.len() < N / 2 {
        match next_event(&mut stream).await {
            WatchEvent::Added(c) => {
                assert_eq!(c.labels()["app"], "web");
                versions.push(c.resource_version().unwrap().parse::<u64>().unwrap());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(versions.is_sorted(), "events out of order: {versions:?}");
}

#[tokio::test]
async fn watches_end_after_their_timeout() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let rv = list_version(&api).await;
    let stream = api
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap();
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(events.is_empty());
}

#[tokio::test]
async fn bookmarks_arrive_periodically_and_mark_the_end_of_initial_events() {
    let sim = KubeSim::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    add(&api, "bm", &[]).await;
    let wp = WatchParams::streaming_lists().timeout(5);
    let mut stream = api.watch(&wp, "0").await.unwrap().boxed();
    match next_event(&mut stream).await {
        WatchEvent::Added(c) => assert_eq!(c.name_any(), "bm"),
        other => panic!("unexpected {other:?}"),
    }
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(b) => {
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(b) => assert!(!b.metadata.resource_version.is_empty()),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn the_kube_watcher_syncs_with_streaming_lists() {
    let (sim, api) = sim_in_default::<ConfigMap>().await;
    add(&api, "s1", &[]).await;
    let (reader, task) = reflect(&api, watcher::Config::default().streaming_lists(), false);
    assert!(reader.wait_until_ready().await.is_ok());
    assert_eq!(reader.state().len(), 1);
    add(&api, "s2", &[]).await;
    assert!(holds(&reader, 2, 5).await);
    assert_eq!(
        sim.counters().count("list", "configmaps"),
        0,
        "no list: the watch streamed the initial state"
    );
    task.abort();
}

#[tokio::test]
async fn a_watch_from_a_version_older_than_the_window_gets_410_gone() {
    let sim = KubeSim::builder().watch_window(5).start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let rv = list_version(&api).await;
    for i in 0..10 {
        add(&api, &format!("g{i}"), &[]).await;
    }
    let mut stream = api
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    match next_event(&mut stream).await {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn the_kube_watcher_recovers_from_410_gone() {
    let sim = KubeSim::builder().watch_window(5).start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    add(&api, "before", &[]).await;
    let (reader, task) = reflect(&api, watcher::Config::default().disable_bookmarks(), true);
    assert!(holds(&reader, 1, 5).await);
    // Refuse re-watches until the window has moved past the watcher's last
    // resourceVersion, then cut the stream; its next watch gets 410 Gone.
    sim.faults().inject(
        kube_sim::FaultRule::new(500)
            .verb("watch")
            .resource("configmaps"),
    );
    sim.faults().drop_watches();
    for i in 0..10 {
        add(&api, &format!("after{i}"), &[]).await;
    }
    sim.faults().clear();
    assert!(holds(&reader, 11, 10).await);
    assert!(
        sim.counters().count("list", "configmaps") >= 2,
        "the watcher relisted after 410"
    );
    task.abort();
}

#[derive(Clone)]
struct Ctx {
    client: kube::Client,
    recorder: Recorder,
}

#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error(transparent)]
    Finalizer(#[from] Box<kube::runtime::finalizer::Error<kube::Error>>),
}

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let ns = w.namespace().unwrap();
    let api: Api<Widget> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, "example.com/cleanup", w, |event| async {
        match event {
            FinalizerEvent::Apply(w) => {
                let generation = w.metadata.generation;
                if w.status.as_ref().and_then(|s| s.observed_generation) != generation {
                    let status =
                        json!({"status": {"phase": "Ready", "observedGeneration": generation}});
                    Api::<Widget>::namespaced(ctx.client.clone(), &w.namespace().unwrap())
                        .patch_status(
                            &w.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(status),
                        )
                        .await?;
                    ctx.recorder
                        .publish(
                            &Event {
                                type_: EventType::Normal,
                                reason: "Reconciled".into(),
                                note: Some("widget is ready".into()),
                                action: "Reconcile".into(),
                                secondary: None,
                            },
                            &w.object_ref(&()),
                        )
                        .await?;
                }
                Ok(Action::await_change())
            }
            FinalizerEvent::Cleanup(_) => Ok(Action::await_change()),
        }
    })
    .await
    .map_err(|e| ReconcileError::Finalizer(Box::new(e)))
}

fn error_policy(_: Arc<Widget>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

#[tokio::test]
async fn a_kube_controller_with_finalizer_and_recorder_runs_against_kube_sim() {
    let sim = sim_with_widgets().await;
    let client = sim.client();
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    let reporter = Reporter {
        controller: "widget-controller".into(),
        instance: Some("test".into()),
    };
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        recorder: Recorder::new(client.clone(), reporter),
    });
    let controller = Controller::new(
        Api::<Widget>::all(client.clone()),
        watcher::Config::default(),
    )
    .run(reconcile, error_policy, ctx)
    .for_each(|r| async move {
        if let Err(e) = r {
            eprintln!("reconcile error: {e:?}");
        }
    });
    let task = tokio::spawn(controller);

    api.create(&PostParams::default(), &widget("ctl", 5))
        .await
        .unwrap();
    assert!(
        eventually(10, || async {
            api.get("ctl").await.is_ok_and(|w| {
                w.finalizers().contains(&"example.com/cleanup".to_string())
                    && w.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Ready")
            })
        })
        .await
    );
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    assert!(
        eventually(5, || async {
            events
                .list(
                    &ListParams::default()
                        .fields("involvedObject.name=ctl,involvedObject.kind=Widget"),
                )
                .await
                .is_ok_and(|l| {
                    l.items
                        .iter()
                        .any(|e| e.reason.as_deref() == Some("Reconciled"))
                })
        })
        .await,
        "the Recorder's events.k8s.io Event is visible as a core Event"
    );
    api.delete("ctl", &Default::default()).await.unwrap();
    assert!(
        eventually(10, || async { api.get("ctl").await.is_err() }).await,
        "the finalizer is removed on cleanup"
    );
    task.abort();
}
