//! The limits the S3 endpoint enforces against misuse, each tried the way
//! an attacker or a careless client would: with the AWS SDK where it can
//! send the request, with crafted raw HTTP where it would refuse to.

mod common;

use aws_sdk_s3::types::MetadataDirective;
use common::raw;
use common::*;

const BIG: usize = 100 * 1024;

/// Puts `x` at `key` with user metadata of each name and a value of as
/// many `v`s; the S3 error code on failure.
async fn put_with_metadata(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    metadata: &[(&str, usize)],
) -> Result<(), String> {
    let mut call = s3.put_object().bucket(bucket).key(key).body(body(b"x"));
    for (name, len) in metadata {
        call = call.metadata(*name, "v".repeat(*len));
    }
    s3_result(call.send().await).map(drop)
}

#[tokio::test]
async fn user_metadata_over_2_kb_is_refused_and_nothing_is_stored() {
    let h = Harness::start().await;
    let (id, s3) = h.bucket_client("meta", &[]).await;

    // 2 KB of keys and values in all is allowed.
    put_with_metadata(&s3, &id, "fits", &[("a", 2047)])
        .await
        .unwrap();

    for metadata in [&[("a", BIG)][..], &[("a", 1024), ("b", 1024)]] {
        let err = put_with_metadata(&s3, &id, "big", metadata).await;
        assert_eq!(err.unwrap_err(), "MetadataTooLarge");
    }

    let err = s3
        .create_multipart_upload()
        .bucket(&id)
        .key("big")
        .metadata("a", "v".repeat(BIG))
        .send()
        .await
        .unwrap_err();
    assert_eq!(s3_code(&err), "MetadataTooLarge");

    let err = s3
        .copy_object()
        .bucket(&id)
        .key("big")
        .copy_source(format!("{id}/fits"))
        .metadata_directive(MetadataDirective::Replace)
        .metadata("a", "v".repeat(BIG))
        .send()
        .await
        .unwrap_err();
    assert_eq!(s3_code(&err), "MetadataTooLarge");

    let state = h.driver.backend_state().unwrap();
    assert_eq!(state.buckets[0].objects, 1, "only the object that fits");
    let uploads = s3_result(s3.list_multipart_uploads().bucket(&id).send().await).unwrap();
    assert!(uploads.uploads().is_empty());
    h.stop().await;
}

/// An `aws-chunked` PutObject (unsigned chunks, as SDKs send with
/// trailing checksums) of `data` declaring `declared` decoded bytes.
async fn chunked_put(
    h: &Harness,
    creds: &cosi_driver::proto::S3Credentials,
    url: &str,
    data: &[u8],
    declared: usize,
) -> raw::Response {
    let mut encoded = Vec::new();
    for chunk in data.chunks(64 * 1024) {
        encoded.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        encoded.extend_from_slice(chunk);
        encoded.extend_from_slice(b"\r\n");
    }
    encoded.extend_from_slice(b"0\r\n\r\n");
    let declared = declared.to_string();
    let (target, headers) = raw::sign_v4(
        "PUT",
        url,
        &[
            ("content-encoding", "aws-chunked"),
            ("x-amz-decoded-content-length", &declared),
            ("x-amz-trailer", "x-amz-checksum-crc32"),
        ],
        raw::Signing {
            creds,
            time: std::time::SystemTime::now(),
            presign_for: None,
            body: aws_sigv4::http_request::SignableBody::StreamingUnsignedPayloadTrailer,
        },
    );
    h.send("PUT", &target, &headers, &encoded).await
}

/// Files in the bucket's directory (blobs, committed or not).
fn blob_files(h: &Harness, id: &str) -> usize {
    std::fs::read_dir(h.driver.bucket_dir(id)).map_or(0, |d| d.count())
}

