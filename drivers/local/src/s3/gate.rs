//! Checks every S3 request passes before its signature is even looked at,
//! as an AWS region opened since 2014 checks them, and the bounds on what
//! one client may hold of the endpoint:
//!
//! - Only Signature Version 4 (`AWS4-HMAC-SHA256`) is accepted. A SigV2
//!   signature covers a `Date` (or, presigned, an `Expires`) that nothing
//!   bounds, so a request captured on the plain-HTTP endpoint would replay
//!   until its key is revoked; SigV4 binds every request to a 15-minute
//!   window and every presigned URL to at most a week. SigV2 requests get
//!   AWS's answer, 400 `InvalidRequest`.
//! - A presigned URL may live at most a week (`X-Amz-Expires` ≤ 604800),
//!   else 400 `AuthorizationQueryParametersError`.
//! - Browser-form uploads (POST Object, `multipart/form-data`) are not
//!   served: they are refused (501 `NotImplemented`) before anything of
//!   their body is read, since the S3 protocol library would read the
//!   form, and buffer its file, before checking any signature or grant.
//! - Every request body is paced (`body_pace`) from its first byte, before
//!   the signature is checked: a body that stalls or trickles is answered
//!   400 `RequestTimeout`, and its connection closed.
//! - Each connection counts against the key of its latest signed request
//!   (`key_shares`, claimed by the grant check once the signature holds);
//!   a key over its allowance is answered 503 `SlowDown` and its connection
//!   closed. A connection whose requests carry no valid signature counts
//!   against the allowance those share once answered; beyond it, it is
//!   closed.
//!
//! The checks are pure ([`check`]); [`Gated`] applies them in front of the
//! S3 service, so a refused request costs no key lookup.

use std::sync::Arc;

use http::{HeaderMap, Method};
use s3s::service::S3Service;
use s3s::{HttpError, HttpRequest, HttpResponse, S3Error, S3ErrorCode};

use super::body_pace::{BodyPace, PacedBody, Stall};
use super::key_shares::{Connection, KeyShares, Owner};

/// The longest lifetime of a presigned URL, in seconds (a week, as S3).
pub const MAX_PRESIGNED_EXPIRES_SECS: u64 = 604_800;

/// AWS's message to a request whose body did not arrive in time.
pub const REQUEST_TIMEOUT: &str = "Your socket connection to the server was not read from or written to within the timeout period.";

/// AWS's message to SigV2 requests in SigV4-only regions.
const SIGV4_ONLY: &str =
    "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.";

fn query_error(message: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::AuthorizationQueryParametersError,
        message.to_owned(),
    )
}

