//! `deploy/` renders with kustomize (`kubectl kustomize`, as `kubectl apply
//! -k` does) into every object of the install and nothing that cannot run,
//! and the driver template (`deploy/examples/driver`, an overlay that sets
//! the driver image, as the README tells vendors) renders a runnable driver.

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
fn deploy_renders_the_crds_the_controller_and_the_sidecar_role_and_nothing_that_cannot_run() {
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
        ],
    );
    let rendered = kustomize(&deploy_dir());
    assert!(
        !rendered.contains("DRIVER_IMAGE"),
        "deploy/ holds no placeholder image"
    );
}

/// The driver template: an overlay of its own, outside deploy/.
fn driver_example() -> PathBuf {
    deploy_dir().join("examples/driver")
}

#[test]
fn the_driver_example_renders_a_driver_with_its_sidecar_identity_and_a_real_image() {
    assert_renders(
        &driver_example(),
        &[
            ("ServiceAccount", "cosi-driver"),
            ("ClusterRoleBinding", "cosi-driver"),
            ("Lease", "cosi-driver"),
            ("Role", "cosi-driver-leader-election"),
            ("Deployment", "cosi-driver"),
        ],
    );
    let yaml = kustomize(&driver_example());
    assert!(
        yaml.contains("image: registry.example.com/my-cosi-driver:v1.0.0"),
        "{yaml}"
    );
    assert!(!yaml.contains("DRIVER_IMAGE"));
    assert!(yaml.contains("path: /healthz/driver"), "{yaml}");
}