#[tokio::test]
async fn an_aws_chunked_body_must_match_its_declared_decoded_length() {
    let h = Harness::start().await;
    let (id, creds) = h.granted_bucket("chunked", &[]).await;
    let url = |key: &str| format!("{}/{id}/{key}", h.s3.endpoint_url());

    // As declared: stored.
    let ok = chunked_put(&h, &creds, &url("exact"), b"0123456789", 10).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let s3 = h.s3_client(&creds);
    let got = s3_result(s3.get_object().bucket(&id).key("exact").send().await).unwrap();
    assert_eq!(
        &got.body.collect().await.unwrap().into_bytes()[..],
        b"0123456789"
    );

    // More than declared (10 declared, 1 MiB sent) and fewer.
    let more = chunked_put(&h, &creds, &url("more"), &vec![7u8; 1 << 20], 10).await;
    assert_eq!(more.status, 400, "{}", more.text());
    assert_eq!(more.code().as_deref(), Some("IncompleteBody"));
    let fewer = chunked_put(&h, &creds, &url("fewer"), b"0123456789", 100).await;
    assert_eq!(fewer.status, 400, "{}", fewer.text());
    assert_eq!(fewer.code().as_deref(), Some("IncompleteBody"));

    let state = h.driver.backend_state().unwrap();
    assert_eq!(state.buckets[0].objects, 1);
    assert_eq!(state.buckets[0].used_bytes, 10);
    assert_eq!(
        blob_files(&h, &id),
        1,
        "no blob is left by the refused uploads"
    );
    h.stop().await;
}

/// A bucket with one object `k` holding `secret`, and read-write keys on it.
async fn bucket_with_object(
    h: &Harness,
    name: &str,
) -> (String, cosi_driver::proto::S3Credentials) {
    let (id, creds) = h.granted_bucket(name, &[]).await;
    put(&h.s3_client(&creds), &id, "k", b"secret")
        .await
        .unwrap();
    (id, creds)
}

const SIGV4_ONLY: &str =
    "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.";

#[tokio::test]
async fn a_captured_sigv2_request_does_not_replay() {
    let h = Harness::start().await;
    let (id, creds) = bucket_with_object(&h, "sigv2").await;
    // Captured an hour ago on the plain-HTTP endpoint.
    let date = raw::http_date(std::time::SystemTime::now() - std::time::Duration::from_secs(3600));
    let path = format!("/{id}/k");
    let signature = raw::sigv2_signature(
        &creds.access_secret_key,
        &format!("GET\n\n\n{date}\n{path}"),
    );
    let headers = vec![
        ("host".to_owned(), h.s3.local_addr().to_string()),
        ("date".to_owned(), date),
        (
            "authorization".to_owned(),
            format!("AWS {}:{signature}", creds.access_key_id),
        ),
    ];
    let replayed = h.send("GET", &path, &headers, b"").await;
    assert_sigv4_only(&replayed);
    assert!(!replayed.text().contains("secret"));
    h.stop().await;
}

/// A SigV2 request's answer: 400 `InvalidRequest`, saying SigV4 is required.
fn assert_sigv4_only(got: &raw::Response) {
    assert_eq!(got.status, 400, "{}", got.text());
    assert_eq!(got.code().as_deref(), Some("InvalidRequest"));
    assert_eq!(
        raw::element(&got.text(), "Message").as_deref(),
        Some(SIGV4_ONLY)
    );
}

#[tokio::test]
async fn a_sigv2_presigned_url_is_refused() {
    let h = Harness::start().await;
    let (id, creds) = bucket_with_object(&h, "sigv2q").await;
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 10 * 365 * 24 * 3600;
    let path = format!("/{id}/k");
    let signature = raw::sigv2_signature(
        &creds.access_secret_key,
        &format!("GET\n\n\n{expires}\n{path}"),
    );
    let signature: String = signature
        .bytes()
        .map(|b| match b {
            b'+' => "%2B".to_owned(),
            b'/' => "%2F".to_owned(),
            b'=' => "%3D".to_owned(),
            b => (b as char).to_string(),
        })
        .collect();
    let target = format!(
        "{path}?AWSAccessKeyId={}&Expires={expires}&Signature={signature}",
        creds.access_key_id
    );
    let headers = vec![("host".to_owned(), h.s3.local_addr().to_string())];
    let got = h.send("GET", &target, &headers, b"").await;
    assert_sigv4_only(&got);
    h.stop().await;
}

/// GETs `k` of bucket `id` through a SigV4 URL presigned at `time` for `expires`.
async fn presigned_get(
    h: &Harness,
    creds: &cosi_driver::proto::S3Credentials,
    id: &str,
    time: std::time::SystemTime,
    expires: std::time::Duration,
) -> raw::Response {
    get_signed_at(h, creds, &format!("/{id}/k"), time, Some(expires)).await
}

