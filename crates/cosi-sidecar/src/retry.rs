//! What a driver's gRPC status code means for the next attempt
//! (architecture decision 9): a refusal the driver will repeat until the
//! object changes, or a failure worth retrying with capped exponential backoff.

use tonic::Code;

/// What to do after a driver call failed with a given code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryPolicy {
    /// The driver refused the request as asked; asking again returns the same
    /// answer. Report `Provisioned=False`, `ProvisionFailed=True` and retry only
    /// when the object changes.
    Refused,
    /// A transient or unknown failure (including `NotFound` from
    /// DriverGetBucket): report `ProvisionFailed=True` and retry with backoff.
    Retry,
}

/// The policy for a gRPC status code. Only the codes the COSI driver
/// specification reserves for "the request itself is wrong" are refusals.
pub fn policy(code: Code) -> RetryPolicy {
    match code {
        Code::InvalidArgument
        | Code::AlreadyExists
        | Code::OutOfRange
        | Code::Unimplemented
        | Code::PermissionDenied
        | Code::Unauthenticated => RetryPolicy::Refused,
        _ => RetryPolicy::Retry,
    }
}

/// The code's name as the KEP's metrics and messages spell it: `OK`,
/// `InvalidArgument`, `NotFound`, ...
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Cancelled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_six_request_errors_are_refusals() {
        let refused = [
            Code::InvalidArgument,
            Code::AlreadyExists,
            Code::OutOfRange,
            Code::Unimplemented,
            Code::PermissionDenied,
            Code::Unauthenticated,
        ];
        for code in refused {
            assert_eq!(policy(code), RetryPolicy::Refused, "{code:?}");
        }
        for code in [
            Code::NotFound,
            Code::Unavailable,
            Code::DeadlineExceeded,
            Code::Internal,
            Code::Unknown,
            Code::ResourceExhausted,
            Code::FailedPrecondition,
            Code::Aborted,
            Code::Cancelled,
            Code::DataLoss,
        ] {
            assert_eq!(policy(code), RetryPolicy::Retry, "{code:?}");
        }
    }

    #[test]
    fn code_names_match_the_kep_metric_labels() {
        assert_eq!(code_name(Code::Ok), "OK");
        assert_eq!(code_name(Code::InvalidArgument), "InvalidArgument");
        assert_eq!(code_name(Code::DeadlineExceeded), "DeadlineExceeded");
    }
}
