//! The CRDs as a user meets them through the real kubectl: `kubectl apply`
//! of an object they refuse prints the field and the reason; `kubectl
//! explain` describes a list and its items apart and names enum values;
//! and objects stored under the released CRDs that today's refuse stay
//! writable and deletable after the upgrade (validation ratcheting).

use control_plane::ApiServer;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::chart::{api_of, server_with_earlier_crds, upgrade_crds};
use crate::cli_dev::{Kubectl, kubectl_path};

/// kubectl configured for `server`.
fn kubectl_for(server: &ApiServer, dir: &tempfile::TempDir) -> Kubectl {
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, None).unwrap();
    Kubectl {
        bin: kubectl_path(),
        kubeconfig,
    }
}

/// The test's API server with today's CRDs.
async fn server_with_crds() -> ApiServer {
    let server = crate::common::api_server().await;
    server
        .apply(&cosi_api::crd::all_yaml().unwrap())
        .await
        .expect("today's CRDs install");
    server
}

/// What kubectl printed to stderr for `manifest`, which it must fail to apply.
fn refused(k: &Kubectl, manifest: &str) -> String {
    let out = k.run(&["apply", "-f", "-"], Some(manifest));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "kubectl applied it: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

fn access(secrets: &[(&str, &str)]) -> String {
    let claims: String = secrets
        .iter()
        .map(|(claim, secret)| {
            format!(
                "  - bucketClaimName: {claim}\n    accessSecretName: {secret}\n    accessModes: {{objectData: ReadWrite}}\n"
            )
        })
        .collect();
    format!(
        "apiVersion: objectstorage.k8s.io/v1alpha2\nkind: BucketAccess\nmetadata: {{name: photos-rw, namespace: default}}\nspec:\n  bucketAccessClassName: standard\n  protocol: S3\n  bucketClaims:\n{claims}"
    )
}

fn static_bucket(id: &str) -> String {
    format!(
        "apiVersion: objectstorage.k8s.io/v1alpha2\nkind: Bucket\nmetadata: {{name: imported}}\nspec:\n  driverName: local.cosi-rs.dev\n  deletionPolicy: Retain\n  existingBucketID: \"{id}\"\n  bucketClaimRef: {{namespace: default, name: imported}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_of_an_object_the_crds_refuse_prints_the_field_and_the_reason() {
    let server = server_with_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let k = kubectl_for(&server, &dir);

    let bad_name = refused(&k, &access(&[("photos", "Bad_Name")]));
    assert!(
        bad_name.contains(r#"The BucketAccess "photos-rw" is invalid: spec.bucketClaims[0].accessSecretName: Invalid value: "Bad_Name": spec.bucketClaims[0].accessSecretName in body should match '^[a-z0-9]"#),
        "{bad_name}"
    );

    // A CEL rule on an object: kube-apiserver 1.35 and later leave out its
    // value, 1.34 says "object" (kube-sim follows the newer).
    let shared = refused(&k, &access(&[("photos", "creds"), ("videos", "creds")]));
    let value = if server
        .control_plane()
        .is_some_and(|p| p.version().starts_with("v1.34."))
    {
        "\"object\": "
    } else {
        ""
    };
    assert!(
        shared.contains(&format!(
            "spec: Invalid value: {value}each bucketClaims entry must name a different accessSecretName"
        )),
        "{shared}"
    );

    let too_long = refused(&k, &static_bucket(&"x".repeat(2049)));
    assert!(
        too_long.contains("spec.existingBucketID: Too long: may not be more than 2048"),
        "{too_long}"
    );
    // An ID of any characters, as long as the bound allows, is taken.
    let base64ish: String = "Az+/09=".chars().cycle().take(2048).collect();
    let applied = k.ok(&["apply", "-f", "-"], Some(&static_bucket(&base64ish)));
    assert!(
        applied.contains("bucket.objectstorage.k8s.io/imported created"),
        "{applied}"
    );

    let bad_driver = refused(
        &k,
        "apiVersion: objectstorage.k8s.io/v1alpha2\nkind: BucketClass\nmetadata: {name: standard}\nspec: {driverName: local_driver, deletionPolicy: Delete}\n",
    );
    assert!(
        bad_driver.contains(r#"spec.driverName: Invalid value: "local_driver""#),
        "{bad_driver}"
    );
}

/// The DESCRIPTION section of `kubectl explain`, its lines joined.
fn described(k: &Kubectl, field: &str) -> String {
    let out = k.ok(&["explain", field], None);
    let start = out.find("DESCRIPTION:").unwrap_or_else(|| panic!("{out}")) + 12;
    let end = out.find("FIELDS:").unwrap_or(out.len());
    out[start..end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_describes_lists_apart_from_their_items_and_names_enum_values() {
    let server = server_with_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let k = kubectl_for(&server, &dir);
    // A real API server publishes a new CRD's OpenAPI a moment after it is
    // established.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for kind in ["bucketaccess", "bucketclaim", "bucketaccessclass"] {
        while !k.run(&["explain", kind], None).status.success() {
            assert!(
                std::time::Instant::now() < deadline,
                "kubectl explain {kind}: not published within a minute"
            );
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }

    // kubectl prints a list's description, then its items': one sentence
    // about the list, then one about an entry.
    assert_eq!(
        described(&k, "bucketaccess.spec.bucketClaims"),
        "BucketClaims lists the 1 to 128 BucketClaims this access is for, each at most once \
         and each with a Secret name of its own. Each entry names a BucketClaim, the Secret \
         COSI writes for it and the access modes wanted."
    );

    // kubectl lists the enum of a field, not that of a list's items: the
    // description names the values of both.
    let protocols = described(&k, "bucketclaim.spec.protocols");
    assert!(
        protocols.contains("Possible values: S3, Azure, GCS."),
        "{protocols}"
    );
    let protocol = k.ok(&["explain", "bucketaccess.spec.protocol"], None);
    assert!(
        protocol.contains("ENUM:"),
        "the schema carries the enum: {protocol}"
    );
    assert!(
        protocol.contains("Possible values: S3, Azure, GCS."),
        "{protocol}"
    );
    // A list of enum values: the list, its values, then what one item is.
    assert_eq!(
        described(
            &k,
            "bucketaccessclass.spec.disallowedBucketAccessModes.objectData"
        ),
        "Forbidden modes for reading/writing objects within the bucket. Possible values: \
         ReadWrite, ReadOnly, WriteOnly. A read/write access mode for one category of a \
         bucket's data."
    );
}

/// Objects the released CRDs accept and today's refuse: names with
/// capitals and underscores, a UID that is no UUID, a driver name with an
/// underscore, an ID beyond 2048 characters, an empty protocol list.
/// Each holds a finalizer, as COSI's objects do.
fn refused_today() -> Vec<Value> {
    let long_id = "x".repeat(2100);
    vec![
        json!({
            "apiVersion": "objectstorage.k8s.io/v1alpha2", "kind": "BucketClaim",
            "metadata": {"name": "legacy-claim", "namespace": "default", "finalizers": ["example.com/keep"]},
            "spec": {"bucketClassName": "Legacy_Class", "protocols": []}
        }),
        json!({
            "apiVersion": "objectstorage.k8s.io/v1alpha2", "kind": "Bucket",
            "metadata": {"name": "legacy-bucket", "finalizers": ["example.com/keep"]},
            "spec": {
                "driverName": "local_driver", "deletionPolicy": "Delete",
                "bucketClaimRef": {"namespace": "default", "name": "Legacy_Claim", "uid": "uid-1"}
            }
        }),
        json!({
            "apiVersion": "objectstorage.k8s.io/v1alpha2", "kind": "Bucket",
            "metadata": {"name": "legacy-import", "finalizers": ["example.com/keep"]},
            "spec": {
                "driverName": "local.cosi-rs.dev", "deletionPolicy": "Retain", "existingBucketID": long_id,
                "bucketClaimRef": {"namespace": "default", "name": "imported"}
            }
        }),
        json!({
            "apiVersion": "objectstorage.k8s.io/v1alpha2", "kind": "BucketAccess",
            "metadata": {"name": "legacy-access", "namespace": "default", "finalizers": ["example.com/keep"]},
            "spec": {
                "bucketAccessClassName": "Legacy_Class", "protocol": "S3",
                "bucketClaims": [{"bucketClaimName": "Legacy_Claim", "accessSecretName": "Legacy_Creds",
                                  "accessModes": {"objectData": "ReadWrite"}}]
            }
        }),
    ]
}

#[tokio::test]
async fn objects_made_under_earlier_crds_that_todays_refuse_stay_writable_and_deletable() {
    let server = server_with_earlier_crds().await;
    let client = server.client();
    let objects = refused_today();
    for doc in &objects {
        let obj: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
        api_of(&client, doc)
            .create(&PostParams::default(), &obj)
            .await
            .expect("the released CRDs accept it");
    }
    upgrade_crds(&client).await;
    let pp = PatchParams::default();
    for doc in &objects {
        let name = doc["metadata"]["name"].as_str().unwrap();
        let api = api_of(&client, doc);
        // Today's CRDs refuse the object as new.
        let mut fresh: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
        fresh.metadata.name = Some(format!("{name}-again"));
        let err = api
            .create(&PostParams::default(), &fresh)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, kube::Error::Api(s) if s.code == 422),
            "{name}: {err:?}"
        );
        // Stored, it keeps every write that leaves the refused fields alone.
        api.patch(
            name,
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"upgraded": "true"}}})),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: a label: {e}"));
        let status = match doc["kind"].as_str().unwrap() {
            "Bucket" => json!({"status": {"bucketInfo": {"COSI_S3_REGION": "us-east-1"}}}),
            "BucketClaim" => json!({"status": {"boundBucketName": "legacy-bucket"}}),
            _ => json!({"status": {"driverName": "local.cosi-rs.dev"}}),
        };
        api.patch_status(name, &pp, &Patch::Merge(status))
            .await
            .unwrap_or_else(|e| panic!("{name}: a status write: {e}"));
    }
    // A spec field beside the refused ones may still change...
    let buckets = api_of(&client, &objects[1]);
    let patch_spec = async |spec: serde_json::Value| {
        buckets
            .patch("legacy-bucket", &pp, &Patch::Merge(json!({ "spec": spec })))
            .await
    };
    let retained = patch_spec(json!({"deletionPolicy": "Retain"}))
        .await
        .expect("deletionPolicy changes beside a refused driver name, UID and claim name");
    assert_eq!(retained.data["spec"]["deletionPolicy"], "Retain");
    // ...but a refused field changes only to what today's CRDs allow.
    let err = patch_spec(json!({"driverName": "other_driver"}))
        .await
        .unwrap_err();
    let kube::Error::Api(s) = &err else {
        panic!("{err}")
    };
    assert!(
        s.message
            .contains(r#"spec.driverName: Invalid value: "other_driver""#),
        "{}",
        s.message
    );
    // Deletion waits for the finalizer, whose removal is one more update.
    for doc in &objects {
        let name = doc["metadata"]["name"].as_str().unwrap();
        let api = api_of(&client, doc);
        api.delete(name, &DeleteParams::default()).await.unwrap();
        api.patch(
            name,
            &pp,
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: the finalizer comes off: {e}"));
        assert!(api.get_opt(name).await.unwrap().is_none(), "{name} is gone");
    }
}

/// Manifests written for upstream COSI's v1alpha2 CRDs apply, except the
/// differences the KEP makes (README "Differences from upstream's CRDs"),
/// whose refusals say what to write instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_manifests_apply_except_where_the_kep_differs() {
    let server = server_with_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let k = kubectl_for(&server, &dir);
    let head = "apiVersion: objectstorage.k8s.io/v1alpha2\n";

    // Upstream's single accessMode per claim.
    let applied = k.ok(
        &["apply", "-f", "-"],
        Some(&format!(
            "{head}kind: BucketAccess\nmetadata: {{name: upstream, namespace: default}}\nspec:\n  bucketAccessClassName: standard\n  protocol: S3\n  bucketClaims:\n  - {{bucketClaimName: photos, accessSecretName: photos-creds, accessMode: ReadOnly}}\n"
        )),
    );
    assert!(
        applied.contains("bucketaccess.objectstorage.k8s.io/upstream created"),
        "{applied}"
    );
    let both = refused(
        &k,
        &format!(
            "{head}kind: BucketAccess\nmetadata: {{name: both, namespace: default}}\nspec:\n  bucketAccessClassName: standard\n  protocol: S3\n  bucketClaims:\n  - {{bucketClaimName: photos, accessSecretName: both, accessMode: ReadOnly, accessModes: {{objectData: ReadOnly}}}}\n"
        ),
    );
    assert!(both.contains("set exactly one of accessModes"), "{both}");

    // Upstream's class: authenticationType required there, defaulted here.
    let class = |modes: &str| {
        format!(
            "{head}kind: BucketAccessClass\nmetadata: {{name: read-only}}\nspec:\n  driverName: local.cosi-rs.dev\n  disallowedBucketAccessModes: {modes}\n"
        )
    };
    // Upstream's list of modes: the KEP's shape is per category.
    let listed = refused(&k, &class("[ReadWrite, WriteOnly]"));
    assert!(
        listed.contains("spec.disallowedBucketAccessModes") && listed.contains("object"),
        "{listed}"
    );
    let applied = k.ok(
        &["apply", "-f", "-"],
        Some(&class(
            "{objectData: [ReadWrite, WriteOnly], objectMetadata: [ReadWrite, WriteOnly]}",
        )),
    );
    assert!(applied.contains("created"), "{applied}");

    // A static Bucket that COSI would delete: the KEP forbids it.
    let delete = refused(
        &k,
        &static_bucket("legacy-photos").replace("deletionPolicy: Retain", "deletionPolicy: Delete"),
    );
    assert!(
        delete.contains("deletionPolicy must be Retain when existingBucketID is set"),
        "{delete}"
    );
}
