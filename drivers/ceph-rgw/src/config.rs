//! The driver's configuration (which RGW, how workloads reach it) and the
//! admin credentials, read from the environment or from a mounted Secret.
//! Keys never appear in `Debug` output, logs or error messages.

use std::fmt;
use std::path::Path;

use cosi_driver::validate::FlagProblems;
pub use cosi_driver_s3_common::addressing::AddressingStyle;

/// The driver name used when none is configured.
pub const DEFAULT_DRIVER_NAME: &str = "ceph-rgw.cosi-rs.dev";
/// The region requests are signed for and written into bucket info; RGW
/// accepts any region name in signatures.
pub const DEFAULT_REGION: &str = "us-east-1";
/// RGW's default `rgw admin entry`.
pub const DEFAULT_ADMIN_PATH: &str = "admin";
/// RGW's default `rgw max put param size` (1 MiB): the largest bucket
/// policy it accepts.
pub const RGW_MAX_POLICY_SIZE: usize = 1 << 20;

/// Environment variable holding the admin access key ID.
pub const ADMIN_ACCESS_KEY_ENV: &str = "RGW_ADMIN_ACCESS_KEY_ID";
/// Environment variable holding the admin secret key.
pub const ADMIN_SECRET_KEY_ENV: &str = "RGW_ADMIN_SECRET_ACCESS_KEY";
/// File names of the access key ID in a mounted Secret, in the order they
/// are tried: Rook's `rgw-admin-ops-user` Secret, a CephObjectStoreUser's
/// Secret, and the names of this driver's environment variables.
pub const ACCESS_KEY_FILES: [&str; 3] = ["accessKey", "AccessKey", ADMIN_ACCESS_KEY_ENV];
/// File names of the secret key in a mounted Secret, matching
/// [`ACCESS_KEY_FILES`] one for one.
pub const SECRET_KEY_FILES: [&str; 3] = ["secretKey", "SecretKey", ADMIN_SECRET_KEY_ENV];

/// Everything the driver needs to know besides the admin credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The name returned by DriverGetInfo.
    pub driver_name: String,
    /// RGW's URL as the driver reaches it (S3 and Admin Ops).
    pub endpoint: String,
    /// RGW's URL written into bucket info for workloads; `None` means
    /// [`Config::endpoint`].
    pub public_endpoint: Option<String>,
    /// The path of the Admin Ops API (`rgw admin entry`).
    pub admin_path: String,
    /// The region requests are signed for and workloads are told.
    pub region: String,
    /// How workloads address buckets.
    pub addressing_style: AddressingStyle,
    /// PEM CA certificates trusted in addition to the system's roots.
    pub ca_pem: Option<String>,
    /// Largest bucket policy the driver writes, in bytes.
    pub max_policy_size: usize,
}

impl Config {
    /// A configuration for the RGW at `endpoint` with every default.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            driver_name: DEFAULT_DRIVER_NAME.into(),
            endpoint: endpoint.into(),
            public_endpoint: None,
            admin_path: DEFAULT_ADMIN_PATH.into(),
            region: DEFAULT_REGION.into(),
            addressing_style: AddressingStyle::Path,
            ca_pem: None,
            max_policy_size: RGW_MAX_POLICY_SIZE,
        }
    }

    /// Checks every field, reporting all problems at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = FlagProblems::default();
        problems.check_driver_name(&self.driver_name);
        problems.check_endpoints(
            ("--rgw-endpoint", &self.endpoint),
            ("--public-endpoint", self.public_endpoint.as_deref()),
        );
        let path_ok = !self.admin_path.is_empty()
            && self
                .admin_path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !path_ok {
            problems.push(format!(
                "--admin-path: {:?} must be the `rgw admin entry` of RGW, a single path segment such as admin",
                self.admin_path
            ));
        }
        let region_ok = !self.region.is_empty()
            && self.region.len() <= 64
            && self
                .region
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
        if !region_ok {
            problems.push(format!(
                "--region: {:?} is not a region name (letters, digits, '-' and '_')",
                self.region
            ));
        }
        problems.check_ca_file(self.ca_pem.as_deref());
        if self.max_policy_size < 1024 {
            problems.push("--max-bucket-policy-size: must be at least 1024 bytes");
        }
        problems.finish().map_err(ConfigError::Invalid)
    }

    /// The endpoint written into bucket info.
    pub fn client_endpoint(&self) -> String {
        self.public_endpoint
            .as_deref()
            .unwrap_or(&self.endpoint)
            .trim_end_matches('/')
            .to_owned()
    }
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A value is malformed or missing; the message names the setting.
    #[error("{0}")]
    Invalid(String),
}

