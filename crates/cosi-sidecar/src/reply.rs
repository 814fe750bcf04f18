//! Checks of driver replies before anything is written: a reply that misses
//! a requested protocol, names a protocol the driver never advertised,
//! answers for an unknown bucket, forgets a requested bucket, or lacks a
//! required field is a provisioning failure, never a half-written status or
//! Secret. Messages name fields, never values of credentials.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use cosi_api::constants::{bucket_info_keys, secret_keys};
use cosi_api::{AuthenticationType, Protocol};
use cosi_driver::proto::{
    Credentials, DriverGrantBucketAccessResponse, ProtocolBucketInfo, S3AddressingStyle,
};

use crate::convert::protocol_from_proto;
use crate::driver::DriverInfo;

/// What a valid DriverCreateBucket / DriverGetBucket reply says about a bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProvisionedBucket {
    /// Every protocol the bucket supports, sorted.
    pub protocols: Vec<Protocol>,
    /// `Bucket.status.bucketInfo`: non-secret info as `COSI_<PROTOCOL>_<KEY>`.
    pub bucket_info: BTreeMap<String, String>,
}

fn returned_protocols(info: &ProtocolBucketInfo) -> Vec<Protocol> {
    info.protocols()
        .into_iter()
        .filter_map(|p| protocol_from_proto(p as i32))
        .collect()
}

fn insert_nonempty(map: &mut BTreeMap<String, String>, key: &str, value: &str) {
    if !value.is_empty() {
        map.insert(key.to_owned(), value.to_owned());
    }
}

/// Renders bucket info as `Bucket.status.bucketInfo` (empty fields are omitted).
pub fn bucket_info_map(info: &ProtocolBucketInfo) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    if let Some(s3) = &info.s3 {
        insert_nonempty(&mut map, bucket_info_keys::S3_BUCKET_NAME, &s3.bucket_name);
        insert_nonempty(&mut map, bucket_info_keys::S3_REGION, &s3.region);
        insert_nonempty(&mut map, bucket_info_keys::S3_ENDPOINT, &s3.endpoint);
        if let Some(style) = addressing_style(s3.addressing_style) {
            map.insert(
                bucket_info_keys::S3_ADDRESSING_STYLE.to_owned(),
                style.to_owned(),
            );
        }
    }
    if let Some(az) = &info.azure {
        insert_nonempty(
            &mut map,
            bucket_info_keys::AZURE_STORAGE_ACCOUNT,
            &az.storage_account,
        );
    }
    if let Some(gcs) = &info.gcs {
        insert_nonempty(&mut map, bucket_info_keys::GCS_PROJECT_ID, &gcs.project_id);
        insert_nonempty(
            &mut map,
            bucket_info_keys::GCS_BUCKET_NAME,
            &gcs.bucket_name,
        );
    }
    map
}

fn addressing_style(value: i32) -> Option<&'static str> {
    S3AddressingStyle::try_from(value)
        .ok()
        .and_then(S3AddressingStyle::env_value)
}

/// Checks a DriverCreateBucket or DriverGetBucket reply: at least one
/// protocol, every requested protocol present, and none the driver does not
/// advertise.
pub fn bucket_reply(
    info: Option<&ProtocolBucketInfo>,
    requested: &[Protocol],
    driver: &DriverInfo,
) -> Result<ProvisionedBucket, String> {
    let info = info.ok_or("the reply has no protocols field")?;
    let mut protocols = returned_protocols(info);
    protocols.sort();
    if protocols.is_empty() {
        return Err("the reply lists no protocol; at least one is required".into());
    }
    let missing = requested.iter().filter(|p| !protocols.contains(p));
    refuse_named(missing.map(|p| p.as_str()), |names| {
        format!("the reply lacks the requested protocol(s) {names}")
    })?;
    let unadvertised = protocols.iter().filter(|p| !driver.supports(**p));
    refuse_named(unadvertised.map(|p| p.as_str()), |names| {
        format!(
            "the reply names protocol(s) {names} that the driver does not advertise in DriverGetInfo"
        )
    })?;
    Ok(ProvisionedBucket {
        protocols,
        bucket_info: bucket_info_map(info),
    })
}

/// Secret data: key → value. Its `Debug` lists the keys only, so a stray
/// `{:?}` can never print a credential.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretData(pub BTreeMap<String, String>);

