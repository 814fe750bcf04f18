//! The outcome of a run: one [`CaseResult`] per case, printed one line each,
//! and the closing `N passed, N failed, N skipped` line (with `, N warned`
//! when a case warned).

use std::collections::BTreeSet;
use std::fmt;

/// How one case ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The driver did what the specification requires.
    Passed,
    /// The driver broke a requirement; the text says which and how.
    Failed(String),
    /// The case could not be checked; the text says why (e.g. an input was not given).
    Skipped(String),
    /// The driver deviates from the specification in a way tolerated
    /// unless `--strict`; the text says how.
    Warned(String),
}

impl Outcome {
    /// True for [`Outcome::Passed`].
    pub fn is_passed(&self) -> bool {
        matches!(self, Outcome::Passed)
    }

    /// True for [`Outcome::Failed`].
    pub fn is_failed(&self) -> bool {
        matches!(self, Outcome::Failed(_))
    }

    /// True for [`Outcome::Skipped`].
    pub fn is_skipped(&self) -> bool {
        matches!(self, Outcome::Skipped(_))
    }

    /// True for [`Outcome::Warned`].
    pub fn is_warned(&self) -> bool {
        matches!(self, Outcome::Warned(_))
    }

    /// The reason of a failure or skip; empty for a pass.
    pub fn reason(&self) -> &str {
        match self {
            Outcome::Passed => "",
            Outcome::Failed(r) | Outcome::Skipped(r) | Outcome::Warned(r) => r,
        }
    }
}

/// The result of one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseResult {
    /// The case's name, `"<RPC or area>: <expected behaviour>"`.
    pub name: String,
    /// How it ended.
    pub outcome: Outcome,
}

impl fmt::Display for CaseResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Outcome::Passed => write!(f, "PASS {}", self.name),
            Outcome::Failed(reason) => write!(f, "FAIL {}: {reason}", self.name),
            Outcome::Skipped(reason) => write!(f, "SKIP {}: {reason}", self.name),
            Outcome::Warned(reason) => write!(f, "WARN {}: {reason}", self.name),
        }
    }
}

/// Everything a run found, in the order the cases ran.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// One entry per case that was selected.
    pub cases: Vec<CaseResult>,
}

impl Report {
    /// How many cases passed.
    pub fn passed(&self) -> usize {
        self.cases.iter().filter(|c| c.outcome.is_passed()).count()
    }

    /// How many cases failed.
    pub fn failed(&self) -> usize {
        self.cases.iter().filter(|c| c.outcome.is_failed()).count()
    }

    /// How many cases were skipped.
    pub fn skipped(&self) -> usize {
        self.cases.iter().filter(|c| c.outcome.is_skipped()).count()
    }

    /// How many cases warned.
    pub fn warned(&self) -> usize {
        self.cases.iter().filter(|c| c.outcome.is_warned()).count()
    }

    /// True when no case failed (warnings do not fail a run).
    pub fn success(&self) -> bool {
        self.failed() == 0
    }

    /// The result of the case named `name`, if it ran.
    pub fn case(&self, name: &str) -> Option<&CaseResult> {
        self.cases.iter().find(|c| c.name == name)
    }

    /// `"N passed, N failed, N skipped"`, then `", N warned"` when a case warned.
    pub fn summary_line(&self) -> String {
        let mut line = format!(
            "{} passed, {} failed, {} skipped",
            self.passed(),
            self.failed(),
            self.skipped()
        );
        if self.warned() > 0 {
            line.push_str(&format!(", {} warned", self.warned()));
        }
        line
    }

    /// Prints one line per case, then the summary line, to standard output.
    pub fn print(&self) {
        print!("{self}");
    }

    /// The names of the skipped cases.
    pub fn skipped_names(&self) -> BTreeSet<&str> {
        self.cases
            .iter()
            .filter(|c| c.outcome.is_skipped())
            .map(|c| c.name.as_str())
            .collect()
    }