/// A GET of `path_and_query` on the endpoint, signed with SigV4 at `time`:
/// presigned for `presign_for` (the payload unsigned) when given, with
/// signed headers otherwise.
async fn get_signed_at(
    h: &Harness,
    creds: &cosi_driver::proto::S3Credentials,
    path_and_query: &str,
    time: std::time::SystemTime,
    presign_for: Option<std::time::Duration>,
) -> raw::Response {
    let body = match presign_for {
        Some(_) => aws_sigv4::http_request::SignableBody::UnsignedPayload,
        None => aws_sigv4::http_request::SignableBody::Bytes(b""),
    };
    let signing = raw::Signing {
        creds,
        time,
        presign_for,
        body,
    };
    let url = format!("{}{path_and_query}", h.s3.endpoint_url());
    let (target, headers) = raw::sign_v4("GET", &url, &[], signing);
    h.send("GET", &target, &headers, b"").await
}

#[tokio::test]
async fn presigned_urls_live_at_most_a_week() {
    let h = Harness::start().await;
    let (id, creds) = bucket_with_object(&h, "presign").await;
    let now = std::time::SystemTime::now();
    let week = std::time::Duration::from_secs(604_800);

    let ok = presigned_get(&h, &creds, &id, now, week).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.body, b"secret");

    for too_long in [
        week + std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(315_360_000),
    ] {
        let got = presigned_get(&h, &creds, &id, now, too_long).await;
        assert_eq!(got.status, 400, "{}", got.text());
        assert_eq!(
            got.code().as_deref(),
            Some("AuthorizationQueryParametersError")
        );
        assert!(got.text().contains("604800"), "{}", got.text());
    }

    // A URL signed eight days ago for a week has expired.
    let old = presigned_get(
        &h,
        &creds,
        &id,
        now - week - std::time::Duration::from_secs(86_400),
        week,
    )
    .await;
    assert_eq!(old.status, 403, "{}", old.text());
    assert_eq!(old.code().as_deref(), Some("AccessDenied"));
    h.stop().await;
}

#[tokio::test]
async fn a_sigv4_request_signed_more_than_15_minutes_away_is_refused() {
    let h = Harness::start().await;
    let (id, creds) = bucket_with_object(&h, "skew").await;
    let object = format!("/{id}/k");
    let get_at = |time| get_signed_at(&h, &creds, &object, time, None);
    let now = std::time::SystemTime::now();
    let ok = get_at(now).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let minutes = |m: u64| std::time::Duration::from_secs(m * 60);
    for time in [now - minutes(16), now + minutes(16)] {
        let got = get_at(time).await;
        assert_eq!(got.status, 403, "{}", got.text());
        assert_eq!(got.code().as_deref(), Some("RequestTimeTooSkewed"));
    }
    h.stop().await;
}

/// A header-signed SigV4 GET of `path_and_query` on the endpoint.
async fn signed_get(
    h: &Harness,
    creds: &cosi_driver::proto::S3Credentials,
    path_and_query: &str,
) -> raw::Response {
    let now = std::time::SystemTime::now();
    let got = get_signed_at(h, creds, path_and_query, now, None).await;
    assert_xml_1_0(&got);
    got
}

/// The body of [`signed_get`] of `path_and_query`, which must answer 200.
async fn signed_ok(
    h: &Harness,
    creds: &cosi_driver::proto::S3Credentials,
    path_and_query: &str,
) -> String {
    let got = signed_get(h, creds, path_and_query).await;
    assert_eq!(got.status, 200, "{}", got.text());
    got.text()
}

/// The body is complete and holds nothing XML 1.0 cannot carry.
fn assert_xml_1_0(r: &raw::Response) {
    let text = std::str::from_utf8(&r.body).expect("a UTF-8 body");
    assert!(
        text.chars()
            .all(|c| matches!(c, '\t' | '\n') || (c >= ' ' && c != '\u{FFFE}' && c != '\u{FFFF}')),
        "{text:?}"
    );
    let end = if r.status == 200 {
        "Result>"
    } else {
        "</Error>"
    };
    assert!(text.trim_end().ends_with(end), "truncated: {text:?}");
}

