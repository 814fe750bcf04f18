//! Pure checks of driver replies against `proto/cosi.proto` and the KEP:
//! protocol coverage, completeness of granted bucket info and credentials,
//! size limits, and the wording of a gRPC status in a reason.

use std::collections::BTreeSet;

use cosi_driver::proto::*;
use cosi_driver::validate::{MAX_ENDPOINT_BYTES, MAX_STRING_BYTES};
use cosi_driver::{Code, Status};

/// Size limit of an Azure SAS token.
pub const MAX_ACCESS_TOKEN_BYTES: usize = 4096;
/// Size limit of a GCS private key.
pub const MAX_PRIVATE_KEY_BYTES: usize = 8192;
/// Size limit of a certificate authority bundle.
pub const MAX_CA_BYTES: usize = 65536;

/// How much of a driver's error message a reason quotes.
const MAX_QUOTED_MESSAGE: usize = 200;

/// `"NotFound: bucket x does not exist"`, the message shortened if long.
pub fn describe(status: &Status) -> String {
    let message = status.message();
    let mut short: String = message.chars().take(MAX_QUOTED_MESSAGE).collect();
    if short.len() < message.len() {
        short.push_str("...");
    }
    if short.is_empty() {
        format!("{:?} (no message)", status.code())
    } else {
        format!("{:?}: {short}", status.code())
    }
}

/// The API name of a protocol (`S3`, `Azure`, `GCS`), or its number.
pub fn protocol_name(protocol: ObjectProtocol) -> String {
    protocol
        .api_name()
        .map(str::to_owned)
        .unwrap_or_else(|| format!("{protocol:?}"))
}

/// The known protocols among advertised protocol numbers, in order, once each.
pub fn known_protocols(advertised: &[i32]) -> Vec<ObjectProtocol> {
    let mut out = Vec::new();
    for p in advertised {
        if let Ok(p) = ObjectProtocol::try_from(*p)
            && p != ObjectProtocol::Unspecified
            && !out.contains(&p)
        {
            out.push(p);
        }
    }
    out
}

