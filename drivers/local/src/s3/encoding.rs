//! Small S3 text encodings: the `x-amz-tagging` header (a URL query
//! string), names in listings (`encoding-type=url`, continuation tokens),
//! what XML 1.0 can carry, and the limits on tag sets and user-defined
//! metadata.
//!
//! Object keys may hold any Unicode character, but XML 1.0 cannot carry
//! most control characters, not even as character references, and reads
//! a carriage return back as a line feed. So no such string is ever put in
//! a response as XML text: listings show names percent-encoded when asked
//! with `encoding-type=url` (what AWS offers for these keys) and refuse
//! otherwise; other responses leave such a key out.

use base64::Engine as _;
use s3s::dto::{EncodingType, Metadata};
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
        if !xml_safe(k) || !xml_safe(v) {
            return Err(s3_error!(
                InvalidTag,
                "tag keys and values must not contain control characters"
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

/// True when XML 1.0 carries `s` unchanged as element text: no control
/// character but tab and line feed (a carriage return is read back as a
/// line feed), and neither U+FFFE nor U+FFFF.
pub fn xml_safe(s: &str) -> bool {
    s.chars()
        .all(|c| matches!(c, '\t' | '\n') || (c >= ' ' && !matches!(c, '\u{FFFE}' | '\u{FFFF}')))
}

/// `s` when XML 1.0 can carry it (see [`xml_safe`]), for response fields
/// that may be left out.
pub fn xml_text(s: String) -> Option<String> {
    xml_safe(&s).then_some(s)
}

/// How a listing shows keys, prefixes, delimiters and markers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Names {
    /// As they are: only names XML 1.0 can carry.
    Plain,
    /// Percent-encoded (`encoding-type=url`): any name.
    Url,
}

impl Names {
    /// The encoding a listing request asks for; `url` is the only one S3 knows.
    pub fn requested(encoding_type: Option<&EncodingType>) -> S3Result<Self> {
        match encoding_type.map(EncodingType::as_str) {
            None => Ok(Names::Plain),
            Some(EncodingType::URL) => Ok(Names::Url),
            Some(_) => Err(s3_error!(
                InvalidArgument,
                "Invalid Encoding Method specified in Request: the only encoding-type is url"
            )),
        }
    }

    /// `name` as the listing shows it; a plain listing cannot show a name
    /// XML 1.0 cannot carry.
    pub fn show(self, name: String) -> S3Result<String> {
        match self {
            Names::Url => Ok(url_encode(&name)),
            Names::Plain if xml_safe(&name) => Ok(name),
            Names::Plain => Err(s3_error!(
                InvalidArgument,
                "a key, prefix, delimiter or marker of this listing holds characters XML 1.0 cannot carry; list with encoding-type=url"
            )),
        }
    }

    /// [`Names::show`] of an optional name.
    pub fn show_opt(self, name: Option<String>) -> S3Result<Option<String>> {
        name.map(|n| self.show(n)).transpose()
    }
}

/// The ListObjectsV2 continuation token that resumes after `marker`
/// (opaque to clients, as S3's: base64url of the key).
pub fn continuation_token(marker: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(marker)
}

/// The key a continuation token made by [`continuation_token`] resumes
/// after; any other token is refused.
pub fn resume_after(token: &str) -> S3Result<String> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| {
            s3_error!(
                InvalidArgument,
                "The continuation token provided is incorrect"
            )
        })
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
    fn xml_carries_text_but_control_characters() {
        for ok in ["a b", "tab\there", "line\nfeed", "é€😀", "\u{7f}", "<&>\"'"] {
            assert!(xml_safe(ok), "{ok:?}");
        }
        for bad in [
            "\0",
            "a\u{1}b",
            "\u{8}",
            "\r",
            "\u{1b}[31m",
            "\u{FFFE}",
            "\u{FFFF}",
        ] {
            assert!(!xml_safe(bad), "{bad:?}");
            assert_eq!(xml_text(bad.to_owned()), None);
        }
    }

    #[test]
    fn listings_show_names_plain_or_percent_encoded() {
        let url = EncodingType::from_static(EncodingType::URL);
        assert_eq!(Names::requested(None).unwrap(), Names::Plain);
        assert_eq!(Names::requested(Some(&url)).unwrap(), Names::Url);
        let other = EncodingType::from("base64".to_owned());
        assert_eq!(
            *Names::requested(Some(&other)).unwrap_err().code(),
            s3s::S3ErrorCode::InvalidArgument
        );

        assert_eq!(Names::Plain.show("a/b c".into()).unwrap(), "a/b c");
        assert_eq!(Names::Url.show("a/b\u{0}c".into()).unwrap(), "a/b%00c");
        let e = Names::Plain.show("a\u{0}".into()).unwrap_err();
        assert_eq!(*e.code(), s3s::S3ErrorCode::InvalidArgument);
        assert!(e.message().unwrap().contains("encoding-type=url"));
        assert_eq!(Names::Url.show_opt(None).unwrap(), None);
    }

    #[test]
    fn continuation_tokens_round_trip_and_refuse_anything_else() {
        for key in ["", "k", "dir/a b", "\u{0}\u{1}", "é/😀"] {
            let token = continuation_token(key);
            assert!(
                token
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
            );
            assert_eq!(resume_after(&token).unwrap(), key);
        }
        for bad in [
            "\u{0}",
            "a b",
            "a+b/",
            "YQ==",
            "a",
            &continuation_token("x")[..1],
        ] {
            let e = resume_after(bad).unwrap_err();
            assert_eq!(*e.code(), s3s::S3ErrorCode::InvalidArgument, "{bad:?}");
            assert_eq!(e.status_code(), Some(http::StatusCode::BAD_REQUEST));
        }
        // Valid base64url that is not UTF-8.
        let not_utf8 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xff, 0xfe]);
        assert!(resume_after(&not_utf8).is_err());
    }

    #[test]
    fn tags_with_control_characters_are_refused() {
        let tags = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
        assert!(check_tags(&tags("k", "v"), 10).is_ok());
        for (k, v) in [("k\u{0}", "v"), ("k", "v\u{1}"), ("k", "v\r")] {
            let e = check_tags(&tags(k, v), 10).unwrap_err();
            assert_eq!(*e.code(), s3s::S3ErrorCode::InvalidTag);
        }
    }

    #[test]
    fn url_encoding_keeps_slashes() {
        assert_eq!(url_encode("dir/a b+c%.txt"), "dir/a%20b%2Bc%25.txt");
        assert_eq!(url_encode("é"), "%C3%A9");
    }
}
