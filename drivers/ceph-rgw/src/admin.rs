//! A client of RGW's Admin Ops API (`/<admin path>/user`, `/bucket`),
//! its requests signed with SigV4 as RGW expects of S3 requests.
//!
//! The request building (query encoding, signing) and the parsing of
//! RGW's answers are pure functions tested apart; [`AdminApi`] only sends.
//! Two things RGW (Pacific) is strict about: query strings must encode a
//! space as `%20` (RGW's canonical query differs from a `+`, and the
//! signature no longer matches), and quota limits travel as query
//! parameters (a JSON body answers 501).

use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use cosi_driver::tls::Caller;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;

use crate::config::{AdminKeys, Config, ConfigError};
use crate::errors::{BackendError, Transport};
use crate::params::Quota;

/// How long one Admin Ops call may take in all.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(90);

/// Characters a query component keeps unencoded: SigV4's unreserved set.
const QUERY_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Encodes query parameters the way SigV4 canonicalizes them (RFC 3986,
/// a space as `%20`, never `+`).
pub fn encode_query(params: &[(&str, &str)]) -> String {
    params
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, QUERY_COMPONENT),
                utf8_percent_encode(v, QUERY_COMPONENT)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Builds the signed request for `method` on `url` (which carries its
/// query), at `time`.
pub fn signed_request(
    method: &http::Method,
    url: &str,
    keys: &AdminKeys,
    region: &str,
    time: SystemTime,
) -> Result<http::Request<SdkBody>, String> {
    let mut request = http::Request::builder()
        .method(method.clone())
        .uri(url)
        .body(SdkBody::empty())
        .map_err(|e| format!("cannot build the request: {e}"))?;
    let identity = keys.credentials().into();
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| format!("cannot sign the request: {e}"))?
        .into();
    let signable = SignableRequest::new(
        method.as_str(),
        url,
        std::iter::empty(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| format!("cannot sign the request: {e}"))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| format!("cannot sign the request: {e}"))?
        .into_parts();
    instructions.apply_to_request_http1x(&mut request);
    Ok(request)
}

/// An S3 key pair of an RGW user. `Debug` shows neither part.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct S3Key {
    /// The access key ID.
    pub access_key: String,
    /// The secret key.
    pub secret_key: String,
}

impl std::fmt::Debug for S3Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("S3Key(<redacted>)")
    }
}

/// An RGW user, as Admin Ops reports it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct UserInfo {
    /// The user ID (without tenant).
    pub user_id: String,
    /// The tenant; empty for the default tenant.
    #[serde(default)]
    pub tenant: String,
    /// The display name.
    #[serde(default)]
    pub display_name: String,
    /// How many buckets the user may create: negative none, 0 any number.
    #[serde(default)]
    pub max_buckets: i64,
    /// The user's S3 keys.
    #[serde(default)]
    pub keys: Vec<S3Key>,
}

/// A bucket quota as RGW reports it (`max_size` in bytes; negative means
/// no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct BucketQuota {
    /// Whether RGW enforces the quota.
    #[serde(default)]
    pub enabled: bool,
    /// Most bytes; negative is no limit.
    #[serde(default)]
    pub max_size: i64,
    /// Most objects; negative is no limit.
    #[serde(default)]
    pub max_objects: i64,
}

impl BucketQuota {
    /// True when RGW enforces exactly the limits of `quota`.
    pub fn matches(&self, quota: &Quota) -> bool {
        let size = quota.max_size_kb.map(|kb| kb.saturating_mul(1024) as i64);
        let objects = quota.max_objects.map(|n| n as i64);
        let limit = |v: i64| (v >= 0).then_some(v);
        self.enabled && limit(self.max_size) == size && limit(self.max_objects) == objects
    }

    /// True when RGW enforces any limit.
    pub fn limits_anything(&self) -> bool {
        self.enabled && (self.max_size >= 0 || self.max_objects >= 0)
    }
}

/// A bucket, as Admin Ops reports it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct BucketInfo {
    /// The bucket name.
    pub bucket: String,
    /// The bucket's instance ID (needed to relink it).
    pub id: String,
    /// The owning user ID.
    pub owner: String,
    /// `placement[/storage class]`; no storage class means `STANDARD`.
    #[serde(default)]
    pub placement_rule: String,
    /// The bucket quota.
    #[serde(default)]
    pub bucket_quota: BucketQuota,
}

