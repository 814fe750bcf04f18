//! Used from the build scripts of the crates that ship a binary, so that
//! every `--version` (and the `cosi_build_info` metric) names the git
//! commit the binary was built from.
//!
//! [`emit`] sets two compile-time environment variables for the package:
//!
//! - `COSI_GIT_COMMIT`: the short commit hash, or `unknown` outside a git
//!   checkout (a source tarball) or without `git`; a build that knows
//!   better (e.g. an image build from an exported tree) sets
//!   `COSI_GIT_COMMIT` in its environment and that value is used;
//! - `COSI_VERSION`: `<package version> (commit <hash>)`, for clap's
//!   `#[command(version = env!("COSI_VERSION"))]`.
//!
//! Cargo re-runs the build script when HEAD moves: it watches the HEAD file,
//! the branch ref HEAD points to and `packed-refs`, wherever this checkout
//! keeps them (linked worktrees keep HEAD apart from the refs).

#![warn(missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// What `COSI_GIT_COMMIT` is when the commit cannot be found.
pub const UNKNOWN: &str = "unknown";

/// Emits `COSI_GIT_COMMIT` and `COSI_VERSION` and the `rerun-if-changed`
/// lines that keep them current. Call it from `build.rs`.
pub fn emit() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rerun-if-env-changed=COSI_GIT_COMMIT");
    let commit = match std::env::var("COSI_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_owned(),
        _ => {
            for path in watched_paths(&dir) {
                println!("cargo:rerun-if-changed={}", path.display());
            }
            git(&dir, &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| UNKNOWN.to_owned())
        }
    };
    // Without any rerun-if-changed line cargo would re-run the script on
    // every change of the package; this keeps it to the lines above.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-env=COSI_GIT_COMMIT={commit}");
    println!(
        "cargo:rustc-env=COSI_VERSION={}",
        version_line(&version, &commit)
    );
}

/// The text `--version` prints after the binary's name.
pub fn version_line(version: &str, commit: &str) -> String {
    format!("{version} (commit {commit})")
}

/// The files whose change means HEAD may name another commit: HEAD, the
/// ref it points to, and packed-refs (those that exist: a missing path
/// would make cargo re-run the script on every build).
fn watched_paths(dir: &Path) -> Vec<PathBuf> {
    let mut names = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(reference) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        names.push(reference);
    }
    names
        .iter()
        .filter_map(|name| git(dir, &["rev-parse", "--git-path", name]))
        .map(|p| absolute(dir, PathBuf::from(p)))
        .filter(|p| p.exists())
        .collect()
}

fn absolute(dir: &Path, path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        path
    } else {
        dir.join(path)
    }
}

/// The trimmed output of `git args` run in `dir`, if it succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_line_names_the_version_and_the_commit() {
        assert_eq!(version_line("0.1.0", "abc1234"), "0.1.0 (commit abc1234)");
    }

    #[test]
    fn in_this_checkout_head_is_watched_and_a_commit_is_found() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        if git(dir, &["rev-parse", "--git-dir"]).is_none() {
            return; // built from a source tarball
        }
        let watched = watched_paths(dir);
        assert!(
            watched.iter().any(|p| p.ends_with("HEAD")),
            "HEAD is watched: {watched:?}"
        );
        let commit = git(dir, &["rev-parse", "--short", "HEAD"]).unwrap();
        assert!(commit.chars().all(|c| c.is_ascii_hexdigit()), "{commit}");
    }
}
