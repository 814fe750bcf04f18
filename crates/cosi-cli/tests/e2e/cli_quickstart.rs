//! `cosi quickstart`, the built binary, run exactly as the README runs it.

use std::io::Read;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use cosi_driver::testing::assert_mentions_all;

use crate::common::cosi;

/// Runs `cosi quickstart`, killing it if it has not exited within two minutes.
fn quickstart(args: &[&str]) -> Output {
    let mut child = cosi(&["quickstart"])
        .args(args)
        .spawn()
        .expect("run cosi quickstart");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let out = String::from_utf8_lossy(&stdout.join().unwrap()).into_owned();
            panic!("cosi quickstart {args:?} did not exit within 2 minutes:\n{out}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// The data directory the run announced.
fn announced_data_dir(stdout: &str) -> PathBuf {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("data directory: "))
        .expect("the data directory is announced");
    PathBuf::from(line.split(" (").next().unwrap())
}

/// Checks the run exited 0 with every step passed; its stdout and stderr.
fn passed_every_step(out: &Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let steps = stdout.lines().filter(|l| l.starts_with("[ ok ] ")).count();
    assert_eq!(steps, cosi_cli::quickstart::STEPS, "{stdout}");
    (stdout, stderr)
}

#[test]
fn quickstart_passes_every_step_and_shows_no_credentials() {
    let out = quickstart(&[]);
    let (stdout, stderr) = passed_every_step(&out);
    assert!(!stdout.contains("[FAIL]"));
    assert_mentions_all(
        &stdout,
        &[
            "quickstart passed: 15 steps",
            "Wait for the BucketClaim to be provisioned",
            "… BucketClaim quickstart: ",
            "AWS_ENDPOINT_URL         http://127.0.0.1:",
            "COSI_PROTOCOL            S3",
            "PUT not-allowed.txt: AccessDenied, as it should be",
            "the old ReadWrite key now gets InvalidAccessKeyId",
            "backend holds 0 buckets, 0 accounts, 0 access keys",
        ],
    );
    for key in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .expect("key listed");
        assert!(line.contains("<redacted, "), "{key} shown: {line}");
    }
    // Component logs go to stderr, warnings and errors only; a clean run has no error.
    assert!(!stderr.contains("ERROR"), "stderr:\n{stderr}");
    assert!(
        !stderr.contains(" INFO "),
        "info logs only with --verbose:\n{stderr}"
    );
    assert!(
        !announced_data_dir(&stdout).exists(),
        "the temporary data directory is removed"
    );
}

#[test]
fn quickstart_with_the_azure_protocol_passes_every_step_on_azurite_and_shows_no_token() {
    let bin = cosi_driver_azure::testing::find_bin()
        .unwrap_or_else(|| panic!("{}", cosi_driver_azure::testing::install_hint()));
    let bin = bin.to_string_lossy().into_owned();
    let out = quickstart(&["--protocol", "azure", "--azurite-bin", &bin]);
    let (stdout, stderr) = passed_every_step(&out);
    assert_mentions_all(
        &stdout,
        &[
            "Start Azurite (Azure Storage emulator) and the Azure driver",
            "class quickstart, protocols [Azure]",
            "COSI_PROTOCOL            Azure",
            "AZURE_STORAGE_SAS_TOKEN  <redacted, ",
            "PUT not-allowed.txt: AuthorizationPermissionMismatch (HTTP 403), as it should be",
            "the old ReadWrite SAS token is now refused",
            "Azurite holds 0 containers",
        ],
    );
    assert!(!stdout.contains("sig="), "a token is shown:\n{stdout}");
    assert!(!stderr.contains("ERROR"), "stderr:\n{stderr}");
}

#[test]
fn quickstart_names_the_failed_step_and_exits_non_zero() {
    let out = quickstart(&["--timeout", "1ms"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a 1 ms budget cannot pass:\n{stdout}"
    );
    let report = stdout
        .lines()
        .find(|l| l.starts_with("quickstart FAILED at step "))
        .unwrap_or_else(|| panic!("no failure report in\n{stdout}"));
    assert!(report.contains("of 15, \""), "{report}");
    assert!(stdout.lines().any(|l| l.starts_with("[FAIL] ")), "{stdout}");
    assert!(stdout.contains("rerun with --verbose"), "{stdout}");
    assert!(!stdout.contains("quickstart passed"));
    assert!(stderr.contains("quickstart failed at step"), "{stderr}");
    assert!(
        !announced_data_dir(&stdout).exists(),
        "removed on failure too"
    );
}

#[test]
fn quickstart_keeps_a_named_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = quickstart(&["--data-dir", data.to_str().unwrap(), "--timeout", "30s"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(data.join(cosi_driver_local::STATE_FILE).exists());
}

#[test]
fn quickstart_help_documents_every_flag() {
    let out = quickstart(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for flag in [
        "--data-dir <DIR>",
        "--keep",
        "--timeout <DURATION>",
        "[default: 60s]",
        "--verbose",
    ] {
        assert!(help.contains(flag), "missing {flag} in\n{help}");
    }
}