#[tokio::test]
async fn crafted_continuation_tokens_are_invalid_arguments() {
    let h = Harness::start().await;
    let (id, creds) = bucket_with_object(&h, "tokens").await;
    for token in [
        "%00",
        "%01%1B%5B31m",
        "not%20a%20token",
        "k",
        "AAAA%2B%2F%3D%3D",
        "__8",
    ] {
        for encoding in ["", "&encoding-type=url"] {
            let got = signed_get(
                &h,
                &creds,
                &format!("/{id}?list-type=2&continuation-token={token}{encoding}"),
            )
            .await;
            assert_eq!(got.status, 400, "{token}{encoding}: {}", got.text());
            assert_eq!(got.code().as_deref(), Some("InvalidArgument"), "{token}");
        }
    }
    // Tokens the endpoint hands out still page through the bucket.
    let s3 = h.s3_client(&creds);
    put(&s3, &id, "l", b"v").await.unwrap();
    let first = s3_result(s3.list_objects_v2().bucket(&id).max_keys(1).send().await).unwrap();
    let token = first.next_continuation_token().unwrap();
    let second = s3
        .list_objects_v2()
        .bucket(&id)
        .continuation_token(token)
        .send()
        .await
        .unwrap();
    assert_eq!(second.contents()[0].key(), Some("l"));
    assert_eq!(second.continuation_token(), Some(token));
    h.stop().await;
}

#[tokio::test]
async fn names_xml_cannot_carry_are_listed_only_url_encoded() {
    let h = Harness::start().await;
    let (id, creds) = bucket_with_object(&h, "ctl").await;
    let s3 = h.s3_client(&creds);
    for key in ["ctl/\u{1}bell", "ctl/cr\rlf", "ctl/nul\u{0}"] {
        put(&s3, &id, key, b"v").await.unwrap();
    }

    // Asked for plainly, the listing refuses rather than send them.
    for query in [
        format!("/{id}?list-type=2"),
        format!("/{id}?list-type=2&prefix=ctl/"),
        format!("/{id}?list-type=2&delimiter=/&prefix=ctl/"),
        format!("/{id}"),
        format!("/{id}?uploads"),
    ] {
        let got = signed_get(&h, &creds, &query).await;
        if query.ends_with("uploads") {
            assert_eq!(got.status, 200, "{query}: no upload yet: {}", got.text());
            continue;
        }
        assert_eq!(got.status, 400, "{query}: {}", got.text());
        assert_eq!(got.code().as_deref(), Some("InvalidArgument"));
        assert!(got.text().contains("encoding-type=url"), "{}", got.text());
    }
    // So are names the request itself echoes.
    for query in [
        format!("/{id}?list-type=2&prefix=%01"),
        format!("/{id}?list-type=2&delimiter=%1B"),
        format!("/{id}?list-type=2&start-after=%00"),
        format!("/{id}?marker=%0D"),
        format!("/{id}?uploads&prefix=%07"),
    ] {
        let got = signed_get(&h, &creds, &query).await;
        assert_eq!(got.status, 400, "{query}: {}", got.text());
        assert_eq!(got.code().as_deref(), Some("InvalidArgument"));
    }

    // With encoding-type=url every name is percent-encoded.
    let text = signed_ok(
        &h,
        &creds,
        &format!("/{id}?list-type=2&prefix=ctl/&encoding-type=url"),
    )
    .await;
    for encoded in ["ctl/%01bell", "ctl/cr%0Dlf", "ctl/nul%00"] {
        assert!(text.contains(&format!("<Key>{encoded}</Key>")), "{text}");
    }
    let query = "list-type=2&prefix=%01&delimiter=%1B&start-after=%00&encoding-type=url";
    let text = signed_ok(&h, &creds, &format!("/{id}?{query}")).await;
    assert_eq!(raw::element(&text, "Prefix").as_deref(), Some("%01"));
    assert_eq!(raw::element(&text, "Delimiter").as_deref(), Some("%1B"));
    assert_eq!(raw::element(&text, "StartAfter").as_deref(), Some("%00"));
    let text = signed_ok(&h, &creds, &format!("/{id}?marker=%0D&encoding-type=url")).await;
    assert_eq!(raw::element(&text, "Marker").as_deref(), Some("%0D"));

    // With the AWS SDK, which leaves the names encoded.
    let listed = s3
        .list_objects_v2()
        .bucket(&id)
        .prefix("ctl/")
        .encoding_type(aws_sdk_s3::types::EncodingType::Url)
        .send()
        .await
        .unwrap();
    let keys: Vec<_> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["ctl/%01bell", "ctl/cr%0Dlf", "ctl/nul%00"]);

    // Responses that would echo such a key leave it out; its error
    // messages escape it.
    let call = s3.create_multipart_upload().bucket(&id).key("ctl/\u{1}up");
    let up = call.send().await.unwrap();
    assert_eq!(up.key(), None);
    let got = signed_get(&h, &creds, &format!("/{id}?uploads")).await;
    assert_eq!(got.status, 400, "{}", got.text());
    let got = signed_get(&h, &creds, &format!("/{id}?uploads&encoding-type=url")).await;
    assert!(
        got.text().contains("<Key>ctl/%01up</Key>"),
        "{}",
        got.text()
    );
    let got = signed_get(&h, &creds, &format!("/{id}/ctl/%01missing")).await;
    assert_eq!(got.code().as_deref(), Some("NoSuchKey"));
    h.stop().await;
}

