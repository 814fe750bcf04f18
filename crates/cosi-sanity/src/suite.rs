//! Running the selected cases one after another against one driver, each
//! followed by the removal of what it created.

use cosi_driver::{Code, DriverClient, Status};
use regex::Regex;

use crate::cases::{self, Case};
use crate::checks::{self, describe};
use crate::config::{Api, Config};
use crate::context::{CaseBody, CaseContext, Ctx, DriverPart, Rpc, Step, Stop, V1alpha2};
use crate::one_call::{Driver, OneCallApi, OneCallCtx};
use crate::report::{CaseResult, Outcome, Report};

/// The name of the entry reported when the suite cannot start.
pub const SETUP_CASE: &str = "Suite setup: connect to the driver and call DriverGetInfo";

/// The names of every case, in run order.
pub fn case_names() -> Vec<&'static str> {
    cases::all().iter().map(|c| c.name).collect()
}

/// The names of the v1alpha2 cases `filter` selects (all when `None`).
pub fn selected_names(filter: Option<&str>) -> Result<Vec<&'static str>, regex::Error> {
    selected_names_for(Api::V1alpha2, filter)
}

/// The names of the cases of `api` that `filter` selects (for
/// [`Api::Auto`], the v1alpha2 cases, then the v1alpha1 cases).
pub fn selected_names_for(
    api: Api,
    filter: Option<&str>,
) -> Result<Vec<&'static str>, regex::Error> {
    let filter = filter.map(Regex::new).transpose()?;
    let v1alpha1 = || crate::v1alpha1::all().into_iter().map(|c| c.name);
    let names: Vec<&'static str> = match api {
        Api::V1alpha2 => case_names(),
        Api::V1alpha1 => v1alpha1().collect(),
        Api::Upstream => crate::upstream::all().into_iter().map(|c| c.name).collect(),
        Api::Auto => case_names().into_iter().chain(v1alpha1()).collect(),
    };
    Ok(names
        .into_iter()
        .filter(|n| filter.as_ref().is_none_or(|f| f.is_match(n)))
        .collect())
}

/// Runs every selected case against the driver at `config.endpoint`, on
/// the driver API `config.api` names or, for [`Api::Auto`], the one the
/// driver answers DriverGetInfo on (v1alpha2, then upstream's v1alpha2,
/// else v1alpha1).
/// Driver misbehaviour never panics or aborts the run: it becomes a failed
/// case. Everything a case creates is removed after it, whatever the outcome.
pub async fn run(config: &Config) -> Report {
    let filter = match config.filter.as_deref().map(Regex::new).transpose() {
        Ok(f) => f,
        Err(e) => return setup_failure(&[], format!("invalid filter pattern: {e}")),
    };
    let client = match DriverClient::connect(&config.endpoint).await {
        Ok(c) => c,
        Err(e) => {
            let names =
                selected_names_for(config.api, config.filter.as_deref()).unwrap_or_default();
            return setup_failure(
                &names,
                format!("cannot connect to {}: {}", config.endpoint, error_chain(&e)),
            );
        }
    };
    let v1alpha1 = match config.api {
        Api::Upstream => return crate::upstream::run(client, config, filter.as_ref()).await,
        Api::V1alpha1 => true,
        Api::V1alpha2 => false,
        Api::Auto => {
            let unimplemented = |r: Result<Result<(), Status>, _>| matches!(r, Ok(Err(s)) if s.code() == Code::Unimplemented);
            let v2 = tokio::time::timeout(config.rpc_timeout, client.get_info()).await;
            if !unimplemented(v2.map(|r| r.map(drop))) {
                false
            } else {
                let path = cosi_driver::DriverApi::Upstream.get_info_path();
                let up = tokio::time::timeout(config.rpc_timeout, client.call_empty(path)).await;
                if up.as_ref().is_ok_and(|r| r.is_ok()) {
                    return crate::upstream::run(client, config, filter.as_ref()).await;
                }
                true
            }
        }
    };
    if v1alpha1 {
        return crate::v1alpha1::run(client, config, filter.as_ref()).await;
    }
    let all = cases::all();
    let selected: Vec<&Case> = select(&all, filter.as_ref(), |c| c.name);
    let names: Vec<&str> = selected.iter().map(|c| c.name).collect();
    if selected.is_empty() {
        return setup_failure(
            &[],
            "the filter selects no case (list them with --list)".into(),
        );
    }
    let info = match setup_call(config, "DriverGetInfo", client.get_info()).await {
        Ok(info) => info,
        Err(reason) => return setup_failure(&names, reason),
    };
    if let Some(requested) = config.protocol
        && let Err(e) = checks::choose_protocol(&info.supported_protocols, Some(requested))
    {
        return setup_failure(&names, e);
    }
    let mut ctx = Ctx::new(config.clone(), client, V1alpha2::new(config, info));
    let cases = selected.iter().map(|c| (c.name, c.run)).collect();
    run_cases(&mut ctx, cases, config.strict).await
}

