//! What the driver keeps on disk is its user's alone: directories 0700,
//! files 0600, whatever the umask (every test here runs with umask 000,
//! which would leave everything world-writable), and a data directory
//! left looser by an earlier version is tightened at start-up.

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use common::*;

/// Sets the process umask to 000. Every test in this binary does, so
/// their running in parallel changes nothing.
fn umask_000() {
    // SAFETY: umask only swaps the process's file mode mask.
    unsafe {
        libc::umask(0);
    }
}

/// Every directory and file under `root`, with its mode bits.
fn modes(root: &Path) -> Vec<(String, bool, u32)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_owned()];
    while let Some(p) = todo.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let name = p.strip_prefix(root).unwrap().display().to_string();
        out.push((name, meta.is_dir(), meta.permissions().mode() & 0o7777));
        if meta.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                todo.push(e.unwrap().path());
            }
        }
    }
    out.sort();
    out
}

fn assert_private(root: &Path) {
    let all = modes(root);
    assert!(all.len() >= 6, "{all:?}");
    for (name, is_dir, mode) in all {
        let want = if is_dir { 0o700 } else { 0o600 };
        assert_eq!(mode, want, "{name:?} is {mode:o}");
    }
}

/// Writes an object and a multipart object to a new bucket.
async fn write_objects(h: &Harness, name: &str) -> (String, aws_sdk_s3::Client) {
    let (id, s3) = h.bucket_client(name, &[]).await;
    put(&s3, &id, "plain", b"contents").await.unwrap();
    let (upload_id, parts) = upload_parts(&s3, &id, "parts", vec![b"part".to_vec()]).await;
    complete_upload(&s3, &id, "parts", &upload_id, parts)
        .await
        .unwrap();
    (id, s3)
}

#[tokio::test]
async fn everything_the_driver_writes_is_private_whatever_the_umask() {
    umask_000();
    let h = Harness::start().await;
    write_objects(&h, "umask").await;
    assert_private(h.driver.data_dir());
    h.stop().await;
}

#[tokio::test]
async fn a_data_directory_left_looser_is_tightened_at_start_up() {
    umask_000();
    let h = Harness::start().await;
    let (id, _) = write_objects(&h, "earlier").await;
    let data = h.driver.data_dir().to_owned();
    let dir = h.stop().await;

    // As an earlier version left it (0755 and 0644), with the root as
    // kubelet leaves a volume with an fsGroup (setgid, group-writable).
    for (name, is_dir, _) in modes(&data) {
        let mode = match (name.as_str(), is_dir) {
            ("", _) => 0o2775,
            (_, true) => 0o755,
            (_, false) => 0o644,
        };
        std::fs::set_permissions(data.join(&name), std::fs::Permissions::from_mode(mode)).unwrap();
    }

    let h = Harness::start_in(dir).await;
    assert_private(&data);
    let s3 = h.s3_client(&h.grant("ba-after", &[(&id, rw())]).await);
    let got = s3_result(s3.get_object().bucket(&id).key("parts").send().await).unwrap();
    assert_eq!(&got.body.collect().await.unwrap().into_bytes()[..], b"part");
    h.stop().await;
}