impl fmt::Debug for SecretData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl SecretData {
    fn put(&mut self, key: &str, value: &str) {
        self.0.insert(key.to_owned(), value.to_owned());
    }

    fn put_nonempty(&mut self, key: &str, value: &str) {
        if !value.is_empty() {
            self.put(key, value);
        }
    }

    /// Adds upstream COSI's copy of every key of a `protocol` Secret it
    /// holds that upstream's sidecar also writes
    /// ([`secret_keys::upstream::copies`]).
    fn with_upstream_copies(mut self, protocol: Protocol) -> Self {
        for &(theirs, ours) in secret_keys::upstream::copies(protocol) {
            if let Some(value) = self.0.get(ours) {
                let value = value.clone();
                self.put(theirs, &value);
            }
        }
        self
    }
}

/// A valid DriverGrantBucketAccess reply, split into per-bucket info and
/// the credentials shared by every bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantedAccess {
    /// Per bucket ID: the bucket-info keys of its Secret.
    pub buckets: BTreeMap<String, SecretData>,
    /// Credential keys, the same in every Secret.
    pub credentials: SecretData,
}

/// An error made by `message` from the comma-separated `names`, or
/// nothing when there are none.
pub(crate) fn refuse_named<'n>(
    names: impl IntoIterator<Item = &'n str>,
    message: impl FnOnce(&str) -> String,
) -> Result<(), String> {
    let names: Vec<&str> = names.into_iter().collect();
    if names.is_empty() {
        Ok(())
    } else {
        Err(message(&names.join(", ")))
    }
}

fn require(fields: &[(&str, &String)], what: &str) -> Result<(), String> {
    let missing = fields
        .iter()
        .filter(|(_, v)| v.is_empty())
        .map(|(name, _)| *name);
    refuse_named(missing, |names| {
        format!("{what} lacks required field(s) {names}")
    })
}

/// The `protocol` part (`part`) of `what`, which must be present with the
/// named `fields` filled in.
fn required_part<'i, T>(
    part: Option<&'i T>,
    what: &str,
    protocol: Protocol,
    fields: impl FnOnce(&'i T) -> Vec<(&'static str, &'i String)>,
) -> Result<&'i T, String> {
    let part =
        part.ok_or_else(|| format!("{what} has no {protocol} info, but {protocol} was requested"))?;
    require(&fields(part), &format!("{what} ({protocol})"))?;
    Ok(part)
}

fn bucket_secret_info(
    id: &str,
    info: Option<&ProtocolBucketInfo>,
    protocol: Protocol,
) -> Result<SecretData, String> {
    let what = format!("the bucket info of bucket {id:?}");
    let mut data = SecretData::default();
    let info = info.ok_or_else(|| format!("{what} is missing"))?;
    match protocol {
        Protocol::S3 => {
            let s3 = required_part(info.s3.as_ref(), &what, protocol, |s3| {
                vec![
                    ("bucket_name", &s3.bucket_name),
                    ("region", &s3.region),
                    ("endpoint", &s3.endpoint),
                ]
            })?;
            data.put(secret_keys::s3::AWS_ENDPOINT_URL, &s3.endpoint);
            data.put(secret_keys::s3::BUCKET_NAME, &s3.bucket_name);
            data.put(secret_keys::s3::AWS_DEFAULT_REGION, &s3.region);
            data.put(secret_keys::s3::AWS_REGION, &s3.region);
            if let Some(style) = addressing_style(s3.addressing_style) {
                data.put(secret_keys::s3::AWS_S3_ADDRESSING_STYLE, style);
            }
        }
        Protocol::Azure => {
            let az = required_part(info.azure.as_ref(), &what, protocol, |az| {
                vec![("storage_account", &az.storage_account)]
            })?;
            data.put(
                secret_keys::azure::AZURE_STORAGE_ACCOUNT,
                &az.storage_account,
            );
        }
        Protocol::Gcs => {
            let gcs = required_part(info.gcs.as_ref(), &what, protocol, |gcs| {
                vec![
                    ("project_id", &gcs.project_id),
                    ("bucket_name", &gcs.bucket_name),
                ]
            })?;
            data.put(secret_keys::gcs::PROJECT_ID, &gcs.project_id);
            data.put(secret_keys::gcs::BUCKET_NAME, &gcs.bucket_name);
        }
    }
    Ok(data.with_upstream_copies(protocol))
}

