//! Programs and paths of the machine the tests run on, shared by the
//! end-to-end and the container suites.

use std::path::{Path, PathBuf};

/// The executable `name` on `PATH`, or else in `/usr/bin`.
pub fn program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// `target` as a path relative to `from` (kustomize refuses absolute ones);
/// both absolute.
pub fn relative_to(target: &Path, from: &Path) -> PathBuf {
    let from = from.canonicalize().expect("the overlay exists");
    let mut rel = PathBuf::new();
    for _ in from.components().skip(1) {
        rel.push("..");
    }
    rel.join(target.strip_prefix("/").expect("an absolute path"))
}
