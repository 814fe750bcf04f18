//! `cosi --version` names the version and the git commit it was built from
//! (every binary of the workspace does the same, through cosi-build).

use std::process::Command;

#[test]
fn version_names_the_release_and_the_commit_it_was_built_from() {
    let out = Command::new(env!("CARGO_BIN_EXE_cosi"))
        .arg("--version")
        .output()
        .expect("run cosi --version");
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).expect("UTF-8");
    let line = line.trim_end();
    let rest = line
        .strip_prefix(&format!("cosi {} (commit ", env!("CARGO_PKG_VERSION")))
        .unwrap_or_else(|| panic!("unexpected --version output: {line:?}"));
    let commit = rest
        .strip_suffix(')')
        .unwrap_or_else(|| panic!("unexpected --version output: {line:?}"));
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "not a commit: {commit:?} in {line:?}"
    );
    assert_eq!(commit, env!("COSI_GIT_COMMIT"));
    // Built from this checkout, it names the commit checked out (unless the
    // build was told another one).
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    if let Ok(head) = head
        && head.status.success()
        && std::env::var_os("COSI_GIT_COMMIT").is_none()
    {
        assert_eq!(commit, String::from_utf8_lossy(&head.stdout).trim());
    }
}
