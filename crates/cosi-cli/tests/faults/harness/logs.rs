//! Each fault run's log, kept apart from the others': every event logged
//! inside a run's span (by the harness, the controller, the sidecar and
//! the driver, which carry the span into the tasks they spawn) is kept
//! under the run's seed, so that a failed run can show what its
//! components did although several runs share the process.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id};
use tracing::{Event, Span, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The name of a run's span.
const RUN_SPAN: &str = "fault_run";

/// The lines logged so far, by seed.
#[derive(Clone, Default)]
pub struct RunLogs(Arc<Mutex<HashMap<u64, Vec<String>>>>);

impl RunLogs {
    /// Takes the lines logged in the run of `seed`.
    pub fn take(&self, seed: u64) -> Vec<String> {
        lock(&self.0).remove(&seed).unwrap_or_default()
    }

    fn push(&self, seed: u64, line: String) {
        lock(&self.0).entry(seed).or_default().push(line);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The span a run with `seed` runs in.
pub fn run_span(seed: u64) -> Span {
    tracing::info_span!(RUN_SPAN, seed)
}

/// Installs the process's subscriber once: the kept run logs (debug for
/// the COSI components, info for the rest, never the S3 library's request
/// signatures), plus the test output when `RUST_LOG` is set. Returns the
/// run logs.
pub fn install() -> RunLogs {
    static LOGS: OnceLock<RunLogs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = RunLogs::default();
        let kept = Targets::new()
            .with_default(LevelFilter::INFO)
            .with_targets(
                [
                    "cosi_controller",
                    "cosi_sidecar",
                    "cosi_runtime",
                    "cosi_cli",
                ]
                .map(|t| (t, LevelFilter::DEBUG)),
            )
            .with_target("s3s", LevelFilter::OFF);
        let printed = std::env::var_os("RUST_LOG").is_some().then(|| {
            let filter = tracing_subscriber::EnvFilter::from_default_env().add_directive(
                cosi_driver_local::SECRET_SAFE_LOG_DIRECTIVE
                    .parse()
                    .expect("a valid directive"),
            );
            tracing_subscriber::fmt::layer()
                .with_test_writer()
                .with_filter(filter)
        });
        let _ = tracing_subscriber::registry()
            .with(Capture(logs.clone()).with_filter(kept))
            .with(printed)
            .try_init();
        logs
    })
    .clone()
}

/// The seed of a run span, kept in the span's extensions.
struct Seed(u64);

/// Keeps every event logged inside a run span under the run's seed.
struct Capture(RunLogs);

impl<S> Layer<S> for Capture
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != RUN_SPAN {
            return;
        }
        let mut seed = SeedField(None);
        attrs.record(&mut seed);
        if let (Some(seed), Some(span)) = (seed.0, ctx.span(id)) {
            span.extensions_mut().insert(Seed(seed));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let seed = scope
            .into_iter()
            .find_map(|span| span.extensions().get::<Seed>().map(|s| s.0));
        let Some(seed) = seed else {
            return;
        };
        let meta = event.metadata();
        let mut line = format!("{} {}:", meta.level(), meta.target());
        event.record(&mut Line(&mut line));
        self.0.push(seed, line);
    }
}

/// Reads the `seed` field of a run span.
struct SeedField(Option<u64>);

impl Visit for SeedField {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "seed" {
            self.0 = Some(value);
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

/// Writes an event's fields after its level and target, the message first.
struct Line<'a>(&'a mut String);

impl Visit for Line<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = if field.name() == "message" {
            write!(self.0, " {value:?}")
        } else {
            write!(self.0, " {}={value:?}", field.name())
        };
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = if field.name() == "message" {
            write!(self.0, " {value}")
        } else {
            write!(self.0, " {}={value:?}", field.name())
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Instrument as _;

    #[tokio::test]
    async fn a_run_keeps_the_events_of_its_spawned_tasks_and_only_its_own() {
        let logs = install();
        let run = async {
            tracing::info!(step = 1, "in the run");
            tokio::spawn(
                async { tracing::debug!(target: "cosi_sidecar", "in a task") }.in_current_span(),
            )
            .await
            .unwrap();
            // Below the kept level for other crates.
            tracing::debug!(target: "hyper", "not kept");
        };
        run.instrument(run_span(9_001)).await;
        tokio::spawn(async { tracing::info!("outside every run") })
            .await
            .unwrap();
        let lines = logs.take(9_001);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines[0].starts_with("INFO "), "{}", lines[0]);
        assert!(lines[0].ends_with(" in the run step=1"), "{}", lines[0]);
        assert_eq!(lines[1], "DEBUG cosi_sidecar: in a task");
        assert!(logs.take(9_001).is_empty(), "taken once");
    }
}
