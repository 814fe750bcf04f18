//! Object contents on disk: `<data-dir>/buckets/<bucket-id>/<blob>`, one
//! file per object or multipart part, named by a random UUID so that keys
//! never become paths (no traversal, no file/directory clashes). A blob is
//! written and synced before the record pointing at it is committed, and
//! deleted only after the record stopped pointing at it; a crash in between
//! leaves an unreferenced blob, which [`sweep`] removes at start-up. A
//! bucket's directory is made by its first blob, so an empty bucket costs
//! no directory. Directories are 0700 and blobs 0600 (see `file_modes`).

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use s3s::crypto::{Checksum as _, Md5};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use crate::file_modes;

/// Size of the chunks object contents are read in.
const CHUNK: usize = 64 * 1024;

/// The directory holding bucket directories.
pub fn buckets_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("buckets")
}

/// A new blob name.
pub fn new_blob_name() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// What writing a blob produced.
pub struct Written {
    /// Bytes written.
    pub size: u64,
    /// MD5 of the contents.
    pub md5: [u8; 16],
}

/// Why writing a blob failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteBlobError {
    /// The request body failed.
    #[error("reading the request body: {0}")]
    Body(s3s::StdError),
    /// The body grew past the allowed size.
    #[error("the body is larger than {0} bytes")]
    TooLarge(u64),
    /// The body is not as long as the request declared.
    #[error("the body has {got} bytes or more where {declared} were declared")]
    LengthMismatch {
        /// The declared length.
        declared: u64,
        /// The bytes received when the mismatch was found.
        got: u64,
    },
    /// The file system failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// How long a body may and must be.
#[derive(Clone, Copy, Debug)]
pub struct Length {
    /// At most this many bytes are accepted.
    pub limit: u64,
    /// The length the request declared, which the body must have exactly
    /// (an `aws-chunked` body's `x-amz-decoded-content-length` is only a
    /// claim until its chunks are counted).
    pub declared: Option<u64>,
}

/// Writes `body` to a new blob file at `path` (mode 0600; its directory
/// must exist, see [`make_dir`]), feeding every chunk to `inspect`, and syncs it. The
/// body must fit `length`. The file is removed on failure.
pub async fn write<S, E>(
    path: &Path,
    body: S,
    length: Length,
    mut inspect: impl FnMut(&[u8]),
) -> Result<Written, WriteBlobError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: Into<s3s::StdError>,
{
    let result = write_inner(path, body, length, &mut inspect).await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(path).await;
    }
    result
}

async fn write_inner<S, E>(
    path: &Path,
    mut body: S,
    length: Length,
    inspect: &mut impl FnMut(&[u8]),
) -> Result<Written, WriteBlobError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: Into<s3s::StdError>,
{
    let mut file = file_modes::create_file(path).await?;
    let mut md5 = Md5::new();
    let mut size: u64 = 0;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| WriteBlobError::Body(e.into()))?;
        size += chunk.len() as u64;
        if let Some(declared) = length.declared
            && size > declared
        {
            return Err(WriteBlobError::LengthMismatch {
                declared,
                got: size,
            });
        }
        if size > length.limit {
            return Err(WriteBlobError::TooLarge(length.limit));
        }
        md5.update(&chunk);
        inspect(&chunk);
        file.write_all(&chunk).await?;
    }
    if let Some(declared) = length.declared
        && size != declared
    {
        return Err(WriteBlobError::LengthMismatch {
            declared,
            got: size,
        });
    }
    file.flush().await?;
    file.sync_all().await?;
    Ok(Written {
        size,
        md5: md5.finalize(),
    })
}

