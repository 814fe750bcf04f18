//! What a run needs to know about the driver under test: its endpoint, the
//! class parameters it accepts (and, optionally, sets it must refuse), the
//! protocol to exercise, and which optional parts to run.
//!
//! Parameter files are YAML or JSON. Either a flat map of the parameters to
//! use:
//!
//! ```yaml
//! tier: standard
//! ```
//!
//! or a map with up to three sets, where the last two enable the cases that
//! need them:
//!
//! ```yaml
//! parameters: {tier: standard}        # used for every creation/grant
//! incompatibleParameters: {tier: gold} # a repeat with these must be AlreadyExists
//! invalidParameters: {tier: "???"}     # these must be InvalidArgument
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cosi_driver::Endpoint;
use cosi_driver::proto::ObjectProtocol;
use serde_json::Value;

/// Which driver API the suite checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Api {
    /// The API the driver answers DriverGetInfo on: v1alpha2, else v1alpha1.
    #[default]
    Auto,
    /// The v1alpha2 driver API (`cosi.v1alpha2`).
    V1alpha2,
    /// The v1alpha1 driver API (`cosi.v1alpha1`) of drivers shipped before v1alpha2.
    V1alpha1,
    /// Upstream's v1alpha2 driver API (`sigs.k8s.io.cosi.v1alpha2`, the Go
    /// implementation's at [`cosi_driver::upstream::PINNED_COMMIT`]).
    Upstream,
}

/// An opaque parameter map, as copied from a BucketClass or BucketAccessClass.
pub type Parameters = BTreeMap<String, String>;

/// Why a configuration input was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A parameter file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A parameter file is not valid YAML or JSON.
    #[error("{path} is not valid YAML or JSON: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A parameter file parsed but does not have the expected shape.
    #[error("{path}: {message}")]
    Shape {
        /// The file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The protocol name is not one of the COSI protocols.
    #[error("unknown protocol {0:?}: use S3, Azure or GCS")]
    Protocol(String),
}

/// The parameter sets read from one parameter file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParameterFile {
    /// Parameters every creation (or grant) uses; the driver must accept them.
    pub parameters: Parameters,
    /// Parameters a repeat of a creation (or grant) with [`Self::parameters`]
    /// must refuse with `AlreadyExists`.
    pub incompatible: Option<Parameters>,
    /// Parameters the driver must refuse with `InvalidArgument`.
    pub invalid: Option<Parameters>,
}

const KEY_PARAMETERS: &str = "parameters";
const KEY_INCOMPATIBLE: &str = "incompatibleParameters";
const KEY_INVALID: &str = "invalidParameters";

impl ParameterFile {
    /// Reads and parses a YAML or JSON parameter file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|e| match e {
            ParseError::Syntax(message) => ConfigError::Syntax {
                path: path.to_owned(),
                message,
            },
            ParseError::Shape(message) => ConfigError::Shape {
                path: path.to_owned(),
                message,
            },
        })
    }

    /// Parses the text of a parameter file (YAML; JSON is accepted as YAML).
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_saphyr::from_str(text).map_err(|e| ParseError::Syntax(e.to_string()))?
        };
        let top = match value {
            Value::Null => return Ok(Self::default()),
            Value::Object(map) => map,
            other => {
                return Err(ParseError::Shape(format!(
                    "expected a map of parameters, found {}",
                    kind(&other)
                )));
            }
        };
        let structured = top.values().any(Value::is_object);
        if !structured {
            return Ok(Self {
                parameters: string_map("the top level", &Value::Object(top))?,
                ..Self::default()
            });
        }
        let mut file = Self::default();
        for (key, value) in &top {
            match key.as_str() {
                KEY_PARAMETERS => file.parameters = string_map(key, value)?,
                KEY_INCOMPATIBLE => file.incompatible = Some(string_map(key, value)?),
                KEY_INVALID => file.invalid = Some(string_map(key, value)?),
                other => {
                    return Err(ParseError::Shape(format!(
                        "unknown key {other:?}: a file with nested maps may only hold \
                         {KEY_PARAMETERS}, {KEY_INCOMPATIBLE} and {KEY_INVALID}"
                    )));
                }
            }
        }
        Ok(file)
    }
}

/// Why the text of a parameter file was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    /// Not YAML or JSON.
    #[error("{0}")]
    Syntax(String),
    /// Parsed, but not a map of string parameters.
    #[error("{0}")]
    Shape(String),
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing (null)",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

fn string_map(what: &str, value: &Value) -> Result<Parameters, ParseError> {
    let Value::Object(map) = value else {
        return Err(ParseError::Shape(format!(
            "{what} must be a map of strings, found {}",
            kind(value)
        )));
    };
    map.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                other => {
                    return Err(ParseError::Shape(format!(
                        "{what}: the value of {k:?} must be a string, found {}",
                        kind(other)
                    )));
                }
            };
            Ok((k.clone(), v))
        })
        .collect()
}

