//! Crafted S3 requests: raw HTTP/1.1 over a TCP socket (for requests an
//! SDK refuses to send) and signing helpers (SigV4 through `aws-sigv4`,
//! SigV2 by hand, as old clients sign).

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SignatureLocation,
    SigningSettings, UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use cosi_driver::proto::S3Credentials;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a crafted request may take before the test gives up.
const LIMIT: Duration = Duration::from_secs(30);

/// A response read to the end of the connection.
#[derive(Debug)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The status line and headers.
    pub head: String,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The S3 error code of an error body.
    pub fn code(&self) -> Option<String> {
        element(&self.text(), "Code")
    }
}

/// The text of the first `<name>` element of `xml`.
pub fn element(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{name}>"))? + start;
    Some(xml[start..end].to_owned())
}

/// A raw HTTP/1.1 request with `Connection: close` and a Content-Length.
pub fn request(method: &str, target: &str, headers: &[(String, String)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    if !has("content-length") && !has("transfer-encoding") {
        out.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    out.push_str("connection: close\r\n\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Sends `raw` to `addr` and reads the response until the server closes.
pub async fn send(addr: SocketAddr, raw: &[u8]) -> Response {
    tokio::time::timeout(LIMIT, async {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        socket.write_all(raw).await.unwrap();
        let mut all = Vec::new();
        socket.read_to_end(&mut all).await.unwrap();
        parse(&all)
    })
    .await
    .expect("the server answered in time")
}

/// Reads what the server sends on `socket` until it closes it (or resets
/// it: what arrived before counts), and parses it as one response.
pub async fn read_until_closed(socket: &mut TcpStream) -> Response {
    tokio::time::timeout(LIMIT, async {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = socket.read(&mut buf).await {
            all.extend_from_slice(&buf[..n]);
        }
        parse(&all)
    })
    .await
    .expect("the server answered and closed the connection in time")
}

/// Parses `all` as one response.
pub fn parse(all: &[u8]) -> Response {
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(all)));
    let head = String::from_utf8_lossy(&all[..split]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let raw_body = &all[split + 4..];
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(raw_body)
    } else {
        raw_body.to_vec()
    };
    Response { status, head, body }
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&rest[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size_text:?}"));
        rest = &rest[eol + 2..];
        if size == 0 {
            break;
        }
        let take = size.min(rest.len());
        out.extend_from_slice(&rest[..take]);
        rest = &rest[(take + 2).min(rest.len())..];
    }
    out
}

/// What to sign a request with.
pub struct Signing<'a> {
    pub creds: &'a S3Credentials,
    pub time: SystemTime,
    /// `Some` presigns (query parameters) with this lifetime.
    pub presign_for: Option<Duration>,
    pub body: SignableBody<'a>,
}

/// Signs `method url` with SigV4 and returns the request target (path
/// and query) and the headers to send (including `host`).
pub fn sign_v4(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    signing: Signing<'_>,
) -> (String, Vec<(String, String)>) {
    let mut builder = http::Request::builder().method(method).uri(url);
    let uri: http::Uri = url.parse().unwrap();
    let host = uri.authority().unwrap().as_str().to_owned();
    builder = builder.header("host", &host);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let mut request = builder.body(()).unwrap();
    let identity = aws_credential_types::Credentials::new(
        &signing.creds.access_key_id,
        &signing.creds.access_secret_key,
        None,
        None,
        "test",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    // As S3 signs: the path encoded once, never normalized.
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    if let Some(expires) = signing.presign_for {
        settings.signature_location = SignatureLocation::QueryParams;
        settings.expires_in = Some(expires);
    }
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("s3")
        .time(signing.time)
        .settings(settings)
        .build()
        .unwrap()
        .into();
    let pairs: Vec<(String, String)> = request
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    let signable = SignableRequest::new(
        method,
        url,
        pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        signing.body,
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    instructions.apply_to_request_http1x(&mut request);
    let target = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap();
    let headers = request
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    (target, headers)
}

/// HMAC-SHA1 of `data` under `secret`, base64: the SigV2 signature of a
/// string to sign.
pub fn sigv2_signature(secret: &str, string_to_sign: &str) -> String {
    use base64::Engine as _;
    use hmac::{KeyInit as _, Mac as _};
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(string_to_sign.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// An HTTP date (`Date:` header form) for `time`.
pub fn http_date(time: SystemTime) -> String {
    httpdate::fmt_http_date(time)
}

/// Reads one response (its body sized by Content-Length) from a
/// kept-alive connection.
pub async fn read_response(socket: &mut TcpStream) -> Response {
    tokio::time::timeout(LIMIT, async {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(split) = all.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&all[..split]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if all.len() >= split + 4 + length {
                    return parse(&all[..split + 4 + length]);
                }
            }
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0, "the connection closed mid-response");
            all.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("a response in time")
}

/// True when the server closes `socket` within `limit` (whatever it sends
/// before closing); false when it is still open then.
pub async fn closed_within(socket: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(limit, async {
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}
