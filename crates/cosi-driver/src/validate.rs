//! Checks of requests and replies against `proto/cosi.proto`: required
//! fields, name and ID forms, and the COSI size limits (128-byte strings,
//! 4 KiB maps). Failures are `InvalidArgument` with a message naming the
//! field and what to fix; no message ever quotes a parameter value.

use std::collections::{BTreeSet, HashMap};

use tonic::Status;

use crate::proto::*;

/// Default size limit of a string field, in bytes.
pub const MAX_STRING_BYTES: usize = 128;
/// Size limit of a `map<string, string>` field (keys and values), in bytes.
pub const MAX_MAP_BYTES: usize = 4096;
/// Size limit of a driver name.
pub const MAX_DRIVER_NAME: usize = 63;
/// Size limit of an endpoint URL in bucket info.
pub const MAX_ENDPOINT_BYTES: usize = 2048;

/// Checks a configured endpoint URL: `http://` or `https://`, a host
/// without whitespace or user info, no query or fragment, at most
/// [`MAX_ENDPOINT_BYTES`]. The message names the URL and what is wrong.
pub fn endpoint_url(url: &str) -> Result<(), String> {
    scheme_and_host(url)?;
    if url.contains(['?', '#']) {
        return Err(format!("{url:?} must not carry a query or fragment"));
    }
    endpoint_length(url)
}

/// Checks a configured HTTP URL like [`endpoint_url`] but lets it carry a
/// query or fragment.
pub fn http_url(url: &str) -> Result<(), String> {
    scheme_and_host(url)?;
    endpoint_length(url)
}

/// `http://` or `https://` and a host without whitespace or user info.
fn scheme_and_host(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("{url:?} must start with http:// or https://"))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.contains(char::is_whitespace) || host.contains('@') {
        return Err(format!(
            "{url:?} has no valid host (and must not carry user info)"
        ));
    }
    Ok(())
}

/// At most [`MAX_ENDPOINT_BYTES`].
fn endpoint_length(url: &str) -> Result<(), String> {
    if url.len() > MAX_ENDPOINT_BYTES {
        return Err(format!(
            "the URL is longer than {} bytes",
            MAX_ENDPOINT_BYTES
        ));
    }
    Ok(())
}

/// The problems of a driver's flags, collected so that all are reported
/// at once, each led by the flag it is about.
#[derive(Debug, Default)]
pub struct FlagProblems(Vec<String>);

impl FlagProblems {
    /// Notes `problem`, which names its flag itself.
    pub fn push(&mut self, problem: impl Into<String>) {
        self.0.push(problem.into());
    }

    /// Notes the error of `checked`, if any, as `<flag>: <error>`.
    pub fn check<T>(&mut self, flag: &str, checked: Result<T, String>) {
        if let Err(e) = checked {
            self.0.push(format!("{flag}: {e}"));
        }
    }

    /// Checks `value` with `check` when there is a value, noting an error
    /// like [`FlagProblems::check`].
    pub fn check_some<T>(
        &mut self,
        flag: &str,
        value: Option<&str>,
        check: impl FnOnce(&str) -> Result<T, String>,
    ) {
        if let Some(value) = value {
            self.check(flag, check(value));
        }
    }

    /// Checks `--driver-name` with [`driver_name`].
    pub fn check_driver_name(&mut self, name: &str) {
        self.check("--driver-name", driver_name(name));
    }

    /// Checks, with [`endpoint_url`], the flag of the endpoint the driver
    /// calls and the flag of the endpoint workloads are given when set;
    /// each pair is the flag and its value.
    pub fn check_endpoints(&mut self, endpoint: (&str, &str), public: (&str, Option<&str>)) {
        self.check(endpoint.0, endpoint_url(endpoint.1));
        self.check_some(public.0, public.1, endpoint_url);
    }

    /// `Ok` when nothing was noted, else every problem joined by `; `.
    pub fn finish(self) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.0.join("; "))
        }
    }
}

