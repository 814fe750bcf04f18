//! `deploy/drivers/ceph-rgw` renders with kustomize (`kubectl
//! kustomize`, as `kubectl apply -k` would) into a driver Deployment that
//! runs this driver against the Rook store's RGW Service with the admin
//! keys Rook writes for the CephObjectStoreUser, in files the driver reads.

use std::path::{Path, PathBuf};

use cosi_driver::testing::kustomize;

use cosi_driver_ceph_rgw::config::{ACCESS_KEY_FILES, DEFAULT_DRIVER_NAME, SECRET_KEY_FILES};
use serde_json::Value;

fn render() -> Vec<Value> {
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/drivers/ceph-rgw");
    let text = kustomize(Path::new("kubectl"), &example);
    text.split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).expect("rendered YAML"))
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} is not rendered"))
}

#[test]
fn the_rook_example_runs_the_driver_with_the_admin_keys_rook_writes() {
    let docs = render();
    let pod = &find(&docs, "Deployment", "cosi-driver-ceph-rgw")["spec"]["template"]["spec"];
    let driver = pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "driver")
        .expect("a driver container");
    let image = driver["image"].as_str().unwrap();
    assert_eq!(
        image,
        format!("cosi-rs/cosi-driver-ceph-rgw:{}", env!("CARGO_PKG_VERSION"))
    );
    let env = |name: &str| {
        driver["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_else(|| panic!("{name} is not set"))
            .to_owned()
    };
    assert_eq!(
        env("RGW_ENDPOINT"),
        "http://rook-ceph-rgw-my-store.rook-ceph.svc"
    );
    let dir = env("ADMIN_CREDENTIALS_DIR");
    let mount = driver["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == dir.as_str())
        .expect("the admin Secret is mounted at ADMIN_CREDENTIALS_DIR");
    assert_eq!(mount["readOnly"], true);
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the mounted volume");
    assert_eq!(
        volume["secret"]["secretName"],
        "rook-ceph-object-user-my-store-cosi-driver"
    );
    let files: Vec<&str> = volume["secret"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["path"].as_str())
        .collect();
    let pair = ACCESS_KEY_FILES
        .iter()
        .zip(SECRET_KEY_FILES)
        .find(|(id, _)| files.contains(id));
    let (id, secret) = pair.expect("the driver reads the mounted key files");
    assert!(files.contains(&secret), "{id} is mounted without {secret}");

    let user = find(&docs, "CephObjectStoreUser", "cosi-driver");
    assert_eq!(user["metadata"]["namespace"], "cosi-system");
    assert_eq!(user["spec"]["clusterNamespace"], "rook-ceph");
    assert_eq!(user["spec"]["capabilities"]["user"], "*");
    assert_eq!(user["spec"]["capabilities"]["bucket"], "*");
    assert_eq!(user["spec"]["quotas"]["maxBuckets"], 0);
    for kind in ["BucketClass", "BucketAccessClass"] {
        assert_eq!(
            find(&docs, kind, "ceph-rgw")["spec"]["driverName"],
            DEFAULT_DRIVER_NAME
        );
    }
}
