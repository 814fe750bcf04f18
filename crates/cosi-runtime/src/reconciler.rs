//! A reconcile loop: the objects of one kind, triggered by their own watch
//! and by mapped changes of other kinds, reconciled by a fixed number of
//! workers in the order of a [`WorkQueue`] (oldest object first, each
//! object by one worker at a time).
//!
//! It takes the place of kube-runtime's `Controller`, whose scheduler
//! works in hash order once its concurrency limit is reached, so that
//! under a burst the first objects submitted could be the last served.
//! The interface is the same: triggers, `reconcile(object, context)`,
//! an error policy, and an [`Action`] that says when to reconcile again.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::stream::{BoxStream, SelectAll};
use futures::{FutureExt as _, Stream, StreamExt as _};
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::Object;
use crate::cache::Cache;
use crate::loop_metrics::{LoopMetrics, ReconcileResult};
use crate::work_queue::WorkQueue;

/// When to reconcile an object again, besides on its next trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    requeue_after: Option<Duration>,
    failure: bool,
}

impl Action {
    /// Reconcile again after `duration` (or earlier when triggered).
    #[must_use]
    pub const fn requeue(duration: Duration) -> Self {
        Self {
            requeue_after: Some(duration),
            failure: false,
        }
    }

    /// Reconcile again only when triggered.
    #[must_use]
    pub const fn await_change() -> Self {
        Self {
            requeue_after: None,
            failure: false,
        }
    }

    /// Marks a reconcile that failed and handled the failure itself (set
    /// the conditions, chose the backoff): the metrics count it as an
    /// error, and its requeue as a retry.
    #[must_use]
    pub const fn as_failure(mut self) -> Self {
        self.failure = true;
        self
    }

    /// True when the reconcile failed (see [`Action::as_failure`]).
    pub fn is_failure(&self) -> bool {
        self.failure
    }

    /// The delay of a requeue, if one was asked for.
    pub fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// The creation time of `obj` in seconds (objects without one, or not
/// known, come last).
pub fn age<K: Resource>(obj: &K) -> i64 {
    obj.meta()
        .creation_timestamp
        .as_ref()
        .map_or(i64::MAX, |t| t.0.as_second())
}

/// The order objects are served in: by creation time, and within a second
/// (the resolution of creation times) in the order this loop first saw
/// them, which is the order they were created in.
type Rank = (i64, u64);

/// A reconcile loop over the objects of `store`, to be given its triggers
/// and run.
pub struct Reconciler<K: Object> {
    store: Cache<K>,
    triggers: SelectAll<BoxStream<'static, (ObjectRef<K>, Option<i64>)>>,
    workers: usize,
    debounce: Duration,
    metrics: Option<LoopMetrics>,
    settled: Option<Box<dyn FnOnce() + Send>>,
}

impl<K: Object> Reconciler<K> {
    /// A loop over `store`, triggered by each object `objects` yields (the
    /// object, or an `Arc` of it shared with the store; errors are
    /// dropped: handle them upstream). One worker, no debounce.
    pub fn new<O, E>(
        store: Cache<K>,
        objects: impl Stream<Item = Result<O, E>> + Send + 'static,
    ) -> Self
    where
        O: Borrow<K> + Send + 'static,
        E: 'static,
    {
        let own = objects
            .filter_map(|o| std::future::ready(o.ok()))
            .map(|o| {
                let o: &K = o.borrow();
                (ObjectRef::from_obj(o), Some(age(o)))
            })
            .boxed();
        let mut triggers = SelectAll::new();
        triggers.push(own);
        Self {
            store,
            triggers,
            workers: 1,
            debounce: Duration::ZERO,
            metrics: None,
            settled: None,
        }
    }

    /// Also triggers the objects `mapper` names for each item of `stream`.
    pub fn watches<O, E, I>(
        mut self,
        stream: impl Stream<Item = Result<O, E>> + Send + 'static,
        mut mapper: impl FnMut(O) -> I + Send + 'static,
    ) -> Self
    where
        O: Send + 'static,
        E: 'static,
        I: IntoIterator<Item = ObjectRef<K>>,
        I::IntoIter: Send + 'static,
    {
        let mapped = stream
            .filter_map(|o| std::future::ready(o.ok()))
            .flat_map(move |o| futures::stream::iter(mapper(o)))
            .map(|r| (r, None))
            .boxed();
        self.triggers.push(mapped);
        self
    }

