//! The whole suite as a driver's own integration test: the parameter files
//! the driver is checked with, the cases it cannot exercise, and one call
//! that runs the suite with the data plane and asserts that the run is
//! complete.
//!
//! ```no_run
//! # async fn demo(endpoint: cosi_driver::Endpoint) {
//! use cosi_sanity::DriverTest;
//! const SUITE: DriverTest = DriverTest {
//!     bucket_parameters: "parameters: {tier: standard}\ninvalidParameters: {tier: gold!}",
//!     access_parameters: "",
//!     expected_skips: &[],
//! };
//! SUITE.assert_passes(endpoint).await;
//! # }
//! ```

use std::time::Instant;

use cosi_driver::Endpoint;

use crate::{Config, ParameterFile, Report};

/// What a driver's conformance test runs the suite with, and which of its
/// cases the driver is known not to exercise.
#[derive(Clone, Copy, Debug)]
pub struct DriverTest {
    /// The BucketClass parameter file, as YAML or JSON text.
    pub bucket_parameters: &'static str,
    /// The BucketAccessClass parameter file, as YAML or JSON text.
    pub access_parameters: &'static str,
    /// The cases the driver cannot exercise, and why. A case that starts
    /// skipping (or stops skipping) fails [`Self::assert_passes`], so
    /// coverage cannot shrink unnoticed.
    pub expected_skips: &'static [(&'static str, &'static str)],
}

impl DriverTest {
    /// The configuration for the driver at `endpoint`: both parameter
    /// files, and the data plane on.
    ///
    /// # Panics
    ///
    /// If either text is not a valid parameter file.
    pub fn config(&self, endpoint: Endpoint) -> Config {
        let parse = |what: &str, text: &str| {
            ParameterFile::parse(text).unwrap_or_else(|e| panic!("{what} parameters: {e}"))
        };
        Config {
            bucket: parse("bucket", self.bucket_parameters),
            access: parse("access", self.access_parameters),
            data_plane: true,
            ..Config::new(endpoint)
        }
    }

    /// Runs the suite with [`Self::config`] against the driver at
    /// `endpoint`, prints the report and how long the run took, and asserts
    /// that every case ran and passed but the expected skips
    /// ([`Report::assert_complete`]).
    ///
    /// # Panics
    ///
    /// If the run is not complete.
    pub async fn assert_passes(&self, endpoint: Endpoint) -> Report {
        let started = Instant::now();
        let report = crate::run(&self.config(endpoint)).await;
        report.print();
        eprintln!("cosi-sanity took {:?}", started.elapsed());
        report.assert_complete(self.expected_skips);
        report
    }
}