    /// For a driver's own test of the whole suite: panics, with the report,
    /// unless no case failed, every case of the suite ran, and the skipped
    /// cases are exactly those of `expected_skips` (name, why the driver
    /// cannot exercise it). A case that starts or stops skipping fails, so
    /// coverage cannot shrink unnoticed.
    pub fn assert_complete(&self, expected_skips: &[(&str, &str)]) {
        assert_eq!(self.failed(), 0, "cosi-sanity found failures:\n{self}");
        assert_eq!(
            self.cases.len(),
            crate::case_names().len(),
            "every case runs:\n{self}"
        );
        let expected: BTreeSet<&str> = expected_skips.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            self.skipped_names(),
            expected,
            "the skipped cases are not the expected ones (left: skipped, right: expected)\n{self}"
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for case in &self.cases {
            writeln!(f, "{case}")?;
        }
        writeln!(f, "{}", self.summary_line())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report<'a>(cases: impl IntoIterator<Item = (&'a str, Outcome)>) -> Report {
        Report {
            cases: cases
                .into_iter()
                .map(|(name, outcome)| CaseResult {
                    name: name.into(),
                    outcome,
                })
                .collect(),
        }
    }

    /// Two passes, a failure and a skip.
    fn sample() -> Report {
        report([
            ("x: works", Outcome::Passed),
            ("y: fails", Outcome::Failed("because".into())),
            ("z: skipped", Outcome::Skipped("no file".into())),
            ("v: works too", Outcome::Passed),
        ])
    }

    #[test]
    fn counts_and_summary_reflect_every_outcome() {
        let report = sample();
        assert_eq!(
            (report.passed(), report.failed(), report.skipped()),
            (2, 1, 1)
        );
        assert_eq!(report.summary_line(), "2 passed, 1 failed, 1 skipped");
        assert!(!report.success());
        assert_eq!(report.case("y: fails").unwrap().outcome.reason(), "because");
    }

    #[test]
    fn printed_lines_name_the_outcome_and_reason() {
        assert_eq!(
            sample().to_string(),
            "PASS x: works\nFAIL y: fails: because\nSKIP z: skipped: no file\nPASS v: works too\n2 passed, 1 failed, 1 skipped\n"
        );
    }

    #[test]
    fn warnings_are_counted_printed_and_do_not_fail_the_run() {
        let report = report([
            ("x: works", Outcome::Passed),
            ("w: deviates", Outcome::Warned("Internal".into())),
        ]);
        assert!(report.success());
        assert_eq!(
            report.to_string(),
            "PASS x: works\nWARN w: deviates: Internal\n1 passed, 0 failed, 0 skipped, 1 warned\n"
        );
    }

    fn whole_suite(skipped: &[&str]) -> Report {
        report(crate::case_names().into_iter().map(|name| {
            let outcome = if skipped.contains(&name) {
                Outcome::Skipped("no input".into())
            } else {
                Outcome::Passed
            };
            (name, outcome)
        }))
    }

    #[test]
    fn a_complete_run_skips_exactly_the_expected_cases() {
        let name = crate::case_names()[0];
        whole_suite(&[name]).assert_complete(&[(name, "why")]);
        whole_suite(&[]).assert_complete(&[]);
    }

    #[test]
    #[should_panic(expected = "the skipped cases are not the expected ones")]
    fn a_case_that_stops_skipping_fails_a_complete_run() {
        let name = crate::case_names()[0];
        whole_suite(&[]).assert_complete(&[(name, "why")]);
    }

    #[test]
    #[should_panic(expected = "every case runs")]
    fn a_run_missing_cases_is_not_complete() {
        Report::default().assert_complete(&[]);
    }

    #[test]
    fn an_empty_report_is_a_success() {
        let report = Report::default();
        assert!(report.success());
        assert_eq!(report.summary_line(), "0 passed, 0 failed, 0 skipped");
    }
}
