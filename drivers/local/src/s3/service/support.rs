//! Conversions between store records and S3 shapes, request checks and S3 errors.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Result, s3_error};

use super::{MAX_LIST, MAX_PART_NUMBER, OWNER};
use crate::listing::{self, Entry};
use crate::s3::encoding::{self, Names};
use crate::store::{ObjectAttrs, ObjectRecord, WriteError};

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(super) fn timestamp(ms: i64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

pub(super) fn internal(e: impl std::fmt::Display) -> S3Error {
    tracing::error!(error = %e, "S3 request failed");
    s3_error!(InternalError, "{e}")
}

pub(super) fn quota_error(bucket: &str, max: u64, would_hold: u64) -> S3Error {
    let mut e = S3Error::with_message(
        S3ErrorCode::Custom("QuotaExceeded".into()),
        format!(
            "bucket {bucket} would hold {would_hold} bytes, over its maxSizeBytes quota of {max} bytes"
        ),
    );
    e.set_status_code(http::StatusCode::FORBIDDEN);
    e
}

pub(super) fn write_error(bucket: &str, e: WriteError) -> S3Error {
    match e {
        WriteError::NoSuchBucket => s3_error!(NoSuchBucket, "bucket {bucket} does not exist"),
        WriteError::NoSuchUpload => s3_error!(NoSuchUpload),
        WriteError::Quota { max, would_hold } => quota_error(bucket, max, would_hold),
        WriteError::Store(e) => internal(e),
    }
}

pub(super) fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn owner() -> Owner {
    Owner {
        display_name: Some(OWNER.to_owned()),
        id: Some(OWNER.to_owned()),
    }
}

pub(super) fn full_control() -> Grants {
    vec![Grant {
        grantee: Some(Grantee {
            display_name: Some(OWNER.to_owned()),
            email_address: None,
            id: Some(OWNER.to_owned()),
            type_: Type::from_static(Type::CANONICAL_USER),
            uri: None,
        }),
        permission: Some(Permission::from_static(Permission::FULL_CONTROL)),
    }]
}

pub(super) fn to_tag_set(tags: &[(String, String)]) -> TagSet {
    tags.iter()
        .map(|(k, v)| Tag {
            key: Some(k.clone()),
            value: Some(v.clone()),
        })
        .collect()
}

pub(super) fn from_tag_set(set: TagSet, max: usize) -> S3Result<Vec<(String, String)>> {
    let tags: Vec<(String, String)> = set
        .into_iter()
        .map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default()))
        .collect();
    encoding::check_tags(&tags, max)?;
    Ok(tags)
}

pub(super) fn etag_of(rec: &ObjectRecord) -> ETag {
    ETag::Strong(rec.etag.clone())
}

pub(super) fn hex_md5(md5: [u8; 16]) -> String {
    hex::encode(md5)
}

/// The `If-Match` / `If-None-Match` conditions of a request.
#[derive(Clone, Copy)]
pub(super) struct Conditions<'a> {
    pub(super) if_match: Option<&'a ETagCondition>,
    pub(super) if_none_match: Option<&'a ETagCondition>,
}

/// The [`Conditions`] of request `$input`, which names them alike.
macro_rules! conditions {
    ($input:ident) => {
        $crate::s3::service::support::Conditions {
            if_match: $input.if_match.as_ref(),
            if_none_match: $input.if_none_match.as_ref(),
        }
    };
}
pub(super) use conditions;

/// Checks `If-Match` / `If-None-Match` against an object's ETag.
/// `read` selects GET/HEAD semantics (304 Not Modified) over write
/// semantics (412 Precondition Failed).
pub(super) fn check_conditions(
    current: Option<&ObjectRecord>,
    conditions: Conditions<'_>,
    read: bool,
) -> S3Result<()> {
    let Conditions {
        if_match,
        if_none_match,
    } = conditions;
    let matches = |c: &ETagCondition| match (c, current) {
        (ETagCondition::Any, Some(_)) => true,
        (ETagCondition::ETag(want), Some(o)) => want.value() == o.etag,
        (_, None) => false,
    };
    if let Some(c) = if_match
        && !matches(c)
    {
        return Err(s3_error!(PreconditionFailed, "If-Match condition failed"));
    }
    if let Some(c) = if_none_match
        && matches(c)
    {
        return Err(if read {
            s3_error!(NotModified)
        } else {
            s3_error!(PreconditionFailed, "If-None-Match condition failed")
        });
    }
    Ok(())
}

