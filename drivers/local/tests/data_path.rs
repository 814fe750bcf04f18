//! The S3 data path with a real S3 client: credentials from grants work on
//! their buckets, in the granted directions and categories, and nowhere else.

mod common;

use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use common::*;
use cosi_driver::proto::AccessMode::{ReadOnly, ReadWrite, Unspecified, WriteOnly};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn read_all(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Vec<u8> {
    get(s3, bucket, key).await.unwrap()
}

#[tokio::test]
async fn read_write_credentials_write_and_read_their_bucket() {
    let h = Harness::start().await;
    let (id, s3) = h.bucket_client("d1", &[]).await;
    let written = s3
        .put_object()
        .bucket(&id)
        .key("dir/hello.txt")
        .content_type("text/plain")
        .metadata("owner", "team-a")
        .body(body(b"hello world"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        written.e_tag(),
        Some("\"5eb63bbbe01eeed093cb22bb8f5acdc3\"")
    );
    assert_eq!(read_all(&s3, &id, "dir/hello.txt").await, b"hello world");

    let meta = head(&s3, &id, "dir/hello.txt").await.unwrap();
    assert_eq!(meta.content_length(), Some(11));
    assert_eq!(meta.content_type(), Some("text/plain"));
    assert_eq!(meta.metadata().unwrap()["owner"], "team-a");

    let call = s3.get_object().bucket(&id).key("dir/hello.txt");
    let ranged = call.range("bytes=6-").send().await.unwrap();
    assert_eq!(
        ranged.body.collect().await.unwrap().into_bytes().as_ref(),
        b"world"
    );

    put(&s3, &id, "top", b"x").await.unwrap();
    let listed = s3_result(s3.list_objects_v2().bucket(&id).delimiter("/").send().await).unwrap();
    let keys: Vec<_> = listed.contents().iter().filter_map(|o| o.key()).collect();
    let prefixes: Vec<_> = listed
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix())
        .collect();
    assert_eq!(keys, ["top"]);
    assert_eq!(prefixes, ["dir/"]);

    copy(&s3, &id, "copy", &format!("{id}/top")).await.unwrap();
    assert_eq!(read_all(&s3, &id, "copy").await, b"x");

    delete(&s3, &id, "top").await.unwrap();
    assert_eq!(get(&s3, &id, "top").await.unwrap_err(), "NoSuchKey");
    h.stop().await;
}

#[tokio::test]
async fn read_only_credentials_cannot_write() {
    let h = Harness::start().await;
    let (id, _writer) = h.bucket_holding("d2", "k", b"v").await;
    let ro = object_data(ReadOnly);
    let reader = h.s3_client(&h.grant("ba-d2r", &[(&id, ro)]).await);
    assert_eq!(read_all(&reader, &id, "k").await, b"v");
    list(&reader, &id).await.unwrap();
    assert_eq!(
        put(&reader, &id, "k2", b"v").await.unwrap_err(),
        "AccessDenied"
    );
    assert_eq!(delete(&reader, &id, "k").await.unwrap_err(), "AccessDenied");
    let err = start_upload(&reader, &id, "m").await;
    assert_eq!(err.unwrap_err(), "AccessDenied");
    h.stop().await;
}

#[tokio::test]
async fn write_only_credentials_cannot_read() {
    let h = Harness::start().await;
    let (id, s3) = h.bucket_client_as("d3", &[], object_data(WriteOnly)).await;
    put(&s3, &id, "k", b"v").await.unwrap();
    assert_eq!(get(&s3, &id, "k").await.unwrap_err(), "AccessDenied");
    assert_eq!(list(&s3, &id).await.unwrap_err(), "AccessDenied");
    assert_eq!(head(&s3, &id, "k").await.unwrap_err(), "HTTP 403");
    h.stop().await;
}

#[tokio::test]
async fn other_buckets_are_denied_and_not_listed() {
    let h = Harness::start().await;
    let [mine, theirs] = h.buckets(["bc-d4a", "bc-d4b"]).await;
    let s3 = h.s3_client(&h.grant("ba-d4", &[(&mine, rw())]).await);
    assert_eq!(
        put(&s3, &theirs, "k", b"v").await.unwrap_err(),
        "AccessDenied"
    );
    assert_eq!(list(&s3, &theirs).await.unwrap_err(), "AccessDenied");
    let err = s3.head_bucket().bucket(&theirs).send().await.unwrap_err();
    assert_eq!(s3_code(&err), "HTTP 403");
    s3.head_bucket().bucket(&mine).send().await.unwrap();
    let listed = s3.list_buckets().send().await.unwrap();
    let names: Vec<_> = listed.buckets().iter().filter_map(|b| b.name()).collect();
    assert_eq!(names, [mine.as_str()]);
    h.stop().await;
}

#[tokio::test]
async fn buckets_cannot_be_created_or_deleted_through_s3() {
    let h = Harness::start().await;
    let all = modes(ReadWrite, ReadWrite, ReadWrite);
    let (id, s3) = h.bucket_client_as("d5", &[], all).await;
    let err = s3_result(s3.create_bucket().bucket("sneaky").send().await).unwrap_err();
    assert_eq!(err, "AccessDenied");
    let err = s3.delete_bucket().bucket(&id).send().await.unwrap_err();
    assert_eq!(s3_code(&err), "AccessDenied");
    // Its own bucket exists already and is its own, as AWS answers an
    // owner (`aws s3 mb` and rclone take this as success).
    let err = s3.create_bucket().bucket(&id).send().await.unwrap_err();
    assert_eq!(s3_code(&err), "BucketAlreadyOwnedByYou");
    assert_eq!(err.raw_response().map(|r| r.status().as_u16()), Some(409));
    let read_only = h.s3_client(&h.grant("ba-d5b", &[(&id, object_data(ReadOnly))]).await);
    let err = s3_result(read_only.create_bucket().bucket(&id).send().await).unwrap_err();
    assert_eq!(err, "BucketAlreadyOwnedByYou");
    assert_eq!(h.driver.backend_state().unwrap().buckets.len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn one_key_works_on_every_bucket_of_a_multi_bucket_grant() {
    let h = Harness::start().await;
    let [a, b] = h.buckets(["bc-d6a", "bc-d6b"]).await;
    let creds = h
        .grant("ba-d6", &[(&a, rw()), (&b, object_data(ReadOnly))])
        .await;
    let s3 = h.s3_client(&creds);
    put(&s3, &a, "k", b"in a").await.unwrap();
    // Copy from a to b is refused (b is read-only); b is still readable.
    assert_eq!(put(&s3, &b, "k", b"v").await.unwrap_err(), "AccessDenied");
    list(&s3, &b).await.unwrap();
    let names: Vec<String> = s3
        .list_buckets()
        .send()
        .await
        .unwrap()
        .buckets()
        .iter()
        .filter_map(|x| x.name().map(str::to_owned))
        .collect();
    assert_eq!(names, [a.clone(), b.clone()]);
    let state = h.driver.backend_state().unwrap();
    assert_eq!(state.accounts[0].buckets, [a, b]);
    h.stop().await;
}

#[tokio::test]
async fn a_revoked_key_fails_on_its_next_request() {
    let h = Harness::start().await;
    let (id, s3) = h.bucket_holding("d7", "k", b"v").await;
    h.revoke("ba-d7", &id).await;
    assert_eq!(get(&s3, &id, "k").await.unwrap_err(), "InvalidAccessKeyId");
    h.stop().await;
}

#[tokio::test]
async fn a_wrong_secret_key_is_a_signature_mismatch() {
    let h = Harness::start().await;
    let (id, creds) = h.granted_bucket("d8", &[]).await;
    let s3 = s3_client(
        h.s3.endpoint_url(),
        &creds.access_key_id,
        "not-the-secret-key-at-all-000000000000000",
    );
    assert_eq!(list(&s3, &id).await.unwrap_err(), "SignatureDoesNotMatch");
    let unknown = s3_client(h.s3.endpoint_url(), "LCLUNKNOWNKEY0000000", "whatever");
    assert_eq!(list(&unknown, &id).await.unwrap_err(), "InvalidAccessKeyId");
    h.stop().await;
}

#[tokio::test]
async fn anonymous_requests_are_denied() {
    let h = Harness::start().await;
    let id = h.bucket("bc-d9", &[]).await;
    let mut conn = tokio::net::TcpStream::connect(h.s3.local_addr())
        .await
        .unwrap();
    let request = format!(
        "GET /{id}/k HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        h.s3.local_addr()
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    conn.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 403"), "{response}");
    assert!(response.contains("<Code>AccessDenied</Code>"), "{response}");
    h.stop().await;
}

#[tokio::test]
async fn bucket_metadata_needs_the_bucket_metadata_mode() {
    let h = Harness::start().await;
    let (id, data_only) = h.bucket_client("d10", &[]).await;
    let tagging = one_tag("team", "a");
    let err = put_bucket_tags(&data_only, &id, tagging.clone()).await;
    assert_eq!(err.unwrap_err(), "AccessDenied");
    let err = s3_result(data_only.get_bucket_versioning().bucket(&id).send().await).unwrap_err();
    assert_eq!(err, "AccessDenied");
    // The location is bucket metadata, but any grant may read it: s3cmd
    // asks for it before anything else.
    s3_result(data_only.get_bucket_location().bucket(&id).send().await).unwrap();

    let meta_rw = modes(Unspecified, Unspecified, ReadWrite);
    let admin = h.s3_client(&h.grant("ba-d10b", &[(&id, meta_rw)]).await);
    put_bucket_tags(&admin, &id, tagging).await.unwrap();
    let tags = admin.get_bucket_tagging().bucket(&id).send().await.unwrap();
    assert_eq!(tags.tag_set()[0].key(), "team");
    s3_result(admin.get_bucket_versioning().bucket(&id).send().await).unwrap();
    s3_result(admin.get_bucket_location().bucket(&id).send().await).unwrap();
    let err = s3_result(admin.get_bucket_policy().bucket(&id).send().await).unwrap_err();
    assert_eq!(err, "NoSuchBucketPolicy");
    // Bucket metadata does not give object data.
    assert_eq!(list(&admin, &id).await.unwrap_err(), "AccessDenied");

    let meta_ro = modes(Unspecified, Unspecified, ReadOnly);
    let viewer = h.s3_client(&h.grant("ba-d10c", &[(&id, meta_ro)]).await);
    s3_result(viewer.get_bucket_tagging().bucket(&id).send().await).unwrap();
    let err = s3_result(viewer.delete_bucket_tagging().bucket(&id).send().await).unwrap_err();
    assert_eq!(err, "AccessDenied");
    h.stop().await;
}

#[tokio::test]
async fn object_tags_need_the_object_metadata_mode() {
    let h = Harness::start().await;
    let (id, data_only) = h.bucket_holding("d11", "k", b"v").await;
    let tagging = one_tag("class", "gold");
    let err = put_tags(&data_only, &id, "k", tagging.clone()).await;
    assert_eq!(err.unwrap_err(), "AccessDenied");
    // Tags on upload are object metadata too.
    let err = put_tagged(&data_only, &id, "t", "class=gold").await;
    assert_eq!(err.unwrap_err(), "AccessDenied");

    let both = modes(ReadWrite, ReadWrite, Unspecified);
    let tagger = h.s3_client(&h.grant("ba-d11b", &[(&id, both)]).await);
    put_tags(&tagger, &id, "k", tagging).await.unwrap();
    put_tagged(&tagger, &id, "t", "class=silver&tier=2")
        .await
        .unwrap();
    let got = object_tags(&tagger, &id, "t").await.unwrap();
    let tags: Vec<(&str, &str)> = got.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(tags, [("class", "silver"), ("tier", "2")]);
    s3_result(tagger.get_object_acl().bucket(&id).key("k").send().await).unwrap();
    h.stop().await;
}

#[tokio::test]
async fn copies_need_read_access_to_the_source_bucket() {
    let h = Harness::start().await;
    let (src, _owner) = h.bucket_holding("d12a", "secret", b"s").await;
    let (dst, other) = h.bucket_client("d12b", &[]).await;
    let err = copy(&other, &dst, "stolen", &format!("{src}/secret")).await;
    assert_eq!(err.unwrap_err(), "AccessDenied");
    h.stop().await;
}

#[tokio::test]
async fn multipart_uploads_assemble_their_parts() {
    let h = Harness::start().await;
    let (id, s3) = h.bucket_client("d13", &[]).await;
    let part1 = vec![b'a'; 5 * 1024 * 1024];
    let (upload_id, parts) =
        upload_parts(&s3, &id, "big", vec![part1.clone(), b"tail".to_vec()]).await;
    let call = s3.list_parts().bucket(&id).key("big");
    let listed = call.upload_id(&upload_id).send().await.unwrap();
    assert_eq!(listed.parts().len(), 2);
    let done = complete_upload(&s3, &id, "big", &upload_id, parts)
        .await
        .unwrap();
    assert!(
        done.e_tag().unwrap().ends_with("-2\""),
        "{:?}",
        done.e_tag()
    );
    let data = read_all(&s3, &id, "big").await;
    assert_eq!(data.len(), part1.len() + 4);
    assert!(data.ends_with(b"tail"));
    // Only the assembled object remains on disk.
    assert_eq!(
        std::fs::read_dir(h.driver.bucket_dir(&id)).unwrap().count(),
        1
    );
    h.stop().await;
}

#[tokio::test]
async fn the_size_quota_refuses_puts_and_parts_over_it() {
    let h = Harness::start().await;
    let (id, s3) = h.bucket_client("d14", &[("maxSizeBytes", "6Mi")]).await;
    put(&s3, &id, "small", vec![0u8; 1024 * 1024])
        .await
        .unwrap();
    let err = put(&s3, &id, "too-big", vec![0u8; 6 * 1024 * 1024]).await;
    assert_eq!(err.unwrap_err(), "QuotaExceeded");

    // 1 MiB stored + a 5 MiB part: the bucket is full...
    let (upload_id, mut parts) =
        upload_parts(&s3, &id, "mp", vec![vec![1u8; 5 * 1024 * 1024]]).await;
    // ...so a second part does not fit.
    let err = upload_part(&s3, &id, "mp", &upload_id, 2, vec![1u8; 512 * 1024]).await;
    assert_eq!(err.unwrap_err(), "QuotaExceeded");
    // Freeing space lets it in, and the upload completes.
    delete(&s3, &id, "small").await.unwrap();
    let etag = upload_part(&s3, &id, "mp", &upload_id, 2, vec![1u8; 512 * 1024])
        .await
        .unwrap();
    parts.push(
        aws_sdk_s3::types::CompletedPart::builder()
            .part_number(2)
            .e_tag(etag)
            .build(),
    );
    complete_upload(&s3, &id, "mp", &upload_id, parts)
        .await
        .unwrap();
    let state = h.driver.backend_state().unwrap();
    assert_eq!(state.buckets[0].used_bytes, 5 * 1024 * 1024 + 512 * 1024);
    h.stop().await;
}

#[tokio::test]
async fn pending_multipart_parts_count_against_the_size_quota() {
    const KIB: usize = 1024;
    let h = Harness::start().await;
    let (id, s3) = h.bucket_client("d14p", &[("maxSizeBytes", "1Mi")]).await;

    // 768 KiB of parts pending leave 256 KiB: no part, of this upload or
    // another, and no object may take more.
    let first = start_upload(&s3, &id, "a").await.unwrap();
    upload_part(&s3, &id, "a", &first, 1, vec![1u8; 768 * KIB])
        .await
        .unwrap();
    let over = upload_part(&s3, &id, "a", &first, 2, vec![2u8; 512 * KIB]).await;
    assert_eq!(over.unwrap_err(), "QuotaExceeded");
    let second = start_upload(&s3, &id, "b").await.unwrap();
    let over = upload_part(&s3, &id, "b", &second, 1, vec![3u8; 512 * KIB]).await;
    assert_eq!(over.unwrap_err(), "QuotaExceeded");
    let over = put(&s3, &id, "object", vec![4u8; 512 * KIB]).await;
    assert_eq!(over.unwrap_err(), "QuotaExceeded");
    // A part uploaded again replaces the old one: counted once.
    upload_part(&s3, &id, "a", &first, 1, vec![5u8; 1024 * KIB])
        .await
        .unwrap();

    // Aborting releases the parts.
    for (key, upload) in [("a", &first), ("b", &second)] {
        let abort = s3.abort_multipart_upload().bucket(&id).key(key);
        s3_result(abort.upload_id(upload).send().await).unwrap();
    }
    put(&s3, &id, "whole", vec![6u8; 1024 * KIB]).await.unwrap();
    delete(&s3, &id, "whole").await.unwrap();

    // Completing with one of two parts stores that part once and releases
    // the other.
    let (upload, parts) = upload_parts(
        &s3,
        &id,
        "c",
        vec![vec![7u8; 300 * KIB], vec![8u8; 300 * KIB]],
    )
    .await;
    complete_upload(&s3, &id, "c", &upload, parts[1..].to_vec())
        .await
        .unwrap();
    put(&s3, &id, "fill", vec![9u8; 724 * KIB]).await.unwrap();
    let over = put(&s3, &id, "one-more", b"x").await;
    assert_eq!(over.unwrap_err(), "QuotaExceeded");
    let state = h.driver.backend_state().unwrap();
    assert_eq!(state.buckets[0].used_bytes, 1024 * KIB as u64);
    h.stop().await;
}

#[tokio::test]
async fn listings_paginate_with_continuation_tokens() {
    let h = Harness::start().await;
    let (id, s3) = h.bucket_client("d15", &[]).await;
    for i in 0..5 {
        put(&s3, &id, &format!("k{i}"), b"v").await.unwrap();
    }
    let mut keys = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..10 {
        let call = s3.list_objects_v2().bucket(&id).max_keys(2);
        let page = s3_result(call.set_continuation_token(token.clone()).send().await).unwrap();
        keys.extend(
            page.contents()
                .iter()
                .filter_map(|o| o.key().map(str::to_owned)),
        );
        token = page.next_continuation_token().map(str::to_owned);
        if !page.is_truncated().unwrap_or(false) {
            break;
        }
    }
    assert_eq!(keys, ["k0", "k1", "k2", "k3", "k4"]);
    let objects = keys
        .iter()
        .map(|k| ObjectIdentifier::builder().key(k).build().unwrap())
        .collect();
    let batch = Delete::builder().set_objects(Some(objects)).build();
    let deleted = s3
        .delete_objects()
        .bucket(&id)
        .delete(batch.unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.deleted().len(), 5);
    assert_eq!(h.driver.backend_state().unwrap().buckets[0].objects, 0);
    h.stop().await;
}

/// Whether the backend holds a directory for bucket `id`.
fn has_directory(h: &Harness, id: &str) -> bool {
    let state = h.driver.backend_state().unwrap();
    assert!(state.stray_directories.is_empty(), "{state:?}");
    state
        .buckets
        .iter()
        .find(|b| b.id == id)
        .is_some_and(|b| b.directory_exists)
}

#[tokio::test]
async fn a_bucket_gets_its_directory_with_its_first_object_and_loses_it_when_deleted() {
    let h = Harness::start().await;
    let [put_first, part_first] = h.buckets(["bc-lazy1", "bc-lazy2"]).await;
    let s3 = h.s3_client(
        &h.grant("ba-lazy", &[(&put_first, rw()), (&part_first, rw())])
            .await,
    );
    assert!(!has_directory(&h, &put_first));
    assert!(!has_directory(&h, &part_first));
    // An empty bucket lists as empty.
    let listed = s3_result(s3.list_objects_v2().bucket(&put_first).send().await).unwrap();
    assert_eq!(listed.key_count(), Some(0));

    put(&s3, &put_first, "k", b"first").await.unwrap();
    assert!(has_directory(&h, &put_first));
    assert_eq!(read_all(&s3, &put_first, "k").await, b"first");

    // A multipart upload's first part makes the directory too.
    let (upload_id, parts) = upload_parts(&s3, &part_first, "m", vec![b"part".to_vec()]).await;
    assert!(has_directory(&h, &part_first));
    complete_upload(&s3, &part_first, "m", &upload_id, parts)
        .await
        .unwrap();
    assert_eq!(read_all(&s3, &part_first, "m").await, b"part");

    // Deleting the bucket removes its directory; a later write makes none.
    h.provisioner()
        .driver_delete_bucket(cosi_driver::proto::DriverDeleteBucketRequest {
            bucket_id: put_first.clone(),
            parameters: Default::default(),
        })
        .await
        .unwrap();
    assert_eq!(
        put(&s3, &put_first, "late", b"late").await.unwrap_err(),
        "NoSuchBucket"
    );
    let state = h.driver.backend_state().unwrap();
    assert!(state.buckets.iter().all(|b| b.id != put_first));
    assert!(state.stray_directories.is_empty(), "{state:?}");
    h.stop().await;
}