/// Streams `len` bytes of the blob at `path` from `offset`.
pub async fn read(
    path: &Path,
    offset: u64,
    len: u64,
) -> io::Result<impl Stream<Item = io::Result<Bytes>> + Send + Sync + 'static> {
    let mut file = tokio::fs::File::open(path).await?;
    file.seek(io::SeekFrom::Start(offset)).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Bytes>>(4);
    tokio::spawn(async move {
        let mut left = len;
        while left > 0 {
            let want = usize::try_from(left).unwrap_or(CHUNK).min(CHUNK);
            let mut buf = vec![0u8; want];
            let got = match file.read(&mut buf).await {
                Ok(0) => {
                    let _ = tx
                        .send(Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "blob is shorter than its record",
                        )))
                        .await;
                    return;
                }
                Ok(n) => n,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            buf.truncate(got);
            left -= got as u64;
            if tx.send(Ok(Bytes::from(buf))).await.is_err() {
                return;
            }
        }
    });
    Ok(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// Creates a new, empty blob file at `path` (mode 0600) for writing.
pub async fn create(path: &Path) -> io::Result<tokio::fs::File> {
    file_modes::create_file(path).await
}

/// Appends the whole blob at `from` to `to`, feeding chunks to `inspect`.
pub async fn append(
    to: &mut tokio::fs::File,
    from: &Path,
    mut inspect: impl FnMut(&[u8]),
) -> io::Result<u64> {
    let mut src = tokio::fs::File::open(from).await?;
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    loop {
        let n = src.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        inspect(&buf[..n]);
        to.write_all(&buf[..n]).await?;
        total += n as u64;
    }
}

/// Removes blobs, ignoring those already gone.
pub async fn remove_all(dir: &Path, blobs: impl IntoIterator<Item = String>) {
    for b in blobs {
        if let Err(e) = tokio::fs::remove_file(dir.join(&b)).await
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(blob = %dir.join(&b).display(), error = %e, "could not remove unreferenced blob");
        }
    }
}

/// Removes every file in `dir` not named in `referenced`; returns how many.
pub fn sweep(dir: &Path, referenced: &HashSet<String>) -> io::Result<usize> {
    let mut removed = 0;
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_file() && !referenced.contains(&name) {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Makes directory `dir` in `parent` (mode 0700) unless it exists,
/// durably (the parent is synced); true when it was made now.
pub fn make_dir(dir: &Path, parent: &Path) -> io::Result<bool> {
    match file_modes::create_dir(dir) {
        Ok(()) => sync_dir(parent).map(|()| true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Syncs a directory so that entries created or removed in it survive a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_dir_makes_a_directory_once() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("b");
        assert!(make_dir(&dir, parent.path()).unwrap());
        assert!(dir.is_dir());
        assert!(!make_dir(&dir, parent.path()).unwrap());
        assert!(make_dir(&parent.path().join("no/such"), parent.path()).is_err());
    }

    #[test]
    fn sweep_keeps_referenced_blobs_only() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["keep", "orphan"] {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        let refs: HashSet<String> = ["keep".to_owned()].into();
        assert_eq!(sweep(dir.path(), &refs).unwrap(), 1);
        assert!(dir.path().join("keep").exists());
        assert!(!dir.path().join("orphan").exists());
        assert_eq!(sweep(&dir.path().join("missing"), &refs).unwrap(), 0);
    }

    #[tokio::test]
    async fn a_body_over_the_limit_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let body = futures::stream::iter(vec![Ok::<_, io::Error>(Bytes::from_static(b"hello"))]);
        let err = write(&path, body, limit(4), |_| {}).await.err().unwrap();
        assert!(matches!(err, WriteBlobError::TooLarge(4)));
        assert!(!path.exists());
    }

    fn limit(limit: u64) -> Length {
        Length {
            limit,
            declared: None,
        }
    }

    #[tokio::test]
    async fn a_body_must_have_its_declared_length_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let hello =
            || futures::stream::iter(vec![Ok::<_, io::Error>(Bytes::from_static(b"hello"))]);
        let declared = |n| Length {
            limit: u64::MAX,
            declared: Some(n),
        };
        for n in [4, 6] {
            let err = write(&path, hello(), declared(n), |_| {})
                .await
                .err()
                .unwrap();
            assert!(
                matches!(err, WriteBlobError::LengthMismatch { declared, .. } if declared == n),
                "{err}"
            );
            assert!(!path.exists());
        }
        assert_eq!(
            write(&path, hello(), declared(5), |_| {})
                .await
                .unwrap()
                .size,
            5
        );
    }

    #[tokio::test]
    async fn blobs_read_back_by_range() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let body = futures::stream::iter(vec![
            Ok::<_, io::Error>(Bytes::from_static(b"hello ")),
            Ok(Bytes::from_static(b"world")),
        ]);
        let w = write(&path, body, limit(u64::MAX), |_| {}).await.unwrap();
        assert_eq!(w.size, 11);
        let chunks: Vec<_> = read(&path, 6, 5).await.unwrap().collect().await;
        let got: Vec<u8> = chunks
            .into_iter()
            .flat_map(|c| c.unwrap().to_vec())
            .collect();
        assert_eq!(got, b"world");
    }
}
