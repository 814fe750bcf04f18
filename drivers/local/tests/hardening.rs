//! The limits the S3 endpoint enforces against misuse, each tried the way
//! an attacker or a careless client would: with the AWS SDK where it can
//! send the request, with crafted raw HTTP where it would refuse to.

mod common;

use aws_sdk_s3::types::MetadataDirective;
use common::raw;
use common::*;

const BIG: usize = 100 * 1024;

#[tokio::test]
async fn user_metadata_over_2_kb_is_refused_and_nothing_is_stored() {
    let h = Harness::start().await;
    let id = h.bucket("bc-meta", &[]).await;
    let s3 = h.s3_client(&h.grant("ba-meta", &[(&id, rw())]).await);

    // 2 KB of keys and values in all is allowed.
    s3.put_object()
        .bucket(&id)
        .key("fits")
        .metadata("a", "v".repeat(2047))
        .body(body(b"x"))
        .send()
        .await
        .unwrap();

    let err = s3
        .put_object()
        .bucket(&id)
        .key("big")
        .metadata("a", "v".repeat(BIG))
        .body(body(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(s3_code(&err), "MetadataTooLarge");
    let err = s3
        .put_object()
        .bucket(&id)
        .key("big")
        .metadata("a", "v".repeat(1024))
        .metadata("b", "v".repeat(1024))
        .body(body(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(s3_code(&err), "MetadataTooLarge");

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
    let uploads = s3
        .list_multipart_uploads()
        .bucket(&id)
        .send()
        .await
        .unwrap();
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
    raw::send(
        h.s3.local_addr(),
        &raw::request("PUT", &target, &headers, &encoded),
    )
    .await
}

/// Files in the bucket's directory (blobs, committed or not).
fn blob_files(h: &Harness, id: &str) -> usize {
    std::fs::read_dir(h.driver.bucket_dir(id)).map_or(0, |d| d.count())
}

#[tokio::test]
async fn an_aws_chunked_body_must_match_its_declared_decoded_length() {
    let h = Harness::start().await;
    let id = h.bucket("bc-chunked", &[]).await;
    let creds = h.grant("ba-chunked", &[(&id, rw())]).await;
    let url = |key: &str| format!("{}/{id}/{key}", h.s3.endpoint_url());

    // As declared: stored.
    let ok = chunked_put(&h, &creds, &url("exact"), b"0123456789", 10).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let s3 = h.s3_client(&creds);
    let got = s3
        .get_object()
        .bucket(&id)
        .key("exact")
        .send()
        .await
        .unwrap();
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