fn credential_protocols(c: &Credentials) -> Vec<Protocol> {
    [
        (c.s3.is_some(), Protocol::S3),
        (c.azure.is_some(), Protocol::Azure),
        (c.gcs.is_some(), Protocol::Gcs),
    ]
    .into_iter()
    .filter_map(|(present, protocol)| present.then_some(protocol))
    .collect()
}

fn credentials(
    creds: Option<&Credentials>,
    protocol: Protocol,
    auth: AuthenticationType,
) -> Result<SecretData, String> {
    let key_auth = auth == AuthenticationType::Key;
    let mut data = SecretData::default();
    let Some(c) = creds else {
        return if key_auth {
            Err(format!(
                "the reply has no credentials, but {protocol} Key authentication needs them"
            ))
        } else {
            Ok(data)
        };
    };
    let present = credential_protocols(c);
    let foreign = present.iter().filter(|p| **p != protocol);
    refuse_named(foreign.map(|p| p.as_str()), |names| {
        format!("the reply carries credentials for {names} but {protocol} was requested")
    })?;
    if key_auth && !present.contains(&protocol) {
        return Err(format!(
            "the reply has no {protocol} credentials, but Key authentication needs them"
        ));
    }
    match protocol {
        Protocol::S3 => {
            if let Some(s3) = &c.s3 {
                if key_auth {
                    require(
                        &[
                            ("access_key_id", &s3.access_key_id),
                            ("access_secret_key", &s3.access_secret_key),
                        ],
                        "the S3 credentials",
                    )?;
                }
                data.put_nonempty(secret_keys::s3::AWS_ACCESS_KEY_ID, &s3.access_key_id);
                data.put_nonempty(
                    secret_keys::s3::AWS_SECRET_ACCESS_KEY,
                    &s3.access_secret_key,
                );
            }
        }
        Protocol::Azure => {
            if let Some(az) = &c.azure {
                if key_auth {
                    require(
                        &[("access_token", &az.access_token)],
                        "the Azure credentials",
                    )?;
                }
                if !az.access_token.is_empty() {
                    data.put(
                        secret_keys::azure::AZURE_STORAGE_SAS_TOKEN,
                        &az.access_token,
                    );
                    let expiry = az
                        .expiry_timestamp
                        .map(|t| t.to_string())
                        .unwrap_or_default();
                    data.put(
                        secret_keys::azure::AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP,
                        &expiry,
                    );
                }
            }
        }
        Protocol::Gcs => {
            if let Some(g) = &c.gcs {
                let key_pair = !g.private_key_id.is_empty() && !g.private_key.is_empty();
                let hmac_pair = !g.hmac_access_id.is_empty() && !g.hmac_secret.is_empty();
                if key_auth && !key_pair && !hmac_pair {
                    return Err("the GCS credentials need private_key_id and private_key, or hmac_access_id and hmac_secret".into());
                }
                use secret_keys::gcs;
                data.put_nonempty(gcs::SERVICE_ACCOUNT_NAME, &g.service_account_name);
                data.put_nonempty(gcs::CLIENT_EMAIL, &g.client_email);
                data.put_nonempty(gcs::CLIENT_ID, &g.client_id);
                data.put_nonempty(gcs::PRIVATE_KEY_ID, &g.private_key_id);
                data.put_nonempty(gcs::PRIVATE_KEY, &g.private_key);
                data.put_nonempty(gcs::HMAC_ACCESS_ID, &g.hmac_access_id);
                data.put_nonempty(gcs::HMAC_SECRET, &g.hmac_secret);
            }
        }
    }
    data.put_nonempty(
        secret_keys::COSI_CERTIFICATE_AUTHORITY,
        &c.certificate_authority,
    );
    Ok(data.with_upstream_copies(protocol))
}

