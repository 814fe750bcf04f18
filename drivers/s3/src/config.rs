//! The driver's configuration: which backend it talks to, how clients reach
//! buckets, and the driver's name. Credentials are not part of it: the admin
//! credentials come from the standard AWS credential chain.

use cosi_driver::validate::FlagProblems;
pub use cosi_driver_s3_common::addressing::AddressingStyle;

/// The driver name used when none is configured.
pub const DEFAULT_DRIVER_NAME: &str = "s3.cosi-rs.dev";
/// The region used when neither the flag nor the AWS configuration names one.
pub const DEFAULT_REGION: &str = "us-east-1";
/// The IAM path of the users the driver creates, unless configured otherwise.
pub const DEFAULT_USER_PATH: &str = "/cosi/";
/// AWS's limit on the inline policies of one IAM user, in characters.
pub const AWS_INLINE_POLICY_LIMIT: usize = 2048;

/// Everything the driver needs to know besides the admin credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The name returned by DriverGetInfo.
    pub driver_name: String,
    /// The S3 endpoint the driver calls; `None` means AWS's regional endpoint.
    pub s3_endpoint: Option<String>,
    /// The S3 endpoint written into bucket info for workloads; `None` means
    /// the same as `s3_endpoint` (or AWS's regional endpoint).
    pub public_s3_endpoint: Option<String>,
    /// The IAM endpoint; `None` means AWS's IAM endpoint.
    pub iam_endpoint: Option<String>,
    /// The region the driver signs requests for and creates buckets in.
    pub region: String,
    /// How workloads (and the driver) address buckets; `None` picks `path`
    /// when an S3 endpoint is configured and `virtual` for AWS.
    pub addressing_style: Option<AddressingStyle>,
    /// PEM CA certificates trusted in addition to the system's roots.
    pub ca_pem: Option<String>,
    /// The ARN partition in IAM policies (`aws`, `aws-cn`, `aws-us-gov`).
    pub arn_partition: String,
    /// The IAM path of the users the driver creates.
    pub user_path: String,
    /// Largest inline policy the driver writes, in characters (0: no limit).
    pub max_inline_policy_size: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            driver_name: DEFAULT_DRIVER_NAME.into(),
            s3_endpoint: None,
            public_s3_endpoint: None,
            iam_endpoint: None,
            region: DEFAULT_REGION.into(),
            addressing_style: None,
            ca_pem: None,
            arn_partition: "aws".into(),
            user_path: DEFAULT_USER_PATH.into(),
            max_inline_policy_size: AWS_INLINE_POLICY_LIMIT,
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A value is malformed; the message names the flag and the fix.
    #[error("{0}")]
    Invalid(String),
}

impl Config {
    /// Checks every field, reporting all problems at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = FlagProblems::default();
        problems.check_driver_name(&self.driver_name);
        for (flag, value) in [
            ("--s3-endpoint", &self.s3_endpoint),
            ("--public-s3-endpoint", &self.public_s3_endpoint),
            ("--iam-endpoint", &self.iam_endpoint),
        ] {
            problems.check_some(flag, value.as_deref(), cosi_driver::validate::http_url);
        }
        if !valid_region(&self.region) {
            problems.push(format!(
                "--region: {:?} is not a region name (lowercase letters, digits and '-', e.g. us-east-1)",
                self.region
            ));
        }
        if !matches!(
            self.arn_partition.as_str(),
            "aws" | "aws-cn" | "aws-us-gov" | "aws-iso" | "aws-iso-b"
        ) {
            problems.push(format!(
                "--arn-partition: {:?} is not an AWS partition (aws, aws-cn, aws-us-gov, aws-iso, aws-iso-b)",
                self.arn_partition
            ));
        }
        problems.check_ca_file(self.ca_pem.as_deref());
        problems.check("--iam-user-path", check_user_path(&self.user_path));
        problems.finish().map_err(ConfigError::Invalid)
    }

    /// The addressing style after defaults.
    pub fn effective_addressing_style(&self) -> AddressingStyle {
        match (self.addressing_style, &self.s3_endpoint) {
            (Some(style), _) => style,
            (None, Some(_)) => AddressingStyle::Path,
            (None, None) => AddressingStyle::Virtual,
        }
    }

    /// The endpoint written into bucket info for a bucket in `region`.
    pub fn client_endpoint(&self, region: &str) -> String {
        if let Some(url) = self
            .public_s3_endpoint
            .as_ref()
            .or(self.s3_endpoint.as_ref())
        {
            return url.trim_end_matches('/').to_owned();
        }
        let suffix = if region.starts_with("cn-") {
            "amazonaws.com.cn"
        } else {
            "amazonaws.com"
        };
        format!("https://s3.{region}.{suffix}")
    }
}

fn valid_region(region: &str) -> bool {
    !region.is_empty()
        && region.len() <= 64
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn check_user_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') || !path.ends_with('/') {
        return Err(format!("{path:?} must begin and end with '/', e.g. /cosi/"));
    }
    if path.len() > 512 || !path.chars().all(|c| ('!'..='~').contains(&c)) {
        return Err(format!(
            "{path:?} must be at most 512 printable ASCII characters"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::assert_mentions_all;

    #[test]
    fn the_default_configuration_is_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let cfg = Config {
            driver_name: "-bad".into(),
            s3_endpoint: Some("ftp://x".into()),
            region: "US_EAST".into(),
            user_path: "cosi".into(),
            ..Config::default()
        };
        let ConfigError::Invalid(msg) = cfg.validate().unwrap_err();
        assert_mentions_all(
            &msg,
            &[
                "--driver-name",
                "--s3-endpoint",
                "--region",
                "--iam-user-path",
            ],
        );
    }

    #[test]
    fn addressing_defaults_to_path_for_custom_endpoints_and_virtual_for_aws() {
        let aws = Config::default();
        assert_eq!(aws.effective_addressing_style(), AddressingStyle::Virtual);
        let custom = Config {
            s3_endpoint: Some("http://127.0.0.1:9000".into()),
            ..Config::default()
        };
        assert_eq!(custom.effective_addressing_style(), AddressingStyle::Path);
        let forced = Config {
            addressing_style: Some(AddressingStyle::Virtual),
            ..custom
        };
        assert_eq!(
            forced.effective_addressing_style(),
            AddressingStyle::Virtual
        );
    }

    #[test]
    fn client_endpoint_prefers_the_public_endpoint() {
        let mut cfg = Config::default();
        assert_eq!(
            cfg.client_endpoint("eu-west-1"),
            "https://s3.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            cfg.client_endpoint("cn-north-1"),
            "https://s3.cn-north-1.amazonaws.com.cn"
        );
        cfg.s3_endpoint = Some("http://rgw.internal:8080/".into());
        assert_eq!(cfg.client_endpoint("x"), "http://rgw.internal:8080");
        cfg.public_s3_endpoint = Some("https://s3.example.com".into());
        assert_eq!(cfg.client_endpoint("x"), "https://s3.example.com");
    }

    #[test]
    fn addressing_styles_parse_and_print() {
        assert_eq!(
            "path".parse::<AddressingStyle>().unwrap(),
            AddressingStyle::Path
        );
        assert_eq!(
            "virtual".parse::<AddressingStyle>().unwrap().to_string(),
            "virtual"
        );
        assert!("Path".parse::<AddressingStyle>().is_err());
    }
}
