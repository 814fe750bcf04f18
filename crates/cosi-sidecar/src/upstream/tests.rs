use super::*;
use std::collections::HashMap;

use cosi_api::reasons;
use cosi_api::{
    AuthenticationType, BucketAccess, BucketAccessClaim, BucketAccessMode, BucketAccessModes,
    BucketAccessSpec, Protocol,
};
use cosi_driver::proto::{
    self, AccessMode, AccessModes, ObjectProtocol, S3AddressingStyle, ServiceAccount,
};
use cosi_driver::upstream as up;

use crate::driver::DriverApi;

fn up_s3(bucket: &str, endpoint: &str, region: &str) -> up::ObjectProtocolAndBucketInfo {
    up::ObjectProtocolAndBucketInfo {
        s3: Some(up::S3BucketInfo {
            bucket_id: bucket.into(),
            endpoint: endpoint.into(),
            region: region.into(),
            addressing_style: Some(up::S3AddressingStyle {
                style: up::s3_addressing_style::Style::Virtual as i32,
            }),
        }),
        ..Default::default()
    }
}

#[test]
fn s3_endpoint_and_region_are_mapped_by_field_not_by_number() {
    let upstream = up_s3("bucket-1", "https://s3.example.com", "eu-west-3");
    let info = bucket_info_from_upstream(&upstream);
    let s3 = info.s3.unwrap();
    assert_eq!(s3.bucket_name, "bucket-1");
    assert_eq!(s3.endpoint, "https://s3.example.com");
    assert_eq!(s3.region, "eu-west-3");
    assert_eq!(s3.addressing_style, S3AddressingStyle::Virtual as i32);
    // Field 2 is upstream's endpoint but cosi-rs's region: a copy by
    // number would have put the URL in the region.
    assert_ne!(s3.region, upstream.s3.unwrap().endpoint);
}

#[test]
fn addressing_styles_map_by_name_and_unknown_is_unspecified() {
    use up::s3_addressing_style::Style;
    for (style, want) in [
        (Style::Path as i32, S3AddressingStyle::Path),
        (Style::Virtual as i32, S3AddressingStyle::Virtual),
        (Style::Unknown as i32, S3AddressingStyle::Unspecified),
        (42, S3AddressingStyle::Unspecified),
    ] {
        let mut info = up_s3("b", "e", "r");
        info.s3.as_mut().unwrap().addressing_style = Some(up::S3AddressingStyle { style });
        let s3 = bucket_info_from_upstream(&info).s3.unwrap();
        assert_eq!(s3.addressing_style, want as i32, "{style}");
    }
    let mut info = up_s3("b", "e", "r");
    info.s3.as_mut().unwrap().addressing_style = None;
    let s3 = bucket_info_from_upstream(&info).s3.unwrap();
    assert_eq!(s3.addressing_style, S3AddressingStyle::Unspecified as i32);
}

fn modes(object_data: AccessMode, object_metadata: AccessMode, bucket: AccessMode) -> AccessModes {
    AccessModes {
        object_data: object_data as i32,
        object_metadata: object_metadata as i32,
        bucket_metadata: bucket as i32,
    }
}

fn upstream_mode_name(m: &up::AccessMode) -> &'static str {
    up::access_mode::Mode::try_from(m.mode)
        .unwrap()
        .as_str_name()
}

#[test]
fn access_modes_map_by_name_to_the_one_mode_of_the_bucket() {
    use AccessMode::*;
    for mode in [ReadWrite, ReadOnly, WriteOnly] {
        let want = mode
            .as_str_name()
            .strip_prefix("ACCESS_MODE_")
            .unwrap()
            .to_owned();
        for m in [
            modes(mode, mode, mode),
            modes(mode, mode, Unspecified),
            // Object data unrequested: the mode is not object_data's number.
            modes(Unspecified, mode, Unspecified),
            modes(Unspecified, Unspecified, mode),
        ] {
            let out = mode_to_upstream(&m).unwrap();
            assert_eq!(upstream_mode_name(&out), want, "{m:?}");
        }
    }
    let e = mode_to_upstream(&modes(ReadOnly, ReadWrite, Unspecified)).unwrap_err();
    assert!(e.contains("one access mode per bucket"), "{e}");
    assert!(mode_to_upstream(&modes(Unspecified, Unspecified, Unspecified)).is_err());
    let unknown = AccessModes {
        object_data: 9,
        ..Default::default()
    };
    assert!(mode_to_upstream(&unknown).unwrap_err().contains("unknown"));
}