/// The keys of the RGW user the driver acts as. `Debug` shows neither.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminKeys {
    /// The access key ID.
    pub access_key_id: String,
    /// The secret key.
    pub secret_access_key: String,
}

impl fmt::Debug for AdminKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminKeys")
            .field("access_key_id", &"<redacted>")
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

impl AdminKeys {
    /// The keys as AWS SDK credentials.
    pub fn credentials(&self) -> aws_credential_types::Credentials {
        aws_credential_types::Credentials::new(
            &self.access_key_id,
            &self.secret_access_key,
            None,
            None,
            "rgw-admin",
        )
    }

    /// The last four characters of the access key ID, enough to tell keys
    /// apart in a log.
    pub fn key_hint(&self) -> String {
        let id = &self.access_key_id;
        id.chars()
            .skip(id.chars().count().saturating_sub(4))
            .collect()
    }

    /// Reads the keys from `dir` (a mounted Secret) when given, else from
    /// the environment as `env` reports it. Exactly one source must hold
    /// them.
    pub fn load(
        dir: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<AdminKeys, ConfigError> {
        let from_env = (env(ADMIN_ACCESS_KEY_ENV), env(ADMIN_SECRET_KEY_ENV));
        match (dir, from_env) {
            (Some(_), (Some(_), _) | (_, Some(_))) => Err(ConfigError::Invalid(format!(
                "admin credentials are given twice, in --admin-credentials-dir and in {ADMIN_ACCESS_KEY_ENV}/\
                 {ADMIN_SECRET_KEY_ENV}: keep one"
            ))),
            (Some(dir), _) => Self::from_dir(dir),
            (None, (Some(id), Some(secret))) => Self::checked(id, secret, "the environment"),
            (None, (Some(_), None) | (None, Some(_))) => Err(ConfigError::Invalid(format!(
                "set both {ADMIN_ACCESS_KEY_ENV} and {ADMIN_SECRET_KEY_ENV}, or neither and \
                 --admin-credentials-dir"
            ))),
            (None, (None, None)) => Err(ConfigError::Invalid(format!(
                "no admin credentials: set {ADMIN_ACCESS_KEY_ENV} and {ADMIN_SECRET_KEY_ENV}, or mount a Secret \
                 holding accessKey and secretKey (or AccessKey and SecretKey) and name its directory with \
                 --admin-credentials-dir"
            ))),
        }
    }

    fn from_dir(dir: &Path) -> Result<AdminKeys, ConfigError> {
        for (id_file, secret_file) in ACCESS_KEY_FILES.iter().zip(SECRET_KEY_FILES) {
            let id_path = dir.join(id_file);
            if !id_path.exists() {
                continue;
            }
            let read = |p: &Path| {
                std::fs::read_to_string(p).map_err(|e| {
                    ConfigError::Invalid(format!(
                        "--admin-credentials-dir: cannot read {}: {e}",
                        p.display()
                    ))
                })
            };
            let id = read(&id_path)?;
            let secret = read(&dir.join(secret_file))?;
            return Self::checked(id, secret, &format!("{}", dir.display()));
        }
        Err(ConfigError::Invalid(format!(
            "--admin-credentials-dir: {} holds none of the files {}",
            dir.display(),
            ACCESS_KEY_FILES.join(", ")
        )))
    }

    fn checked(id: String, secret: String, source: &str) -> Result<AdminKeys, ConfigError> {
        let (id, secret) = (id.trim().to_owned(), secret.trim().to_owned());
        let printable = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_graphic());
        if !printable(&id) || !printable(&secret) {
            return Err(ConfigError::Invalid(format!(
                "the admin credentials from {source} are empty or hold characters no key has"
            )));
        }
        Ok(AdminKeys {
            access_key_id: id,
            secret_access_key: secret,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::assert_mentions_all;
    use cosi_driver::testing::env_of as env;

    #[test]
    fn a_configuration_with_an_endpoint_is_valid() {
        Config::new("http://127.0.0.1:8080").validate().unwrap();
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let cfg = Config {
            driver_name: "-bad".into(),
            public_endpoint: Some("ftp://x".into()),
            admin_path: "a/b".into(),
            region: "".into(),
            max_policy_size: 10,
            ..Config::new("rgw:8080")
        };
        let ConfigError::Invalid(msg) = cfg.validate().unwrap_err();
        assert_mentions_all(
            &msg,
            &[
                "--driver-name",
                "--rgw-endpoint",
                "--public-endpoint",
                "--admin-path",
                "--region",
                "--max-bucket-policy-size",
            ],
        );
    }

    #[test]
    fn workloads_get_the_public_endpoint() {
        let mut cfg = Config::new("http://rook-ceph-rgw-store.rook-ceph.svc/");
        assert_eq!(
            cfg.client_endpoint(),
            "http://rook-ceph-rgw-store.rook-ceph.svc"
        );
        cfg.public_endpoint = Some("https://s3.example.com".into());
        assert_eq!(cfg.client_endpoint(), "https://s3.example.com");
    }

    #[test]
    fn keys_come_from_the_environment() {
        let keys = AdminKeys::load(
            None,
            env(&[
                (ADMIN_ACCESS_KEY_ENV, "ABCDEFGHIJ0123456789"),
                (ADMIN_SECRET_KEY_ENV, "s3cr3t\n"),
            ]),
        )
        .unwrap();
        assert_eq!(keys.secret_access_key, "s3cr3t");
        assert_eq!(keys.key_hint(), "6789");
        let debug = format!("{keys:?}");
        assert!(
            !debug.contains("ABCDEF") && !debug.contains("s3cr3t"),
            "{debug}"
        );
    }

    #[test]
    fn keys_come_from_a_mounted_rook_secret() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AccessKey"), "ID0123456789ABCDEFGH").unwrap();
        std::fs::write(dir.path().join("SecretKey"), "secret").unwrap();
        let keys = AdminKeys::load(Some(dir.path()), env(&[])).unwrap();
        assert_eq!(keys.access_key_id, "ID0123456789ABCDEFGH");
        std::fs::write(dir.path().join("accessKey"), "OTHER").unwrap();
        std::fs::write(dir.path().join("secretKey"), "other").unwrap();
        assert_eq!(
            AdminKeys::load(Some(dir.path()), env(&[]))
                .unwrap()
                .access_key_id,
            "OTHER",
            "Rook's admin ops Secret names come first"
        );
    }

    #[test]
    fn missing_half_or_doubled_credentials_are_refused_without_showing_them() {
        let half = AdminKeys::load(None, env(&[(ADMIN_ACCESS_KEY_ENV, "ID0123456789ABCDEFGH")]))
            .unwrap_err();
        assert!(half.to_string().contains(ADMIN_SECRET_KEY_ENV), "{half}");
        assert!(!half.to_string().contains("ID0123"), "{half}");
        assert!(AdminKeys::load(None, env(&[])).is_err());
        let dir = tempfile::tempdir().unwrap();
        let twice = AdminKeys::load(
            Some(dir.path()),
            env(&[(ADMIN_ACCESS_KEY_ENV, "x"), (ADMIN_SECRET_KEY_ENV, "y")]),
        )
        .unwrap_err();
        assert!(twice.to_string().contains("twice"), "{twice}");
        let empty = AdminKeys::load(Some(dir.path()), env(&[])).unwrap_err();
        assert!(empty.to_string().contains("holds none"), "{empty}");
    }
}