/// An unsigned ListBuckets that keeps its connection open (answered 403).
const KEEP_ALIVE_GET: &[u8] = b"GET / HTTP/1.1\r\nhost: s3\r\n\r\n";

#[tokio::test]
async fn connections_that_do_not_send_a_request_head_in_time_are_closed() {
    use tokio::io::AsyncWriteExt as _;
    let h = Harness::start_with(|c| {
        c.s3_header_read_timeout = std::time::Duration::from_millis(300);
    })
    .await;
    let addr = h.s3.local_addr();
    let bound = std::time::Duration::from_secs(20);

    // Silent, a partial head, and a head trickling in a byte at a time.
    let mut sockets = Vec::new();
    for i in 0..30 {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        if i % 3 == 1 {
            s.write_all(b"GET / HTTP/1.1\r\nhost: s3\r\nx-slow: ")
                .await
                .unwrap();
        }
        sockets.push(s);
    }
    let mut trickle = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = trickle.split();
    let drip = async {
        for b in b"GET / HTTP/1.1\r\nhost: s3\r\n".iter().cycle().take(400) {
            if writer.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    let (closed, ()) = tokio::join!(
        async {
            let mut buf = [0u8; 256];
            tokio::time::timeout(bound, async {
                while matches!(tokio::io::AsyncReadExt::read(&mut reader, &mut buf).await, Ok(n) if n > 0) {}
            })
            .await
            .is_ok()
        },
        drip
    );
    assert!(closed, "a head sent a byte at a time is cut off");
    for (i, s) in sockets.iter_mut().enumerate() {
        assert!(
            raw::closed_within(s, bound).await,
            "socket {i} is still open"
        );
    }

    // A kept-alive connection idle after its request is closed too, and
    // the endpoint still serves.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(KEEP_ALIVE_GET).await.unwrap();
    assert_eq!(raw::read_response(&mut s).await.status, 403);
    assert!(raw::closed_within(&mut s, bound).await);
    h.stop().await;
}

#[tokio::test]
async fn connections_beyond_the_bound_wait_while_earlier_ones_are_served() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let h = Harness::start_with(|c| {
        c.s3_max_connections = 2;
        c.s3_header_read_timeout = std::time::Duration::from_secs(120);
    })
    .await;
    let addr = h.s3.local_addr();

    // Two connections take both slots: one kept alive, one idle mid-head.
    let mut first = tokio::net::TcpStream::connect(addr).await.unwrap();
    first.write_all(KEEP_ALIVE_GET).await.unwrap();
    assert_eq!(raw::read_response(&mut first).await.status, 403);
    let mut second = tokio::net::TcpStream::connect(addr).await.unwrap();
    second.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();

    // A third is not served while they hold them...
    let mut third = tokio::net::TcpStream::connect(addr).await.unwrap();
    third
        .write_all(b"GET / HTTP/1.1\r\nhost: s3\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let early =
        tokio::time::timeout(std::time::Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(early.is_err(), "the third connection was served: {early:?}");

    // ...while the earlier ones still are...
    first.write_all(KEEP_ALIVE_GET).await.unwrap();
    assert_eq!(raw::read_response(&mut first).await.status, 403);

    // ...and it is served as soon as one of them closes.
    drop(first);
    let mut rest = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        third.read_to_end(&mut rest),
    )
    .await
    .expect("served once a slot is free")
    .unwrap();
    assert!(
        rest.starts_with(b"HTTP/1.1 403"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    drop(second);
    h.stop().await;
}
