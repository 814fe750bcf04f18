//! Generated `cosi.v1alpha2` messages, service traits, servers and clients,
//! plus small conveniences on the generated enums.

#![allow(
    missing_docs,
    clippy::doc_lazy_continuation,
    clippy::large_enum_variant
)]

tonic::include_proto!("cosi.v1alpha2");
include!(concat!(env!("OUT_DIR"), "/cosi.v1alpha2.redacted.rs"));

impl ObjectProtocol {
    /// The protocol's name in the Kubernetes API (`S3`, `Azure`, `GCS`), or
    /// `None` for an unspecified value.
    pub fn api_name(self) -> Option<&'static str> {
        match self {
            ObjectProtocol::S3 => Some("S3"),
            ObjectProtocol::Azure => Some("Azure"),
            ObjectProtocol::Gcs => Some("GCS"),
            ObjectProtocol::Unspecified => None,
        }
    }

    /// Parses a Kubernetes API protocol name.
    pub fn from_api_name(name: &str) -> Option<Self> {
        match name {
            "S3" => Some(ObjectProtocol::S3),
            "Azure" => Some(ObjectProtocol::Azure),
            "GCS" => Some(ObjectProtocol::Gcs),
            _ => None,
        }
    }
}

impl AuthenticationType {
    /// The type's name in the Kubernetes API (`Key`, `ServiceAccount`).
    pub fn api_name(self) -> Option<&'static str> {
        match self {
            AuthenticationType::Key => Some("Key"),
            AuthenticationType::ServiceAccount => Some("ServiceAccount"),
            AuthenticationType::Unspecified => None,
        }
    }
}

impl AccessMode {
    /// The mode's name in the Kubernetes API (`ReadWrite`, `ReadOnly`, `WriteOnly`).
    pub fn api_name(self) -> Option<&'static str> {
        match self {
            AccessMode::ReadWrite => Some("ReadWrite"),
            AccessMode::ReadOnly => Some("ReadOnly"),
            AccessMode::WriteOnly => Some("WriteOnly"),
            AccessMode::Unspecified => None,
        }
    }

    /// True when the mode allows reading.
    pub fn can_read(self) -> bool {
        matches!(self, AccessMode::ReadWrite | AccessMode::ReadOnly)
    }

    /// True when the mode allows writing.
    pub fn can_write(self) -> bool {
        matches!(self, AccessMode::ReadWrite | AccessMode::WriteOnly)
    }
}

impl AccessModes {
    /// `mode` for object data, the other categories unspecified.
    pub fn object_data_only(mode: AccessMode) -> Self {
        Self {
            object_data: mode as i32,
            ..Self::default()
        }
    }
}

impl AccessedBucket {
    /// The bucket `bucket_id` with `mode` access to its object data alone.
    pub fn object_data_only(bucket_id: &str, mode: AccessMode) -> Self {
        Self {
            bucket_id: bucket_id.to_owned(),
            access_mode: Some(AccessModes::object_data_only(mode)),
        }
    }
}

impl S3AddressingStyle {
    /// The style as written to `AWS_S3_ADDRESSING_STYLE` (`path`, `virtual`).
    pub fn env_value(self) -> Option<&'static str> {
        match self {
            S3AddressingStyle::Path => Some("path"),
            S3AddressingStyle::Virtual => Some("virtual"),
            S3AddressingStyle::Unspecified => None,
        }
    }
}

impl ProtocolBucketInfo {
    /// The protocols this info covers.
    pub fn protocols(&self) -> Vec<ObjectProtocol> {
        [
            ObjectProtocol::S3,
            ObjectProtocol::Azure,
            ObjectProtocol::Gcs,
        ]
        .into_iter()
        .filter(|&protocol| self.has(protocol))
        .collect()
    }

    /// True when info for `protocol` is present.
    pub fn has(&self, protocol: ObjectProtocol) -> bool {
        match protocol {
            ObjectProtocol::S3 => self.s3.is_some(),
            ObjectProtocol::Azure => self.azure.is_some(),
            ObjectProtocol::Gcs => self.gcs.is_some(),
            ObjectProtocol::Unspecified => false,
        }
    }
}
