use super::*;
use std::collections::HashMap;

use cosi_api::constants::bucket_info_keys;
use cosi_api::reasons;
use cosi_api::{AuthenticationType, Bucket, BucketAccess, BucketAccessMode, Protocol};
use cosi_driver::proto::{
    DriverGetBucketRequest, DriverGrantBucketAccessResponse, ObjectProtocol, S3BucketInfo,
    S3Credentials,
};
use cosi_driver::v1alpha1 as v1;

use crate::driver::DriverApi;
use cosi_api::{
    AccessedBucket, BucketAccessClaim, BucketAccessSpec, BucketAccessStatus, BucketStatus,
};

fn access(claims: usize, mode: BucketAccessMode, auth: AuthenticationType) -> BucketAccess {
    let mut ba = BucketAccess::new(
        "ba",
        BucketAccessSpec {
            bucket_claims: (0..claims)
                .map(|i| BucketAccessClaim::new(format!("claim-{i}"), format!("secret-{i}"), mode))
                .collect(),
            bucket_access_class_name: "class".into(),
            protocol: Protocol::S3,
            service_account_name: "app".into(),
        },
    );
    ba.status = Some(BucketAccessStatus {
        authentication_type: Some(auth),
        accessed_buckets: vec![AccessedBucket::default()],
        ..Default::default()
    });
    ba
}

#[test]
fn what_v1alpha1_cannot_express_is_refused_with_a_reason() {
    use AuthenticationType::{Key, ServiceAccount};
    assert_eq!(
        access_refusal(&access(1, BucketAccessMode::ReadWrite, Key)),
        None
    );
    let (reason, message) = access_refusal(&access(2, BucketAccessMode::ReadWrite, Key)).unwrap();
    assert_eq!(reason, reasons::MULTIPLE_BUCKETS_NOT_SUPPORTED);
    assert!(message.contains("one bucket per account"), "{message}");
    for mode in [BucketAccessMode::ReadOnly, BucketAccessMode::WriteOnly] {
        let (reason, message) = access_refusal(&access(1, mode, Key)).unwrap();
        assert_eq!(reason, reasons::ACCESS_MODE_NOT_SUPPORTED);
        assert!(message.contains(mode.as_str()), "{message}");
    }
    let (reason, _) =
        access_refusal(&access(1, BucketAccessMode::ReadWrite, ServiceAccount)).unwrap();
    assert_eq!(reason, reasons::AUTHENTICATION_TYPE_NOT_SUPPORTED);
}

fn bucket(info: &[(&str, &str)]) -> Bucket {
    let mut b = crate::test_support::bucket(vec![Protocol::S3]);
    b.status = Some(BucketStatus {
        bucket_info: info
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Default::default()
    });
    b
}

fn creds(outer: &str, secrets: &[(&str, &str)]) -> HashMap<String, v1::CredentialDetails> {
    [(
        outer.to_owned(),
        v1::CredentialDetails {
            secrets: secrets
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        },
    )]
    .into()
}

fn s3_of(reply: &DriverGrantBucketAccessResponse) -> (S3BucketInfo, S3Credentials) {
    let info = reply.buckets[0].bucket_info.clone().unwrap().s3.unwrap();
    let c = reply.credentials.clone().unwrap().s3.unwrap();
    (info, c)
}

#[test]
fn ceph_cosi_credentials_get_the_default_region() {
    // ceph-cosi: the four keys, region always empty; bucket_id is the name.
    let c = creds(
        "s3",
        &[
            ("accessKeyID", "AK"),
            ("accessSecretKey", "SK"),
            ("endpoint", "http://rgw:8080"),
            ("region", ""),
        ],
    );
    let b = bucket(&[(bucket_info_keys::S3_BUCKET_NAME, "bc-1")]);
    let reply = grant_reply(Protocol::S3, "bc-1", Some(&b), &c, "us-east-1").unwrap();
    let (info, key) = s3_of(&reply);
    assert_eq!(info.bucket_name, "bc-1");
    assert_eq!(info.region, "us-east-1");
    assert_eq!(info.endpoint, "http://rgw:8080");
    assert_eq!(
        (key.access_key_id.as_str(), key.access_secret_key.as_str()),
        ("AK", "SK")
    );
}

#[test]
fn linode_credentials_keep_their_region_and_the_name_sent() {
    // Linode: bucket_id "<region>/<label>"; the bucket's name is the label sent.
    let c = creds(
        "s3",
        &[
            ("region", "us-ord"),
            ("endpoint", "https://us-ord-1.linodeobjects.com"),
            ("accessKeyID", "AK"),
            ("accessSecretKey", "SK"),
        ],
    );
    let b = bucket(&[
        (bucket_info_keys::S3_BUCKET_NAME, "bc-1"),
        (bucket_info_keys::S3_REGION, "us-ord"),
    ]);
    let reply = grant_reply(Protocol::S3, "us-ord/bc-1", Some(&b), &c, "us-east-1").unwrap();
    let (info, _) = s3_of(&reply);
    assert_eq!(info.bucket_name, "bc-1");
    assert_eq!(info.region, "us-ord");
    assert_eq!(reply.buckets[0].bucket_id, "us-ord/bc-1");
}

#[test]
fn the_sample_drivers_spelling_is_read_and_a_missing_endpoint_is_named() {
    // The sample driver: "accessKeyId" (lowercase d), no endpoint, no region.
    let c = creds(
        "s3",
        &[("accessKeyId", "AK"), ("accessSecretKey", "SECRET-VALUE")],
    );
    let e = grant_reply(Protocol::S3, "bc-1", None, &c, "us-east-1").unwrap_err();
    assert_eq!(e, "credentials[\"s3\"] lacks key(s) endpoint");
    assert!(!e.contains("SECRET-VALUE"));
}

