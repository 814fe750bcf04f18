//! Checks every S3 request passes before its signature is even looked at,
//! as an AWS region opened since 2014 checks them:
//!
//! - Only Signature Version 4 (`AWS4-HMAC-SHA256`) is accepted. A SigV2
//!   signature covers a `Date` (or, presigned, an `Expires`) that nothing
//!   bounds, so a request captured on the plain-HTTP endpoint would replay
//!   until its key is revoked; SigV4 binds every request to a 15-minute
//!   window and every presigned URL to at most a week. SigV2 requests get
//!   AWS's answer, 400 `InvalidRequest`.
//! - A presigned URL may live at most a week (`X-Amz-Expires` ≤ 604800),
//!   else 400 `AuthorizationQueryParametersError`.
//!
//! The checks are pure ([`check`]); [`Gated`] applies them in front of the
//! S3 service, so a refused request costs no key lookup.

use http::HeaderMap;
use s3s::service::S3Service;
use s3s::{HttpError, HttpRequest, HttpResponse, S3Error, S3ErrorCode};

/// The longest lifetime of a presigned URL, in seconds (a week, as S3).
pub const MAX_PRESIGNED_EXPIRES_SECS: u64 = 604_800;

/// AWS's message to SigV2 requests in SigV4-only regions.
const SIGV4_ONLY: &str =
    "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.";

fn query_error(message: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::AuthorizationQueryParametersError,
        message.to_owned(),
    )
}

/// Refuses requests signed other than with SigV4 and presigned URLs that
/// would outlive a week. Query parameter names are decoded as the S3
/// service decodes them, so an encoded name cannot slip past.
pub fn check(headers: &HeaderMap, query: Option<&str>) -> Result<(), S3Error> {
    let sigv2 = || S3Error::with_message(S3ErrorCode::InvalidRequest, SIGV4_ONLY);
    for value in headers.get_all(http::header::AUTHORIZATION) {
        if !value.as_bytes().starts_with(b"AWS4-HMAC-SHA256 ") {
            return Err(sigv2());
        }
    }
    let Some(query) = query else {
        return Ok(());
    };
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        match name.as_ref() {
            "Signature" | "AWSAccessKeyId" => return Err(sigv2()),
            "X-Amz-Expires" => check_expires(&value)?,
            _ => {}
        }
    }
    Ok(())
}

/// Checks an `X-Amz-Expires` value: whole seconds, at most a week.
fn check_expires(value: &str) -> Result<(), S3Error> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if value.strip_prefix('-').is_some_and(digits) {
        return Err(query_error("X-Amz-Expires must be non-negative"));
    }
    if !digits(value) {
        return Err(query_error("X-Amz-Expires should be a number"));
    }
    // All digits: a parse failure can only be an overflow, i.e. too long.
    if value
        .parse::<u64>()
        .map_or(true, |n| n > MAX_PRESIGNED_EXPIRES_SECS)
    {
        return Err(query_error(
            "X-Amz-Expires must be less than a week (in seconds); that is, the given X-Amz-Expires must be less than 604800 seconds",
        ));
    }
    Ok(())
}

/// The S3 service behind [`check`].
#[derive(Clone)]
pub(crate) struct Gated(pub(crate) S3Service);

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for Gated {
    type Response = HttpResponse;
    type Error = HttpError;
    type Future = futures::future::BoxFuture<'static, Result<HttpResponse, HttpError>>;

    fn call(&self, req: http::Request<hyper::body::Incoming>) -> Self::Future {
        if let Err(refusal) = check(req.headers(), req.uri().query()) {
            tracing::debug!(code = %refusal.code().as_str(), "S3 request refused before authentication");
            return Box::pin(std::future::ready(
                refusal
                    .to_http_response()
                    .map_err(|e| HttpError::new(Box::new(e))),
            ));
        }
        let service = self.0.clone();
        let req: HttpRequest = req.map(s3s::Body::from);
        Box::pin(async move { service.call(req).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for a in authorization {
            h.append(http::header::AUTHORIZATION, a.parse().unwrap());
        }
        h
    }

    fn code(r: Result<(), S3Error>) -> Option<String> {
        r.err().map(|e| e.code().as_str().to_owned())
    }

    const V4: &str = "AWS4-HMAC-SHA256 Credential=AK/20250101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=ab";

    #[test]
    fn sigv4_and_anonymous_requests_pass() {
        assert_eq!(code(check(&headers(&[V4]), None)), None);
        assert_eq!(
            code(check(&headers(&[]), Some("list-type=2&prefix=a"))),
            None
        );
    }

    #[test]
    fn sigv2_and_other_schemes_are_invalid_requests() {
        for auth in [
            "AWS AKIDEXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=",
            "AWS4-HMAC-SHA1 Credential=x",
            "Bearer x",
        ] {
            let e = check(&headers(&[auth]), None).unwrap_err();
            assert_eq!(*e.code(), S3ErrorCode::InvalidRequest, "{auth}");
            assert_eq!(e.message(), Some(SIGV4_ONLY));
            assert_eq!(e.status_code(), Some(http::StatusCode::BAD_REQUEST));
        }
        // A second, SigV2 Authorization header does not hide behind a SigV4 one.
        assert_eq!(
            code(check(&headers(&[V4, "AWS AK:sig"]), None)).as_deref(),
            Some("InvalidRequest")
        );
    }

    #[test]
    fn sigv2_presigned_urls_are_invalid_requests_however_encoded() {
        for q in [
            "AWSAccessKeyId=AK&Expires=9999999999&Signature=abc",
            "Signature=abc",
            "AWSAccessKeyId=AK",
            "Sig%6Eature=abc",
            "x=1&AWSAccess%4BeyId=AK",
        ] {
            assert_eq!(
                code(check(&headers(&[]), Some(q))).as_deref(),
                Some("InvalidRequest"),
                "{q}"
            );
        }
    }

    #[test]
    fn presigned_urls_may_live_a_week_at_most() {
        let q = |expires: &str| {
            format!("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires={expires}&X-Amz-Signature=ab")
        };
        for ok in ["1", "3600", "604800"] {
            assert_eq!(code(check(&headers(&[]), Some(&q(ok)))), None, "{ok}");
        }
        for (bad, message) in [
            ("604801", "less than a week"),
            ("315360000", "less than a week"),
            ("99999999999999999999999", "less than a week"),
            ("-1", "non-negative"),
            ("1h", "a number"),
            ("", "a number"),
            ("%2B5", "a number"),
        ] {
            let e = check(&headers(&[]), Some(&q(bad))).unwrap_err();
            assert_eq!(
                *e.code(),
                S3ErrorCode::AuthorizationQueryParametersError,
                "{bad}"
            );
            assert!(e.message().unwrap().contains(message), "{bad}: {e:?}");
        }
    }
}
