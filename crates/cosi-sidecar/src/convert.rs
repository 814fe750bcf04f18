//! Conversions between the Kubernetes API types and the driver's protobuf
//! enums. Pure and total: an unknown protobuf value maps to `None`.

use cosi_api::{AuthenticationType, BucketAccessMode, BucketAccessModes, Protocol};
use cosi_driver::proto;

/// The protobuf value of an API protocol.
pub fn protocol_to_proto(p: Protocol) -> proto::ObjectProtocol {
    match p {
        Protocol::S3 => proto::ObjectProtocol::S3,
        Protocol::Azure => proto::ObjectProtocol::Azure,
        Protocol::Gcs => proto::ObjectProtocol::Gcs,
    }
}

/// The API protocol of a protobuf value (`None` for unspecified or unknown values).
pub fn protocol_from_proto(value: i32) -> Option<Protocol> {
    match proto::ObjectProtocol::try_from(value).ok()? {
        proto::ObjectProtocol::S3 => Some(Protocol::S3),
        proto::ObjectProtocol::Azure => Some(Protocol::Azure),
        proto::ObjectProtocol::Gcs => Some(Protocol::Gcs),
        proto::ObjectProtocol::Unspecified => None,
    }
}

/// The protobuf values of a list of API protocols.
pub fn protocols_to_proto(protocols: &[Protocol]) -> Vec<i32> {
    protocols
        .iter()
        .map(|p| protocol_to_proto(*p) as i32)
        .collect()
}

/// The protobuf value of an authentication type.
pub fn auth_to_proto(a: AuthenticationType) -> proto::AuthenticationType {
    match a {
        AuthenticationType::Key => proto::AuthenticationType::Key,
        AuthenticationType::ServiceAccount => proto::AuthenticationType::ServiceAccount,
    }
}

fn mode_to_proto(m: Option<BucketAccessMode>) -> i32 {
    (match m {
        None => proto::AccessMode::Unspecified,
        Some(BucketAccessMode::ReadWrite) => proto::AccessMode::ReadWrite,
        Some(BucketAccessMode::ReadOnly) => proto::AccessMode::ReadOnly,
        Some(BucketAccessMode::WriteOnly) => proto::AccessMode::WriteOnly,
    }) as i32
}

/// The protobuf form of the access modes requested for one bucket.
pub fn access_modes_to_proto(m: &BucketAccessModes) -> proto::AccessModes {
    proto::AccessModes {
        object_data: mode_to_proto(m.object_data),
        object_metadata: mode_to_proto(m.object_metadata),
        bucket_metadata: mode_to_proto(m.bucket_metadata),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_round_trip_and_unspecified_is_none() {
        for p in Protocol::ALL {
            assert_eq!(protocol_from_proto(protocol_to_proto(p) as i32), Some(p));
        }
        assert_eq!(protocol_from_proto(0), None);
        assert_eq!(protocol_from_proto(99), None);
    }

    #[test]
    fn unrequested_modes_stay_unspecified() {
        let m = access_modes_to_proto(&BucketAccessModes {
            object_data: Some(BucketAccessMode::ReadOnly),
            ..Default::default()
        });
        assert_eq!(m.object_data, proto::AccessMode::ReadOnly as i32);
        assert_eq!(m.object_metadata, proto::AccessMode::Unspecified as i32);
        assert_eq!(m.bucket_metadata, proto::AccessMode::Unspecified as i32);
    }
}
