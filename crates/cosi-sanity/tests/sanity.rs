//! The suite against in-process drivers on temporary sockets: a correct
//! driver passes every case and is left empty; each deliberately broken
//! driver fails the case that checks what it breaks, with a reason that
//! says so. Also the binary's exit codes and output.

mod support;

use std::time::Duration;

use cosi_driver::proto::ObjectProtocol;
use cosi_sanity::{Api, Config, Outcome, Report, SETUP_CASE, case_names, run};
use support::{Fault, Running, config, start, start_v1alpha1};

const NAME_CASE: &str = "DriverGetInfo: the name is in domain-name notation, at most 63 characters";
const PROTOCOLS_CASE: &str = "DriverGetInfo: advertises at least one known protocol, each once";
const GENERATE_IDEMPOTENT: &str =
    "DriverGenerateBucketId: is idempotent: the same name gives the same bucket_id";
const GENERATE_CREATES_NOTHING: &str = "DriverGenerateBucketId: creates no backend bucket";
const GENERATE_NEEDS_NAME: &str = "DriverGenerateBucketId: a missing name is InvalidArgument";
const CREATE_COVERS: &str =
    "DriverCreateBucket: creates a bucket with info for every requested protocol";
const CREATE_IDEMPOTENT: &str =
    "DriverCreateBucket: is idempotent: a repeat returns OK and the same info";
const CREATE_INCOMPATIBLE: &str = "DriverCreateBucket: an incompatible repeat is AlreadyExists";
const CREATE_UNSUPPORTED: &str = "DriverCreateBucket: an unsupported protocol is InvalidArgument";
const GET_UNKNOWN: &str = "DriverGetBucket: an unknown bucket_id is NotFound";
const DELETE_ABSENT: &str = "DriverDeleteBucket: deleting an absent bucket is OK";
const GRANT_COMPLETE: &str = "DriverGrantBucketAccess: returns complete credentials and info for exactly the requested bucket";
const GRANT_SEVERAL: &str =
    "DriverGrantBucketAccess: several buckets get one credential, or OutOfRange";
const GRANT_SERVICE_ACCOUNT: &str =
    "DriverGrantBucketAccess: ServiceAccount authentication is granted or InvalidArgument";
const GRANT_NEEDS_FIELDS: &str =
    "DriverGrantBucketAccess: missing required fields are InvalidArgument";
const REVOKE_ABSENT: &str = "DriverRevokeBucketAccess: revoking an absent access is OK";
const NO_LEAKS: &str = "Errors: messages and bucket info never contain a credential";
const DATA_READ_ONLY: &str = "Data plane: ReadOnly credentials cannot write";
const DATA_REVOKED: &str = "Data plane: revoked credentials stop working";
const DATA_REPEATED_REVOKED: &str =
    "Data plane: after repeated grants and one revoke, every key they returned is refused";

fn outcome<'a>(report: &'a Report, name: &str) -> &'a Outcome {
    &report
        .case(name)
        .unwrap_or_else(|| panic!("case {name:?} did not run:\n{report}"))
        .outcome
}

