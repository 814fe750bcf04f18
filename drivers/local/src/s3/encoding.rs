//! Small S3 text encodings: the `x-amz-tagging` header (a URL query
//! string), `encoding-type=url` listings, and the limits on tag sets and
//! user-defined metadata.

use s3s::dto::Metadata;
use s3s::{S3Result, s3_error};

/// Most tags on an object (as S3).
pub const MAX_OBJECT_TAGS: usize = 10;
/// Most tags on a bucket (as S3).
pub const MAX_BUCKET_TAGS: usize = 50;
/// Most bytes of user-defined metadata on an object, keys and values
/// together (as S3: 2 KB).
pub const MAX_METADATA_BYTES: usize = 2048;

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes `application/x-www-form-urlencoded` text (`+` is a space).
fn form_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = hex_value(*bytes.get(i + 1)?)?;
                let lo = hex_value(*bytes.get(i + 2)?)?;
                out.push(hi * 16 + lo);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Parses an `x-amz-tagging` header (`k1=v1&k2=v2`).
pub fn parse_tagging_header(header: &str) -> S3Result<Vec<(String, String)>> {
    let mut tags = Vec::new();
    for pair in header.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = form_decode(k)
            .ok_or_else(|| s3_error!(InvalidTag, "malformed x-amz-tagging header"))?;
        let v = form_decode(v)
            .ok_or_else(|| s3_error!(InvalidTag, "malformed x-amz-tagging header"))?;
        tags.push((k, v));
    }
    check_tags(&tags, MAX_OBJECT_TAGS)?;
    Ok(tags)
}

/// Checks a tag set: at most `max` tags, unique non-empty keys of at most
/// 128 characters, values of at most 256.
pub fn check_tags(tags: &[(String, String)], max: usize) -> S3Result<()> {
    if tags.len() > max {
        return Err(s3_error!(InvalidTag, "at most {max} tags are allowed"));
    }
    let mut seen = std::collections::HashSet::new();
    for (k, v) in tags {
        if k.is_empty() || k.chars().count() > 128 || v.chars().count() > 256 {
            return Err(s3_error!(
                InvalidTag,
                "tag keys must be 1 to 128 characters and values at most 256"
            ));
        }
        if !seen.insert(k) {
            return Err(s3_error!(InvalidTag, "tag keys must be unique"));
        }
    }
    Ok(())
}

/// Checks user-defined metadata (`x-amz-meta-*`) against S3's limit: the
/// UTF-8 bytes of every key and value, summed, at most 2 KB.
pub fn check_metadata(metadata: &Metadata) -> S3Result<()> {
    let size: usize = metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_METADATA_BYTES {
        return Err(s3_error!(
            MetadataTooLarge,
            "Your metadata headers exceed the maximum allowed metadata size: user-defined metadata is limited to {MAX_METADATA_BYTES} bytes of keys and values, this request has {size}"
        ));
    }
    Ok(())
}

/// Percent-encodes a key for `encoding-type=url` listings (as S3: every
/// byte except unreserved characters and `/`).
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagging_headers_decode() {
        let tags = parse_tagging_header("team=a%20b&env=dev+x&empty=").unwrap();
        assert_eq!(
            tags,
            [
                ("team".to_owned(), "a b".to_owned()),
                ("env".to_owned(), "dev x".to_owned()),
                ("empty".to_owned(), String::new())
            ]
        );
        assert!(parse_tagging_header("k=%zz").is_err());
        assert!(parse_tagging_header("a=1&a=2").is_err());
        let many: Vec<String> = (0..11).map(|i| format!("k{i}=v")).collect();
        assert!(parse_tagging_header(&many.join("&")).is_err());
    }

    #[test]
    fn metadata_is_limited_to_2_kb_of_keys_and_values() {
        let meta = |k: &str, v_len: usize| Metadata::from([(k.to_owned(), "v".repeat(v_len))]);
        check_metadata(&Metadata::new()).unwrap();
        check_metadata(&meta("key", MAX_METADATA_BYTES - 3)).unwrap();
        let e = check_metadata(&meta("key", MAX_METADATA_BYTES - 2)).unwrap_err();
        assert_eq!(*e.code(), s3s::S3ErrorCode::MetadataTooLarge);
        assert_eq!(e.status_code(), Some(http::StatusCode::BAD_REQUEST));
        // Bytes, not characters.
        let e = check_metadata(&Metadata::from([("k".to_owned(), "é".repeat(1024))]));
        assert!(e.is_err());
    }

    #[test]
    fn url_encoding_keeps_slashes() {
        assert_eq!(url_encode("dir/a b+c%.txt"), "dir/a%20b%2Bc%25.txt");
        assert_eq!(url_encode("é"), "%C3%A9");
    }
}
