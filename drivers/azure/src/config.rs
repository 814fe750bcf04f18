//! The driver's configuration (which storage account, where its Blob
//! service is, how workloads reach it) and the account's shared key, read
//! from the environment or from a mounted Secret. The key never appears
//! in `Debug` output, logs or error messages.

use std::fmt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use cosi_driver::validate::FlagProblems;

/// The driver name used when none is configured.
pub const DEFAULT_DRIVER_NAME: &str = "azure.cosi-rs.dev";
/// Environment variable holding the account key (base64, as the portal
/// shows it).
pub const ACCOUNT_KEY_ENV: &str = "AZURE_STORAGE_KEY";
/// The Blob service version of the driver's REST calls.
pub const API_VERSION: &str = "2021-12-02";

/// Everything the driver needs to know besides the account key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The name returned by DriverGetInfo.
    pub driver_name: String,
    /// The storage account's name.
    pub account: String,
    /// The Blob service URL as the driver reaches it, e.g.
    /// `https://<account>.blob.core.windows.net` or, for Azurite,
    /// `http://127.0.0.1:10000/devstoreaccount1`.
    pub blob_endpoint: String,
    /// The Blob service URL workloads are given in their SAS URL; `None`
    /// means [`Config::blob_endpoint`].
    pub public_blob_endpoint: Option<String>,
    /// PEM CA certificates trusted in addition to the system's roots.
    pub ca_pem: Option<String>,
}

impl Config {
    /// A configuration for `account` at `blob_endpoint`, with every default.
    pub fn new(account: impl Into<String>, blob_endpoint: impl Into<String>) -> Self {
        Self {
            driver_name: DEFAULT_DRIVER_NAME.into(),
            account: account.into(),
            blob_endpoint: blob_endpoint.into(),
            public_blob_endpoint: None,
            ca_pem: None,
        }
    }

    /// The public Azure endpoint of `account`.
    pub fn azure_endpoint(account: &str) -> String {
        format!("https://{account}.blob.core.windows.net")
    }

    /// Checks every field, reporting all problems at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = FlagProblems::default();
        problems.check_driver_name(&self.driver_name);
        let account_ok = (3..=24).contains(&self.account.len())
            && self
                .account
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if !account_ok {
            problems.push(format!(
                "--account-name: {:?} is not a storage account name (3-24 lowercase letters and digits)",
                self.account
            ));
        }
        problems.check_endpoints(
            ("--blob-endpoint", &self.blob_endpoint),
            (
                "--public-blob-endpoint",
                self.public_blob_endpoint.as_deref(),
            ),
        );
        problems.check_ca_file(self.ca_pem.as_deref());
        problems.finish().map_err(ConfigError::Invalid)
    }

    /// The Blob service URL the driver sends its calls to (no trailing `/`).
    pub fn endpoint(&self) -> &str {
        self.blob_endpoint.trim_end_matches('/')
    }

    /// The Blob service URL written into SAS URLs (no trailing `/`).
    pub fn client_endpoint(&self) -> &str {
        self.public_blob_endpoint
            .as_deref()
            .unwrap_or(&self.blob_endpoint)
            .trim_end_matches('/')
    }

    /// The container's URL as workloads reach it.
    pub fn container_url(&self, container: &str) -> String {
        format!("{}/{container}", self.client_endpoint())
    }

    /// `Some("https")` when workloads reach the service over HTTPS: tokens
    /// are then refused over plain HTTP.
    pub fn sas_protocol(&self) -> Option<&'static str> {
        self.client_endpoint()
            .starts_with("https://")
            .then_some("https")
    }
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A value is malformed or missing; the message names the setting.
    #[error("{0}")]
    Invalid(String),
}

/// The storage account's shared key, decoded. `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct AccountKey(Vec<u8>);

impl fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccountKey(<redacted>)")
    }
}