/// Checks the advertised protocol list: at least one, all known, none twice.
pub fn advertised_protocols(advertised: &[i32]) -> Result<(), String> {
    if advertised.is_empty() {
        return Err("supported_protocols is empty; a driver must advertise at least one".into());
    }
    let mut seen = BTreeSet::new();
    for p in advertised {
        match ObjectProtocol::try_from(*p) {
            Ok(ObjectProtocol::Unspecified) => {
                return Err("supported_protocols lists OBJECT_PROTOCOL_UNSPECIFIED".into());
            }
            Err(_) => return Err(format!("supported_protocols lists unknown value {p}")),
            Ok(known) => {
                if !seen.insert(*p) {
                    return Err(format!(
                        "supported_protocols lists {} twice",
                        protocol_name(known)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The protocol to exercise: the requested one if the driver advertises it,
/// else S3 when advertised, else the first advertised protocol.
pub fn choose_protocol(
    advertised: &[i32],
    requested: Option<ObjectProtocol>,
) -> Result<ObjectProtocol, String> {
    let known = known_protocols(advertised);
    match requested {
        Some(p) if known.contains(&p) => Ok(p),
        Some(p) => Err(format!(
            "the driver does not advertise protocol {} (it advertises {})",
            protocol_name(p),
            list(&known)
        )),
        None if known.contains(&ObjectProtocol::S3) => Ok(ObjectProtocol::S3),
        None => known
            .first()
            .copied()
            .ok_or_else(|| "the driver advertises no known protocol to exercise".to_owned()),
    }
}

/// A protocol the driver does not advertise, if there is one.
pub fn unsupported_protocol(advertised: &[i32]) -> Option<ObjectProtocol> {
    let known = known_protocols(advertised);
    [
        ObjectProtocol::S3,
        ObjectProtocol::Azure,
        ObjectProtocol::Gcs,
    ]
    .into_iter()
    .find(|p| !known.contains(p))
}

fn list(protocols: &[ObjectProtocol]) -> String {
    if protocols.is_empty() {
        return "none".into();
    }
    protocols
        .iter()
        .map(|p| protocol_name(*p))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that bucket info is present and covers every requested protocol.
pub fn covers_protocols(
    info: Option<&ProtocolBucketInfo>,
    requested: &[ObjectProtocol],
) -> Result<(), String> {
    let Some(info) = info else {
        return Err("the reply has no bucket info (protocols is unset)".into());
    };
    let present = info.protocols();
    if present.is_empty() {
        return Err("the bucket info covers no protocol; at least one is required".into());
    }
    let missing: Vec<_> = requested
        .iter()
        .copied()
        .filter(|p| !info.has(*p))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the bucket info lacks requested protocol {} (it covers {})",
            list(&missing),
            list(&present)
        ));
    }
    bucket_info_limits(info)
}

fn limit(field: &str, value: &str, max: usize) -> Result<(), String> {
    if value.len() > max {
        return Err(format!(
            "{field} is {} bytes; the limit is {max}",
            value.len()
        ));
    }
    Ok(())
}

/// Checks the size limits of bucket info fields (128 bytes; endpoint 2048).
pub fn bucket_info_limits(info: &ProtocolBucketInfo) -> Result<(), String> {
    if let Some(s3) = &info.s3 {
        limit("s3.bucket_name", &s3.bucket_name, MAX_STRING_BYTES)?;
        limit("s3.region", &s3.region, MAX_STRING_BYTES)?;
        limit("s3.endpoint", &s3.endpoint, MAX_ENDPOINT_BYTES)?;
        if S3AddressingStyle::try_from(s3.addressing_style).is_err() {
            return Err(format!(
                "s3.addressing_style has unknown value {}",
                s3.addressing_style
            ));
        }
    }
    if let Some(azure) = &info.azure {
        limit(
            "azure.storage_account",
            &azure.storage_account,
            MAX_STRING_BYTES,
        )?;
    }
    if let Some(gcs) = &info.gcs {
        limit("gcs.project_id", &gcs.project_id, MAX_STRING_BYTES)?;
        limit("gcs.bucket_name", &gcs.bucket_name, MAX_STRING_BYTES)?;
    }
    Ok(())
}

/// Checks that granted bucket info has every field a workload needs for
/// `protocol` (S3: bucket_name, region, endpoint; Azure: storage_account;
/// GCS: project_id, bucket_name).
pub fn granted_info_complete(
    info: Option<&ProtocolBucketInfo>,
    protocol: ObjectProtocol,
) -> Result<(), String> {
    let name = protocol_name(protocol);
    let info = info.ok_or("bucket_info is unset")?;
    bucket_info_limits(info)?;
    let no_info = || format!("bucket_info has no {name} info");
    let fields: Vec<(&str, &String)> = match protocol {
        ObjectProtocol::S3 => {
            let s3 = info.s3.as_ref().ok_or_else(no_info)?;
            vec![
                ("bucket_name", &s3.bucket_name),
                ("region", &s3.region),
                ("endpoint", &s3.endpoint),
            ]
        }
        ObjectProtocol::Azure => {
            let azure = info.azure.as_ref().ok_or_else(no_info)?;
            vec![("storage_account", &azure.storage_account)]
        }
        ObjectProtocol::Gcs => {
            let gcs = info.gcs.as_ref().ok_or_else(no_info)?;
            vec![
                ("project_id", &gcs.project_id),
                ("bucket_name", &gcs.bucket_name),
            ]
        }
        ObjectProtocol::Unspecified => return Err("no protocol was requested".into()),
    };
    let empty: Vec<&str> = fields
        .into_iter()
        .filter(|(_, v)| v.is_empty())
        .map(|(k, _)| k)
        .collect();
    if empty.is_empty() {
        Ok(())
    } else {
        Err(format!("{name} bucket info lacks {}", empty.join(", ")))
    }
}

/// Checks a grant's bucket list: exactly one entry per requested bucket ID,
/// no others, each with complete info for `protocol`.
pub fn granted_buckets(
    granted: &[GrantedBucket],
    requested: &[String],
    protocol: ObjectProtocol,
) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for b in granted {
        if !requested.contains(&b.bucket_id) {
            return Err(format!(
                "the reply lists bucket {:?}, which was not requested",
                b.bucket_id
            ));
        }
        if !seen.insert(b.bucket_id.as_str()) {
            return Err(format!("the reply lists bucket {:?} twice", b.bucket_id));
        }
        granted_info_complete(b.bucket_info.as_ref(), protocol)
            .map_err(|e| format!("bucket {:?}: {e}", b.bucket_id))?;
    }
    let missing: Vec<_> = requested
        .iter()
        .filter(|id| !seen.contains(id.as_str()))
        .map(|id| format!("{id:?}"))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the reply has no entry for requested bucket {}",
            missing.join(", ")
        ));
    }
    Ok(())
}

/// Checks granted credentials: for `Key` authentication the requested
/// protocol's credentials are present and complete; for every type, no other
/// protocol's credentials are set and size limits hold.
pub fn credentials(
    creds: Option<&Credentials>,
    protocol: ObjectProtocol,
    auth: AuthenticationType,
) -> Result<(), String> {
    let key_auth = auth == AuthenticationType::Key;
    let Some(creds) = creds else {
        return if key_auth {
            Err("the reply has no credentials".into())
        } else {
            Ok(())
        };
    };
    limit(
        "credentials.certificate_authority",
        &creds.certificate_authority,
        MAX_CA_BYTES,
    )?;
    if !creds.certificate_authority.is_empty() {
        crate::s3::check_ca_bundle(&creds.certificate_authority)?;
    }
    let others: Vec<_> = [
        (ObjectProtocol::S3, creds.s3.is_some()),
        (ObjectProtocol::Azure, creds.azure.is_some()),
        (ObjectProtocol::Gcs, creds.gcs.is_some()),
    ]
    .into_iter()
    .filter(|(p, set)| *set && *p != protocol)
    .map(|(p, _)| p)
    .collect();
    if !others.is_empty() {
        return Err(format!(
            "credentials for {} are set, but only {} was requested",
            list(&others),
            protocol_name(protocol)
        ));
    }
    let name = protocol_name(protocol);
    match protocol {
        ObjectProtocol::S3 => match &creds.s3 {
            None if key_auth => Err(format!("credentials have no {name} credentials")),
            None => Ok(()),
            Some(s3) => {
                limit("s3.access_key_id", &s3.access_key_id, MAX_STRING_BYTES)?;
                limit(
                    "s3.access_secret_key",
                    &s3.access_secret_key,
                    MAX_STRING_BYTES,
                )?;
                let empty = missing(&[
                    ("access_key_id", &s3.access_key_id),
                    ("access_secret_key", &s3.access_secret_key),
                ]);
                complete(&name, key_auth, &empty, false)
            }
        },
        ObjectProtocol::Azure => match &creds.azure {
            None if key_auth => Err(format!("credentials have no {name} credentials")),
            None => Ok(()),
            Some(azure) => {
                limit(
                    "azure.access_token",
                    &azure.access_token,
                    MAX_ACCESS_TOKEN_BYTES,
                )?;
                let empty = missing(&[("access_token", &azure.access_token)]);
                complete(&name, key_auth, &empty, false)
            }
        },
        ObjectProtocol::Gcs => match &creds.gcs {
            None if key_auth => Err(format!("credentials have no {name} credentials")),
            None => Ok(()),
            Some(gcs) => {
                limit("gcs.private_key", &gcs.private_key, MAX_PRIVATE_KEY_BYTES)?;
                for (field, value) in [
                    ("gcs.service_account_name", &gcs.service_account_name),
                    ("gcs.client_email", &gcs.client_email),
                    ("gcs.client_id", &gcs.client_id),
                    ("gcs.private_key_id", &gcs.private_key_id),
                    ("gcs.hmac_access_id", &gcs.hmac_access_id),
                    ("gcs.hmac_secret", &gcs.hmac_secret),
                ] {
                    limit(field, value, MAX_STRING_BYTES)?;
                }
                // Either a service-account key or an HMAC key pair lets a
                // workload in; half of either is useless.
                let key = missing(&[
                    ("private_key_id", &gcs.private_key_id),
                    ("private_key", &gcs.private_key),
                ]);
                let hmac = missing(&[
                    ("hmac_access_id", &gcs.hmac_access_id),
                    ("hmac_secret", &gcs.hmac_secret),
                ]);
                for half in [&key, &hmac] {
                    if half.len() == 1 {
                        return Err(format!("{name} credentials lack {}", half[0]));
                    }
                }
                let none = key.len() == 2 && hmac.len() == 2;
                complete(&name, key_auth, &[], none)
            }
        },
        ObjectProtocol::Unspecified => Err("no protocol was requested".into()),
    }
}

fn missing<'a>(fields: &[(&'a str, &String)]) -> Vec<&'a str> {
    fields
        .iter()
        .filter(|(_, v)| v.is_empty())
        .map(|(k, _)| *k)
        .collect()
}

