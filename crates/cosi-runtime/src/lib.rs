//! Plumbing shared by `cosi-controller` and `cosi-sidecar`: command-line
//! flags, Kubernetes client set-up, logging, graceful shutdown, leader
//! election, the metrics/health HTTP endpoints with the KEP's metrics and the
//! controller-runtime ones (reconciles, work queues, leader election),
//! capped exponential backoff, Events, the one API error type
//! ([`ApiError`]), the compact watch caches ([`cache`]), metadata/status
//! patches that write nothing when nothing changes, and the one observe →
//! decide → apply loop every reconciler runs ([`steps`]).

pub mod api_error;
pub mod backoff;
pub mod cache;
pub mod client;
pub mod events;
pub mod flags;
pub mod http;
pub mod leader;
pub mod lean_responses;
pub mod logging;
pub mod loop_metrics;
pub mod managed_fields;
pub mod metrics;
pub mod object;
pub mod object_states;
pub mod own_writes;
pub mod patch;
pub mod reconcile_loop;
pub mod ref_index;
pub mod shutdown;
pub mod steps;

pub use api_error::{ApiContext, ApiError};
pub use backoff::{Backoff, FailureTracker};
pub use events::{EventReporter, EventType};
pub use flags::{CommonArgs, LogFormat};
pub use http::Readiness;
pub use object::Object;
pub use own_writes::OwnWrites;
pub use shutdown::Shutdown;
pub mod reconciler;
pub mod work_queue;
