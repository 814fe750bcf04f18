//! File modes of the data directory: what the driver keeps there (secret
//! keys in the state store, every object's contents) is for its own user
//! alone. Directories are 0700 and files 0600 whatever the process umask:
//! each is created with that mode and then set to it exactly. A data
//! directory written by an earlier version (0755 directories, 0644 blobs)
//! or loosened since is tightened at start-up.
//!
//! Ownership is never changed. On a Kubernetes volume with an `fsGroup`,
//! kubelet makes the volume's root belong to root and group fsGroup
//! (setgid, group-writable) and adds group access to what is inside: the
//! driver, running as a member of that group, tightens everything it owns
//! and, when it may not change the root's mode, logs a warning and goes
//! on (it works there through the group's access).

use std::io;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// Mode of every directory the driver makes.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file the driver writes.
pub const FILE_MODE: u32 = 0o600;

/// The mode to set on an entry whose mode bits are `current`, if any.
pub fn tightened(current: u32, is_dir: bool) -> Option<u32> {
    let want = if is_dir { DIR_MODE } else { FILE_MODE };
    (current & 0o7777 != want).then_some(want)
}

/// Makes directory `dir` (not its parents) with [`DIR_MODE`].
pub fn create_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(DIR_MODE).create(dir)?;
    set_mode(dir, DIR_MODE)
}

/// Makes `dir` and any missing parents with [`DIR_MODE`].
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .mode(DIR_MODE)
        .recursive(true)
        .create(dir)
}

/// Creates a new file at `path` for writing, with [`FILE_MODE`].
pub async fn create_file(path: &Path) -> io::Result<tokio::fs::File> {
    let file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .await?;
    // The umask may have taken bits away; set exactly.
    file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
        .await?;
    Ok(file)
}

/// Creates `path` with [`FILE_MODE`] unless it exists (the state store,
/// before the database opens it, so it never exists with a looser mode).
pub fn ensure_file(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(path)
        .map(drop)
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// What tightening a data directory did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tightened {
    /// Entries whose mode was changed.
    pub changed: usize,
    /// Entries whose mode the process may not change (not its own).
    pub not_permitted: Vec<PathBuf>,
}