    /// Objects reconciled at the same time (at least one).
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Reports reconciles and the work queue to `metrics` (the
    /// `controller_runtime_*` and `workqueue_*` series of one loop name).
    #[must_use]
    pub fn metrics(mut self, metrics: LoopMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// How long an object's triggers must be quiet before it is reconciled.
    #[must_use]
    pub fn debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }

    /// Calls `settled` once the loop has worked through what its first
    /// list gave it: the first time, after the store has listed, that
    /// nothing was due for [`SETTLE_QUIET`] (objects waiting for a later
    /// time do not count). Not called if the loop stops first.
    #[must_use]
    pub fn on_settled(mut self, settled: impl FnOnce() + Send + 'static) -> Self {
        self.settled = Some(Box::new(settled));
        self
    }

    /// Runs until `shutdown` completes, then lets reconciles in progress
    /// finish. Nothing is reconciled before the store has listed once.
    /// `reconcile` gets the object as the store holds it when its turn
    /// comes; an error goes to `error_policy` for the next [`Action`].
    pub async fn run<C, E, F, Fut, P>(
        self,
        reconcile: F,
        error_policy: P,
        ctx: Arc<C>,
        shutdown: impl Future<Output = ()> + Send,
    ) where
        C: Send + Sync + 'static,
        E: std::fmt::Display + Send + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        P: Fn(Arc<K>, &E, Arc<C>) -> Action + Send + Sync + 'static,
    {
        let Self {
            store,
            triggers,
            workers,
            debounce,
            metrics,
            settled,
        } = self;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(debounce)),
            metrics,
            work: Notify::new(),
            rearm: Notify::new(),
            stop: CancellationToken::new(),
        });
        let work = async {
            // Nothing is reconciled on a partial cache.
            tokio::select! {
                ready = store.wait_until_ready() => {
                    if !ready {
                        return;
                    }
                }
                () = shared.stop.cancelled() => return,
            }
            let reconcile = Arc::new(reconcile);
            let error_policy = Arc::new(error_policy);
            // Workers run as tasks of their own (on any runtime thread); a
            // loop that is dropped (an aborted component) aborts them.
            // They log in the loop's span.
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..workers {
                let work = worker(
                    store.clone(),
                    shared.clone(),
                    reconcile.clone(),
                    error_policy.clone(),
                    ctx.clone(),
                );
                tasks.spawn(work.in_current_span());
            }
            let settle = async {
                if let Some(settled) = settled {
                    tokio::select! {
                        () = quiet(&shared) => settled(),
                        () = shared.stop.cancelled() => {}
                    }
                }
            };
            let workers = async { while tasks.join_next().await.is_some() {} };
            tokio::join!(settle, workers);
        };
        // Triggers are queued until shutdown (or until they end, when the
        // watch behind them is gone); then the workers finish what they
        // hold and stop.
        let until_stopped = async {
            tokio::select! {
                () = shutdown => {}
                () = feed(triggers, store.clone(), &shared) => {}
                () = timer(&shared) => {}
            }
            shared.stop.cancel();
        };
        tokio::join!(work, until_stopped);
    }
}

/// Objects remembered beyond twice the store's size before the ones gone
/// from it are forgotten.
const FORGET_SLACK: usize = 1024;

/// The queue, the time the timer is set for, and the rank of each object
/// known to the loop (its age, and when it was first seen). Each object's
/// reference `T` is held once, in an `Arc` (the key of `first_seen`): the
/// queue holds clones of that pointer, not copies of the name and
/// namespace.
struct State<T> {
    queue: WorkQueue<Arc<T>, Rank>,
    armed: Option<Instant>,
    first_seen: HashMap<Arc<T>, Rank>,
    next_seen: u64,
}

impl<T: Clone + Eq + Hash> State<T> {
    fn new(debounce: Duration) -> Self {
        Self {
            queue: WorkQueue::new(debounce),
            armed: None,
            first_seen: HashMap::new(),
            next_seen: 0,
        }
    }