impl AccountKey {
    /// Decodes a base64 key as Azure shows it.
    pub fn from_base64(text: &str, source: &str) -> Result<AccountKey, ConfigError> {
        let bytes = BASE64.decode(text.trim()).map_err(|_| {
            ConfigError::Invalid(format!(
                "the account key from {source} is not base64 (copy key1 or key2 of the storage account as shown)"
            ))
        })?;
        if bytes.len() < 16 {
            return Err(ConfigError::Invalid(format!(
                "the account key from {source} is too short to be a storage account key"
            )));
        }
        Ok(AccountKey(bytes))
    }

    /// The decoded key bytes (what HMACs are computed with).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// Reads the key from `file` (a mounted Secret's file) when given, else
    /// from [`ACCOUNT_KEY_ENV`] as `env` reports it. Exactly one source
    /// must hold it.
    pub fn load(
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<AccountKey, ConfigError> {
        match (file, env(ACCOUNT_KEY_ENV)) {
            (Some(_), Some(_)) => Err(ConfigError::Invalid(format!(
                "the account key is given twice, in --account-key-file and in {ACCOUNT_KEY_ENV}: keep one"
            ))),
            (Some(path), None) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ConfigError::Invalid(format!(
                        "--account-key-file: cannot read {}: {e}",
                        path.display()
                    ))
                })?;
                Self::from_base64(&text, &path.display().to_string())
            }
            (None, Some(text)) => Self::from_base64(&text, ACCOUNT_KEY_ENV),
            (None, None) => Err(ConfigError::Invalid(format!(
                "no account key: set {ACCOUNT_KEY_ENV}, or mount a Secret holding it and name the file with \
                 --account-key-file"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::assert_mentions_all;
    use cosi_driver::testing::env_of as env;

    const KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    #[test]
    fn a_configuration_for_azurite_is_valid_and_every_problem_is_reported() {
        Config::new(
            "devstoreaccount1",
            "http://127.0.0.1:10000/devstoreaccount1",
        )
        .validate()
        .unwrap();
        let cfg = Config {
            driver_name: "-bad".into(),
            public_blob_endpoint: Some("ftp://x".into()),
            ca_pem: Some("nope".into()),
            ..Config::new("Bad_Account", "blob.example.com")
        };
        let ConfigError::Invalid(msg) = cfg.validate().unwrap_err();
        assert_mentions_all(
            &msg,
            &[
                "--driver-name",
                "--account-name",
                "--blob-endpoint",
                "--public-blob-endpoint",
                "--ca-file",
            ],
        );
    }

    #[test]
    fn workloads_get_the_public_endpoint_and_https_only_tokens_on_https() {
        let mut cfg = Config::new("acct", "http://azurite:10000/acct/");
        assert_eq!(cfg.container_url("bc-1"), "http://azurite:10000/acct/bc-1");
        assert_eq!(cfg.sas_protocol(), None);
        cfg.public_blob_endpoint = Some(Config::azure_endpoint("acct"));
        assert_eq!(
            cfg.container_url("bc-1"),
            "https://acct.blob.core.windows.net/bc-1"
        );
        assert_eq!(cfg.sas_protocol(), Some("https"));
        assert_eq!(cfg.endpoint(), "http://azurite:10000/acct");
    }

    #[test]
    fn the_key_comes_from_the_environment_or_a_file_and_never_shows() {
        let key = AccountKey::load(None, env(&[(ACCOUNT_KEY_ENV, KEY)])).unwrap();
        assert_eq!(key.bytes().len(), 64);
        assert_eq!(format!("{key:?}"), "AccountKey(<redacted>)");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        std::fs::write(&file, format!("{KEY}\n")).unwrap();
        assert_eq!(AccountKey::load(Some(&file), env(&[])).unwrap(), key);
        let twice = AccountKey::load(Some(&file), env(&[(ACCOUNT_KEY_ENV, KEY)])).unwrap_err();
        assert!(twice.to_string().contains("twice"), "{twice}");
        let none = AccountKey::load(None, env(&[])).unwrap_err();
        assert!(none.to_string().contains(ACCOUNT_KEY_ENV), "{none}");
        let bad = AccountKey::load(None, env(&[(ACCOUNT_KEY_ENV, "not base64!")])).unwrap_err();
        assert!(!bad.to_string().contains("not base64!"), "{bad}");
    }
}