/// Runs each case in `ctx`, then removes what it created, and reports
/// their outcomes.
pub(crate) async fn run_cases<D: DriverPart>(
    ctx: &mut CaseContext<D>,
    cases: Vec<(&'static str, CaseBody<CaseContext<D>>)>,
    strict: bool,
) -> Report {
    let mut report = Report::default();
    for (name, run) in cases {
        let step = run(ctx).await;
        let cleanup = D::clean_up(ctx).await;
        let violations = ctx.take_violations();
        report.cases.push(CaseResult {
            name: name.to_owned(),
            outcome: combine(step, violations, cleanup, strict),
        });
    }
    report
}

/// Runs the cases of the one-call API `A` that `filter` selects from
/// `cases`, against the driver `client` connects to, after the setup call
/// of DriverGetInfo.
pub(crate) async fn run_one_call<A: OneCallApi>(
    client: DriverClient,
    config: &Config,
    filter: Option<&Regex>,
    cases: Vec<(&'static str, CaseBody<OneCallCtx<A>>)>,
) -> Report {
    let selected: Vec<_> = select(&cases, filter, |c| c.0)
        .into_iter()
        .copied()
        .collect();
    let names: Vec<&str> = selected.iter().map(|c| c.0).collect();
    if selected.is_empty() {
        return setup_failure(
            &[],
            format!(
                "the filter selects no {} case (list them with --api {} --list)",
                A::NAME,
                A::API_ARG
            ),
        );
    }
    if let Some(p) = config.protocol
        && p != cosi_driver::proto::ObjectProtocol::S3
    {
        return setup_failure(
            &names,
            format!(
                "the {} cases exercise S3 only; drop --protocol or use --protocol S3",
                A::NAME
            ),
        );
    }
    let rpc = format!("{} DriverGetInfo", A::NAME);
    let identity = A::GetInfo::client(&client).clone();
    let reply = setup_call(config, &rpc, A::GetInfo::default().send(identity));
    let name = match reply.await {
        Ok(reply) => A::driver_name(&reply.into_inner()).to_owned(),
        Err(reason) => return setup_failure(&names, reason),
    };
    let mut ctx = OneCallCtx::<A>::new(config.clone(), client, Driver::new(name));
    run_cases(&mut ctx, selected, config.strict).await
}

/// The cases of `all` whose names `filter` matches (all without a filter).
fn select<'a, T>(all: &'a [T], filter: Option<&Regex>, name: fn(&T) -> &str) -> Vec<&'a T> {
    all.iter()
        .filter(|c| filter.is_none_or(|f| f.is_match(name(c))))
        .collect()
}