/// A request the SDK checks before handing it to a driver.
pub trait Validate {
    /// `Ok` when every required field is present and well-formed.
    fn validate(&self) -> Result<(), Status>;
}

/// Checks a driver name: domain-name notation, at most 63 characters,
/// alphanumeric at both ends with `-`, `.` and alphanumerics between.
pub fn driver_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("driver name is empty".into());
    }
    if name.len() > MAX_DRIVER_NAME {
        return Err(format!(
            "driver name {name:?} is {} characters; the limit is {MAX_DRIVER_NAME}",
            name.len()
        ));
    }
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    if !alnum(&bytes[0]) || !alnum(&bytes[bytes.len() - 1]) {
        return Err(format!(
            "driver name {name:?} must begin and end with a letter or digit"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '.'))
    {
        return Err(format!(
            "driver name {name:?} contains {c:?}; only letters, digits, '-' and '.' are allowed"
        ));
    }
    Ok(())
}

/// Checks a DriverGetInfo reply: a valid name and at least one known protocol.
pub fn driver_info(info: &DriverGetInfoResponse) -> Result<(), String> {
    driver_name(&info.name)?;
    if info.supported_protocols.is_empty() {
        return Err(format!(
            "driver {:?} advertises no supported protocols; at least one is required",
            info.name
        ));
    }
    for p in &info.supported_protocols {
        match ObjectProtocol::try_from(*p) {
            Ok(ObjectProtocol::Unspecified) | Err(_) => {
                return Err(format!(
                    "driver {:?} advertises an unknown protocol value {p}",
                    info.name
                ));
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

fn invalid(msg: String) -> Status {
    Status::invalid_argument(msg)
}

fn shown(value: &str) -> String {
    let short: String = value.chars().take(64).collect();
    if short.len() < value.len() {
        format!("{short:?}...")
    } else {
        format!("{short:?}")
    }
}

/// A required, printable identifier without whitespace (IDs returned by drivers).
pub fn identifier(field: &str, value: &str) -> Result<(), Status> {
    identifier_within(field, value, MAX_STRING_BYTES)
}

/// [`identifier`] with another size limit, for IDs of the v1alpha1 driver
/// API, which sets none (Azure's driver returns base64-encoded JSON).
pub fn identifier_within(field: &str, value: &str, max_bytes: usize) -> Result<(), Status> {
    if value.is_empty() {
        return Err(invalid(format!("{field} is required")));
    }
    if value.len() > max_bytes {
        return Err(invalid(format!(
            "{field} is {} bytes; the limit is {max_bytes}",
            value.len()
        )));
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(format!(
            "{field} {} contains whitespace or control characters",
            shown(value)
        )));
    }
    Ok(())
}

/// A required Kubernetes-style object name: lowercase letters, digits, `-`
/// and `.`, alphanumeric at both ends, at most 128 bytes.
pub fn object_name(field: &str, value: &str) -> Result<(), Status> {
    identifier(field, value)?;
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let alnum_end =
        |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !value.chars().all(ok_char)
        || !alnum_end(value.chars().next())
        || !alnum_end(value.chars().last())
    {
        return Err(invalid(format!(
            "{field} {} must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
            shown(value)
        )));
    }
    Ok(())
}

/// An opaque parameter map within the 4 KiB limit.
pub fn parameters(field: &str, map: &HashMap<String, String>) -> Result<(), Status> {
    let size: usize = map.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_MAP_BYTES {
        return Err(invalid(format!(
            "{field} hold {size} bytes of keys and values; the limit is {MAX_MAP_BYTES}"
        )));
    }
    if map.keys().any(|k| k.is_empty()) {
        return Err(invalid(format!("{field} contain an empty key")));
    }
    Ok(())
}

fn known_protocol(field: &str, value: i32) -> Result<ObjectProtocol, Status> {
    match ObjectProtocol::try_from(value) {
        Ok(ObjectProtocol::Unspecified) => Err(invalid(format!("{field} is required"))),
        Ok(p) => Ok(p),
        Err(_) => Err(invalid(format!("{field} has unknown value {value}"))),
    }
}

/// An optional list of known, distinct protocols.
pub fn protocols(field: &str, values: &[i32]) -> Result<(), Status> {
    let mut seen = BTreeSet::new();
    for v in values {
        let p = known_protocol(field, *v)?;
        if !seen.insert(p) {
            return Err(invalid(format!("{field} lists {} twice", p.as_str_name())));
        }
    }
    Ok(())
}

fn known_mode(field: &str, value: i32) -> Result<AccessMode, Status> {
    AccessMode::try_from(value).map_err(|_| invalid(format!("{field} has unknown value {value}")))
}

fn authentication(auth: i32, sa: Option<&ServiceAccount>) -> Result<AuthenticationType, Status> {
    let auth = match AuthenticationType::try_from(auth) {
        Ok(AuthenticationType::Unspecified) => {
            return Err(invalid("authentication_type is required".into()));
        }
        Ok(a) => a,
        Err(_) => {
            return Err(invalid(format!(
                "authentication_type has unknown value {auth}"
            )));
        }
    };
    let sa_set = sa.is_some_and(|sa| !sa.name.is_empty() || !sa.namespace.is_empty());
    match auth {
        AuthenticationType::ServiceAccount => {
            let sa = sa.ok_or_else(|| {
                invalid("service_account is required for SERVICE_ACCOUNT authentication".into())
            })?;
            object_name("service_account.namespace", &sa.namespace)?;
            object_name("service_account.name", &sa.name)?;
        }
        _ if sa_set => {
            return Err(invalid(
                "service_account must be unset unless authentication_type is SERVICE_ACCOUNT"
                    .into(),
            ));
        }
        _ => {}
    }
    Ok(auth)
}

fn accessed_buckets(buckets: &[AccessedBucket]) -> Result<(), Status> {
    if buckets.is_empty() {
        return Err(invalid("buckets must list at least one bucket".into()));
    }
    let mut seen = BTreeSet::new();
    for (i, b) in buckets.iter().enumerate() {
        identifier(&format!("buckets[{i}].bucket_id"), &b.bucket_id)?;
        if !seen.insert(b.bucket_id.as_str()) {
            return Err(invalid(format!(
                "buckets lists bucket_id {} twice",
                shown(&b.bucket_id)
            )));
        }
        let modes = b
            .access_mode
            .as_ref()
            .ok_or_else(|| invalid(format!("buckets[{i}].access_mode is required")))?;
        let requested = [
            known_mode(
                &format!("buckets[{i}].access_mode.object_data"),
                modes.object_data,
            )?,
            known_mode(
                &format!("buckets[{i}].access_mode.object_metadata"),
                modes.object_metadata,
            )?,
            known_mode(
                &format!("buckets[{i}].access_mode.bucket_metadata"),
                modes.bucket_metadata,
            )?,
        ];
        if requested.iter().all(|m| *m == AccessMode::Unspecified) {
            return Err(invalid(format!(
                "buckets[{i}].access_mode requests no access; set at least one of object_data, object_metadata, bucket_metadata"
            )));
        }
    }
    Ok(())
}

/// Checks the access fields that DriverGenerateBucketAccessId and
/// DriverGrantBucketAccess requests name alike: buckets, protocol,
/// authentication and parameters.
macro_rules! access_fields {
    ($request:expr) => {{
        let request = $request;
        accessed_buckets(&request.buckets)?;
        known_protocol("protocol", request.protocol)?;
        authentication(
            request.authentication_type,
            request.service_account.as_ref(),
        )?;
        parameters("parameters", &request.parameters)
    }};
}

impl Validate for DriverGenerateBucketIdRequest {
    fn validate(&self) -> Result<(), Status> {
        object_name("name", &self.name)?;
        protocols("protocols", &self.protocols)?;
        parameters("parameters", &self.parameters)
    }
}

/// Implements [`Validate`] for requests that name a bucket by ID, with
/// protocols and parameters.
macro_rules! bucket_id_requests {
    ($($request:ty),*) => {$(
        impl Validate for $request {
            fn validate(&self) -> Result<(), Status> {
                identifier("bucket_id", &self.bucket_id)?;
                protocols("protocols", &self.protocols)?;
                parameters("parameters", &self.parameters)
            }
        }
    )*};
}

bucket_id_requests!(DriverCreateBucketRequest, DriverGetBucketRequest);

impl Validate for DriverDeleteBucketRequest {
    fn validate(&self) -> Result<(), Status> {
        identifier("bucket_id", &self.bucket_id)?;
        parameters("parameters", &self.parameters)
    }
}

impl Validate for DriverGenerateBucketAccessIdRequest {
    fn validate(&self) -> Result<(), Status> {
        object_name("account_name", &self.account_name)?;
        access_fields!(self)
    }
}

impl Validate for DriverGrantBucketAccessRequest {
    fn validate(&self) -> Result<(), Status> {
        identifier("account_id", &self.account_id)?;
        access_fields!(self)
    }
}

impl Validate for DriverRevokeBucketAccessRequest {
    fn validate(&self) -> Result<(), Status> {
        identifier("account_id", &self.account_id)?;
        if self.buckets.is_empty() {
            return Err(invalid("buckets must list at least one bucket".into()));
        }
        for (i, b) in self.buckets.iter().enumerate() {
            identifier(&format!("buckets[{i}].bucket_id"), &b.bucket_id)?;
        }
        known_protocol("protocol", self.protocol)?;
        authentication(self.authentication_type, self.service_account.as_ref())?;
        parameters("parameters", &self.parameters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_urls_are_endpoint_urls_that_may_carry_a_query() {
        let long = format!("http://h/{}", "a".repeat(MAX_ENDPOINT_BYTES));
        // (URL, accepted by http_url, accepted by endpoint_url)
        let table = [
            ("http://127.0.0.1:9000/?x=1#y", true, false),
            ("https://s3.example.net/path", true, true),
            ("ftp://host", false, false),
            ("http://user@host", false, false),
            (long.as_str(), false, false),
        ];
        for (url, http, endpoint) in table {
            let got = (http_url(url).is_ok(), endpoint_url(url).is_ok());
            assert_eq!(got, (http, endpoint), "{url}");
        }
    }

    #[test]
    fn flag_problems_are_reported_at_once_each_led_by_its_flag() {
        assert_eq!(FlagProblems::default().finish(), Ok(()));
        let mut problems = FlagProblems::default();
        problems.check_driver_name("");
        problems.check_endpoints(("--endpoint", "ftp://x"), ("--public-endpoint", None));
        problems.check_some("--other", Some("x"), |_| Err::<(), _>("bad".to_owned()));
        problems.check_some("--unset", None, |_| Err::<(), _>("bad".to_owned()));
        problems.push("--max: too small");
        assert_eq!(
            problems.finish().unwrap_err(),
            "--driver-name: driver name is empty; --endpoint: \"ftp://x\" must start with http:// \
             or https://; --other: bad; --max: too small"
        );
    }

    #[test]
    fn endpoint_urls_need_a_scheme_and_a_plain_host_and_nothing_after_the_path() {
        assert!(endpoint_url("http://127.0.0.1:9000").is_ok());
        assert!(endpoint_url("https://blob.example.net/account").is_ok());
        for bad in [
            "127.0.0.1:9000",
            "ftp://host",
            "http://",
            "http://user@host",
            "http://ho st",
            "http://host/?a=b",
            "http://host/#f",
        ] {
            assert!(endpoint_url(bad).is_err(), "{bad}");
        }
        let long = format!("http://host/{}", "a".repeat(MAX_ENDPOINT_BYTES));
        assert!(endpoint_url(&long).is_err());
    }

    fn rw() -> AccessModes {
        AccessModes {
            object_data: AccessMode::ReadWrite as i32,
            ..Default::default()
        }
    }

    fn grant() -> DriverGrantBucketAccessRequest {
        DriverGrantBucketAccessRequest {
            account_id: "ba-123".into(),
            buckets: vec![AccessedBucket {
                bucket_id: "bc-1".into(),
                access_mode: Some(rw()),
            }],
            protocol: ObjectProtocol::S3 as i32,
            authentication_type: AuthenticationType::Key as i32,
            service_account: None,
            parameters: HashMap::new(),
        }
    }

    fn message(r: Result<(), Status>) -> String {
        let s = r.expect_err("must be refused");
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        s.message().to_owned()
    }

    #[test]
    fn driver_names_follow_domain_notation() {
        assert!(driver_name("local.cosi-rs.dev").is_ok());
        assert!(driver_name("a").is_ok());
        assert!(driver_name("").is_err());
        assert!(driver_name("-bad.example").is_err());
        assert!(driver_name("bad.example.").is_err());
        assert!(driver_name("has space.example").is_err());
        assert!(
            driver_name(&"a".repeat(64))
                .unwrap_err()
                .contains("limit is 63")
        );
    }

    #[test]
    fn driver_info_needs_a_protocol() {
        let mut info = DriverGetInfoResponse {
            name: "x.example.com".into(),
            supported_protocols: vec![],
        };
        assert!(
            driver_info(&info)
                .unwrap_err()
                .contains("no supported protocols")
        );
        info.supported_protocols = vec![0];
        assert!(driver_info(&info).is_err());
        info.supported_protocols = vec![ObjectProtocol::S3 as i32];
        assert!(driver_info(&info).is_ok());
    }

    #[test]
    fn a_well_formed_grant_passes() {
        grant().validate().unwrap();
    }

    #[test]
    fn missing_fields_are_named() {
        let mut g = grant();
        g.account_id.clear();
        assert_eq!(message(g.validate()), "account_id is required");
        let mut g = grant();
        g.buckets.clear();
        assert!(message(g.validate()).contains("at least one bucket"));
        let mut g = grant();
        g.protocol = 0;
        assert_eq!(message(g.validate()), "protocol is required");
        let mut g = grant();
        g.buckets[0].access_mode = Some(AccessModes::default());
        assert!(message(g.validate()).contains("requests no access"));
        let mut g = grant();
        g.authentication_type = AuthenticationType::ServiceAccount as i32;
        assert!(message(g.validate()).contains("service_account is required"));
        let mut g = grant();
        g.service_account = Some(ServiceAccount {
            namespace: "ns".into(),
            name: "sa".into(),
        });
        assert!(message(g.validate()).contains("must be unset"));
    }

    #[test]
    fn size_limits_are_enforced_without_quoting_values() {
        let mut g = grant();
        g.parameters.insert("k".into(), "v".repeat(5000));
        let msg = message(g.validate());
        assert!(msg.contains("limit is 4096"), "{msg}");
        assert!(!msg.contains("vvvv"));
        let req = DriverCreateBucketRequest {
            bucket_id: "b".repeat(129),
            ..Default::default()
        };
        assert!(message(req.validate()).contains("limit is 128"));
    }

    #[test]
    fn names_use_the_kubernetes_charset() {
        let ok = DriverGenerateBucketIdRequest {
            name: "bc-0f9a".into(),
            ..Default::default()
        };
        ok.validate().unwrap();
        let bad = DriverGenerateBucketIdRequest {
            name: "BC_1".into(),
            ..Default::default()
        };
        assert!(message(bad.validate()).contains("lowercase"));
    }

    #[test]
    fn duplicate_buckets_and_protocols_are_refused() {
        let mut g = grant();
        g.buckets.push(g.buckets[0].clone());
        assert!(message(g.validate()).contains("twice"));
        let req = DriverCreateBucketRequest {
            bucket_id: "b".into(),
            protocols: vec![1, 1],
            ..Default::default()
        };
        assert!(message(req.validate()).contains("twice"));
    }
}