/// Sets the mode of `path` (a directory when `is_dir`) with `chmod` when
/// it is not the right one; a refusal to a process that does not own it
/// is noted, not fatal.
fn tighten_one(
    path: &Path,
    mode: u32,
    is_dir: bool,
    chmod: &mut impl FnMut(&Path, u32) -> io::Result<()>,
    done: &mut Tightened,
) -> io::Result<()> {
    let Some(want) = tightened(mode, is_dir) else {
        return Ok(());
    };
    match chmod(path, want) {
        Ok(()) => done.changed += 1,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            done.not_permitted.push(path.to_owned());
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

/// Tightens what the driver keeps in `data_dir`: the directory itself,
/// `state_file`, `buckets_dir`, every bucket directory in it and every
/// file in those. Other entries (such as a file system's `lost+found`)
/// are not the driver's and are left alone.
pub fn tighten_data_dir(
    data_dir: &Path,
    state_file: &Path,
    buckets_dir: &Path,
    mut chmod: impl FnMut(&Path, u32) -> io::Result<()>,
) -> io::Result<Tightened> {
    let mut done = Tightened::default();
    let mode = |p: &Path| std::fs::symlink_metadata(p).map(|m| m.permissions().mode());
    for (path, is_dir) in [(data_dir, true), (buckets_dir, true), (state_file, false)] {
        match mode(path) {
            Ok(m) => tighten_one(path, m, is_dir, &mut chmod, &mut done)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let buckets = match std::fs::read_dir(buckets_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(done),
        Err(e) => return Err(e),
    };
    for bucket in buckets {
        let bucket = bucket?;
        if !bucket.file_type()?.is_dir() {
            continue;
        }
        let dir = bucket.path();
        let m = mode(&dir)?;
        tighten_one(&dir, m, true, &mut chmod, &mut done)?;
        for blob in std::fs::read_dir(&dir)? {
            let blob = blob?;
            if blob.file_type()?.is_file() {
                let m = mode(&blob.path())?;
                tighten_one(&blob.path(), m, false, &mut chmod, &mut done)?;
            }
        }
    }
    Ok(done)
}

/// [`tighten_data_dir`] with the real `chmod`, logging what it did.
pub fn secure_data_dir(data_dir: &Path, state_file: &Path, buckets_dir: &Path) -> io::Result<()> {
    let done = tighten_data_dir(data_dir, state_file, buckets_dir, set_mode)?;
    if done.changed > 0 {
        tracing::info!(
            data_dir = %data_dir.display(),
            changed = done.changed,
            "made the data directory private: directories 0700, files 0600"
        );
    }
    for path in &done.not_permitted {
        tracing::warn!(
            path = %path.display(),
            "cannot make this path private (0700/0600): it belongs to another user, as a volume's root does with an fsGroup; its contents are still made private"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_set_exactly_when_they_differ() {
        assert_eq!(tightened(0o40755, true), Some(DIR_MODE));
        assert_eq!(
            tightened(0o42775, true),
            Some(DIR_MODE),
            "setgid, as kubelet leaves it"
        );
        assert_eq!(tightened(0o40700, true), None);
        assert_eq!(tightened(0o100644, false), Some(FILE_MODE));
        assert_eq!(tightened(0o100660, false), Some(FILE_MODE));
        assert_eq!(tightened(0o100400, false), Some(FILE_MODE));
        assert_eq!(tightened(0o100600, false), None);
    }

    fn loose_tree() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let buckets = data.join("buckets");
        let state = data.join("state.redb");
        std::fs::create_dir_all(buckets.join("b1")).unwrap();
        std::fs::create_dir_all(data.join("lost+found")).unwrap();
        std::fs::write(&state, b"").unwrap();
        std::fs::write(buckets.join("b1/blob"), b"x").unwrap();
        for (p, m) in [
            (&data, 0o2775),
            (&buckets, 0o755),
            (&buckets.join("b1"), 0o755),
            (&data.join("lost+found"), 0o755),
            (&state, 0o644),
            (&buckets.join("b1/blob"), 0o664),
        ] {
            set_mode(p, m).unwrap();
        }
        (tmp, data, state, buckets)
    }

    #[test]
    fn everything_the_driver_keeps_is_tightened_and_nothing_else() {
        let (_tmp, data, state, buckets) = loose_tree();
        let done = tighten_data_dir(&data, &state, &buckets, set_mode).unwrap();
        assert_eq!(done.changed, 5);
        assert!(done.not_permitted.is_empty());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        for dir in [&data, &buckets, &buckets.join("b1")] {
            assert_eq!(mode(dir), DIR_MODE, "{}", dir.display());
        }
        for file in [&state, &buckets.join("b1/blob")] {
            assert_eq!(mode(file), FILE_MODE, "{}", file.display());
        }
        assert_eq!(mode(&data.join("lost+found")), 0o755);
        // Already tight: nothing to do.
        let again = tighten_data_dir(&data, &state, &buckets, set_mode).unwrap();
        assert_eq!(again, Tightened::default());
    }

    #[test]
    fn a_root_the_process_may_not_change_is_noted_and_the_rest_tightened() {
        let (_tmp, data, state, buckets) = loose_tree();
        // As for a volume root owned by root with group fsGroup.
        let denied = data.clone();
        let chmod = |p: &Path, m: u32| {
            if p == denied {
                Err(io::Error::from_raw_os_error(1)) // EPERM
            } else {
                set_mode(p, m)
            }
        };
        let done = tighten_data_dir(&data, &state, &buckets, chmod).unwrap();
        assert_eq!(done.not_permitted, [data]);
        assert_eq!(done.changed, 4);
    }

    #[test]
    fn other_failures_are_errors() {
        let (_tmp, data, state, buckets) = loose_tree();
        let chmod = |_: &Path, _: u32| Err(io::Error::from_raw_os_error(30)); // EROFS
        assert!(tighten_data_dir(&data, &state, &buckets, chmod).is_err());
    }

    #[tokio::test]
    async fn new_files_and_directories_are_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        create_dir(&dir).unwrap();
        let file = dir.join("f");
        drop(create_file(&file).await.unwrap());
        let state = dir.join("s");
        ensure_file(&state).unwrap();
        ensure_file(&state).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&dir), DIR_MODE);
        assert_eq!(mode(&file), FILE_MODE);
        assert_eq!(mode(&state), FILE_MODE);
        assert!(create_file(&file).await.is_err(), "never overwrites");
    }
}
