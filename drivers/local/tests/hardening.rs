//! The limits the S3 endpoint enforces against misuse, each tried the way
//! an attacker or a careless client would: with the AWS SDK where it can
//! send the request, with crafted raw HTTP where it would refuse to.

mod common;

use aws_sdk_s3::types::MetadataDirective;
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