/// Parses a protocol name as written in the Kubernetes API (`S3`, `Azure`,
/// `GCS`; any case).
pub fn parse_protocol(name: &str) -> Result<ObjectProtocol, ConfigError> {
    match name.trim().to_ascii_lowercase().as_str() {
        "s3" => Ok(ObjectProtocol::S3),
        "azure" => Ok(ObjectProtocol::Azure),
        "gcs" => Ok(ObjectProtocol::Gcs),
        _ => Err(ConfigError::Protocol(name.to_owned())),
    }
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The driver's endpoint (`unix:///path.sock`).
    pub endpoint: Endpoint,
    /// The driver API to check.
    pub api: Api,
    /// The parameter sets of the buckets the suite creates (a
    /// BucketClass's); an absent incompatible or invalid set skips the
    /// cases that need it.
    pub bucket: ParameterFile,
    /// The parameter sets of the accesses the suite grants (a
    /// BucketAccessClass's); an absent incompatible or invalid set skips
    /// the cases that need it.
    pub access: ParameterFile,
    /// The protocol to exercise; `None` picks S3 when the driver supports it,
    /// else its first advertised protocol.
    pub protocol: Option<ObjectProtocol>,
    /// Run the data-plane cases (S3 and Azure): use the granted credentials
    /// against the object store.
    pub data_plane: bool,
    /// A regular expression; only cases whose name matches it run.
    pub filter: Option<String>,
    /// How long one driver call may take before the case fails.
    pub rpc_timeout: Duration,
    /// How long the object store may take to honour a grant or a revocation
    /// (eventually consistent backends such as AWS IAM need seconds).
    pub propagation_timeout: Duration,
    /// Count deviations that common gRPC stacks share (warnings) as failures.
    pub strict: bool,
}

impl Config {
    /// A configuration with no parameters, no optional parts and default timeouts.
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            api: Api::Auto,
            bucket: ParameterFile::default(),
            access: ParameterFile::default(),
            protocol: None,
            data_plane: false,
            filter: None,
            rpc_timeout: Duration::from_secs(30),
            propagation_timeout: Duration::from_secs(30),
            strict: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> Parameters {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_flat_yaml_map_is_the_parameter_set() {
        let file = ParameterFile::parse("tier: standard\nreplicas: 3\nversioned: true\n").unwrap();
        assert_eq!(
            file.parameters,
            map(&[
                ("tier", "standard"),
                ("replicas", "3"),
                ("versioned", "true")
            ])
        );
        assert_eq!(file.incompatible, None);
        assert_eq!(file.invalid, None);
    }

    #[test]
    fn json_is_accepted() {
        let file = ParameterFile::parse(r#"{"tier": "standard"}"#).unwrap();
        assert_eq!(file.parameters, map(&[("tier", "standard")]));
    }

    #[test]
    fn nested_maps_give_the_three_sets() {
        let file = ParameterFile::parse(
            "parameters: {tier: standard}\nincompatibleParameters: {tier: gold}\ninvalidParameters:\n  tier: \"???\"\n",
        )
        .unwrap();
        assert_eq!(file.parameters, map(&[("tier", "standard")]));
        assert_eq!(file.incompatible, Some(map(&[("tier", "gold")])));
        assert_eq!(file.invalid, Some(map(&[("tier", "???")])));
    }

    #[test]
    fn an_empty_file_is_no_parameters() {
        assert_eq!(
            ParameterFile::parse("  \n").unwrap(),
            ParameterFile::default()
        );
    }

    #[test]
    fn unknown_keys_beside_nested_maps_are_refused() {
        let err = ParameterFile::parse("parameters: {a: b}\nextra: {c: d}\n").unwrap_err();
        assert!(err.to_string().contains("unknown key \"extra\""), "{err}");
    }

    #[test]
    fn lists_and_nulls_are_refused_as_values() {
        let err = ParameterFile::parse("a: [1, 2]\n").unwrap_err();
        assert!(matches!(err, ParseError::Shape(_)), "{err}");
        let err = ParameterFile::parse("a: null\n").unwrap_err();
        assert!(err.to_string().contains("must be a string"), "{err}");
        let err = ParameterFile::parse("- a\n- b\n").unwrap_err();
        assert!(err.to_string().contains("expected a map"), "{err}");
    }

    #[test]
    fn broken_syntax_is_a_syntax_error() {
        assert!(matches!(
            ParameterFile::parse("a: [unclosed\n"),
            Err(ParseError::Syntax(_))
        ));
    }

    #[test]
    fn protocols_parse_in_any_case() {
        assert_eq!(parse_protocol("S3").unwrap(), ObjectProtocol::S3);
        assert_eq!(parse_protocol("azure").unwrap(), ObjectProtocol::Azure);
        assert_eq!(parse_protocol("GCS").unwrap(), ObjectProtocol::Gcs);
        assert!(parse_protocol("nfs").is_err());
    }

    #[test]
    fn loading_a_missing_file_names_it() {
        let err = ParameterFile::load(Path::new("/nonexistent/params.yaml")).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/params.yaml"),
            "{err}"
        );
    }
}
