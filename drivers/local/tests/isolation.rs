//! One tenant cannot hold the S3 endpoint against the others: request
//! bodies that never come or trickle in are cut off (signed or not, before
//! or after their signature is checked), and each access key holds at most
//! its allowance of connections, a request beyond it answered at once.
//! Each test stalls a bounded number of connections of its own, with short
//! limits; time bounds only tell a hang.

mod common;

use std::time::{Duration, Instant};

use common::raw;
use common::*;
use cosi_driver::proto::S3Credentials;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Far longer than anything here should take: only to tell a hang.
const HANG: Duration = Duration::from_secs(30);

/// A body the stalled uploads declare and never send.
const TEN_MB: usize = 10 * 1024 * 1024;

/// AWS's message when a body does not come in time.
const REQUEST_TIMEOUT: &str = "Your socket connection to the server was not read from or written to within the timeout period.";

/// The head of a request (`connection: close` unless `keep_alive`).
fn head(method: &str, target: &str, headers: &[(String, String)], keep_alive: bool) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if !keep_alive {
        out.push_str("connection: close\r\n");
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// Signs `method path` with SigV4 in headers, the payload unsigned, with
/// `extra` headers; the request target and every header to send.
fn signed(
    h: &Harness,
    creds: &S3Credentials,
    method: &str,
    path: &str,
    extra: &[(&str, &str)],
) -> (String, Vec<(String, String)>) {
    let signing = raw::Signing {
        creds,
        time: std::time::SystemTime::now(),
        presign_for: None,
        body: aws_sigv4::http_request::SignableBody::UnsignedPayload,
    };
    let url = format!("{}{path}", h.s3.endpoint_url());
    raw::sign_v4(method, &url, extra, signing)
}

/// Connects and sends `bytes`.
async fn open(h: &Harness, bytes: &[u8]) -> TcpStream {
    let mut socket = TcpStream::connect(h.s3.local_addr()).await.unwrap();
    socket.write_all(bytes).await.unwrap();
    socket
}

/// Sends the head of a signed PUT of `key` declaring `length` bytes, and
/// none of them.
async fn stalled_put(
    h: &Harness,
    creds: &S3Credentials,
    bucket: &str,
    key: &str,
    length: usize,
) -> TcpStream {
    let length = length.to_string();
    let (target, headers) = signed(
        h,
        creds,
        "PUT",
        &format!("/{bucket}/{key}"),
        &[("content-length", &length)],
    );
    open(h, &head("PUT", &target, &headers, false)).await
}

/// A signed ListObjectsV2 of `bucket` on a connection of its own.
async fn signed_list(h: &Harness, creds: &S3Credentials, bucket: &str) -> raw::Response {
    let (target, headers) = signed(h, creds, "GET", &format!("/{bucket}?list-type=2"), &[]);
    h.send("GET", &target, &headers, b"").await
}

/// Asserts `got` is the refusal of a key over its allowance.
fn assert_slow_down(got: &raw::Response) {
    assert_eq!(got.status, 503, "{}", got.text());
    assert_eq!(got.code().as_deref(), Some("SlowDown"));
    assert!(got.head.to_ascii_lowercase().contains("connection: close"));
}

/// Asserts `got` is the answer to a body that did not come in time.
fn assert_request_timeout(got: &raw::Response) {
    assert_eq!(got.status, 400, "{}", got.text());
    assert_eq!(got.code().as_deref(), Some("RequestTimeout"));
    assert_eq!(
        raw::element(&got.text(), "Message").as_deref(),
        Some(REQUEST_TIMEOUT)
    );
    assert!(got.head.to_ascii_lowercase().contains("connection: close"));
}

/// Retries `request` (a request of a key that has just let go of a
/// connection, which the endpoint notices a moment later) until it is not
/// told to slow down.
async fn once_released<F: Future<Output = raw::Response>>(
    mut request: impl FnMut() -> F,
) -> raw::Response {
    for _ in 0..100 {
        let got = request().await;
        if got.status != 503 {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the connection was never released");
}

#[tokio::test]
async fn stalled_bodies_of_one_key_cannot_keep_another_keys_listing_from_an_answer() {
    let h = Harness::start_with(|c| {
        c.s3_max_connections = 8;
        c.s3_max_connections_per_key = 3;
        c.s3_body_read_timeout = Duration::from_secs(10);
    })
    .await;
    let (a_bucket, a) = h.granted_bucket("stall-a", &[]).await;
    let (b_bucket, b) = h.granted_bucket("stall-b", &[]).await;

    // More PUTs declaring 10 MB and sending nothing than there are
    // connections: each answered when it is refused or cut off.
    let mut stalled = Vec::new();
    for i in 0..10 {
        let mut socket = stalled_put(&h, &a, &a_bucket, &format!("k{i}"), TEN_MB).await;
        stalled.push(tokio::spawn(async move {
            let got = raw::read_until_closed(&mut socket).await;
            (got, Instant::now())
        }));
    }

    // The other key's client has no connection yet: it needs a new one.
    let listed = tokio::time::timeout(HANG, list(&h.s3_client(&b), &b_bucket))
        .await
        .expect("the other key's listing was answered while the stalls held");
    let listed_at = Instant::now();
    assert_eq!(listed.unwrap(), Vec::<String>::new());

    let (mut refused, mut cut) = (0, 0);
    for task in stalled {
        let (got, at) = task.await.unwrap();
        match got.status {
            503 => {
                assert_slow_down(&got);
                refused += 1;
            }
            _ => {
                assert_request_timeout(&got);
                assert!(at > listed_at, "cut off before the listing was answered");
                cut += 1;
            }
        }
    }
    assert_eq!(
        (cut, refused),
        (3, 7),
        "the key's 3 connections held, cut off"
    );
    let state = h.driver.backend_state().unwrap();
    let a_state = state.buckets.iter().find(|b| b.id == a_bucket).unwrap();
    assert_eq!(a_state.objects, 0);
    // The key's connections are its own again.
    let got = once_released(|| signed_list(&h, &a, &a_bucket)).await;
    assert_eq!(got.status, 200, "{}", got.text());
    h.stop().await;
}

#[tokio::test]
async fn a_body_trickling_below_the_minimum_rate_is_cut_off() {
    let h = Harness::start_with(|c| {
        c.s3_body_read_timeout = Duration::from_secs(1);
        c.s3_min_body_rate = 1024;
    })
    .await;
    let (id, creds) = h.granted_bucket("trickle", &[]).await;

    // A byte every 300 ms: each within the read timeout, far below 1 KiB/s.
    let mut socket = stalled_put(&h, &creds, &id, "slow", 4096).await;
    let (mut reader, mut writer) = socket.split();
    let mut answer = Vec::new();
    let mut sent = 0;
    let read = async {
        let mut buf = [0u8; 1024];
        while let Ok(n @ 1..) = reader.read(&mut buf).await {
            answer.extend_from_slice(&buf[..n]);
        }
    };
    let trickle = async {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if writer.write_all(b"x").await.is_err() {
                return;
            }
            sent += 1;
        }
    };
    tokio::select! {
        () = read => {}
        () = trickle => panic!("30 s of trickling were not cut off"),
    }
    let got = raw::parse(&answer);
    assert_request_timeout(&got);
    assert!(sent < 100);

    // A body as slow, but keeping the rate, is stored.
    let mut socket = stalled_put(&h, &creds, &id, "steady", 4096).await;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        socket.write_all(&[7u8; 1024]).await.unwrap();
    }
    let got = raw::read_until_closed(&mut socket).await;
    assert_eq!(got.status, 200, "{}", got.text());
    let state = h.driver.backend_state().unwrap();
    assert_eq!(
        (state.buckets[0].objects, state.buckets[0].used_bytes),
        (1, 4096)
    );
    h.stop().await;
}

#[tokio::test]
async fn unsigned_bodies_that_stall_are_cut_off_or_never_read() {
    let h = Harness::start_with(|c| {
        c.s3_body_read_timeout = Duration::from_secs(1);
    })
    .await;
    let (id, creds) = h.granted_bucket("unsigned", &[]).await;
    let host = ("host".to_owned(), h.s3.local_addr().to_string());
    let declares = ("content-length".to_owned(), TEN_MB.to_string());

    // A forged signature in an STS scope: the S3 protocol library reads
    // such a body before it checks the signature (to hash it).
    let (_, headers) = signed(&h, &creds, "POST", "/", &[]);
    let date = headers
        .into_iter()
        .find_map(|(k, v)| (k == "x-amz-date").then_some(v))
        .unwrap();
    let authorization = format!(
        "AWS4-HMAC-SHA256 Credential={}/{}/us-east-1/sts/aws4_request, SignedHeaders=host;x-amz-date, Signature={}",
        creds.access_key_id,
        &date[..8],
        "0".repeat(64)
    );
    let forged = [
        host.clone(),
        ("x-amz-date".to_owned(), date),
        ("authorization".to_owned(), authorization),
        ("content-length".to_owned(), "1000".to_owned()),
    ];
    let mut socket = open(&h, &head("POST", "/", &forged, false)).await;
    assert_request_timeout(&raw::read_until_closed(&mut socket).await);

    // A browser-form upload, anonymous, is refused before its body is read.
    let form = [
        host.clone(),
        declares.clone(),
        (
            "content-type".to_owned(),
            "multipart/form-data; boundary=x".to_owned(),
        ),
    ];
    let mut socket = open(&h, &head("POST", &format!("/{id}"), &form, false)).await;
    let got = raw::read_until_closed(&mut socket).await;
    assert_eq!(got.status, 501, "{}", got.text());
    assert_eq!(got.code().as_deref(), Some("NotImplemented"));

    // An anonymous PUT is refused before its body is read.
    let mut socket = open(
        &h,
        &head("PUT", &format!("/{id}/k"), &[host, declares], false),
    )
    .await;
    let got = raw::read_until_closed(&mut socket).await;
    assert_eq!(
        got.code().as_deref(),
        Some("AccessDenied"),
        "{}",
        got.text()
    );

    // The key named in the forged request is not held back by it.
    assert_eq!(signed_list(&h, &creds, &id).await.status, 200);
    h.stop().await;
}

#[tokio::test]
async fn a_key_over_its_connection_allowance_is_told_to_slow_down_at_once() {
    let h = Harness::start_with(|c| {
        c.s3_max_connections_per_key = 2;
        c.s3_body_read_timeout = Duration::from_secs(120);
    })
    .await;
    let (a_bucket, a) = h.granted_bucket("share-a", &[]).await;
    let (b_bucket, b) = h.granted_bucket("share-b", &[]).await;

    // Two stalled uploads hold the key's two connections...
    let first = stalled_put(&h, &a, &a_bucket, "one", TEN_MB).await;
    let _second = stalled_put(&h, &a, &a_bucket, "two", TEN_MB).await;
    // ...so its next request, even one without a body, is refused at once
    // (the time bound only tells a hang: the stalls hold for 120 s)...
    let started = Instant::now();
    let got = once_claimed(|| signed_list(&h, &a, &a_bucket)).await;
    assert_slow_down(&got);
    assert!(started.elapsed() < HANG);
    // ...while another key is served.
    assert_eq!(signed_list(&h, &b, &b_bucket).await.status, 200);

    // Letting one go frees its place.
    drop(first);
    let got = once_released(|| signed_list(&h, &a, &a_bucket)).await;
    assert_eq!(got.status, 200, "{}", got.text());

    // A connection kept alive between requests counts too.
    let (target, headers) = signed(&h, &a, "GET", &format!("/{a_bucket}?list-type=2"), &[]);
    let mut idle = open(&h, &head("GET", &target, &headers, true)).await;
    assert_eq!(raw::read_response(&mut idle).await.status, 200);
    assert_slow_down(&signed_list(&h, &a, &a_bucket).await);
    drop(idle);
    let got = once_released(|| signed_list(&h, &a, &a_bucket)).await;
    assert_eq!(got.status, 200, "{}", got.text());

    // Requests without a signature share one allowance: beyond it, their
    // connections are closed once answered.
    let anonymous = b"GET / HTTP/1.1\r\nhost: s3\r\n\r\n";
    let mut kept = Vec::new();
    for _ in 0..2 {
        let mut socket = open(&h, anonymous).await;
        assert_eq!(raw::read_response(&mut socket).await.status, 403);
        kept.push(socket);
    }
    let mut third = open(&h, anonymous).await;
    assert_eq!(raw::read_response(&mut third).await.status, 403);
    assert!(raw::closed_within(&mut third, HANG).await);
    assert!(!raw::closed_within(&mut kept[0], Duration::from_millis(300)).await);
    h.stop().await;
}

/// Retries `request` until it is refused as over the key's allowance:
/// connections a test just opened are claimed once their heads are read.
async fn once_claimed<F: Future<Output = raw::Response>>(
    mut request: impl FnMut() -> F,
) -> raw::Response {
    for _ in 0..100 {
        let got = request().await;
        if got.status == 503 {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the key was never over its allowance");
}