/// The [`AttrsInput`] of write request `$input`, which names the
/// attribute fields alike, with `$tagging` as its tagging header.
macro_rules! attrs_input {
    ($input:ident, $tagging:expr) => {
        $crate::s3::service::support::AttrsInput {
            content_type: $input.content_type,
            content_encoding: $input.content_encoding,
            content_disposition: $input.content_disposition,
            content_language: $input.content_language,
            cache_control: $input.cache_control,
            metadata: $input.metadata,
            tagging: $tagging,
        }
    };
}
pub(super) use attrs_input;

/// Attributes given on a write request.
pub(super) struct AttrsInput {
    pub(super) content_type: Option<String>,
    pub(super) content_encoding: Option<String>,
    pub(super) content_disposition: Option<String>,
    pub(super) content_language: Option<String>,
    pub(super) cache_control: Option<String>,
    pub(super) metadata: Option<Metadata>,
    pub(super) tagging: Option<String>,
}

impl AttrsInput {
    pub(super) fn into_attrs(self) -> S3Result<ObjectAttrs> {
        if let Some(m) = &self.metadata {
            encoding::check_metadata(m)?;
        }
        Ok(ObjectAttrs {
            content_type: self.content_type,
            content_encoding: self.content_encoding,
            content_disposition: self.content_disposition,
            content_language: self.content_language,
            cache_control: self.cache_control,
            metadata: self.metadata.unwrap_or_default().into_iter().collect(),
            tags: match self.tagging {
                Some(h) => encoding::parse_tagging_header(&h)?,
                None => Vec::new(),
            },
        })
    }
}

pub(super) fn user_metadata(m: &BTreeMap<String, String>) -> Option<Metadata> {
    (!m.is_empty()).then(|| {
        m.iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<HashMap<_, _>>()
    })
}

/// Builds GET or HEAD output `$target` from the given fields and the
/// headers every read of object record `$rec` carries.
macro_rules! with_object_headers {
    ($rec:ident, $target:ident { $($field:ident: $value:expr),* $(,)? }) => {
        $target {
            $($field: $value,)*
            accept_ranges: Some("bytes".to_owned()),
            e_tag: Some($crate::s3::service::support::etag_of(&$rec)),
            last_modified: Some($crate::s3::service::support::timestamp($rec.last_modified_ms)),
            content_type: $rec.attrs.content_type.clone(),
            content_encoding: $rec.attrs.content_encoding.clone(),
            content_disposition: $rec.attrs.content_disposition.clone(),
            content_language: $rec.attrs.content_language.clone(),
            cache_control: $rec.attrs.cache_control.clone(),
            metadata: $crate::s3::service::support::user_metadata(&$rec.attrs.metadata),
            ..Default::default()
        }
    };
}
pub(super) use with_object_headers;

/// Refuses the date conditions of a GET or HEAD, which are not supported.
pub(super) fn no_date_conditions(
    if_modified_since: &Option<Timestamp>,
    if_unmodified_since: &Option<Timestamp>,
) -> S3Result<()> {
    if if_modified_since.is_some() || if_unmodified_since.is_some() {
        return Err(s3_error!(
            NotImplemented,
            "date conditions are not supported; use If-Match / If-None-Match"
        ));
    }
    Ok(())
}

pub(super) fn part_number_ok(n: i32) -> S3Result<()> {
    if (1..=MAX_PART_NUMBER).contains(&n) {
        Ok(())
    } else {
        Err(s3_error!(
            InvalidArgument,
            "part numbers must be between 1 and {MAX_PART_NUMBER}"
        ))
    }
}

/// Parses `bytes=first-last` of UploadPartCopy against a source size.
pub(super) fn copy_range(range: Option<&str>, size: u64) -> S3Result<(u64, u64)> {
    let Some(range) = range else {
        return Ok((0, size));
    };
    let bad = || s3_error!(InvalidRange, "the copy source range is not satisfiable");
    let (first, last) = range
        .strip_prefix("bytes=")
        .and_then(|r| r.split_once('-'))
        .ok_or_else(|| {
            s3_error!(
                InvalidArgument,
                "x-amz-copy-source-range must be bytes=first-last"
            )
        })?;
    let first: u64 = first.parse().map_err(|_| bad())?;
    let last: u64 = last.parse().map_err(|_| bad())?;
    if first > last || last >= size {
        return Err(bad());
    }
    Ok((first, last - first + 1))
}

