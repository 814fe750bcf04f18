//! `deploy/` renders with kustomize (`kubectl kustomize`, as `kubectl apply
//! -k` does) into every object of the install, and an overlay that sets the
//! driver image (what the README tells admins to write) works.

use std::path::{Path, PathBuf};

use crate::cli_dev::kubectl_path;

pub(crate) fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .canonicalize()
        .expect("deploy/ exists")
}

/// `dir` rendered with kustomize, by the test's kubectl.
pub(crate) fn kustomize(dir: &Path) -> String {
    cosi_driver::testing::kustomize(&kubectl_path(), dir)
}

/// `(kind, name)` of every rendered object.
pub(crate) fn objects(yaml: &str) -> Vec<(String, String)> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(yaml).expect("valid YAML");
    docs.iter()
        .filter(|d| d.is_object())
        .map(|d| {
            (
                d["kind"].as_str().unwrap_or_default().to_owned(),
                d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

/// Asserts that `dir` renders every `(kind, name)` of `expected`.
pub(crate) fn assert_renders(dir: &Path, expected: &[(&str, &str)]) {
    let rendered = objects(&kustomize(dir));
    for (kind, name) in expected {
        assert!(
            rendered.iter().any(|(k, n)| k == kind && n == name),
            "{kind} {name} missing from `kubectl kustomize {}`: {rendered:?}",
            dir.display()
        );
    }
}

#[test]
fn deploy_renders_the_crds_the_controller_and_the_driver_template() {
    assert_renders(
        &deploy_dir(),
        &[
            ("Namespace", "cosi-system"),
            ("CustomResourceDefinition", "buckets.objectstorage.k8s.io"),
            (
                "CustomResourceDefinition",
                "bucketclaims.objectstorage.k8s.io",
            ),
            (
                "CustomResourceDefinition",
                "bucketclasses.objectstorage.k8s.io",
            ),
            (
                "CustomResourceDefinition",
                "bucketaccesses.objectstorage.k8s.io",
            ),
            (
                "CustomResourceDefinition",
                "bucketaccessclasses.objectstorage.k8s.io",
            ),
            ("ServiceAccount", "cosi-controller"),
            ("ClusterRole", "cosi-controller"),
            ("ClusterRoleBinding", "cosi-controller"),
            ("Deployment", "cosi-controller"),
            ("Lease", "cosi-controller"),
            ("Role", "cosi-controller-leader-election"),
            ("ClusterRole", "cosi-sidecar"),
            ("ServiceAccount", "cosi-driver"),
            ("ClusterRoleBinding", "cosi-driver"),
            ("Lease", "cosi-driver"),
            ("Role", "cosi-driver-leader-election"),
            ("Deployment", "cosi-driver"),
        ],
    );
}

#[test]
fn an_overlay_sets_the_driver_image() {
    let overlay = tempfile::tempdir().unwrap();
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {}
images:
  - name: DRIVER_IMAGE
    newName: registry.example.com/my-driver
    newTag: v1.0.0
",
            crate::host::relative_to(&deploy_dir(), overlay.path()).display()
        ),
    )
    .unwrap();
    let yaml = kustomize(overlay.path());
    assert!(
        yaml.contains("image: registry.example.com/my-driver:v1.0.0"),
        "{yaml}"
    );
    assert!(!yaml.contains("DRIVER_IMAGE"));
}
