//! A conformance suite any COSI v1alpha2 driver can be run against (and,
//! with [`Api::V1alpha1`], any v1alpha1 driver, and with [`Api::Upstream`]
//! any driver of upstream's v1alpha2 API): the COSI analogue of
//! csi-sanity. It calls the driver's gRPC API on its UNIX
//! socket and checks every MUST and SHOULD of the KEP's "COSI Driver"
//! section and of the driver specification (idempotency, error codes,
//! required fields, credential hygiene) and, optionally, that granted S3
//! credentials or Azure SAS tokens reach exactly what was granted.
//!
//! ```no_run
//! # async fn demo() {
//! use cosi_sanity::{Config, run};
//! let endpoint = cosi_driver::Endpoint::parse("unix:///run/cosi/cosi.sock").unwrap();
//! let report = run(&Config::new(endpoint)).await;
//! report.print();
//! assert!(report.success(), "{}", report.summary_line());
//! # }
//! ```
//!
//! Every case works under fresh names (`bc-<uuid>`, `ba-<uuid>`), so runs
//! in parallel against one driver never collide, and removes what it
//! created when it ends, whatever its outcome.

#![warn(missing_docs)]

pub mod azure;
mod cases;
mod checks;
pub mod config;
mod context;
mod driver_test;
mod names;
mod one_call;
pub mod report;
pub mod s3;
mod secrets;
mod suite;
mod target;
pub mod upstream;
pub mod v1alpha1;

pub use config::{Api, Config, ConfigError, ParameterFile, Parameters, ParseError, parse_protocol};
pub use driver_test::DriverTest;
pub use report::{CaseResult, Outcome, Report};
pub use suite::{SETUP_CASE, case_names, run, selected_names, selected_names_for};