/// Refuses requests signed other than with SigV4, presigned URLs that
/// would outlive a week, and browser-form uploads. Query parameter names
/// are decoded as the S3 service decodes them, so an encoded name cannot
/// slip past.
pub fn check(method: &Method, headers: &HeaderMap, query: Option<&str>) -> Result<(), S3Error> {
    if is_form_upload(method, headers) {
        return Err(S3Error::with_message(
            S3ErrorCode::NotImplemented,
            "browser-form uploads (POST Object) are not served; use PutObject",
        ));
    }
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

/// True for a POST whose body is a form (`multipart/form-data`), which the
/// S3 protocol library would take for POST Object, however the media type
/// is spelt.
fn is_form_upload(method: &Method, headers: &HeaderMap) -> bool {
    *method == Method::POST
        && headers.get_all(http::header::CONTENT_TYPE).iter().any(|v| {
            let media_type = v
                .as_bytes()
                .split(|b| *b == b';')
                .next()
                .unwrap_or_default();
            media_type
                .trim_ascii()
                .eq_ignore_ascii_case(b"multipart/form-data")
        })
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

/// The S3 service behind [`check`], as served on one connection: request
/// bodies paced, the connection counted against its owner's allowance.
#[derive(Clone)]
pub(crate) struct Gated {
    service: S3Service,
    pace: BodyPace,
    shares: Arc<KeyShares>,
    connection: Arc<Connection>,
}

impl Gated {
    /// `service` behind the gate, its bodies paced by `pace`, each owner
    /// holding at most `max_connections_per_key` connections.
    pub(crate) fn new(service: S3Service, pace: BodyPace, max_connections_per_key: usize) -> Self {
        let shares = KeyShares::new(max_connections_per_key);
        let connection = Arc::new(Connection::new(Arc::clone(&shares)));
        Self {
            service,
            pace,
            shares,
            connection,
        }
    }

    /// The same service for a new connection, owned by nobody yet.
    pub(crate) fn for_connection(&self) -> Self {
        Self {
            connection: Arc::new(Connection::new(Arc::clone(&self.shares))),
            ..self.clone()
        }
    }
}

/// `response` with `Connection: close`, so the connection ends with it.
fn closing(mut response: HttpResponse) -> HttpResponse {
    response.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

fn error_response(error: S3Error) -> Result<HttpResponse, HttpError> {
    error
        .to_http_response()
        .map_err(|e| HttpError::new(Box::new(e)))
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for Gated {
    type Response = HttpResponse;
    type Error = HttpError;
    type Future = futures::future::BoxFuture<'static, Result<HttpResponse, HttpError>>;

    fn call(&self, req: http::Request<hyper::body::Incoming>) -> Self::Future {
        if let Err(refusal) = check(req.method(), req.headers(), req.uri().query()) {
            tracing::debug!(code = %refusal.code().as_str(), "S3 request refused before authentication");
            return Box::pin(std::future::ready(error_response(refusal)));
        }
        let stall = Stall::default();
        let pace = self.pace;
        let mut req: HttpRequest =
            req.map(|body| s3s::Body::http_body(PacedBody::new(body, pace, stall.clone())));
        // The grant check claims the connection for the verified key.
        req.extensions_mut().insert(Arc::clone(&self.connection));
        let service = self.service.clone();
        let connection = Arc::clone(&self.connection);
        Box::pin(async move {
            let answered = service.call(req).await;
            if stall.happened() {
                tracing::debug!("S3 request body arrived too slowly: cut off");
                let timeout = S3Error::with_message(S3ErrorCode::RequestTimeout, REQUEST_TIMEOUT);
                return error_response(timeout).map(closing);
            }
            let response = answered?;
            // SlowDown: the key holds as many connections as it may.
            if response.status() == http::StatusCode::SERVICE_UNAVAILABLE {
                return Ok(closing(response));
            }
            if !connection.is_owned() && connection.claim(Owner::Unauthenticated).is_err() {
                tracing::debug!(
                    "connections without a valid signature hold their allowance: closing one"
                );
                return Ok(closing(response));
            }
            Ok(response)
        })
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
        assert_eq!(code(check(&Method::GET, &headers(&[V4]), None)), None);
        assert_eq!(
            code(check(
                &Method::GET,
                &headers(&[]),
                Some("list-type=2&prefix=a")
            )),
            None
        );
    }

    #[test]
    fn browser_form_uploads_are_not_served() {
        let typed = |content_type: &str| {
            let mut h = HeaderMap::new();
            h.insert(http::header::CONTENT_TYPE, content_type.parse().unwrap());
            h
        };
        for form in [
            "multipart/form-data; boundary=x",
            "Multipart/Form-Data;boundary=x",
            "multipart/form-data",
        ] {
            let e = check(&Method::POST, &typed(form), None).unwrap_err();
            assert_eq!(*e.code(), S3ErrorCode::NotImplemented, "{form}");
        }
        // DeleteObjects posts XML; a GET's content type means nothing.
        assert_eq!(
            code(check(
                &Method::POST,
                &typed("application/xml"),
                Some("delete")
            )),
            None
        );
        let form = typed("multipart/form-data; boundary=x");
        assert_eq!(code(check(&Method::GET, &form, None)), None);
    }

    #[test]
    fn sigv2_and_other_schemes_are_invalid_requests() {
        for auth in [
            "AWS AKIDEXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=",
            "AWS4-HMAC-SHA1 Credential=x",
            "Bearer x",
        ] {
            let e = check(&Method::GET, &headers(&[auth]), None).unwrap_err();
            assert_eq!(*e.code(), S3ErrorCode::InvalidRequest, "{auth}");
            assert_eq!(e.message(), Some(SIGV4_ONLY));
            assert_eq!(e.status_code(), Some(http::StatusCode::BAD_REQUEST));
        }
        // A second, SigV2 Authorization header does not hide behind a SigV4 one.
        assert_eq!(
            code(check(&Method::GET, &headers(&[V4, "AWS AK:sig"]), None)).as_deref(),
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
                code(check(&Method::GET, &headers(&[]), Some(q))).as_deref(),
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
            assert_eq!(
                code(check(&Method::GET, &headers(&[]), Some(&q(ok)))),
                None,
                "{ok}"
            );
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
            let e = check(&Method::GET, &headers(&[]), Some(&q(bad))).unwrap_err();
            assert_eq!(
                *e.code(),
                S3ErrorCode::AuthorizationQueryParametersError,
                "{bad}"
            );
            assert!(e.message().unwrap().contains(message), "{bad}: {e:?}");
        }
    }
}
