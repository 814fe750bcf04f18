//! Where the Go-built binaries are: the directories `scripts/control-plane
//! bin-dir` prints, which `scripts/control-plane install` fills.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// The executables of one control plane and the Kubernetes version they
/// were built at.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// `etcd`.
    pub etcd: PathBuf,
    /// `kube-apiserver`.
    pub kube_apiserver: PathBuf,
    /// `kube-controller-manager`.
    pub kube_controller_manager: PathBuf,
    /// The Kubernetes version built (`v1.37.2`).
    pub kubernetes_version: String,
}

/// The repository's root (this crate is `crates/control-plane`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Binaries {
    /// The binaries `scripts/control-plane install` built for the pinned
    /// versions (or those `KUBERNETES_VERSION` and `ETCD_VERSION` name); an
    /// error saying how to build them when they are missing.
    pub fn locate() -> Result<Binaries, Error> {
        let kubernetes = bin_dir("kubernetes")?;
        let etcd = bin_dir("etcd")?;
        let version = script(&["version", "kubernetes"])?;
        let found = Binaries {
            etcd: etcd.join("etcd"),
            kube_apiserver: kubernetes.join("kube-apiserver"),
            kube_controller_manager: kubernetes.join("kube-controller-manager"),
            kubernetes_version: version,
        };
        for path in [
            &found.etcd,
            &found.kube_apiserver,
            &found.kube_controller_manager,
        ] {
            if !path.is_file() {
                return Err(Error::NotInstalled(format!(
                    "{} is missing; run scripts/control-plane install",
                    path.display()
                )));
            }
        }
        Ok(found)
    }
}

fn bin_dir(name: &str) -> Result<PathBuf, Error> {
    script(&["bin-dir", name]).map(PathBuf::from)
}

/// Runs `scripts/control-plane ARGS`; its one line of output.
fn script(args: &[&str]) -> Result<String, Error> {
    let path = repo_root().join("scripts/control-plane");
    let out = Command::new(&path)
        .args(args)
        .output()
        .map_err(|e| Error::NotInstalled(format!("cannot run {}: {e}", path.display())))?;
    if !out.status.success() {
        return Err(Error::NotInstalled(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
