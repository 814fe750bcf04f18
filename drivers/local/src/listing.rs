//! ListObjects semantics (prefix, delimiter, start-after / continuation,
//! max-keys) over a key-ordered source of objects, independent of storage.

/// One listed entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry<T> {
    /// An object and its record.
    Object(String, T),
    /// A common prefix (ends with the delimiter).
    Prefix(String),
}

impl<T> Entry<T> {
    fn name(&self) -> &str {
        match self {
            Entry::Object(k, _) | Entry::Prefix(k) => k,
        }
    }
}

/// The result of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing<T> {
    /// Objects and common prefixes in key order.
    pub entries: Vec<Entry<T>>,
    /// True when more entries follow.
    pub truncated: bool,
    /// Where the next page starts after (set when truncated).
    pub next_marker: Option<String>,
}

/// What to list.
#[derive(Clone, Copy, Debug)]
pub struct Query<'a> {
    /// Only keys starting with this.
    pub prefix: &'a str,
    /// Group keys by the first delimiter after the prefix.
    pub delimiter: Option<&'a str>,
    /// Only entries after this key or prefix.
    pub start_after: Option<&'a str>,
    /// At most this many entries.
    pub max_keys: usize,
}

/// How many records to fetch from the source at a time.
const BATCH: usize = 1000;

/// Lists entries for `query`. `fetch(after, limit)` returns up to `limit`
/// `(key, record)` pairs whose keys start with the prefix and sort after
/// `after` (from the prefix when `None`), in key order.
pub fn list<T, E>(
    query: Query<'_>,
    mut fetch: impl FnMut(Option<&str>, usize) -> Result<Vec<(String, T)>, E>,
) -> Result<Listing<T>, E> {
    let mut entries: Vec<Entry<T>> = Vec::new();
    let mut cursor: Option<String> = query.start_after.map(str::to_owned);
    let floor = query.start_after.unwrap_or("");
    let delimiter = query.delimiter.filter(|d| !d.is_empty());
    loop {
        let batch = fetch(cursor.as_deref(), BATCH)?;
        let exhausted = batch.len() < BATCH;
        for (key, rec) in batch {
            cursor = Some(key.clone());
            let entry = match delimiter.and_then(|d| common_prefix(query.prefix, &key, d)) {
                Some(cp) => {
                    let repeated = entries.last().is_some_and(|e| e.name() == cp);
                    if repeated || cp.as_str() <= floor {
                        continue;
                    }
                    Entry::Prefix(cp)
                }
                None => Entry::Object(key, rec),
            };
            if entries.len() == query.max_keys {
                let next_marker = entries.last().map(|e| e.name().to_owned());
                return Ok(Listing {
                    truncated: query.max_keys > 0,
                    next_marker: next_marker.filter(|_| query.max_keys > 0),
                    entries,
                });
            }
            entries.push(entry);
        }
        if exhausted {
            return Ok(Listing {
                entries,
                truncated: false,
                next_marker: None,
            });
        }
    }
}

/// The common prefix of `key` under `prefix` for `delimiter`, if the key
/// has the delimiter after the prefix.
fn common_prefix(prefix: &str, key: &str, delimiter: &str) -> Option<String> {
    let rest = key.strip_prefix(prefix)?;
    let at = rest.find(delimiter)?;
    Some(format!("{prefix}{}", &rest[..at + delimiter.len()]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(keys: &[&str]) -> impl FnMut(Option<&str>, usize) -> Result<Vec<(String, ())>, ()> {
        let mut keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        keys.sort();
        move |after, limit| {
            Ok(keys
                .iter()
                .filter(|k| after.is_none_or(|a| k.as_str() > a))
                .take(limit)
                .map(|k| (k.clone(), ()))
                .collect())
        }
    }

    fn names(l: &Listing<()>) -> Vec<String> {
        l.entries
            .iter()
            .map(|e| match e {
                Entry::Object(k, _) => k.clone(),
                Entry::Prefix(p) => format!("{p}*"),
            })
            .collect()
    }

    fn q<'a>(
        prefix: &'a str,
        delimiter: Option<&'a str>,
        after: Option<&'a str>,
        max: usize,
    ) -> Query<'a> {
        Query {
            prefix,
            delimiter,
            start_after: after,
            max_keys: max,
        }
    }

    const KEYS: &[&str] = &["a", "dir/x", "dir/y", "dir/sub/z", "e", "f/g"];

    #[test]
    fn without_a_delimiter_every_key_is_listed() {
        let l = list(q("", None, None, 1000), source(KEYS)).unwrap();
        assert_eq!(names(&l), ["a", "dir/sub/z", "dir/x", "dir/y", "e", "f/g"]);
        assert!(!l.truncated);
    }

    #[test]
    fn a_delimiter_groups_keys_into_common_prefixes() {
        let l = list(q("", Some("/"), None, 1000), source(KEYS)).unwrap();
        assert_eq!(names(&l), ["a", "dir/*", "e", "f/*"]);
        let l = list(
            q("dir/", Some("/"), None, 1000),
            source(&["dir/x", "dir/y", "dir/sub/z"]),
        )
        .unwrap();
        assert_eq!(names(&l), ["dir/sub/*", "dir/x", "dir/y"]);
    }

    #[test]
    fn pages_continue_after_the_marker_without_repeats() {
        let l = list(q("", Some("/"), None, 2), source(KEYS)).unwrap();
        assert_eq!(names(&l), ["a", "dir/*"]);
        assert!(l.truncated);
        assert_eq!(l.next_marker.as_deref(), Some("dir/"));
        let l = list(q("", Some("/"), Some("dir/"), 2), source(KEYS)).unwrap();
        assert_eq!(names(&l), ["e", "f/*"]);
        assert!(!l.truncated, "nothing follows f/");
    }

    #[test]
    fn max_keys_zero_lists_nothing() {
        let l = list(q("", None, None, 0), source(KEYS)).unwrap();
        assert!(l.entries.is_empty());
        assert!(!l.truncated);
    }

    #[test]
    fn listing_spans_many_batches() {
        let keys: Vec<String> = (0..2500).map(|i| format!("k{i:05}")).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let l = list(q("", None, None, 2100), source(&refs)).unwrap();
        assert_eq!(l.entries.len(), 2100);
        assert_eq!(l.next_marker.as_deref(), Some("k02099"));
    }
}