pub(super) fn object_entry(key: String, rec: &ObjectRecord, names: Names) -> S3Result<Object> {
    Ok(Object {
        key: Some(names.show(key)?),
        e_tag: Some(etag_of(rec)),
        last_modified: Some(timestamp(rec.last_modified_ms)),
        size: Some(i64_of(rec.size)),
        storage_class: Some(ObjectStorageClass::from_static(
            ObjectStorageClass::STANDARD,
        )),
        owner: Some(owner()),
        ..Default::default()
    })
}

/// Splits a listing into S3 contents and common prefixes.
pub(super) fn split_listing(
    l: listing::Listing<ObjectRecord>,
    names: Names,
) -> S3Result<(Vec<Object>, Vec<CommonPrefix>)> {
    let mut contents = Vec::new();
    let mut prefixes = Vec::new();
    for e in l.entries {
        match e {
            Entry::Object(k, rec) => contents.push(object_entry(k, &rec, names)?),
            Entry::Prefix(p) => prefixes.push(CommonPrefix {
                prefix: Some(names.show(p)?),
            }),
        }
    }
    Ok((contents, prefixes))
}

pub(super) fn max_keys(n: Option<i32>) -> usize {
    n.map_or(MAX_LIST, |n| usize::try_from(n).unwrap_or(0).min(MAX_LIST))
}

pub(super) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(etag: &str) -> ObjectRecord {
        ObjectRecord {
            blob: "b".into(),
            size: 1,
            etag: etag.into(),
            last_modified_ms: 0,
            attrs: ObjectAttrs::default(),
        }
    }

    fn conds<'a>(
        if_match: Option<&'a ETagCondition>,
        if_none_match: Option<&'a ETagCondition>,
    ) -> Conditions<'a> {
        Conditions {
            if_match,
            if_none_match,
        }
    }

    #[test]
    fn etag_conditions_follow_http_semantics() {
        let o = rec("abc");
        let tag = |s: &str| ETagCondition::ETag(ETag::Strong(s.into()));
        assert!(check_conditions(Some(&o), conds(Some(&tag("abc")), None), true).is_ok());
        let e = check_conditions(Some(&o), conds(Some(&tag("zzz")), None), true).unwrap_err();
        assert_eq!(*e.code(), S3ErrorCode::PreconditionFailed);
        let e = check_conditions(Some(&o), conds(None, Some(&tag("abc"))), true).unwrap_err();
        assert_eq!(*e.code(), S3ErrorCode::NotModified);
        // Create-only writes: If-None-Match: * fails when the object exists.
        let e =
            check_conditions(Some(&o), conds(None, Some(&ETagCondition::Any)), false).unwrap_err();
        assert_eq!(*e.code(), S3ErrorCode::PreconditionFailed);
        assert!(check_conditions(None, conds(None, Some(&ETagCondition::Any)), false).is_ok());
    }

    #[test]
    fn copy_ranges_are_inclusive_and_bounded() {
        assert_eq!(copy_range(None, 10).unwrap(), (0, 10));
        assert_eq!(copy_range(Some("bytes=2-4"), 10).unwrap(), (2, 3));
        assert!(copy_range(Some("bytes=5-10"), 10).is_err());
        assert!(copy_range(Some("bytes=4-2"), 10).is_err());
        assert!(copy_range(Some("2-4"), 10).is_err());
    }

    #[test]
    fn base64_decodes_content_md5() {
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("1B2M2Y8AsgTpgAmY7PhCfg==").unwrap().len(), 16);
        assert!(base64_decode("!!").is_none());
    }

    #[test]
    fn quota_errors_are_403_quota_exceeded() {
        let e = quota_error("b", 10, 11);
        assert_eq!(e.code().as_str(), "QuotaExceeded");
        assert_eq!(e.status_code(), Some(http::StatusCode::FORBIDDEN));
        assert!(
            e.message()
                .unwrap()
                .contains("maxSizeBytes quota of 10 bytes")
        );
    }
}
