//! The generated CRD schemas bound what the KEP lets them bound, as
//! upstream's v1alpha2 CRDs do, with plain `pattern`/`maxLength`/`maxItems`
//! that every Kubernetes version enforces: object names are DNS-1123
//! subdomains, driver names domain names, UIDs UUIDs, IDs long but of any
//! characters; and `kubectl explain` reads well: enum fields name their
//! values and lists describe the list, their items the item.

use cosi_api::constants::limits::*;
use regex::Regex;
use serde_json::Value;

/// The `openAPIV3Schema` of the CRD of `kind`.
fn schema(kind: &str) -> Value {
    let (_, crd) = cosi_api::crd::all()
        .into_iter()
        .find(|(_, c)| c.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"));
    serde_json::to_value(&crd.spec.versions[0].schema).unwrap()["openAPIV3Schema"].clone()
}

/// The schema of the field at `path`, named from its kind as `kubectl
/// explain` names it (`BucketAccess.spec.bucketClaims[].accessSecretName`).
fn field(path: &str) -> Value {
    let (kind, fields) = path.split_once('.').expect("a path of the form Kind.field");
    let mut node = schema(kind);
    for part in fields.split('.') {
        let (name, items) = match part.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (part, false),
        };
        node = node["properties"][name].clone();
        if items {
            node = node["items"].clone();
        }
        assert!(node.is_object(), "no field {path}");
    }
    node
}

fn pattern(node: &Value) -> Regex {
    Regex::new(node["pattern"].as_str().expect("a pattern")).unwrap()
}

/// Asserts that `re` matches every string of `good` and none of `bad`.
fn assert_matches(re: &Regex, good: &[&str], bad: &[&str]) {
    for good in good {
        assert!(re.is_match(good), "{good}");
    }
    for bad in bad {
        assert!(!re.is_match(bad), "{bad}");
    }
}

/// Asserts that the field at `path` has `pattern` and `maxLength`, and
/// `minLength` when one is given.
fn assert_string_field(path: &str, pattern: &str, min_length: Option<u64>, max_length: u64) {
    let f = field(path);
    assert_eq!(f["pattern"], pattern, "{path}");
    assert_eq!(f["maxLength"], max_length, "{path}");
    if let Some(min_length) = min_length {
        assert_eq!(f["minLength"], min_length, "{path}");
    }
}

#[test]
fn object_names_are_dns_subdomains_of_at_most_253_characters() {
    for path in [
        "BucketAccess.spec.bucketClaims[].accessSecretName",
        "BucketAccess.spec.bucketClaims[].bucketClaimName",
        "BucketAccess.spec.bucketAccessClassName",
        "BucketAccess.spec.serviceAccountName",
        "BucketAccess.status.accessedBuckets[].bucketName",
        "BucketAccess.status.accessedBuckets[].bucketClaimName",
        "BucketClaim.spec.bucketClassName",
        "BucketClaim.spec.existingBucketName",
        "BucketClaim.status.boundBucketName",
        "Bucket.spec.bucketClaimRef.name",
    ] {
        assert_string_field(path, DNS1123_SUBDOMAIN, Some(1), 253);
    }
    assert_matches(
        &Regex::new(DNS1123_SUBDOMAIN).unwrap(),
        &["creds", "my-creds.v2", "a", "0abc-9"],
        &[
            "Bad_Name", "UPPER", "-lead", "trail-", "a..b", "a_b", "a b", "",
        ],
    );
    let ns = field("Bucket.spec.bucketClaimRef.namespace");
    assert_eq!(ns["pattern"], DNS1123_LABEL);
    assert_eq!(ns["maxLength"], 63);
    assert_matches(&pattern(&ns), &["team-a"], &["team.a"]);
}

#[test]
fn driver_names_are_domain_names_of_at_most_63_characters() {
    for path in [
        "Bucket.spec.driverName",
        "BucketClass.spec.driverName",
        "BucketAccessClass.spec.driverName",
        "BucketAccess.status.driverName",
    ] {
        assert_string_field(path, DRIVER_NAME, None, 63);
    }
    let long = format!("a{}b", "c".repeat(62));
    assert_matches(
        &Regex::new(DRIVER_NAME).unwrap(),
        &["local.cosi-rs.dev", "S3.Example.com", "x", "a-b"],
        &["-x", "x.", "a_b", "a/b", long.as_str()],
    );
}

#[test]
fn ids_are_bounded_by_length_only() {
    for path in [
        "Bucket.spec.existingBucketID",
        "Bucket.status.bucketID",
        "BucketAccess.status.accountID",
        "BucketAccess.status.accessedBuckets[].bucketID",
    ] {
        let f = field(path);
        assert_eq!(f["maxLength"], MAX_ID_LENGTH, "{path}");
        assert_eq!(f["maxLength"], 2048, "{path}");
        assert!(
            f.get("pattern").is_none(),
            "{path}: drivers' IDs hold '+', '=' and '/'"
        );
    }
}