/// Checks a DriverGrantBucketAccess reply against the request: exactly one
/// entry per requested bucket ID (none unknown, none missing, none twice),
/// each with the requested protocol's required info, and the credentials
/// Key authentication needs (for that protocol only).
pub fn grant_reply(
    reply: &DriverGrantBucketAccessResponse,
    requested_ids: &[String],
    protocol: Protocol,
    auth: AuthenticationType,
) -> Result<GrantedAccess, String> {
    let requested: BTreeSet<&str> = requested_ids.iter().map(String::as_str).collect();
    let mut buckets = BTreeMap::new();
    for granted in &reply.buckets {
        if !requested.contains(granted.bucket_id.as_str()) {
            return Err(format!(
                "the reply answers for bucket {:?}, which was not requested",
                granted.bucket_id
            ));
        }
        let data = bucket_secret_info(&granted.bucket_id, granted.bucket_info.as_ref(), protocol)?;
        if buckets.insert(granted.bucket_id.clone(), data).is_some() {
            return Err(format!(
                "the reply answers twice for bucket {:?}",
                granted.bucket_id
            ));
        }
    }
    let missing: Vec<&str> = requested
        .iter()
        .filter(|id| !buckets.contains_key(**id))
        .copied()
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the reply has no entry for requested bucket(s) {}",
            missing
                .iter()
                .map(|id| format!("{id:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let credentials = credentials(reply.credentials.as_ref(), protocol, auth)?;
    Ok(GrantedAccess {
        buckets,
        credentials,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::proto::{
        AzureBucketInfo, AzureCredentials, GcsBucketInfo, GcsCredentials, GrantedBucket,
        S3Credentials,
    };
    use cosi_driver::testing::s3_bucket_info;

    fn driver() -> DriverInfo {
        DriverInfo {
            name: "d.example.com".into(),
            protocols: vec![Protocol::S3, Protocol::Azure],
            api: crate::driver::DriverApi::V1alpha2,
        }
    }

    fn s3_info(name: &str) -> ProtocolBucketInfo {
        s3_bucket_info(name, "us-east-1", "https://s3.example.com")
    }

    fn s3_grant(ids: &[&str]) -> DriverGrantBucketAccessResponse {
        DriverGrantBucketAccessResponse {
            buckets: ids
                .iter()
                .map(|id| GrantedBucket {
                    bucket_id: (*id).into(),
                    bucket_info: Some(s3_info(id)),
                })
                .collect(),
            credentials: Some(Credentials {
                s3: Some(S3Credentials {
                    access_key_id: "AKIDSECRETVALUE".into(),
                    access_secret_key: "verysecretkey".into(),
                }),
                ..Default::default()
            }),
        }
    }

    /// Checks `reply` to a grant of the buckets `ids`.
    fn grant(
        reply: &DriverGrantBucketAccessResponse,
        ids: &[&str],
        protocol: Protocol,
        auth: AuthenticationType,
    ) -> Result<GrantedAccess, String> {
        let requested: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
        grant_reply(reply, &requested, protocol, auth)
    }

    /// Checks `reply` to an S3 Key grant of the buckets `ids`.
    fn s3_key_grant(
        reply: &DriverGrantBucketAccessResponse,
        ids: &[&str],
    ) -> Result<GrantedAccess, String> {
        grant(reply, ids, Protocol::S3, AuthenticationType::Key)
    }

    /// A grant reply for the single bucket `b1`.
    fn b1_grant(
        info: ProtocolBucketInfo,
        credentials: Credentials,
    ) -> DriverGrantBucketAccessResponse {
        DriverGrantBucketAccessResponse {
            buckets: vec![GrantedBucket {
                bucket_id: "b1".into(),
                bucket_info: Some(info),
            }],
            credentials: Some(credentials),
        }
    }

    #[test]
    fn bucket_info_is_rendered_with_protocol_prefixes() {
        let mut info = s3_info("b1");
        info.azure = Some(AzureBucketInfo {
            storage_account: "acct".into(),
        });
        let got = bucket_reply(Some(&info), &[Protocol::S3], &driver()).unwrap();
        assert_eq!(got.protocols, vec![Protocol::S3, Protocol::Azure]);
        for (key, value) in [
            ("COSI_S3_BUCKET_NAME", "b1"),
            ("COSI_S3_REGION", "us-east-1"),
            ("COSI_S3_ENDPOINT", "https://s3.example.com"),
            ("COSI_S3_ADDRESSING_STYLE", "path"),
            ("COSI_AZURE_STORAGE_ACCOUNT", "acct"),
        ] {
            assert_eq!(got.bucket_info[key], value, "{key}");
        }
    }

    #[test]
    fn bucket_reply_must_cover_requested_and_only_advertised_protocols() {
        let info = s3_info("b1");
        let err = bucket_reply(Some(&info), &[Protocol::Azure], &driver()).unwrap_err();
        assert!(
            err.contains("lacks the requested protocol(s) Azure"),
            "{err}"
        );
        let gcs = ProtocolBucketInfo {
            gcs: Some(GcsBucketInfo::default()),
            ..Default::default()
        };
        let err = bucket_reply(Some(&gcs), &[], &driver()).unwrap_err();
        assert!(err.contains("does not advertise"), "{err}");
        let err = bucket_reply(Some(&ProtocolBucketInfo::default()), &[], &driver()).unwrap_err();
        assert!(err.contains("no protocol"), "{err}");
        assert!(bucket_reply(None, &[], &driver()).is_err());
    }

    #[test]
    fn a_complete_s3_grant_yields_bucket_info_and_shared_credentials() {
        let g = s3_key_grant(&s3_grant(&["b1", "b2"]), &["b1", "b2"]).unwrap();
        assert_eq!(g.buckets.len(), 2);
        assert_eq!(g.buckets["b2"].0["BUCKET_NAME"], "b2");
        assert_eq!(g.buckets["b2"].0["AWS_S3_ADDRESSING_STYLE"], "path");
        // Both region keys: the AWS CLI and boto3 read the first, the AWS
        // SDKs for JavaScript v3, Java v2 and Go v2 the second.
        assert_eq!(g.buckets["b2"].0["AWS_DEFAULT_REGION"], "us-east-1");
        assert_eq!(g.buckets["b2"].0["AWS_REGION"], "us-east-1");
        assert_eq!(g.credentials.0["AWS_ACCESS_KEY_ID"], "AKIDSECRETVALUE");
        // Upstream COSI's keys beside them, with the same values.
        let b2 = &g.buckets["b2"].0;
        for (ours, theirs) in [
            ("BUCKET_NAME", "COSI_S3_BUCKET_ID"),
            ("AWS_ENDPOINT_URL", "COSI_S3_ENDPOINT"),
            ("AWS_DEFAULT_REGION", "COSI_S3_REGION"),
            ("AWS_S3_ADDRESSING_STYLE", "COSI_S3_ADDRESSING_STYLE"),
        ] {
            assert_eq!(b2[ours], b2[theirs], "{theirs}");
        }
        let creds = &g.credentials.0;
        assert_eq!(creds["COSI_S3_ACCESS_KEY_ID"], creds["AWS_ACCESS_KEY_ID"]);
        assert_eq!(
            creds["COSI_S3_ACCESS_SECRET_KEY"],
            creds["AWS_SECRET_ACCESS_KEY"]
        );
    }

    #[test]
    fn unknown_missing_and_duplicate_buckets_are_refused() {
        let err = s3_key_grant(&s3_grant(&["b1", "zz"]), &["b1"]).unwrap_err();
        assert!(err.contains("not requested"), "{err}");
        let err = s3_key_grant(&s3_grant(&["b1"]), &["b1", "b2"]).unwrap_err();
        assert!(
            err.contains("no entry for requested bucket(s) \"b2\""),
            "{err}"
        );
        let err = s3_key_grant(&s3_grant(&["b1", "b1"]), &["b1"]).unwrap_err();
        assert!(err.contains("twice"), "{err}");
    }

    #[test]
    fn missing_required_s3_fields_are_named() {
        let mut reply = s3_grant(&["b1"]);
        if let Some(s3) = reply.buckets[0]
            .bucket_info
            .as_mut()
            .and_then(|i| i.s3.as_mut())
        {
            s3.region.clear();
            s3.endpoint.clear();
        }
        let err = s3_key_grant(&reply, &["b1"]).unwrap_err();
        assert!(err.contains("region, endpoint"), "{err}");
    }

    #[test]
    fn missing_or_foreign_credentials_are_refused_without_quoting_values() {
        let mut reply = s3_grant(&["b1"]);
        reply.credentials = None;
        let err = s3_key_grant(&reply, &["b1"]).unwrap_err();
        assert!(err.contains("no credentials"), "{err}");

        let mut reply = s3_grant(&["b1"]);
        if let Some(c) = reply.credentials.as_mut().and_then(|c| c.s3.as_mut()) {
            c.access_secret_key.clear();
        }
        let err = s3_key_grant(&reply, &["b1"]).unwrap_err();
        assert!(err.contains("access_secret_key"), "{err}");
        assert!(!err.contains("AKIDSECRETVALUE"));

        let mut reply = s3_grant(&["b1"]);
        if let Some(c) = reply.credentials.as_mut() {
            c.azure = Some(AzureCredentials {
                access_token: "tok".into(),
                expiry_timestamp: None,
            });
        }
        let err = s3_key_grant(&reply, &["b1"]).unwrap_err();
        assert!(err.contains("credentials for Azure"), "{err}");
        assert!(!err.contains("tok\""));
    }

    #[test]
    fn wrong_protocol_info_is_refused() {
        let reply = s3_grant(&["b1"]);
        let err = grant(&reply, &["b1"], Protocol::Azure, AuthenticationType::Key).unwrap_err();
        assert!(err.contains("no Azure info"), "{err}");
    }

    #[test]
    fn service_account_grants_may_omit_credentials() {
        let mut reply = s3_grant(&["b1"]);
        reply.credentials = None;
        let g = grant(
            &reply,
            &["b1"],
            Protocol::S3,
            AuthenticationType::ServiceAccount,
        )
        .unwrap();
        assert!(g.credentials.0.is_empty());
    }

    #[test]
    fn azure_expiry_is_iso_8601_or_empty() {
        let reply = b1_grant(
            ProtocolBucketInfo {
                azure: Some(AzureBucketInfo {
                    storage_account: "acct".into(),
                }),
                ..Default::default()
            },
            Credentials {
                azure: Some(AzureCredentials {
                    access_token: "sv=token".into(),
                    expiry_timestamp: Some(prost_types::Timestamp {
                        seconds: 1_767_225_600,
                        nanos: 0,
                    }),
                }),
                certificate_authority: "-----BEGIN CERTIFICATE-----".into(),
                ..Default::default()
            },
        );
        let g = grant(&reply, &["b1"], Protocol::Azure, AuthenticationType::Key).unwrap();
        assert_eq!(
            g.credentials.0["AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP"],
            "2026-01-01T00:00:00Z"
        );
        assert!(g.credentials.0.contains_key("COSI_CERTIFICATE_AUTHORITY"));
        assert_eq!(g.buckets["b1"].0["AZURE_STORAGE_ACCOUNT"], "acct");
        assert_eq!(g.buckets["b1"].0["COSI_AZURE_STORAGE_ACCOUNT"], "acct");
        assert_eq!(g.credentials.0["COSI_AZURE_ACCESS_TOKEN"], "sv=token");
        assert_eq!(
            g.credentials.0["COSI_AZURE_EXPIRY_TIMESTAMP"],
            "2026-01-01T00:00:00Z"
        );
    }

    #[test]
    fn gcs_needs_a_key_pair_or_an_hmac_pair() {
        let mut reply = b1_grant(
            ProtocolBucketInfo {
                gcs: Some(GcsBucketInfo {
                    project_id: "p".into(),
                    bucket_name: "b".into(),
                }),
                ..Default::default()
            },
            Credentials {
                gcs: Some(GcsCredentials {
                    hmac_access_id: "id".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        assert!(grant(&reply, &["b1"], Protocol::Gcs, AuthenticationType::Key).is_err());
        if let Some(g) = reply.credentials.as_mut().and_then(|c| c.gcs.as_mut()) {
            g.hmac_secret = "s".into();
        }
        let g = grant(&reply, &["b1"], Protocol::Gcs, AuthenticationType::Key).unwrap();
        assert_eq!(g.credentials.0["HMAC_SECRET"], "s");
        assert_eq!(g.buckets["b1"].0["PROJECT_ID"], "p");
        assert_eq!(g.credentials.0["COSI_GCS_ACCESS_ID"], "id");
        assert_eq!(g.credentials.0["COSI_GCS_ACCESS_SECRET"], "s");
        assert_eq!(g.buckets["b1"].0["COSI_GCS_PROJECT_ID"], "p");
        assert_eq!(g.buckets["b1"].0["COSI_GCS_BUCKET_NAME"], "b");
        assert!(!g.credentials.0.contains_key("COSI_GCS_PRIVATE_KEY_NAME"));
    }

    #[test]
    fn secret_data_debug_shows_keys_only() {
        let g = s3_key_grant(&s3_grant(&["b1"]), &["b1"]).unwrap();
        let shown = format!("{g:?}");
        assert!(shown.contains("AWS_SECRET_ACCESS_KEY"));
        assert!(!shown.contains("verysecretkey"));
        assert!(!shown.contains("AKIDSECRETVALUE"));
    }
}