    /// Forgets when the objects `exists` denies were first seen, once
    /// more are remembered than twice `live` (the store's size) and
    /// [`FORGET_SLACK`]. A deleted object is forgotten when its reconcile
    /// finds it gone, but one no trigger brings back (a loop fed only
    /// applied objects never hears of deletions) would be kept for good;
    /// waiting for the map to double spreads the cost of the sweep.
    fn forget_gone(&mut self, live: usize, exists: impl Fn(&T) -> bool) {
        if self.first_seen.len() > 2 * live + FORGET_SLACK {
            self.first_seen.retain(|r, _| exists(r));
        }
    }

    /// The age of `r` as the loop knows it, if it does.
    fn age(&self, r: &T) -> Option<i64> {
        self.first_seen
            .get(r)
            .map(|(age, _)| *age)
            .filter(|age| *age != i64::MAX)
    }

    /// The loop's one copy of `r`, and its rank when created `age` (kept
    /// for the next time the age is not known).
    fn rank(&mut self, r: &T, age: i64) -> (Arc<T>, Rank) {
        if let Some((held, rank)) = self.first_seen.get_key_value(r) {
            let held = held.clone();
            let rank = (age, rank.1);
            self.first_seen.insert(held.clone(), rank);
            return (held, rank);
        }
        let rank = (age, self.next_seen);
        self.next_seen += 1;
        let held = Arc::new(r.clone());
        self.first_seen.insert(held.clone(), rank);
        (held, rank)
    }
}

struct Shared<T> {
    state: Mutex<State<T>>,
    metrics: Option<LoopMetrics>,
    /// Wakes a worker: something is due.
    work: Notify,
    /// Wakes the timer: something falls due earlier than it was set for.
    rearm: Notify,
    stop: CancellationToken,
}

impl<T: Clone + Eq + Hash> Shared<T> {
    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reports the queue's depth and adds (two atomic operations).
    fn report(&self, state: &mut State<T>) {
        if let Some(m) = &self.metrics {
            m.queue(state.queue.due_len(), state.queue.take_added());
        }
    }

    /// After the queue changed: wakes a worker if work is due, and the
    /// timer if it must fire earlier.
    fn changed(&self, state: &mut State<T>, now: Instant) {
        self.report(state);
        if state.queue.has_due(now) {
            self.work.notify_one();
        }
        if let Some(at) = state.queue.next_due()
            && state.armed.is_none_or(|armed| at < armed)
        {
            state.armed = Some(at);
            self.rearm.notify_one();
        }
    }
}

/// How long nothing must be due before a loop counts as settled.
pub const SETTLE_QUIET: Duration = Duration::from_secs(1);

/// How often a loop not yet settled looks at its queue.
const SETTLE_POLL: Duration = Duration::from_millis(100);

/// Since when a loop has had nothing due, from samples of its queue.
#[derive(Debug, Default)]
struct Quiet {
    since: Option<Instant>,
}

impl Quiet {
    /// Takes one sample (`busy`: something due at `now`); true once
    /// nothing was due for [`SETTLE_QUIET`].
    fn sample(&mut self, busy: bool, now: Instant) -> bool {
        if busy {
            self.since = None;
            return false;
        }
        now.duration_since(*self.since.get_or_insert(now)) >= SETTLE_QUIET
    }
}

/// Returns once nothing was due in the loop for [`SETTLE_QUIET`], sampled
/// every [`SETTLE_POLL`] (a list's triggers are queued well within it).
async fn quiet<T: Clone + Eq + Hash>(shared: &Shared<T>) {
    let mut quiet = Quiet::default();
    let mut tick = tokio::time::interval(SETTLE_POLL);
    loop {
        tick.tick().await;
        let now = Instant::now();
        let busy = shared.state().queue.has_due(now);
        if quiet.sample(busy, now) {
            return;
        }
    }
}

/// Queues every trigger; ends when the triggers do.
async fn feed<K: Object>(
    mut triggers: SelectAll<BoxStream<'static, (ObjectRef<K>, Option<i64>)>>,
    store: Cache<K>,
    shared: &Shared<ObjectRef<K>>,
) {
    while let Some((mut r, age_of)) = triggers.next().await {
        // Queued and ranked by name: the version and UID an object
        // reference may carry would be four strings per object held.
        r.extra = Default::default();
        // A mapped trigger's object is read for its age only the first
        // time the loop sees it.
        let known = shared.state().age(&r);
        let created = age_of
            .or(known)
            .or_else(|| store.get(&r).map(|o| age(o.as_ref())))
            .unwrap_or(i64::MAX);
        let now = Instant::now();
        let mut state = shared.state();
        let (r, rank) = state.rank(&r, created);
        state.queue.trigger(r, rank, now);
        shared.changed(&mut state, now);
        state.forget_gone(store.len(), |r| store.contains(r));
    }
}