#[test]
fn a_claim_uid_is_a_lowercase_uuid() {
    assert_matches(
        &pattern(&field("Bucket.spec.bucketClaimRef.uid")),
        &["6f1c1b9e-3a55-4c2e-9d7e-0b8f4a1e2c3d"],
        &[
            "uid-1",
            "6F1C1B9E-3A55-4C2E-9D7E-0B8F4A1E2C3D",
            "6f1c1b9e3a554c2e9d7e0b8f4a1e2c3d",
        ],
    );
}

#[test]
fn parameters_protocols_and_claims_are_bounded() {
    for path in [
        "Bucket.spec.parameters",
        "BucketClass.spec.parameters",
        "BucketAccessClass.spec.parameters",
        "BucketAccess.status.parameters",
    ] {
        assert_eq!(field(path)["maxProperties"], 512, "{path}");
    }
    assert_eq!(MAX_PARAMETERS, 512);
    for path in [
        "Bucket.spec.protocols",
        "Bucket.status.protocols",
        "BucketClaim.spec.protocols",
        "BucketClaim.status.protocols",
    ] {
        let f = field(path);
        assert_eq!(
            (&f["minItems"], &f["maxItems"]),
            (&1.into(), &3.into()),
            "{path}"
        );
        assert_eq!(f["x-kubernetes-list-type"], "set", "{path}");
    }
    let claims = field("BucketAccess.spec.bucketClaims");
    assert_eq!(
        (&claims["minItems"], &claims["maxItems"]),
        (&1.into(), &128.into())
    );
    assert_eq!(
        field("BucketAccess.status.accessedBuckets")["maxItems"],
        128
    );
}

#[test]
fn secret_names_must_differ_within_one_access() {
    let spec = field("BucketAccess.spec");
    let rules: Vec<&str> = spec["x-kubernetes-validations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["message"].as_str().unwrap())
        .collect();
    assert!(
        rules.contains(&"each bucketClaims entry must name a different accessSecretName"),
        "{rules:?}"
    );
}

/// Every field of `node` (at `path`), depth first.
fn fields<'a>(node: &'a Value, path: String, out: &mut Vec<(String, &'a Value)>) {
    if let Some(props) = node["properties"].as_object() {
        for (name, child) in props {
            let p = format!("{path}.{name}");
            out.push((p.clone(), child));
            fields(child, p, out);
        }
    }
    if node["items"].is_object() {
        fields(&node["items"], format!("{path}[]"), out);
    }
}

#[test]
fn every_enum_field_names_its_values_at_the_end_of_its_description() {
    let mut seen = 0;
    for (_, crd) in cosi_api::crd::all() {
        let kind = crd.spec.names.kind.clone();
        let root = schema(&kind);
        let mut all = Vec::new();
        fields(&root, kind.clone(), &mut all);
        for (path, f) in all {
            let values = f["enum"].as_array().or(f["items"]["enum"].as_array());
            let Some(values) = values else { continue };
            seen += 1;
            let names: Vec<&str> = values.iter().map(|v| v.as_str().unwrap()).collect();
            let want = format!("Possible values: {}.", names.join(", "));
            let description = f["description"].as_str().unwrap_or_default();
            assert!(
                description.ends_with(&want),
                "{path}: {description:?} does not end with {want:?}"
            );
        }
    }
    // protocol(s) ×5, deletionPolicy ×2, authenticationType ×2,
    // multiBucketAccess, the three access mode categories twice, and
    // upstream's single accessMode.
    assert_eq!(seen, 17);
    let protocols = field("BucketClaim.spec.protocols");
    assert_eq!(
        protocols["items"]["enum"],
        serde_json::json!(["S3", "Azure", "GCS"])
    );
}

#[test]
fn a_list_describes_the_list_and_its_items_describe_one_item() {
    // `kubectl explain bucketaccess.spec.bucketClaims` prints the list's
    // description and then its items': each must stand on its own.
    let claims = field("BucketAccess.spec.bucketClaims");
    let list = claims["description"].as_str().unwrap();
    let item = claims["items"]["description"].as_str().unwrap();
    assert_eq!(
        list.matches(". ").count() + usize::from(list.ends_with('.')),
        1,
        "one sentence about the list: {list:?}"
    );
    assert!(list.contains("1 to 128"), "{list:?}");
    assert!(item.starts_with("Each entry "), "{item:?}");
    assert!(!list.contains(item) && !item.contains(list));
}