impl BucketInfo {
    /// The placement target.
    pub fn placement(&self) -> &str {
        self.placement_rule
            .split_once('/')
            .map_or(self.placement_rule.as_str(), |(p, _)| p)
    }

    /// The default storage class of the bucket's objects.
    pub fn storage_class(&self) -> &str {
        self.placement_rule
            .split_once('/')
            .map_or("STANDARD", |(_, c)| c)
    }
}

/// Parses an Admin Ops JSON answer.
pub fn parse<T: for<'de> Deserialize<'de>>(
    what: &'static str,
    body: &[u8],
) -> Result<T, BackendError> {
    serde_json::from_slice(body).map_err(|e| {
        BackendError::without_answer(
            what,
            "RGW's answer",
            Transport::BadResponse,
            &format!("cannot read the answer: {e}"),
        )
    })
}

/// The Admin Ops client. `Debug` does not show the keys.
#[derive(Clone, Debug)]
pub struct AdminApi {
    base: String,
    region: String,
    keys: AdminKeys,
    http: Caller,
}

/// `answer`, with RGW's "not found" as `None`.
fn found<T>(answer: Result<T, BackendError>) -> Result<Option<T>, BackendError> {
    match answer {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

fn user_target(uid: &str) -> String {
    format!("RGW user {uid:?}")
}

fn bucket_target(bucket: &str) -> String {
    format!("bucket {bucket:?}")
}

impl AdminApi {
    /// A client for the RGW of `cfg`, acting as `keys`. Sends nothing yet.
    pub fn new(cfg: &Config, keys: AdminKeys) -> Result<Self, ConfigError> {
        let connector =
            crate::tls::admin_connector(cfg.ca_pem.as_deref()).map_err(ConfigError::Invalid)?;
        Ok(Self {
            base: format!("{}/{}", cfg.endpoint.trim_end_matches('/'), cfg.admin_path),
            region: cfg.region.clone(),
            keys,
            http: Caller::new(connector, CALL_TIMEOUT),
        })
    }

    async fn call(
        &self,
        operation: &'static str,
        target: &str,
        method: http::Method,
        resource: &str,
        query: &[(&str, &str)],
    ) -> Result<Bytes, BackendError> {
        let url = format!("{}/{resource}?{}", self.base, encode_query(query));
        let request = signed_request(&method, &url, &self.keys, &self.region, SystemTime::now());
        let answer = self
            .http
            .call(request, operation, target, |answer| {
                crate::errors::from_admin_response(operation, target, answer.status, &answer.body)
            })
            .await?;
        Ok(answer.body)
    }

    /// Reads `resource`, parsed; `None` when RGW says there is none.
    async fn get<T: for<'de> Deserialize<'de>>(
        &self,
        op: &'static str,
        target: &str,
        resource: &str,
        query: &[(&str, &str)],
    ) -> Result<Option<T>, BackendError> {
        let body = found(
            self.call(op, target, http::Method::GET, resource, query)
                .await,
        )?;
        body.map(|body| parse(op, &body)).transpose()
    }

    /// The user holding `access_key` (the driver's own admin user).
    pub async fn user_by_access_key(&self, access_key: &str) -> Result<UserInfo, BackendError> {
        let op = "Admin Ops get user by access key";
        let query = [("access-key", access_key)];
        let target = "the admin user";
        parse(
            op,
            &self
                .call(op, target, http::Method::GET, "user", &query)
                .await?,
        )
    }

    /// Calls the `user` resource of Admin Ops about `uid`.
    async fn user_call(
        &self,
        operation: &'static str,
        uid: &str,
        method: http::Method,
        query: &[(&str, &str)],
    ) -> Result<Bytes, BackendError> {
        self.call(operation, &user_target(uid), method, "user", query)
            .await
    }

    /// The user `uid`; `None` when there is none.
    pub async fn user(&self, uid: &str) -> Result<Option<UserInfo>, BackendError> {
        let target = user_target(uid);
        self.get("Admin Ops get user", &target, "user", &[("uid", uid)])
            .await
    }

    /// Creates the user `uid` with one generated S3 key. RGW answers
    /// `UserAlreadyExists` when it exists.
    pub async fn create_user(
        &self,
        uid: &str,
        display_name: &str,
        max_buckets: i64,
    ) -> Result<UserInfo, BackendError> {
        let max = max_buckets.to_string();
        let query = [
            ("uid", uid),
            ("display-name", display_name),
            ("max-buckets", &max),
        ];
        self.put_generating_key("Admin Ops create user", uid, &query)
            .await
    }

    /// Sets how many buckets `uid` may create (negative: none).
    pub async fn set_max_buckets(&self, uid: &str, max_buckets: i64) -> Result<(), BackendError> {
        let max = max_buckets.to_string();
        let query = [("uid", uid), ("max-buckets", &max)];
        self.user_call("Admin Ops modify user", uid, http::Method::POST, &query)
            .await
            .map(drop)
    }

    /// Generates a new S3 key for `uid`; returns all of the user's keys.
    pub async fn create_key(&self, uid: &str) -> Result<Vec<S3Key>, BackendError> {
        let query = [("key", ""), ("uid", uid)];
        self.put_generating_key("Admin Ops create key", uid, &query)
            .await
    }

    /// PUTs `query` to the `user` resource about `uid`, asking RGW to
    /// generate an S3 key, and parses the answer.
    async fn put_generating_key<T: for<'de> Deserialize<'de>>(
        &self,
        operation: &'static str,
        uid: &str,
        query: &[(&str, &str)],
    ) -> Result<T, BackendError> {
        let generate = [("key-type", "s3"), ("generate-key", "true")];
        let query: Vec<(&str, &str)> = query.iter().copied().chain(generate).collect();
        let body = self
            .user_call(operation, uid, http::Method::PUT, &query)
            .await?;
        parse(operation, &body)
    }

    /// Deletes the user `uid` (not the buckets it owns: RGW refuses while
    /// it owns any). `false` when there was no such user.
    pub async fn delete_user(&self, uid: &str) -> Result<bool, BackendError> {
        let query = [("uid", uid), ("purge-data", "false")];
        let removed = self
            .user_call("Admin Ops remove user", uid, http::Method::DELETE, &query)
            .await;
        Ok(found(removed)?.is_some())
    }

    /// The bucket `bucket`; `None` when there is none.
    pub async fn bucket(&self, bucket: &str) -> Result<Option<BucketInfo>, BackendError> {
        let target = bucket_target(bucket);
        let query = [("bucket", bucket)];
        self.get("Admin Ops get bucket info", &target, "bucket", &query)
            .await
    }

    /// Sets the quota of `bucket` (owned by `owner`); a quota that limits
    /// nothing disables it.
    pub async fn set_bucket_quota(
        &self,
        owner: &str,
        bucket: &str,
        quota: &Quota,
    ) -> Result<(), BackendError> {
        // A limit left out is stored as 0, which refuses every write: both
        // are always sent, -1 meaning none.
        let objects = quota.max_objects.map_or("-1".to_owned(), |n| n.to_string());
        let size = quota.max_size_kb.map_or("-1".to_owned(), |n| n.to_string());
        let enabled = if quota.is_set() { "true" } else { "false" };
        let query = [
            ("quota", ""),
            ("uid", owner),
            ("bucket", bucket),
            ("max-objects", &objects),
            ("max-size-kb", &size),
            ("enabled", enabled),
        ];
        self.bucket_put("Admin Ops set bucket quota", bucket, &query)
            .await
    }

    /// Makes `uid` the owner of `bucket` (instance `bucket_id`).
    pub async fn link_bucket(
        &self,
        bucket: &str,
        bucket_id: &str,
        uid: &str,
    ) -> Result<(), BackendError> {
        let query = [("bucket", bucket), ("bucket-id", bucket_id), ("uid", uid)];
        self.bucket_put("Admin Ops link bucket", bucket, &query)
            .await
    }

    /// Puts to the `bucket` resource of Admin Ops about `bucket`.
    async fn bucket_put(
        &self,
        operation: &'static str,
        bucket: &str,
        query: &[(&str, &str)],
    ) -> Result<(), BackendError> {
        let target = bucket_target(bucket);
        self.call(operation, &target, http::Method::PUT, "bucket", query)
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> AdminKeys {
        AdminKeys {
            access_key_id: "ABCDEFGHIJ0123456789".into(),
            secret_access_key: "secretsecretsecretsecretsecretsecret0000".into(),
        }
    }

    #[test]
    fn spaces_are_encoded_as_percent_20_never_plus() {
        assert_eq!(
            encode_query(&[("display-name", "COSI access ba-1"), ("quota", "")]),
            "display-name=COSI%20access%20ba-1&quota="
        );
        assert_eq!(
            encode_query(&[("uid", "a+b/c~d_e.f")]),
            "uid=a%2Bb%2Fc~d_e.f"
        );
    }

    #[test]
    fn requests_are_signed_like_s3_requests() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let url = "http://127.0.0.1:8080/admin/user?uid=ba-1&display-name=COSI%20access";
        let r = signed_request(&http::Method::PUT, url, &keys(), "us-east-1", t).unwrap();
        let auth = r.headers()["authorization"].to_str().unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=ABCDEFGHIJ0123456789/20231114/us-east-1/s3/aws4_request"),
            "{auth}"
        );
        assert!(
            auth.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date"),
            "{auth}"
        );
        assert_eq!(
            r.headers()["x-amz-content-sha256"],
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(r.uri().to_string(), url, "the URL is sent as it was signed");
        let again = signed_request(&http::Method::PUT, url, &keys(), "us-east-1", t).unwrap();
        assert_eq!(
            again.headers()["authorization"],
            r.headers()["authorization"]
        );
        let other = signed_request(&http::Method::GET, url, &keys(), "us-east-1", t).unwrap();
        assert_ne!(
            other.headers()["authorization"],
            r.headers()["authorization"]
        );
    }

    #[test]
    fn user_answers_are_read_and_keys_stay_out_of_debug() {
        let body = br#"{"tenant":"","user_id":"ba-1","display_name":"COSI","email":"","suspended":0,
            "max_buckets":-1,"subusers":[],"keys":[{"user":"ba-1","access_key":"W301G6ILBXKKUXRJA1KR",
            "secret_key":"yz44t8Uckih0lz4aCZaGlxKSCYTWmzpGOiAC5YUn"}],"caps":[]}"#;
        let user: UserInfo = parse("test", body).unwrap();
        assert_eq!(user.user_id, "ba-1");
        assert_eq!(user.max_buckets, -1);
        assert_eq!(user.keys[0].access_key, "W301G6ILBXKKUXRJA1KR");
        let debug = format!("{user:?}");
        assert!(
            !debug.contains("W301G6") && !debug.contains("yz44t8"),
            "{debug}"
        );
        let e = parse::<UserInfo>("Admin Ops get user", b"<html>").unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable);
    }

    #[test]
    fn bucket_answers_give_owner_placement_and_quota() {
        let body = br#"{"bucket":"bkt1","num_shards":11,"tenant":"","placement_rule":"default-placement",
            "id":"5605.4120.1","marker":"5605.4120.1","owner":"cosi-admin",
            "bucket_quota":{"enabled":true,"check_on_raw":false,"max_size":-1024,"max_size_kb":0,"max_objects":3}}"#;
        let b: BucketInfo = parse("test", body).unwrap();
        assert_eq!(
            (b.owner.as_str(), b.id.as_str()),
            ("cosi-admin", "5605.4120.1")
        );
        assert_eq!(
            (b.placement(), b.storage_class()),
            ("default-placement", "STANDARD")
        );
        assert!(b.bucket_quota.matches(&Quota {
            max_size_kb: None,
            max_objects: Some(3)
        }));
        assert!(!b.bucket_quota.matches(&Quota {
            max_size_kb: Some(4),
            max_objects: Some(3)
        }));
        assert!(b.bucket_quota.limits_anything());
        let cold = BucketInfo {
            placement_rule: "fast/COLD".into(),
            ..b
        };
        assert_eq!((cold.placement(), cold.storage_class()), ("fast", "COLD"));
    }

    #[test]
    fn quotas_compare_in_bytes_as_rgw_stores_them() {
        let stored = BucketQuota {
            enabled: true,
            max_size: 4096,
            max_objects: -1,
        };
        assert!(stored.matches(&Quota {
            max_size_kb: Some(4),
            max_objects: None
        }));
        let disabled = BucketQuota {
            enabled: false,
            max_size: 0,
            max_objects: -1,
        };
        assert!(!disabled.limits_anything());
        assert!(!disabled.matches(&Quota {
            max_size_kb: Some(4),
            max_objects: None
        }));
    }
}