/// How a case must end: but for a pass, with a reason containing the words
/// given ("" for any reason).
#[derive(Clone, Copy, Debug)]
enum Expect {
    Passed,
    Failed(&'static str),
    Skipped(&'static str),
    Warned(&'static str),
}

/// Asserts that case `name` ended as `expected` says; a failed case also
/// fails the run.
fn assert_outcome(report: &Report, name: &str, expected: Expect) {
    let outcome = outcome(report, name);
    let words = match (expected, outcome) {
        (Expect::Passed, Outcome::Passed) => return,
        (Expect::Failed(words), Outcome::Failed(_)) => {
            assert!(!report.success());
            words
        }
        (Expect::Skipped(words), Outcome::Skipped(_))
        | (Expect::Warned(words), Outcome::Warned(_)) => words,
        _ => panic!("{name} should be {expected:?} but is {outcome:?}\n{report}"),
    };
    let reason = outcome.reason();
    assert!(
        reason.contains(words),
        "{name}: reason {reason:?} lacks {words:?}"
    );
}

/// Asserts that the `cases` of the suite all passed.
fn assert_all_passed(report: &Report, cases: usize) {
    assert_eq!(report.failed(), 0, "{report}");
    assert_eq!(report.skipped(), 0, "{report}");
    assert_eq!(report.passed(), cases, "{report}");
    assert!(report.success());
}

/// Asserts that the driver holds no bucket, account or object.
fn assert_left_empty(driver: &Running) {
    let state = driver.driver.state();
    assert!(
        state.buckets.is_empty(),
        "buckets left: {:?}",
        state.buckets.keys()
    );
    assert!(
        state.accounts.is_empty(),
        "accounts left: {:?}",
        state.accounts.keys()
    );
    assert!(
        state.objects.is_empty(),
        "objects left: {:?}",
        state.objects.keys()
    );
}

#[tokio::test]
async fn a_correct_driver_passes_every_case_and_is_left_empty() {
    let driver = start(Fault::None).await;
    let report = run(&config(&driver)).await;
    assert_all_passed(&report, case_names().len());
    assert_left_empty(&driver);
    let state = driver.driver.state();
    assert!(state.keys.is_empty(), "keys left: {}", state.keys.len());
}

#[tokio::test]
async fn cases_without_their_inputs_are_skipped_with_the_reason() {
    let driver = start(Fault::None).await;
    let report = run(&Config::new(driver.endpoint.clone())).await;
    assert_eq!(report.failed(), 0, "{report}");
    let skipped = Expect::Skipped("incompatibleParameters");
    assert_outcome(&report, CREATE_INCOMPATIBLE, skipped);
    assert_outcome(&report, DATA_REVOKED, Expect::Skipped("--data-plane"));
    // 3 parameter-gated bucket cases, 3 access ones, 8 data-plane ones.
    assert_eq!(report.skipped(), 14, "{report}");
    assert!(driver.driver.state().buckets.is_empty());
}

/// Broken drivers and how cases must end against each: mostly the case
/// that checks what the driver breaks fails, with words of its reason. The
/// rows of one driver stand together; it runs once for them.
const BROKEN: &[(Fault, &str, Expect)] = &[
    // A name that is not a domain name fails.
    (Fault::BadName, NAME_CASE, Expect::Failed("\"Mem Driver!\"")),
    // A driver without protocols fails; its provisioner cases are skipped.
    (
        Fault::NoProtocols,
        PROTOCOLS_CASE,
        Expect::Failed("supported_protocols is empty"),
    ),
    (Fault::NoProtocols, CREATE_IDEMPOTENT, Expect::Skipped("")),
    // Random bucket IDs fail idempotency; what needs a stable ID is skipped.
    (
        Fault::RandomBucketId,
        GENERATE_IDEMPOTENT,
        Expect::Failed("different bucket_ids"),
    ),
    (
        Fault::RandomBucketId,
        GENERATE_CREATES_NOTHING,
        Expect::Skipped(""),
    ),
    // A bucket created in phase one fails.
    (
        Fault::GenerateCreatesBucket,
        GENERATE_CREATES_NOTHING,
        Expect::Failed("phase 1 must not create a backend bucket"),
    ),
    // A create that refuses an identical repeat fails idempotency.
    (
        Fault::CreateFailsOnRepeat,
        CREATE_IDEMPOTENT,
        Expect::Failed("answered AlreadyExists"),
    ),
    // An accepted incompatible repeat fails.
    (
        Fault::CreateIgnoresIncompatibleRepeat,
        CREATE_INCOMPATIBLE,
        Expect::Failed("succeeded instead of answering AlreadyExists"),
    ),
    // An accepted unsupported protocol fails.
    (
        Fault::CreateAcceptsAnyProtocol,
        CREATE_UNSUPPORTED,
        Expect::Failed("protocols [Azure]"),
    ),
    // Bucket info without the requested protocol fails.
    (
        Fault::CreateReturnsWrongProtocol,
        CREATE_COVERS,
        Expect::Failed("lacks requested protocol S3"),
    ),
    // A wrong code for an unknown bucket fails.
    (
        Fault::GetMissingIsInternal,
        GET_UNKNOWN,
        Expect::Failed("answered Internal: lookup failed instead of NotFound"),
    ),
    // Deleting an absent bucket must be ok.
    (
        Fault::DeleteAbsentIsNotFound,
        DELETE_ABSENT,
        Expect::Failed("never created answered NotFound"),
    ),
    // A grant that leaves out a bucket fails.
    (
        Fault::GrantDropsABucket,
        GRANT_SEVERAL,
        Expect::Failed("no entry for requested bucket"),
    ),
    // A grant without a secret key fails.
    (
        Fault::GrantOmitsSecretKey,
        GRANT_COMPLETE,
        Expect::Failed("S3 credentials lack access_secret_key"),
    ),
    // Revoking an absent access must be ok.
    (
        Fault::RevokeAbsentIsNotFound,
        REVOKE_ABSENT,
        Expect::Failed("never granted answered NotFound"),
    ),
    // A wrong code for unsupported service accounts fails.
    (
        Fault::ServiceAccountPermissionDenied,
        GRANT_SERVICE_ACCOUNT,
        Expect::Failed("must answer InvalidArgument"),
    ),
    // Out of range for a single bucket fails.
    (
        Fault::OutOfRangeAlways,
        GRANT_SEVERAL,
        Expect::Failed("a single-bucket grant also fails"),
    ),
    (
        Fault::OutOfRangeAlways,
        GRANT_COMPLETE,
        Expect::Failed("OutOfRange for a single-bucket request"),
    ),
    // Accepted requests without required fields fail.
    (
        Fault::AcceptsMissingFields,
        GENERATE_NEEDS_NAME,
        Expect::Failed("succeeded instead of answering InvalidArgument"),
    ),
    (
        Fault::AcceptsMissingFields,
        GRANT_NEEDS_FIELDS,
        Expect::Failed("with no buckets succeeded"),
    ),
    // Revoked credentials that keep working fail.
    (
        Fault::RevokeKeepsKeys,
        DATA_REVOKED,
        Expect::Failed("revoked credentials still read bucket"),
    ),
    // Read only credentials that can write fail.
    (
        Fault::ReadOnlyCanWrite,
        DATA_READ_ONLY,
        Expect::Failed("ReadOnly credentials wrote"),
    ),
    // A new backend account per repeated grant fails. The older cases
    // cannot see it: each grant's key works, and the revoke removes the
    // last one.
    (
        Fault::AccountPerRepeatedGrant,
        DATA_REPEATED_REVOKED,
        Expect::Failed("the key of grant 1 of 3 still read bucket"),
    ),
    (Fault::AccountPerRepeatedGrant, DATA_REVOKED, Expect::Passed),
    (
        Fault::AccountPerRepeatedGrant,
        "Data plane: credentials from a repeated grant work",
        Expect::Passed,
    ),
    // What cleanup cannot remove fails the case.
    (
        Fault::DeleteFails,
        CREATE_COVERS,
        Expect::Failed("cleanup: DriverDeleteBucket of bucket"),
    ),
];

#[tokio::test]
async fn each_broken_driver_fails_the_case_that_checks_what_it_breaks() {
    for rows in BROKEN.chunk_by(|a, b| a.0 == b.0) {
        let driver = start(rows[0].0).await;
        let report = run(&config(&driver)).await;
        for &(_, case, expected) in rows {
            assert_outcome(&report, case, expected);
        }
    }
}

#[tokio::test]
async fn a_credential_in_an_error_message_fails_without_being_repeated() {
    let driver = start(Fault::CredentialInErrors).await;
    let report = run(&config(&driver)).await;
    let leak = Expect::Failed("contains a credential returned by a grant");
    assert_outcome(&report, NO_LEAKS, leak);
    let secret = driver.driver.state().last_secret.clone();
    assert!(!secret.is_empty());
    assert!(
        !report.to_string().contains(&secret),
        "the report quotes a credential"
    );
}

#[tokio::test]
async fn internal_for_a_request_that_does_not_decode_warns_and_fails_under_strict() {
    const UNDECODABLE: &str = "Errors: a request that does not decode is InvalidArgument";
    let driver = start(Fault::UndecodableIsInternal).await;
    let mut config = config(&driver);
    config.filter = Some(format!("^{UNDECODABLE}$"));
    let report = run(&config).await;
    assert_outcome(&report, UNDECODABLE, Expect::Warned("Internal"));
    assert!(
        report.success(),
        "a warning does not fail the run:\n{report}"
    );
    config.strict = true;
    let report = run(&config).await;
    assert_outcome(&report, UNDECODABLE, Expect::Failed("--strict"));
}

#[tokio::test]
async fn an_unreachable_driver_fails_the_setup_and_skips_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let endpoint = cosi_driver::Endpoint::from_path(dir.path().join("absent.sock")).unwrap();
    let report = run(&Config::new(endpoint)).await;
    let unreachable = Expect::Failed("cannot connect to unix://");
    assert_outcome(&report, SETUP_CASE, unreachable);
    assert_eq!(report.failed(), 1);
    // The API is unknown: the cases of both are skipped.
    assert_eq!(
        report.skipped(),
        case_names().len() + cosi_sanity::v1alpha1::all().len()
    );
}

/// Options that fail the setup: how each changes a bare configuration,
/// words of the reason, and the cases it leaves skipped.
type SetupRow = (fn(&mut Config), &'static str, &'static [&'static str]);

#[tokio::test]
async fn the_v1alpha1_api_pinned_on_a_v1alpha2_driver_is_a_setup_failure() {
    let driver = start(Fault::None).await;
    let mut config = config(&driver);
    config.api = Api::V1alpha1;
    let report = run(&config).await;
    let unimplemented = Expect::Failed("v1alpha1 DriverGetInfo answered Unimplemented");
    assert_outcome(&report, SETUP_CASE, unimplemented);
}

#[tokio::test]
async fn options_the_suite_or_the_driver_cannot_meet_fail_the_setup() {
    let rows: [SetupRow; 3] = [
        (
            |c| c.filter = Some("(".into()),
            "invalid filter pattern",
            &[],
        ),
        (
            |c| c.filter = Some("no such case".into()),
            "selects no case",
            &[],
        ),
        (
            |c| c.protocol = Some(ObjectProtocol::Gcs),
            "does not advertise protocol GCS (it advertises S3)",
            &[CREATE_IDEMPOTENT],
        ),
    ];
    let driver = start(Fault::None).await;
    for (edit, words, skipped) in rows {
        let mut config = Config::new(driver.endpoint.clone());
        edit(&mut config);
        let report = run(&config).await;
        assert_outcome(&report, SETUP_CASE, Expect::Failed(words));
        for case in skipped {
            assert_outcome(&report, case, Expect::Skipped(""));
        }
    }
}

#[tokio::test]
async fn the_filter_selects_the_cases_that_run() {
    let driver = start(Fault::BadName).await;
    let mut config = config(&driver);
    config.filter = Some("^DriverGetInfo: advertises".into());
    let report = run(&config).await;
    assert_eq!(report.cases.len(), 1, "{report}");
    assert!(report.success(), "{report}");
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

async fn cli(args: &[&str]) -> std::process::Output {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_cosi-sanity"))
        .args(args)
        .env_remove("COSI_ENDPOINT")
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(120), child)
        .await
        .expect("cosi-sanity finished")
        .expect("cosi-sanity ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_passes_a_correct_driver_and_prints_one_line_per_case() {
    let driver = start(Fault::None).await;
    let dir = tempfile::tempdir().unwrap();
    let params = write(
        dir.path(),
        "b.yaml",
        "parameters: {tier: standard}\nincompatibleParameters: {tier: gold}\ninvalidParameters: {tier: x}\n",
    );
    let access = write(dir.path(), "a.json", r#"{"policy": "default"}"#);
    let endpoint = driver.endpoint.to_string();
    let out = cli(&[
        "--endpoint",
        &endpoint,
        "--parameters",
        &params,
        "--access-parameters",
        &access,
        "--protocol",
        "S3",
        "--data-plane",
        "--propagation-timeout",
        "1",
    ])
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), case_names().len() + 1, "{stdout}");
    let total = case_names().len();
    assert_eq!(
        lines.last().copied(),
        Some(format!("{} passed, 0 failed, 3 skipped", total - 3).as_str()),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("SKIP DriverGrantBucketAccess: an incompatible repeat"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_exits_non_zero_for_a_broken_driver() {
    let driver = start(Fault::RevokeAbsentIsNotFound).await;
    let endpoint = driver.endpoint.to_string();
    let out = cli(&["--endpoint", &endpoint, "--filter", "absent access"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("FAIL {REVOKE_ABSENT}: ")),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("0 passed, 1 failed, 0 skipped\n"),
        "{stdout}"
    );
}

#[tokio::test]
async fn the_binary_lists_cases_and_refuses_bad_input() {
    let out = cli(&["--list", "--filter", "^Data plane"]).await;
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 8);
    let out = cli(&["--endpoint", "tcp://127.0.0.1:1"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a UNIX socket"));
    let out = cli(&["--endpoint", "unix:///tmp/x.sock", "--protocol", "NFS"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown protocol"));
}

const V1_CREATE_IDEMPOTENT: &str = "v1alpha1 DriverCreateBucket: is idempotent by name: a repeat returns OK and the same bucket_id, or AlreadyExists";

#[tokio::test]
async fn a_correct_v1alpha1_driver_passes_every_v1alpha1_case_and_is_left_empty() {
    let driver = start_v1alpha1(Fault::None).await;
    // Detected by itself: the driver answers UNIMPLEMENTED on v1alpha2.
    let report = run(&config(&driver)).await;
    assert_all_passed(&report, cosi_sanity::v1alpha1::all().len());
    assert!(report.case(V1_CREATE_IDEMPOTENT).is_some(), "{report}");
    assert_left_empty(&driver);
}

#[tokio::test]
async fn a_v1alpha1_driver_not_idempotent_by_name_fails_that_case() {
    let driver = start_v1alpha1(Fault::RandomBucketId).await;
    let mut config = config(&driver);
    config.api = Api::V1alpha1;
    let report = run(&config).await;
    let expected = Expect::Failed("not idempotent by name");
    assert_outcome(&report, V1_CREATE_IDEMPOTENT, expected);
}