fn complete(name: &str, key_auth: bool, empty: &[&str], nothing: bool) -> Result<(), String> {
    if !empty.is_empty() && key_auth {
        return Err(format!("{name} credentials lack {}", empty.join(", ")));
    }
    if nothing && key_auth {
        return Err(format!(
            "{name} credentials hold neither a private key (private_key_id, private_key) nor an HMAC key (hmac_access_id, hmac_secret)"
        ));
    }
    Ok(())
}

/// Checks that a call ended in `expected`. `what` describes the request.
pub fn expect_code<T>(
    rpc: &str,
    what: &str,
    result: &Result<T, Status>,
    expected: Code,
) -> Result<(), String> {
    match result {
        Err(s) if s.code() == expected => Ok(()),
        Err(s) => Err(format!(
            "{rpc} with {what} answered {} instead of {expected:?}",
            describe(s)
        )),
        Ok(_) => Err(format!(
            "{rpc} with {what} succeeded instead of answering {expected:?}"
        )),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cosi_driver::testing::s3_bucket_info as s3_info;

    /// Credentials holding the S3 key pair `id`, `secret`.
    pub(crate) fn s3_creds(id: &str, secret: &str) -> Credentials {
        Credentials {
            s3: Some(S3Credentials {
                access_key_id: id.into(),
                access_secret_key: secret.into(),
            }),
            ..Default::default()
        }
    }

    const S3: i32 = ObjectProtocol::S3 as i32;
    const AZURE: i32 = ObjectProtocol::Azure as i32;
    const GCS: i32 = ObjectProtocol::Gcs as i32;

    #[test]
    fn advertised_protocols_must_be_known_and_distinct() {
        assert!(advertised_protocols(&[S3, AZURE]).is_ok());
        assert!(advertised_protocols(&[]).unwrap_err().contains("empty"));
        assert!(
            advertised_protocols(&[0])
                .unwrap_err()
                .contains("UNSPECIFIED")
        );
        assert!(
            advertised_protocols(&[9])
                .unwrap_err()
                .contains("unknown value 9")
        );
        assert!(
            advertised_protocols(&[S3, S3])
                .unwrap_err()
                .contains("S3 twice")
        );
    }

    #[test]
    fn the_exercised_protocol_prefers_the_request_then_s3() {
        assert_eq!(
            choose_protocol(&[AZURE, S3], None).unwrap(),
            ObjectProtocol::S3
        );
        assert_eq!(
            choose_protocol(&[GCS, AZURE], None).unwrap(),
            ObjectProtocol::Gcs
        );
        assert_eq!(
            choose_protocol(&[S3, AZURE], Some(ObjectProtocol::Azure)).unwrap(),
            ObjectProtocol::Azure
        );
        let err = choose_protocol(&[S3], Some(ObjectProtocol::Gcs)).unwrap_err();
        assert!(err.contains("does not advertise protocol GCS"), "{err}");
        assert!(choose_protocol(&[], None).is_err());
    }

    #[test]
    fn an_unsupported_protocol_is_found_unless_all_are_supported() {
        assert_eq!(unsupported_protocol(&[S3]), Some(ObjectProtocol::Azure));
        assert_eq!(
            unsupported_protocol(&[S3, AZURE]),
            Some(ObjectProtocol::Gcs)
        );
        assert_eq!(unsupported_protocol(&[GCS, S3, AZURE]), None);
    }

    #[test]
    fn bucket_info_must_cover_the_requested_protocols() {
        let info = s3_info("b", "r", "http://e");
        assert!(covers_protocols(Some(&info), &[ObjectProtocol::S3]).is_ok());
        let err = covers_protocols(Some(&info), &[ObjectProtocol::Azure]).unwrap_err();
        assert!(err.contains("lacks requested protocol Azure"), "{err}");
        assert!(
            covers_protocols(None, &[])
                .unwrap_err()
                .contains("no bucket info")
        );
        let empty = ProtocolBucketInfo::default();
        assert!(
            covers_protocols(Some(&empty), &[])
                .unwrap_err()
                .contains("no protocol")
        );
    }

    #[test]
    fn bucket_info_fields_respect_size_limits() {
        let long = s3_info(&"b".repeat(129), "r", "http://e");
        assert!(
            bucket_info_limits(&long)
                .unwrap_err()
                .contains("bucket_name")
        );
        let endpoint = s3_info("b", "r", &"e".repeat(2000));
        assert!(bucket_info_limits(&endpoint).is_ok());
    }

    #[test]
    fn granted_s3_info_needs_name_region_and_endpoint() {
        let ok = s3_info("b", "us-east-1", "http://127.0.0.1:1");
        assert!(granted_info_complete(Some(&ok), ObjectProtocol::S3).is_ok());
        let no_region = s3_info("b", "", "http://127.0.0.1:1");
        let err = granted_info_complete(Some(&no_region), ObjectProtocol::S3).unwrap_err();
        assert_eq!(err, "S3 bucket info lacks region");
        let err = granted_info_complete(Some(&ok), ObjectProtocol::Azure).unwrap_err();
        assert!(err.contains("no Azure info"), "{err}");
    }

    fn granted(id: &str) -> GrantedBucket {
        GrantedBucket {
            bucket_id: id.into(),
            bucket_info: Some(s3_info(id, "r", "http://e")),
        }
    }

    #[test]
    fn granted_buckets_must_match_the_request_exactly() {
        let req = vec!["a".to_owned(), "b".to_owned()];
        assert!(granted_buckets(&[granted("a"), granted("b")], &req, ObjectProtocol::S3).is_ok());
        let err = granted_buckets(&[granted("a")], &req, ObjectProtocol::S3).unwrap_err();
        assert!(err.contains("no entry for requested bucket \"b\""), "{err}");
        let err = granted_buckets(
            &[granted("a"), granted("b"), granted("c")],
            &req,
            ObjectProtocol::S3,
        )
        .unwrap_err();
        assert!(err.contains("\"c\", which was not requested"), "{err}");
        let err =
            granted_buckets(&[granted("a"), granted("a")], &req, ObjectProtocol::S3).unwrap_err();
        assert!(err.contains("twice"), "{err}");
    }

    #[test]
    fn key_credentials_must_be_complete_for_the_protocol() {
        let key = AuthenticationType::Key;
        assert!(credentials(Some(&s3_creds("AKID", "secret")), ObjectProtocol::S3, key).is_ok());
        let err = credentials(Some(&s3_creds("AKID", "")), ObjectProtocol::S3, key).unwrap_err();
        assert_eq!(err, "S3 credentials lack access_secret_key");
        assert!(
            credentials(None, ObjectProtocol::S3, key)
                .unwrap_err()
                .contains("no credentials")
        );
        let err = credentials(Some(&Credentials::default()), ObjectProtocol::S3, key).unwrap_err();
        assert!(err.contains("no S3 credentials"), "{err}");
    }

    #[test]
    fn credentials_for_other_protocols_are_refused() {
        let mut creds = s3_creds("AKID", "secret");
        creds.azure = Some(AzureCredentials {
            access_token: "t".into(),
            expiry_timestamp: None,
        });
        let err =
            credentials(Some(&creds), ObjectProtocol::S3, AuthenticationType::Key).unwrap_err();
        assert!(err.contains("credentials for Azure are set"), "{err}");
    }

    #[test]
    fn a_certificate_authority_must_be_a_pem_bundle() {
        let mut creds = s3_creds("AKID", "secret");
        creds.certificate_authority = "not a certificate".into();
        let err =
            credentials(Some(&creds), ObjectProtocol::S3, AuthenticationType::Key).unwrap_err();
        assert!(err.contains("certificate_authority"), "{err}");
    }

    #[test]
    fn service_account_grants_may_carry_no_credentials() {
        let sa = AuthenticationType::ServiceAccount;
        assert!(credentials(None, ObjectProtocol::S3, sa).is_ok());
        assert!(credentials(Some(&Credentials::default()), ObjectProtocol::S3, sa).is_ok());
    }

    #[test]
    fn gcs_credentials_need_a_whole_key_or_hmac_pair() {
        let key = AuthenticationType::Key;
        let gcs = |f: fn(&mut GcsCredentials)| {
            let mut g = GcsCredentials::default();
            f(&mut g);
            Credentials {
                gcs: Some(g),
                ..Default::default()
            }
        };
        let hmac = gcs(|g| {
            g.hmac_access_id = "id".into();
            g.hmac_secret = "s".into();
        });
        assert!(credentials(Some(&hmac), ObjectProtocol::Gcs, key).is_ok());
        let half = gcs(|g| g.private_key_id = "id".into());
        let err = credentials(Some(&half), ObjectProtocol::Gcs, key).unwrap_err();
        assert!(err.contains("lack private_key"), "{err}");
        let none = gcs(|g| g.client_email = "a@b".into());
        let err = credentials(Some(&none), ObjectProtocol::Gcs, key).unwrap_err();
        assert!(err.contains("neither a private key"), "{err}");
    }

    #[test]
    fn expected_codes_are_checked_and_described() {
        let wrong: Result<(), Status> = Err(Status::internal("boom"));
        let err = expect_code(
            "DriverGetBucket",
            "an unknown bucket_id",
            &wrong,
            Code::NotFound,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "DriverGetBucket with an unknown bucket_id answered Internal: boom instead of NotFound"
        );
        let ok: Result<(), Status> = Ok(());
        assert!(
            expect_code("X", "y", &ok, Code::NotFound)
                .unwrap_err()
                .contains("succeeded")
        );
        let right: Result<(), Status> = Err(Status::not_found("gone"));
        assert!(expect_code("X", "y", &right, Code::NotFound).is_ok());
    }

    #[test]
    fn long_messages_are_shortened_in_descriptions() {
        let s = Status::internal("x".repeat(500));
        let d = describe(&s);
        assert!(d.len() < 250 && d.ends_with("..."), "{d}");
        assert_eq!(describe(&Status::unknown("")), "Unknown (no message)");
    }
}
