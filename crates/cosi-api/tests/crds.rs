//! The CRDs checked in under `deploy/crds/` and in the Helm chart's
//! `charts/cosi-rs/crds/` must be exactly what the types generate. Run with
//! `UPDATE_CRDS=1` to rewrite them after changing a type.

use std::path::PathBuf;

/// Where the CRDs are checked in, relative to the repository root.
const CRD_DIRS: [&str; 2] = ["deploy/crds", "charts/cosi-rs/crds"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn checked_in_crds_match_the_types() {
    let update = std::env::var_os("UPDATE_CRDS").is_some();
    let mut stale = Vec::new();
    for (file, crd) in cosi_api::crd::all() {
        let want = cosi_api::crd::to_yaml(&crd).expect("CRD renders as YAML");
        for dir in CRD_DIRS {
            let path = repo().join(dir).join(file);
            if update {
                std::fs::write(&path, &want).expect("write CRD");
                continue;
            }
            let have = std::fs::read_to_string(&path).unwrap_or_default();
            if have != want {
                stale.push(format!("{dir}/{file}"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "CRDs out of date: {stale:?}; run `UPDATE_CRDS=1 cargo test -p cosi-api --test crds`"
    );
}

#[test]
fn five_crds_in_the_objectstorage_group_with_the_kep_scopes() {
    let crds = cosi_api::crd::all();
    assert_eq!(crds.len(), 5);
    for (_, crd) in &crds {
        assert_eq!(crd.spec.group, "objectstorage.k8s.io");
        let approval = crd
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("api-approved.kubernetes.io"));
        assert!(
            approval.is_some_and(|a| a.starts_with("unapproved")),
            "a protected group's CRD needs api-approved.kubernetes.io: {approval:?}"
        );
        assert_eq!(crd.spec.versions.len(), 1);
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1alpha2");
        assert!(v.served && v.storage);
        let kind = crd.spec.names.kind.as_str();
        let want_scope = match kind {
            "BucketClaim" | "BucketAccess" => "Namespaced",
            "Bucket" | "BucketClass" | "BucketAccessClass" => "Cluster",
            other => panic!("unexpected kind {other}"),
        };
        assert_eq!(crd.spec.scope, want_scope, "{kind}");
        assert_eq!(
            crd.spec.names.categories.as_deref(),
            Some(&["cosi".to_string()][..]),
            "{kind}"
        );
        let has_status = v.subresources.as_ref().is_some_and(|s| s.status.is_some());
        let want_status = matches!(kind, "Bucket" | "BucketClaim" | "BucketAccess");
        assert_eq!(has_status, want_status, "{kind} status subresource");
    }
}