/// Awaits the setup call `rpc` within the RPC timeout; an error status or
/// no answer is the reason the suite cannot start.
async fn setup_call<T>(
    config: &Config,
    rpc: &str,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<T, String> {
    match tokio::time::timeout(config.rpc_timeout, call).await {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(s)) => Err(format!("{rpc} answered {}", describe(&s))),
        Err(_) => Err(format!(
            "{rpc} did not answer within {}s",
            config.rpc_timeout.as_secs_f64()
        )),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

fn setup_failure(selected: &[&str], reason: String) -> Report {
    let mut cases = vec![CaseResult {
        name: SETUP_CASE.to_owned(),
        outcome: Outcome::Failed(reason),
    }];
    cases.extend(selected.iter().map(|name| CaseResult {
        name: (*name).to_owned(),
        outcome: Outcome::Skipped("the suite could not start (see the setup failure)".into()),
    }));
    Report { cases }
}

/// The outcome of a case from its body's result, the requirements broken
/// in passing (credential leaks...) and what cleanup could not remove; a
/// warning is a failure when `strict`.
pub fn combine(step: Step, violations: Vec<String>, cleanup: Vec<String>, strict: bool) -> Outcome {
    let mut problems = Vec::new();
    let mut warning = None;
    let skipped = match step {
        Ok(()) => None,
        Err(Stop::Fail(reason)) => {
            problems.push(reason);
            None
        }
        Err(Stop::Warn(reason)) if strict => {
            problems.push(format!("{reason} (a failure under --strict)"));
            None
        }
        Err(Stop::Warn(reason)) => {
            warning = Some(reason);
            None
        }
        Err(Stop::Skip(reason)) => Some(reason),
    };
    problems.extend(violations);
    if !cleanup.is_empty() {
        problems.push(format!("cleanup: {}", cleanup.join("; ")));
    }
    match (problems.is_empty(), skipped) {
        (true, None) => warning.map_or(Outcome::Passed, Outcome::Warned),
        (true, Some(reason)) => Outcome::Skipped(reason),
        (false, _) => Outcome::Failed(problems.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_pass_passes() {
        assert_eq!(combine(Ok(()), vec![], vec![], false), Outcome::Passed);
    }

    #[test]
    fn a_skip_with_nothing_else_stays_a_skip() {
        assert_eq!(
            combine(Err(Stop::Skip("no input".into())), vec![], vec![], false),
            Outcome::Skipped("no input".into())
        );
    }

    #[test]
    fn cleanup_problems_fail_even_a_passed_or_skipped_case() {
        let out = combine(
            Ok(()),
            vec![],
            vec!["DriverDeleteBucket answered Internal".into()],
            false,
        );
        assert_eq!(
            out,
            Outcome::Failed("cleanup: DriverDeleteBucket answered Internal".into())
        );
        let out = combine(Err(Stop::Skip("x".into())), vec![], vec!["y".into()], false);
        assert!(out.is_failed());
    }

    #[test]
    fn violations_are_added_to_the_failure_reason() {
        let out = combine(
            Err(Stop::Fail("wrong code".into())),
            vec!["leaked a credential".into()],
            vec![],
            false,
        );
        assert_eq!(
            out,
            Outcome::Failed("wrong code; leaked a credential".into())
        );
    }

    #[test]
    fn a_warning_fails_only_under_strict() {
        let warn = || Err(Stop::Warn("answered Internal".into()));
        assert_eq!(
            combine(warn(), vec![], vec![], false),
            Outcome::Warned("answered Internal".into())
        );
        assert_eq!(
            combine(warn(), vec![], vec![], true),
            Outcome::Failed("answered Internal (a failure under --strict)".into())
        );
        assert!(combine(warn(), vec!["leak".into()], vec![], false).is_failed());
    }

    #[test]
    fn the_run_future_can_be_spawned() {
        fn is_send<T: Send>(_: &T) {}
        let endpoint = cosi_driver::Endpoint::parse("unix:///nonexistent/cosi.sock").unwrap();
        let config = Config::new(endpoint);
        let future = run(&config);
        is_send(&future);
    }

    #[test]
    fn filters_are_regular_expressions_over_case_names() {
        let names = selected_names(Some("^DriverGetInfo: ")).unwrap();
        assert_eq!(names.len(), 3);
        assert!(selected_names(Some("Revoke|Grant")).unwrap().len() > 5);
        assert_eq!(selected_names(None).unwrap().len(), case_names().len());
        assert!(selected_names(Some("(")).is_err());
    }
}
