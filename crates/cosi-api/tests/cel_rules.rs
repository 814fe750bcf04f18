//! The CEL rules in the generated CRDs accept what the KEP allows and refuse
//! what it forbids, each with a message that says what to fix.

use std::collections::BTreeMap;

use cosi_api::*;
use kube::CustomResourceExt;
use kube::core::ObjectMeta;
use kube::core::cel::{validate_cel, validate_cel_update};

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("default".into()),
        ..Default::default()
    }
}

fn refusal<E: std::fmt::Debug>(r: Result<(), E>) -> String {
    format!("{:?}", r.expect_err("the rule must refuse this object"))
}

/// The refusal of the update that makes `change` to a copy of `old`.
fn update_refusal<K>(old: &K, change: impl FnOnce(&mut K)) -> String
where
    K: Clone + CustomResourceExt + serde::Serialize,
{
    let mut new = old.clone();
    change(&mut new);
    refusal(validate_cel_update(&new, old))
}

/// The `openAPIV3Schema` of `K`'s CRD.
fn crd_schema<K: CustomResourceExt>() -> serde_json::Value {
    let crd = serde_json::to_value(K::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn dynamic_bucket() -> Bucket {
    Bucket {
        metadata: meta("bc-1"),
        spec: BucketSpec {
            driver_name: "local.cosi-rs.dev".into(),
            deletion_policy: DeletionPolicy::Delete,
            protocols: vec![Protocol::S3],
            parameters: BTreeMap::from([("quota".into(), "1Gi".into())]),
            bucket_claim_ref: BucketClaimReference {
                name: "claim".into(),
                namespace: "default".into(),
                uid: "uid-1".into(),
            },
            existing_bucket_id: String::new(),
        },
        status: None,
    }
}

#[test]
fn bucket_deletion_policy_is_the_only_mutable_spec_field() {
    let old = dynamic_bucket();
    let mut new = old.clone();
    new.spec.deletion_policy = DeletionPolicy::Retain;
    validate_cel_update(&new, &old).expect("deletionPolicy may change");

    let why = update_refusal(&old, |b| b.spec.driver_name = "other.example.com".into());
    assert!(why.contains("driverName is immutable"));
    let why = update_refusal(&old, |b| {
        b.spec.parameters.insert("x".into(), "y".into());
    });
    assert!(why.contains("parameters are immutable"));
    let why = update_refusal(&old, |b| b.spec.protocols = vec![Protocol::Azure]);
    assert!(why.contains("protocols are immutable"));
    let why = update_refusal(&old, |b| b.spec.bucket_claim_ref.name = "other".into());
    assert!(why.contains("name and namespace are immutable"));
}

#[test]
fn bucket_claim_uid_may_be_set_once() {
    let mut old = dynamic_bucket();
    old.spec.bucket_claim_ref.uid = String::new();
    let mut new = old.clone();
    new.spec.bucket_claim_ref.uid = "uid-1".into();
    validate_cel_update(&new, &old).expect("uid may be set when unset");

    for uid in ["uid-2", ""] {
        let why = update_refusal(&new, |b| b.spec.bucket_claim_ref.uid = uid.into());
        assert!(why.contains("set once"), "{uid:?}: {why}");
    }
}

#[test]
fn brownfield_bucket_refuses_delete_policy() {
    let mut b = dynamic_bucket();
    b.spec.existing_bucket_id = "legacy-bucket".into();
    b.spec.deletion_policy = DeletionPolicy::Retain;
    validate_cel(&b).expect("static bucket with Retain is valid");
    b.spec.deletion_policy = DeletionPolicy::Delete;
    assert!(refusal(validate_cel(&b)).contains("must be Retain when existingBucketID is set"));
}

#[test]
fn bucket_status_bucket_id_is_set_once() {
    let mut old = dynamic_bucket();
    old.status = Some(BucketStatus::default());
    let mut new = old.clone();
    new.status.as_mut().unwrap().bucket_id = "id-1".into();
    validate_cel_update(&new, &old).expect("bucketID may be set");
    let why = update_refusal(&new, |b| {
        b.status.as_mut().unwrap().bucket_id = "id-2".into()
    });
    assert!(why.contains("bucketID may be set once"));
}

fn claim(spec: BucketClaimSpec) -> BucketClaim {
    BucketClaim::new("claim", spec)
}

#[test]
fn claim_names_exactly_one_of_class_or_existing_bucket() {
    let by_class = claim(BucketClaimSpec {
        bucket_class_name: "standard".into(),
        ..Default::default()
    });
    validate_cel(&by_class).expect("class only is valid");
    let by_bucket = claim(BucketClaimSpec {
        existing_bucket_name: "legacy".into(),
        ..Default::default()
    });
    validate_cel(&by_bucket).expect("existing bucket only is valid");
    let both = claim(BucketClaimSpec {
        bucket_class_name: "standard".into(),
        existing_bucket_name: "legacy".into(),
        ..Default::default()
    });
    assert!(
        refusal(validate_cel(&both))
            .contains("exactly one of bucketClassName or existingBucketName")
    );
    let neither = claim(BucketClaimSpec::default());
    assert!(refusal(validate_cel(&neither)).contains("exactly one of"));
}

#[test]
fn claim_spec_is_immutable() {
    let old = claim(BucketClaimSpec {
        bucket_class_name: "standard".into(),
        ..Default::default()
    });
    let why = update_refusal(&old, |c| c.spec.protocols = vec![Protocol::S3]);
    assert!(why.contains("BucketClaim spec is immutable"));
}

fn access(claims: Vec<BucketAccessClaim>) -> BucketAccess {
    BucketAccess::new(
        "access",
        BucketAccessSpec {
            bucket_claims: claims,
            bucket_access_class_name: "standard".into(),
            protocol: Protocol::S3,
            service_account_name: String::new(),
        },
    )
}

fn claim_ref(claim: &str, secret: &str, modes: BucketAccessModes) -> BucketAccessClaim {
    BucketAccessClaim {
        bucket_claim_name: claim.into(),
        access_secret_name: secret.into(),
        access_modes: modes,
    }
}

#[test]
fn access_requests_at_least_one_mode_per_claim() {
    let rw = BucketAccessModes::objects(BucketAccessMode::ReadWrite);
    validate_cel(&access(vec![claim_ref("a", "sa", rw)])).expect("valid access");
    let none = BucketAccessModes::default();
    assert!(
        refusal(validate_cel(&access(vec![claim_ref("a", "sa", none)])))
            .contains("at least one of objectData")
    );
}

#[test]
fn access_secrets_must_differ_between_claims() {
    let rw = BucketAccessModes::objects(BucketAccessMode::ReadWrite);
    let ok = access(vec![
        claim_ref("a", "sa", rw.clone()),
        claim_ref("b", "sb", rw.clone()),
    ]);
    validate_cel(&ok).expect("distinct secrets are valid");
    let clash = access(vec![
        claim_ref("a", "s", rw.clone()),
        claim_ref("b", "s", rw),
    ]);
    assert!(refusal(validate_cel(&clash)).contains("different accessSecretName"));
}

#[test]
fn access_spec_is_immutable_and_account_id_set_once() {
    let rw = BucketAccessModes::objects(BucketAccessMode::ReadWrite);
    let old = access(vec![claim_ref("a", "sa", rw)]);
    let why = update_refusal(&old, |a| a.spec.protocol = Protocol::Azure);
    assert!(why.contains("BucketAccess spec is immutable"));

    let mut old = old;
    old.status = Some(BucketAccessStatus {
        account_id: "acct-1".into(),
        ..Default::default()
    });
    let why = update_refusal(&old, |a| {
        a.status.as_mut().unwrap().account_id = "acct-2".into();
    });
    assert!(why.contains("accountID may be set once"));
}

#[test]
fn classes_are_immutable() {
    let old = BucketClass::new(
        "standard",
        BucketClassSpec {
            driver_name: "local.cosi-rs.dev".into(),
            deletion_policy: DeletionPolicy::Delete,
            parameters: BTreeMap::new(),
        },
    );
    let why = update_refusal(&old, |c| c.spec.deletion_policy = DeletionPolicy::Retain);
    assert!(why.contains("BucketClass spec is immutable"));

    let old = BucketAccessClass::new(
        "standard",
        BucketAccessClassSpec {
            driver_name: "local.cosi-rs.dev".into(),
            authentication_type: AuthenticationType::Key,
            parameters: BTreeMap::new(),
            multi_bucket_access: None,
            disallowed_bucket_access_modes: Default::default(),
        },
    );
    let why = update_refusal(&old, |c| {
        c.spec.multi_bucket_access = Some(MultiBucketAccess::MultipleBuckets);
    });
    assert!(why.contains("BucketAccessClass spec is immutable"));
}

/// The names serde writes for `values`.
fn serde_names<T: serde::Serialize>(values: &[T]) -> Vec<String> {
    values
        .iter()
        .map(|v| {
            serde_json::to_value(v)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn optional_enum_schemas_list_exactly_the_serde_names() {
    // The Option<enum> fields carry a hand-written enum list (see common.rs);
    // it must stay equal to what serde accepts.
    let names = |v: &[serde_json::Value]| {
        v.iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let schema = crd_schema::<BucketAccess>();
    let modes = &schema["properties"]["spec"]["properties"]["bucketClaims"]["items"]["properties"]
        ["accessModes"]["properties"]["objectData"]["enum"];
    let serde_modes = serde_names(&[
        BucketAccessMode::ReadWrite,
        BucketAccessMode::ReadOnly,
        BucketAccessMode::WriteOnly,
    ]);
    assert_eq!(names(modes.as_array().unwrap()), serde_modes);
    let auth = &schema["properties"]["status"]["properties"]["authenticationType"]["enum"];
    assert_eq!(names(auth.as_array().unwrap()), ["Key", "ServiceAccount"]);
    let class_spec = &crd_schema::<BucketAccessClass>()["properties"]["spec"]["properties"];
    let multi = &class_spec["multiBucketAccess"]["enum"];
    let serde_multi = serde_names(&[
        MultiBucketAccess::SingleBucket,
        MultiBucketAccess::MultipleBuckets,
    ]);
    assert_eq!(names(multi.as_array().unwrap()), serde_multi);
}

#[test]
fn access_class_authentication_type_defaults_to_key() {
    let schema = crd_schema::<BucketAccessClass>();
    let auth = &schema["properties"]["spec"]["properties"]["authenticationType"];
    assert_eq!(auth["default"], "Key");
}

#[test]
fn an_access_claim_takes_upstreams_access_mode_or_the_keps_access_modes() {
    use kube::core::cel::validate_cel_schema;
    use serde_json::json;
    let entry = |extra: serde_json::Value| {
        let mut e = json!({"bucketClaimName": "a", "accessSecretName": "s"});
        e.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        e
    };
    let upstream = entry(json!({"accessMode": "ReadOnly"}));
    validate_cel_schema::<BucketAccessClaim>(&upstream, None).unwrap();
    let kep = entry(json!({"accessModes": {"objectData": "ReadOnly"}}));
    validate_cel_schema::<BucketAccessClaim>(&kep, None).unwrap();
    for wrong in [
        entry(json!({"accessMode": "ReadOnly", "accessModes": {"objectData": "ReadOnly"}})),
        entry(json!({})),
    ] {
        let why = refusal(validate_cel_schema::<BucketAccessClaim>(&wrong, None));
        assert!(
            why.contains("set exactly one of accessModes") && why.contains("accessMode (upstream"),
            "{why}"
        );
    }

    // Upstream's one mode is the same mode for objects' data and metadata.
    let read: BucketAccessClaim = serde_json::from_value(upstream).unwrap();
    assert_eq!(
        read.access_modes,
        BucketAccessModes::objects(BucketAccessMode::ReadOnly)
    );
    let read: BucketAccessClaim = serde_json::from_value(kep).unwrap();
    assert_eq!(
        read.access_modes.object_data,
        Some(BucketAccessMode::ReadOnly)
    );
    assert_eq!(read.access_modes.object_metadata, None);

    let schema = crd_schema::<BucketAccess>();
    let item = &schema["properties"]["spec"]["properties"]["bucketClaims"]["items"];
    assert_eq!(
        item["properties"]["accessMode"]["enum"],
        json!(["ReadWrite", "ReadOnly", "WriteOnly"])
    );
    let required = item["required"].as_array().unwrap();
    assert!(!required.contains(&json!("accessModes")), "{required:?}");
    assert!(required.contains(&json!("bucketClaimName")));
}
