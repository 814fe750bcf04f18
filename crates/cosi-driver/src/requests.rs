//! Checks of a COSI request that a driver serving one protocol with Key
//! authentication only makes: the protocols asked for and the
//! authentication type. Each returns the message of an `InvalidArgument`
//! refusal; why a driver cannot serve ServiceAccount identities is the
//! driver's to say.

use crate::proto::{AuthenticationType, ObjectProtocol};

/// Refuses any protocol other than `served`.
pub fn check_protocols(protocols: &[i32], served: ObjectProtocol) -> Result<(), String> {
    for p in protocols {
        let p = ObjectProtocol::try_from(*p).unwrap_or(ObjectProtocol::Unspecified);
        if p != served {
            return Err(format!(
                "this driver serves only the {} protocol; {} was requested",
                served.api_name().unwrap_or("an unknown"),
                p.api_name().unwrap_or("an unknown protocol")
            ));
        }
    }
    Ok(())
}

/// Refuses an access other than `served` with Key authentication;
/// `service_accounts_refused` says why ServiceAccount authentication is
/// not supported and what to use instead.
pub fn check_key_access(
    protocol: i32,
    served: ObjectProtocol,
    authentication_type: i32,
    service_accounts_refused: &str,
) -> Result<(), String> {
    check_protocols(&[protocol], served)?;
    match AuthenticationType::try_from(authentication_type) {
        Ok(AuthenticationType::Key) => Ok(()),
        Ok(AuthenticationType::ServiceAccount) => Err(format!(
            "ServiceAccount authentication is not supported by this driver: {service_accounts_refused}"
        )),
        _ => Err("authentication_type is required".into()),
    }
}
