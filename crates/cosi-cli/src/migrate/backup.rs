//! The backup `apply` writes before it changes anything: every source
//! object as a `v1` `List` (what `kubectl create -f` takes), in a file
//! only its owner can read, since it holds Secrets. A repeated `apply`
//! adds only the objects the file does not hold yet (by UID), so the file
//! keeps each object as it was before the first change.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;
use serde_json::Value;

/// The first line of every backup, naming the source.
fn header(source: &str) -> String {
    format!("# cosi migrate {source}: the source objects as they were before apply changed them\n")
}

/// The UID of `object`, which identifies it in the backup.
fn uid(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid")?.as_str()
}

/// Drops what a restore must not send back and nobody reads.
fn trimmed(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    object
}

/// Merges `objects` into the backup `existing` holds (none when `None`):
/// the objects already there stay as they were, the others are added.
/// Returns the new content and how many objects were added.
pub fn merged(
    source: &str,
    existing: Option<&str>,
    objects: Vec<Value>,
) -> anyhow::Result<(String, usize)> {
    let mut items: Vec<Value> = match existing {
        None => Vec::new(),
        Some(text) => {
            anyhow::ensure!(
                text.starts_with(&header(source)),
                "it is not a backup of `cosi migrate {source}` (its first line differs); \
                 name another file with --backup"
            );
            let list: Value = serde_saphyr::from_str(text).context("parse the existing backup")?;
            list.get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        }
    };
    let mut known: std::collections::HashSet<String> =
        items.iter().filter_map(uid).map(str::to_owned).collect();
    let mut added = 0;
    for object in objects {
        let fresh = uid(&object).is_none_or(|u| known.insert(u.to_owned()));
        if fresh {
            items.push(trimmed(object));
            added += 1;
        }
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    Ok((
        format!("{}{}", header(source), serde_saphyr::to_string(&list)?),
        added,
    ))
}

/// Adds `objects` to the backup at `path` (see [`merged`]), writing it
/// atomically with mode 0600. Returns how many objects were added.
pub fn write(path: &Path, source: &str, objects: Vec<Value>) -> anyhow::Result<usize> {
    let existing = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    };
    let (content, added) = merged(source, existing.as_deref(), objects)
        .with_context(|| format!("backup {}", path.display()))?;
    if added == 0 && existing.is_some() {
        return Ok(0);
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".cosi-migrate-backup")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .tempfile_in(dir)
        .with_context(|| format!("create a file in {}", dir.display()))?;
    tmp.write_all(content.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .with_context(|| format!("write {}", path.display()))?;
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(uid: &str, value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "uid": uid, "managedFields": [{"manager": "x"}]},
               "data": {"k": value}})
    }

    #[test]
    fn the_first_copy_of_an_object_is_kept() {
        let (first, added) = merged("obc", None, vec![obj("1", "before")]).unwrap();
        assert_eq!(added, 1);
        assert!(!first.contains("managedFields"), "{first}");
        let (second, added) =
            merged("obc", Some(&first), vec![obj("1", "after"), obj("2", "x")]).unwrap();
        assert_eq!(added, 1);
        assert!(
            second.contains("before") && !second.contains("after"),
            "{second}"
        );
        let list: Value = serde_saphyr::from_str(&second).unwrap();
        assert_eq!(list["items"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_file_of_another_source_is_refused() {
        let (first, _) = merged("obc", None, vec![]).unwrap();
        let err = merged("v1alpha1", Some(&first), vec![]).unwrap_err();
        assert!(err.to_string().contains("--backup"), "{err}");
    }

    #[test]
    fn the_file_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.yaml");
        assert_eq!(write(&path, "obc", vec![obj("1", "v")]).unwrap(), 1);
        assert_eq!(write(&path, "obc", vec![obj("1", "w")]).unwrap(), 0);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
