//! Credentials never appear in the `Debug` form of any message that holds them.

use cosi_driver::proto::*;

const SECRETS: [&str; 6] = [
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "sv=2024-01-01&sig=SECRETSIG",
    "-----BEGIN PRIVATE KEY-----MIIsecret",
    "GOOGHMACID123",
    "hmac-secret-value",
];

fn grant_response() -> DriverGrantBucketAccessResponse {
    DriverGrantBucketAccessResponse {
        buckets: vec![GrantedBucket {
            bucket_id: "bc-1".into(),
            bucket_info: Some(ProtocolBucketInfo {
                s3: Some(S3BucketInfo {
                    bucket_name: "bc-1".into(),
                    region: "us-east-1".into(),
                    endpoint: "http://127.0.0.1:9000".into(),
                    addressing_style: S3AddressingStyle::Path as i32,
                }),
                ..Default::default()
            }),
        }],
        credentials: Some(Credentials {
            s3: Some(S3Credentials {
                access_key_id: SECRETS[0].into(),
                access_secret_key: SECRETS[1].into(),
            }),
            azure: Some(AzureCredentials {
                access_token: SECRETS[2].into(),
                expiry_timestamp: None,
            }),
            gcs: Some(GcsCredentials {
                service_account_name: "sa".into(),
                client_email: "sa@example.iam".into(),
                client_id: "123".into(),
                private_key_id: "key-id-secret".into(),
                private_key: SECRETS[3].into(),
                hmac_access_id: SECRETS[4].into(),
                hmac_secret: SECRETS[5].into(),
            }),
            certificate_authority: String::new(),
        }),
    }
}

#[test]
fn grant_response_debug_never_shows_a_credential() {
    let resp = grant_response();
    for shown in [format!("{resp:?}"), format!("{resp:#?}")] {
        for secret in SECRETS.iter().chain(&["key-id-secret"]) {
            assert!(!shown.contains(secret), "{secret} leaked in {shown}");
        }
        assert!(shown.contains("<redacted>"));
        // Non-secret info stays visible for debugging.
        assert!(shown.contains("us-east-1"));
        assert!(shown.contains("sa@example.iam"));
    }
}

#[test]
fn empty_secret_fields_show_as_empty() {
    let creds = S3Credentials::default();
    assert_eq!(
        format!("{creds:?}"),
        r#"S3Credentials { access_key_id: "", access_secret_key: "" }"#
    );
}

#[test]
fn a_v1alpha1_grant_reply_debug_shows_credential_keys_but_no_credential() {
    use cosi_driver::v1alpha1::{CredentialDetails, DriverGrantBucketAccessResponse};
    let secrets = [
        ("accessKeyID", SECRETS[0]),
        ("accessSecretKey", SECRETS[1]),
        ("endpoint", "http://rgw.example.com"),
    ];
    let reply = DriverGrantBucketAccessResponse {
        account_id: "ba-1".into(),
        credentials: [(
            "s3".to_owned(),
            CredentialDetails {
                secrets: secrets
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            },
        )]
        .into(),
    };
    for shown in [format!("{reply:?}"), format!("{reply:#?}")] {
        for (_, value) in secrets {
            assert!(!shown.contains(value), "{value} leaked in {shown}");
        }
        assert!(shown.contains("accessKeyID") && shown.contains("<redacted>"));
        assert!(shown.contains("ba-1"));
    }
}