#[test]
fn wrapped_protocols_map_by_name_and_unknown_is_never_sent_nor_taken() {
    use up::object_protocol::Type;
    for (cosi, upstream) in [
        (ObjectProtocol::S3, Type::S3),
        (ObjectProtocol::Azure, Type::Azure),
        (ObjectProtocol::Gcs, Type::Gcs),
    ] {
        let wrapped = protocol_to_upstream(cosi as i32).unwrap();
        assert_eq!(wrapped.r#type, upstream as i32);
        assert_eq!(protocol_from_upstream(&wrapped), Some(cosi));
    }
    assert!(protocol_to_upstream(ObjectProtocol::Unspecified as i32).is_err());
    assert!(protocol_to_upstream(17).is_err());
    for unknown in [Type::Unknown as i32, 17] {
        assert_eq!(
            protocol_from_upstream(&up::ObjectProtocol { r#type: unknown }),
            None
        );
    }
    assert!(auth_to_upstream(proto::AuthenticationType::Unspecified as i32).is_err());
    let sa = auth_to_upstream(proto::AuthenticationType::ServiceAccount as i32).unwrap();
    assert_eq!(
        up::authentication_type::Type::try_from(sa.r#type).unwrap(),
        up::authentication_type::Type::ServiceAccount
    );
}

#[test]
fn driver_info_drops_unknown_protocols_and_needs_a_known_one() {
    use up::object_protocol::Type;
    let wrap = |t: i32| up::ObjectProtocol { r#type: t };
    let reply = up::DriverGetInfoResponse {
        name: "up.example.com".into(),
        supported_protocols: vec![
            wrap(Type::Unknown as i32),
            wrap(Type::Gcs as i32),
            wrap(99),
            wrap(Type::S3 as i32),
        ],
    };
    let info = driver_info(&reply).unwrap();
    assert_eq!(info.api, DriverApi::Upstream);
    assert_eq!(info.protocols, vec![Protocol::S3, Protocol::Gcs]);
    let only_unknown = up::DriverGetInfoResponse {
        name: "up.example.com".into(),
        supported_protocols: vec![wrap(Type::Unknown as i32), wrap(99)],
    };
    assert!(
        driver_info(&only_unknown)
            .unwrap_err()
            .contains("no known protocol")
    );
    let bad_name = up::DriverGetInfoResponse {
        name: "Not A Name".into(),
        supported_protocols: vec![wrap(Type::S3 as i32)],
    };
    assert!(driver_info(&bad_name).is_err());
}

fn access(claims: Vec<BucketAccessModes>) -> BucketAccess {
    BucketAccess::new(
        "ba",
        BucketAccessSpec {
            bucket_claims: claims
                .into_iter()
                .enumerate()
                .map(|(i, access_modes)| BucketAccessClaim {
                    bucket_claim_name: format!("claim-{i}"),
                    access_secret_name: format!("secret-{i}"),
                    access_modes,
                })
                .collect(),
            bucket_access_class_name: "class".into(),
            protocol: Protocol::S3,
            service_account_name: "app".into(),
        },
    )
}

#[test]
fn only_mixed_modes_are_refused_before_any_call() {
    use BucketAccessMode::{ReadOnly, ReadWrite};
    let same = BucketAccessModes::objects(ReadOnly);
    assert_eq!(access_refusal(&access(vec![same.clone(), same])), None);
    let all = BucketAccessModes {
        object_data: Some(ReadWrite),
        object_metadata: Some(ReadWrite),
        bucket_metadata: Some(ReadWrite),
    };
    assert_eq!(access_refusal(&access(vec![all])), None);
    let mixed = BucketAccessModes {
        object_data: Some(ReadOnly),
        object_metadata: Some(ReadWrite),
        bucket_metadata: None,
    };
    let (reason, message) =
        access_refusal(&access(vec![BucketAccessModes::objects(ReadWrite), mixed])).unwrap();
    assert_eq!(reason, reasons::ACCESS_MODE_NOT_SUPPORTED);
    for part in [
        "claim-1",
        "objectData ReadOnly",
        "objectMetadata ReadWrite",
        "same mode in every category",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
}

fn generate(
    auth: proto::AuthenticationType,
    sa: Option<&str>,
) -> DriverGenerateBucketAccessIdRequest {
    DriverGenerateBucketAccessIdRequest {
        account_name: "ba-1".into(),
        buckets: vec![
            proto::AccessedBucket {
                bucket_id: "b-1".into(),
                access_mode: Some(modes(
                    AccessMode::ReadOnly,
                    AccessMode::ReadOnly,
                    AccessMode::Unspecified,
                )),
            },
            proto::AccessedBucket {
                bucket_id: "b-2".into(),
                access_mode: Some(modes(
                    AccessMode::WriteOnly,
                    AccessMode::Unspecified,
                    AccessMode::Unspecified,
                )),
            },
        ],
        protocol: ObjectProtocol::Azure as i32,
        authentication_type: auth as i32,
        service_account: sa.map(|name| ServiceAccount {
            namespace: "team-a".into(),
            name: name.into(),
        }),
        parameters: HashMap::from([("tier".into(), "hot".into())]),
    }
}

#[test]
fn grant_requests_carry_every_bucket_and_field() {
    let r = grant_request(&generate(proto::AuthenticationType::Key, None)).unwrap();
    assert_eq!(r.account_name, "ba-1");
    assert_eq!(
        r.protocol.unwrap().r#type,
        up::object_protocol::Type::Azure as i32
    );
    assert_eq!(
        r.authentication_type.unwrap().r#type,
        up::authentication_type::Type::Key as i32
    );
    assert_eq!(r.service_account_name, "");
    assert_eq!(r.parameters["tier"], "hot");
    let buckets: Vec<(&str, &str)> = r
        .buckets
        .iter()
        .map(|b| {
            (
                b.bucket_id.as_str(),
                upstream_mode_name(b.access_mode.as_ref().unwrap()),
            )
        })
        .collect();
    assert_eq!(buckets, [("b-1", "READ_ONLY"), ("b-2", "WRITE_ONLY")]);

    let sa = grant_request(&generate(
        proto::AuthenticationType::ServiceAccount,
        Some("app"),
    ))
    .unwrap();
    assert_eq!(sa.service_account_name, "app", "the namespace is implied");
    assert!(grant_request(&generate(proto::AuthenticationType::ServiceAccount, None)).is_err());
    let mut no_mode = generate(proto::AuthenticationType::Key, None);
    no_mode.buckets[0].access_mode = None;
    assert!(grant_request(&no_mode).unwrap_err().contains("b-1"));
}

#[test]
fn revoke_requests_carry_every_field() {
    let r = revoke_request(DriverRevokeBucketAccessRequest {
        account_id: "acc-1".into(),
        buckets: vec![proto::RevokedBucket {
            bucket_id: "b-1".into(),
        }],
        protocol: ObjectProtocol::S3 as i32,
        authentication_type: proto::AuthenticationType::ServiceAccount as i32,
        service_account: Some(ServiceAccount {
            namespace: "ns".into(),
            name: "app".into(),
        }),
        parameters: HashMap::from([("k".into(), "v".into())]),
    })
    .unwrap();
    assert_eq!(r.account_id, "acc-1");
    assert_eq!(r.buckets[0].bucket_id, "b-1");
    assert_eq!(r.service_account_name, "app");
    assert_eq!(r.parameters["k"], "v");
    assert_eq!(
        r.protocol.unwrap().r#type,
        up::object_protocol::Type::S3 as i32
    );
}

fn grant_reply_of(credentials: up::CredentialInfo) -> up::DriverGrantBucketAccessResponse {
    up::DriverGrantBucketAccessResponse {
        account_id: String::new(),
        buckets: vec![up::driver_grant_bucket_access_response::BucketInfo {
            bucket_id: "b-1".into(),
            bucket_info: Some(up_s3("bucket-1", "https://s3.example.com", "eu-west-3")),
        }],
        credentials: Some(credentials),
    }
}

#[test]
fn s3_grants_become_valid_secrets_with_endpoint_and_region_in_place() {
    let reply = grant_reply_of(up::CredentialInfo {
        s3: Some(up::S3CredentialInfo {
            access_key_id: "AKID".into(),
            access_secret_key: "SECRET-VALUE".into(),
        }),
        ..Default::default()
    });
    let cosi = translate::grant_reply(&reply).unwrap();
    let granted = crate::reply::grant_reply(
        &cosi,
        &["b-1".to_owned()],
        Protocol::S3,
        AuthenticationType::Key,
    )
    .unwrap();
    let data = &granted.buckets["b-1"].0;
    use cosi_api::constants::secret_keys::s3;
    assert_eq!(data[s3::AWS_ENDPOINT_URL], "https://s3.example.com");
    assert_eq!(data[s3::AWS_REGION], "eu-west-3");
    assert_eq!(data[s3::BUCKET_NAME], "bucket-1");
    assert_eq!(
        granted.credentials.0[s3::AWS_SECRET_ACCESS_KEY],
        "SECRET-VALUE"
    );
    assert!(!format!("{reply:?}{cosi:?}{granted:?}").contains("SECRET-VALUE"));
}

#[test]
fn bad_grant_replies_are_refused_without_their_secrets() {
    // No credentials: the reply checks refuse it for Key authentication.
    let mut reply = grant_reply_of(up::CredentialInfo::default());
    reply.credentials = None;
    let cosi = translate::grant_reply(&reply).unwrap();
    let e = crate::reply::grant_reply(
        &cosi,
        &["b-1".into()],
        Protocol::S3,
        AuthenticationType::Key,
    )
    .unwrap_err();
    assert!(e.contains("no credentials"), "{e}");
    // A bucket without info.
    let mut reply = grant_reply_of(up::CredentialInfo::default());
    reply.buckets[0].bucket_info = None;
    assert!(translate::grant_reply(&reply).unwrap_err().contains("b-1"));
    // An Azure expiry that does not parse: an error naming the field.
    let reply = grant_reply_of(up::CredentialInfo {
        azure: Some(up::AzureCredentialInfo {
            access_token: "TOKEN-VALUE".into(),
            expiry_timestamp: "next tuesday".into(),
        }),
        ..Default::default()
    });
    let e = translate::grant_reply(&reply).unwrap_err();
    assert!(e.contains("expiry_timestamp"), "{e}");
    assert!(!e.contains("TOKEN-VALUE"));
}

#[test]
fn azure_expiries_are_rfc3339_or_empty() {
    assert_eq!(azure_expiry("").unwrap(), None);
    let t = azure_expiry("2030-01-02T03:04:05+01:00").unwrap().unwrap();
    assert_eq!(t.to_string(), "2030-01-02T02:04:05Z");
    assert!(azure_expiry("2030-01-02 03:04:05 +0000 UTC").is_err());
}

#[test]
fn gcs_credentials_become_hmac_keys_and_the_service_account() {
    let c = credentials_from_upstream(&up::CredentialInfo {
        gcs: Some(up::GcsCredentialInfo {
            access_id: "GOOG1ID".into(),
            access_secret: "HMAC-SECRET".into(),
            private_key_name: "key-1".into(),
            service_account: "sa@project.iam.gserviceaccount.com".into(),
        }),
        ..Default::default()
    })
    .unwrap();
    let g = c.gcs.unwrap();
    assert_eq!(g.hmac_access_id, "GOOG1ID");
    assert_eq!(g.hmac_secret, "HMAC-SECRET");
    assert_eq!(g.private_key_id, "key-1");
    assert_eq!(g.private_key, "");
    assert_eq!(g.service_account_name, "sa@project.iam.gserviceaccount.com");
    assert!(c.s3.is_none() && c.azure.is_none());
}

#[test]
fn existing_buckets_must_keep_their_id() {
    let reply = up::DriverGetExistingBucketResponse {
        bucket_id: "legacy".into(),
        protocols: Some(up_s3("legacy", "https://e", "r")),
    };
    let info = existing_bucket_reply("legacy", &reply)
        .unwrap()
        .protocols
        .unwrap();
    assert_eq!(info.s3.unwrap().endpoint, "https://e");
    let e = existing_bucket_reply("legacy-alias", &reply).unwrap_err();
    assert!(e.contains("set it to \"legacy\""), "{e}");
    let empty = up::DriverGetExistingBucketResponse::default();
    assert!(existing_bucket_reply("legacy", &empty).is_err());
}

#[test]
fn out_of_range_for_several_buckets_says_what_to_do() {
    let e = DriverError {
        method: Method::GrantBucketAccess,
        status: Status::out_of_range("multi-bucket access unsupported"),
    };
    let said = several_buckets(e.clone(), true);
    assert_eq!(said.code(), Code::OutOfRange);
    assert!(
        said.status
            .message()
            .contains("one BucketAccess per BucketClaim")
    );
    assert_eq!(
        several_buckets(e, false).status.message(),
        "multi-bucket access unsupported"
    );
}