#[test]
fn dell_credentials_name_the_bucket() {
    let c = creds(
        "s3",
        &[
            ("accessKeyID", "AK"),
            ("accessSecretKey", "SK"),
            ("endpoint", "https://objectscale:9021"),
            ("bucketName", "backend-bc-1"),
        ],
    );
    let reply = grant_reply(Protocol::S3, "b1-bc-1", None, &c, "eu-1").unwrap();
    let (info, _) = s3_of(&reply);
    assert_eq!(
        (info.bucket_name.as_str(), info.region.as_str()),
        ("backend-bc-1", "eu-1")
    );
}

#[test]
fn azure_sas_urls_name_the_storage_account() {
    // Azure's driver: only "accessToken", a SAS URL; no bucket_info, no expiry.
    let sas = "https://acct1.blob.core.windows.net/bc-1?sv=2021&sig=SIGNATURE";
    let c = creds("azure", &[("accessToken", sas)]);
    let reply = grant_reply(Protocol::Azure, "eyJ...", None, &c, "us-east-1").unwrap();
    let info = reply.buckets[0].bucket_info.clone().unwrap().azure.unwrap();
    assert_eq!(info.storage_account, "acct1");
    let az = reply.credentials.unwrap().azure.unwrap();
    assert_eq!(az.access_token, sas);
    assert_eq!(az.expiry_timestamp, None);

    let c = creds(
        "azure",
        &[
            ("accessToken", "tok"),
            ("expiryTs", "2030-01-02 03:04:05.5 +0100 CET"),
        ],
    );
    let b = bucket(&[(bucket_info_keys::AZURE_STORAGE_ACCOUNT, "acct2")]);
    let reply = grant_reply(Protocol::Azure, "id", Some(&b), &c, "").unwrap();
    let az = reply.credentials.unwrap().azure.unwrap();
    let expiry = az.expiry_timestamp.unwrap();
    assert_eq!(expiry.to_string(), "2030-01-02T02:04:05.500Z");

    let c = creds("azure", &[("accessToken", "not-a-url")]);
    let e = grant_reply(Protocol::Azure, "id", None, &c, "").unwrap_err();
    assert!(e.contains("storage account"), "{e}");
}

#[test]
fn a_missing_protocol_entry_lists_what_is_there() {
    let c = creds("azure", &[("accessToken", "tok")]);
    let e = grant_reply(Protocol::S3, "id", None, &c, "r").unwrap_err();
    assert_eq!(
        e,
        "the credentials map has no \"s3\" entry for S3 (it has azure)"
    );
    let e = grant_reply(Protocol::S3, "id", None, &HashMap::new(), "r").unwrap_err();
    assert!(e.ends_with("(it has none)"), "{e}");
}

#[test]
fn create_replies_without_bucket_info_take_the_requested_protocols() {
    let s3 = [ObjectProtocol::S3 as i32];
    let info = bucket_info("bc-1", None, &s3);
    assert_eq!(info.s3.unwrap().bucket_name, "bc-1");
    let linode = v1::Protocol {
        r#type: Some(v1::protocol::Type::S3(v1::S3 {
            region: "us-ord".into(),
            signature_version: v1::S3SignatureVersion::S3v4 as i32,
        })),
    };
    let info = bucket_info("bc-1", Some(&linode), &s3);
    let s3_info = info.s3.unwrap();
    assert_eq!(
        (s3_info.bucket_name.as_str(), s3_info.region.as_str()),
        ("bc-1", "us-ord")
    );
    // A reply naming another protocol stays what it is, for the reply checks to refuse.
    let azure = v1::Protocol {
        r#type: Some(v1::protocol::Type::AzureBlob(v1::AzureBlob {
            storage_account: "acct".into(),
        })),
    };
    let info = bucket_info("bc-1", Some(&azure), &s3);
    assert!(info.s3.is_none() && info.azure.is_some());
}

#[test]
fn static_buckets_are_named_by_their_existing_id() {
    let reply = existing_bucket(&DriverGetBucketRequest {
        bucket_id: "legacy-bucket".into(),
        protocols: vec![ObjectProtocol::S3 as i32],
        parameters: HashMap::new(),
    });
    let info = reply.protocols.unwrap();
    assert_eq!(info.s3.unwrap().bucket_name, "legacy-bucket");
    assert!(info.azure.is_none() && info.gcs.is_none());
}

#[test]
fn go_and_rfc3339_expiries_parse() {
    for (expiry, parses) in [
        ("2030-01-02T03:04:05Z", true),
        ("2030-01-02 03:04:05 +0000 UTC", true),
        ("tomorrow", false),
        ("2030-01-02 03:04:05 0000 UTC", false),
    ] {
        assert_eq!(azure_expiry(expiry).is_some(), parses, "{expiry}");
    }
}

#[test]
fn driver_info_takes_the_configured_protocols() {
    let info = driver_info("cosi.ceph.objectstorage.k8s.io", &[Protocol::S3]).unwrap();
    assert_eq!(info.api, DriverApi::V1alpha1);
    assert!(info.supports(Protocol::S3) && !info.supports(Protocol::Azure));
    assert!(driver_info("Bad Name", &[Protocol::S3]).is_err());
    assert!(driver_info("d.example.com", &[]).is_err());
}