/// Wakes a worker whenever a waiting object falls due (never ends).
async fn timer<T: Clone + Eq + Hash>(shared: &Shared<T>) {
    loop {
        let rearmed = shared.rearm.notified();
        let armed = shared.state().armed;
        let Some(at) = armed else {
            rearmed.await;
            continue;
        };
        tokio::select! {
            () = rearmed => {}
            () = tokio::time::sleep_until(at) => {
                let now = Instant::now();
                let mut state = shared.state();
                state.queue.promote(now);
                shared.report(&mut state);
                state.armed = state.queue.next_due();
                if state.queue.has_due(now) {
                    shared.work.notify_one();
                }
            }
        }
    }
}

/// Takes due objects from the queue and reconciles them until stopped.
async fn worker<K, C, E, F, Fut, P>(
    store: Cache<K>,
    shared: Arc<Shared<ObjectRef<K>>>,
    reconcile: Arc<F>,
    error_policy: Arc<P>,
    ctx: Arc<C>,
) where
    K: Object,
    E: std::fmt::Display,
    F: Fn(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
    P: Fn(Arc<K>, &E, Arc<C>) -> Action,
{
    loop {
        // Registered before looking, so a wake-up between the look and the
        // wait is not missed.
        let mut woken = std::pin::pin!(shared.work.notified());
        woken.as_mut().enable();
        if shared.stop.is_cancelled() {
            return;
        }
        let next = {
            let mut state = shared.state();
            let now = Instant::now();
            let next = state.queue.pop(now);
            shared.report(&mut state);
            if next.is_some() && state.queue.has_due(now) {
                // More is due: another worker may take it.
                shared.work.notify_one();
            }
            next
        };
        let Some(r) = next else {
            tokio::select! {
                () = woken => {}
                () = shared.stop.cancelled() => return,
            }
            continue;
        };
        let Some(obj) = store.get(&r) else {
            tracing::debug!(object = %r, "object gone before its reconcile");
            let mut state = shared.state();
            state.first_seen.remove(&r);
            state.queue.done(&r, (i64::MAX, u64::MAX), None);
            shared.changed(&mut state, Instant::now());
            continue;
        };
        let created = age(obj.as_ref());
        let started = Instant::now();
        let run = AssertUnwindSafe(reconcile(obj.clone(), ctx.clone())).catch_unwind();
        let (action, failed) = match run.await {
            Ok(Ok(action)) => (action, false),
            Ok(Err(e)) => {
                tracing::debug!(object = %r, error = %e, "reconcile failed");
                (error_policy(obj, &e, ctx.clone()), true)
            }
            Err(_) => {
                tracing::error!(object = %r, "reconcile panicked; retrying in 30s");
                (Action::requeue(Duration::from_secs(30)), true)
            }
        };
        if let Some(m) = &shared.metrics {
            let result = ReconcileResult::of(&action, failed);
            m.reconciled(result, started.elapsed(), action.requeue_after().is_some());
        }
        let now = Instant::now();
        let mut state = shared.state();
        let (_, rank) = state.rank(&r, created);
        state
            .queue
            .done(&r, rank, action.requeue_after().map(|d| now + d));
        shared.changed(&mut state, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{self, Writer};
    use futures::channel::mpsc;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use kube::runtime::watcher;
    use std::convert::Infallible;

    fn cm(name: &str, created: i64) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = Some("ns".into());
        c.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        c
    }

    type Trigger = Result<ConfigMap, Infallible>;

    /// A store already listed holding `objs`, and a trigger channel.
    fn listed(
        objs: &[ConfigMap],
    ) -> (
        Cache<ConfigMap>,
        Writer<ConfigMap>,
        mpsc::UnboundedSender<Trigger>,
        mpsc::UnboundedReceiver<Trigger>,
    ) {
        let (store, mut writer) = cache::store();
        writer.apply_watcher_event(&watcher::Event::Init);
        for o in objs {
            writer.apply_watcher_event(&watcher::Event::InitApply(o.clone()));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let (tx, rx) = mpsc::unbounded();
        (store, writer, tx, rx)
    }

    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl Log {
        fn push(&self, s: String) {
            self.0.lock().unwrap().push(s);
        }
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }

    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    /// A running loop whose reconciles log the object's name.
    struct Logging {
        log: Arc<Log>,
        stop: CancellationToken,
        handle: tokio::task::JoinHandle<()>,
    }

    impl Logging {
        fn start(r: Reconciler<ConfigMap>) -> Self {
            let log = Arc::new(Log::default());
            let stop = CancellationToken::new();
            let handle = tokio::spawn(r.run(
                |o: Arc<ConfigMap>, log: Arc<Log>| async move {
                    log.push(o.metadata.name.clone().unwrap());
                    Ok::<_, Infallible>(Action::await_change())
                },
                |_, e: &Infallible, _| match *e {},
                log.clone(),
                stop.clone().cancelled_owned(),
            ));
            Self { log, stop, handle }
        }

        async fn stop(self) {
            self.stop.cancel();
            self.handle.await.unwrap();
        }
    }

    fn send(tx: &mpsc::UnboundedSender<Trigger>, o: &ConfigMap) {
        tx.unbounded_send(Ok(o.clone())).unwrap();
    }

    #[test]
    fn objects_gone_from_the_store_are_forgotten_once_they_outnumber_it() {
        let mut state = State::new(Duration::ZERO);
        let live = ["a".to_owned(), "b".to_owned()];
        let ranks: Vec<Rank> = live.iter().map(|r| state.rank(r, 1).1).collect();
        let exists = |r: &String| live.contains(r);
        let limit = 2 * live.len() + FORGET_SLACK;
        for i in 0..limit - live.len() {
            state.rank(&format!("gone-{i}"), 1);
            state.forget_gone(live.len(), exists);
        }
        assert_eq!(state.first_seen.len(), limit, "not yet past the limit");
        state.rank(&"gone-last".to_owned(), 1);
        state.forget_gone(live.len(), exists);
        assert_eq!(state.first_seen.len(), live.len());
        let kept: Vec<Rank> = live.iter().map(|r| state.rank(r, 1).1).collect();
        assert_eq!(kept, ranks, "the live objects keep their place");
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_is_reconciled_oldest_object_first_each_once() {
        let objs = [cm("c", 30), cm("a", 10), cm("d", 40), cm("b", 20)];
        let (store, _w, tx, rx) = listed(&objs);
        // Triggered newest first, some twice, before the loop runs.
        for i in [2, 0, 3, 1, 0, 2] {
            send(&tx, &objs[i]);
        }
        let run = Logging::start(Reconciler::new(store, rx).workers(1));
        settle().await;
        assert_eq!(run.log.take(), ["a", "b", "c", "d"]);
        run.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn objects_of_the_same_second_keep_the_order_they_were_first_seen_in() {
        let objs = [cm("a", 5), cm("z", 5), cm("x", 5)];
        let (store, _w, tx, rx) = listed(&objs);
        let run = Logging::start(Reconciler::new(store, rx).workers(1));
        send(&tx, &objs[0]);
        settle().await;
        assert_eq!(run.log.take(), ["a"]);
        // "a" comes back after the others were first seen: it still goes first.
        for i in [1, 2, 0] {
            send(&tx, &objs[i]);
        }
        settle().await;
        assert_eq!(run.log.take(), ["a", "z", "x"]);
        run.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn triggers_are_debounced() {
        let (store, _w, tx, rx) = listed(&[cm("a", 1)]);
        let run = Logging::start(Reconciler::new(store, rx).debounce(Duration::from_millis(50)));
        for _ in 0..4 {
            send(&tx, &cm("a", 1));
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        assert!(run.log.take().is_empty(), "still within the debounce");
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(run.log.take(), ["a"]);
        run.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn mapped_triggers_reach_the_objects_they_name_and_deleted_ones_are_skipped() {
        let (store, _w, _tx, rx) = listed(&[cm("a", 1), cm("b", 2)]);
        let (other_tx, other_rx) = mpsc::unbounded::<Result<String, Infallible>>();
        let run = Logging::start(
            Reconciler::new(store, rx).watches(other_rx, |name: String| {
                Some(ObjectRef::<ConfigMap>::new(&name).within("ns"))
            }),
        );
        for name in ["b", "gone", "a"] {
            other_tx.unbounded_send(Ok(name.into())).unwrap();
        }
        settle().await;
        assert_eq!(
            run.log.take(),
            ["a", "b"],
            "by age; the unknown one skipped"
        );
        run.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_is_never_reconciled_twice_at_once_and_reruns_after_a_trigger() {
        let (store, _w, tx, rx) = listed(&[cm("a", 1)]);
        let log = Arc::new(Log::default());
        let (release_tx, release_rx) = tokio::sync::watch::channel(false);
        let stop = CancellationToken::new();
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let ctx = Arc::new((log.clone(), running.clone(), release_rx));
        let run = Reconciler::new(store, rx).workers(4).run(
            |o: Arc<ConfigMap>,
             ctx: Arc<(
                Arc<Log>,
                Arc<std::sync::atomic::AtomicUsize>,
                tokio::sync::watch::Receiver<bool>,
            )>| async move {
                let (log, running, release) = &*ctx;
                let now = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                log.push(format!("{} x{now}", o.metadata.name.clone().unwrap()));
                let _ = release.clone().wait_for(|r| *r).await;
                running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, Infallible>(Action::await_change())
            },
            |_, e: &Infallible, _| match *e {},
            ctx,
            stop.clone().cancelled_owned(),
        );
        let handle = tokio::spawn(run);
        send(&tx, &cm("a", 1));
        settle().await;
        for _ in 0..3 {
            send(&tx, &cm("a", 1));
        }
        settle().await;
        assert_eq!(log.take(), ["a x1"], "held while the first runs");
        release_tx.send_replace(true);
        settle().await;
        assert_eq!(
            log.take(),
            ["a x1"],
            "one more run for the triggers that came meanwhile"
        );
        stop.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn errors_go_to_the_error_policy_whose_requeue_is_honoured() {
        let (store, _w, tx, rx) = listed(&[cm("a", 1)]);
        let log = Arc::new(Log::default());
        let stop = CancellationToken::new();
        let run = Reconciler::new(store, rx).workers(2).run(
            |o: Arc<ConfigMap>, log: Arc<Log>| async move {
                log.push(o.metadata.name.clone().unwrap());
                Err::<Action, _>("boom")
            },
            |_, e: &&str, log: Arc<Log>| {
                log.push(format!("policy: {e}"));
                Action::requeue(Duration::from_millis(30))
            },
            log.clone(),
            stop.clone().cancelled_owned(),
        );
        let handle = tokio::spawn(run);
        send(&tx, &cm("a", 1));
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.cancel();
        handle.await.unwrap();
        let runs = log.take();
        assert!(runs.len() >= 4, "retried after each requeue: {runs:?}");
        assert_eq!(runs[..2], ["a", "policy: boom"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_reconcile_is_retried_after_30s_and_others_still_run() {
        let (store, _w, tx, rx) = listed(&[cm("a", 1), cm("b", 2)]);
        let log = Arc::new(Log::default());
        let stop = CancellationToken::new();
        let run = Reconciler::new(store, rx).workers(1).run(
            |o: Arc<ConfigMap>, log: Arc<Log>| async move {
                let name = o.metadata.name.clone().unwrap();
                log.push(name.clone());
                if name == "a" {
                    panic!("reconcile of a panics");
                }
                Ok::<_, Infallible>(Action::await_change())
            },
            |_, e: &Infallible, _| match *e {},
            log.clone(),
            stop.clone().cancelled_owned(),
        );
        let handle = tokio::spawn(run);
        send(&tx, &cm("a", 1));
        send(&tx, &cm("b", 2));
        settle().await;
        assert_eq!(log.take(), ["a", "b"], "the panic did not stop the loop");
        tokio::time::sleep(Duration::from_secs(29)).await;
        assert!(log.take().is_empty(), "no retry before 30 s");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(log.take(), ["a"], "retried once 30 s on");
        stop.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_shutdown_before_the_first_list_ends_the_loop_at_once() {
        let (store, _writer) = cache::store::<ConfigMap>();
        let (_tx, rx) = mpsc::unbounded::<Trigger>();
        let run = Logging::start(Reconciler::new(store, rx));
        tokio::time::timeout(Duration::from_secs(5), run.stop())
            .await
            .expect("the loop ends");
    }

    /// A loop whose reconciles take 50 ms, logging their start and end.
    fn slow(
        store: Cache<ConfigMap>,
        rx: mpsc::UnboundedReceiver<Trigger>,
        log: &Arc<Log>,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(Reconciler::new(store, rx).run(
            |_: Arc<ConfigMap>, log: Arc<Log>| async move {
                log.push("started".into());
                tokio::time::sleep(Duration::from_millis(50)).await;
                log.push("finished".into());
                Ok::<_, Infallible>(Action::requeue(Duration::from_millis(1)))
            },
            |_, e: &Infallible, _| match *e {},
            log.clone(),
            stop,
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn a_shutdown_lets_the_reconcile_in_progress_finish() {
        let (store, _w, tx, rx) = listed(&[cm("a", 1)]);
        let log = Arc::new(Log::default());
        let stop = CancellationToken::new();
        let handle = slow(store, rx, &log, stop.clone().cancelled_owned());
        send(&tx, &cm("a", 1));
        tokio::time::sleep(Duration::from_millis(10)).await;
        stop.cancel();
        handle.await.unwrap();
        assert_eq!(log.take(), ["started", "finished"], "and nothing after");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_loop_aborts_its_reconciles() {
        let (store, _w, tx, rx) = listed(&[cm("a", 1)]);
        let log = Arc::new(Log::default());
        let handle = slow(store, rx, &log, std::future::pending());
        send(&tx, &cm("a", 1));
        tokio::time::sleep(Duration::from_millis(10)).await;
        handle.abort();
        let _ = handle.await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(log.take(), ["started"], "killed mid-reconcile");
    }

    #[test]
    fn a_loop_is_quiet_once_nothing_was_due_for_the_whole_window() {
        let t0 = Instant::now();
        let mut quiet = Quiet::default();
        assert!(!quiet.sample(false, t0), "the window starts");
        assert!(!quiet.sample(false, t0 + SETTLE_QUIET / 2));
        assert!(
            !quiet.sample(true, t0 + SETTLE_QUIET),
            "work came: it starts again"
        );
        let t1 = t0 + SETTLE_QUIET + Duration::from_millis(1);
        assert!(!quiet.sample(false, t1));
        assert!(!quiet.sample(false, t1 + SETTLE_QUIET - Duration::from_millis(1)));
        assert!(quiet.sample(false, t1 + SETTLE_QUIET));
    }

    #[tokio::test(start_paused = true)]
    async fn a_loop_settles_once_it_has_worked_through_its_first_list() {
        let objs: Vec<ConfigMap> = (0..20).map(|i| cm(&format!("o{i:02}"), i)).collect();
        let (store, _w, tx, rx) = listed(&objs);
        for o in &objs {
            send(&tx, o);
        }
        let log = Arc::new(Log::default());
        let settled_log = log.clone();
        let stop = CancellationToken::new();
        // Each reconcile takes 100 ms and asks to come back in an hour,
        // which does not keep the loop from settling.
        let handle = tokio::spawn(
            Reconciler::new(store, rx)
                .workers(2)
                .on_settled(move || settled_log.push("settled".into()))
                .run(
                    |o: Arc<ConfigMap>, log: Arc<Log>| async move {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        log.push(o.metadata.name.clone().unwrap());
                        Ok::<_, Infallible>(Action::requeue(Duration::from_secs(3600)))
                    },
                    |_, e: &Infallible, _| match *e {},
                    log.clone(),
                    stop.clone().cancelled_owned(),
                ),
        );
        // 20 objects, 2 at a time: a second of work, then a quiet second.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let seen = log.take();
        assert_eq!(seen.len(), 20, "{seen:?}");
        assert!(
            !seen.contains(&"settled".to_owned()),
            "not quiet long enough yet"
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(log.take(), ["settled"]);
        // Once only, whatever comes later.
        send(&tx, &objs[0]);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(log.take(), ["o00"]);
        stop.cancel();
        handle.await.unwrap();
    }
}
