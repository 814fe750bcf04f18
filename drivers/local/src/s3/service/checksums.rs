//! Checksums of uploaded bodies: which to compute, and whether they match those given.

use s3s::dto::{Checksum, ChecksumAlgorithm};
use s3s::{S3Result, TrailingHeaders, s3_error};

/// Builds `$target` from the given fields and the five checksum fields of
/// `$from`, which names them alike (S3 inputs, outputs and [`Checksum`]).
macro_rules! with_checksums {
    ($from:ident, $target:ident { $($field:ident: $value:expr),* $(,)? }) => {
        $target {
            $($field: $value,)*
            checksum_crc32: $from.checksum_crc32,
            checksum_crc32c: $from.checksum_crc32c,
            checksum_sha1: $from.checksum_sha1,
            checksum_sha256: $from.checksum_sha256,
            checksum_crc64nvme: $from.checksum_crc64nvme,
            ..Default::default()
        }
    };
}
pub(super) use with_checksums;

/// The [`Integrity`] asked for by upload request `$input`, with its
/// `$trailers` and the Content-MD5 to check (`None` for none).
macro_rules! integrity {
    ($input:ident, $trailers:expr, $content_md5:expr) => {
        $crate::s3::service::checksums::Integrity {
            given: $crate::s3::service::checksums::with_checksums!($input, Checksum {}),
            algorithm: $input.checksum_algorithm,
            content_md5: $content_md5,
            trailers: $trailers,
        }
    };
}
pub(super) use integrity;

/// The integrity checks of an upload.
pub(super) struct Integrity {
    /// Checksums given in headers; trailers may give more.
    pub(super) given: Checksum,
    /// The checksum algorithm asked for.
    pub(super) algorithm: Option<ChecksumAlgorithm>,
    /// The base64 Content-MD5 to check, if any.
    pub(super) content_md5: Option<String>,
    /// The request's trailers.
    pub(super) trailers: Option<TrailingHeaders>,
}

/// Checksums requested on an upload, computed while the body streams.
pub(super) fn checksum_hasher(
    algorithm: Option<&ChecksumAlgorithm>,
    given: &s3s::dto::Checksum,
) -> S3Result<s3s::checksum::ChecksumHasher> {
    let mut h = s3s::checksum::ChecksumHasher::default();
    if given.checksum_crc32.is_some() {
        h.crc32 = Some(Default::default());
    }
    if given.checksum_crc32c.is_some() {
        h.crc32c = Some(Default::default());
    }
    if given.checksum_sha1.is_some() {
        h.sha1 = Some(Default::default());
    }
    if given.checksum_sha256.is_some() {
        h.sha256 = Some(Default::default());
    }
    if given.checksum_crc64nvme.is_some() {
        h.crc64nvme = Some(Default::default());
    }
    if let Some(alg) = algorithm {
        match alg.as_str() {
            ChecksumAlgorithm::CRC32 => h.crc32 = Some(Default::default()),
            ChecksumAlgorithm::CRC32C => h.crc32c = Some(Default::default()),
            ChecksumAlgorithm::SHA1 => h.sha1 = Some(Default::default()),
            ChecksumAlgorithm::SHA256 => h.sha256 = Some(Default::default()),
            ChecksumAlgorithm::CRC64NVME => h.crc64nvme = Some(Default::default()),
            _ => return Err(s3_error!(InvalidArgument, "unsupported checksum algorithm")),
        }
    }
    Ok(h)
}

/// Fills in checksums sent as trailers, then compares every given
/// checksum with the computed one.
pub(super) fn verify_checksums(
    mut given: s3s::dto::Checksum,
    computed: &s3s::dto::Checksum,
    trailers: Option<&s3s::TrailingHeaders>,
) -> S3Result<()> {
    if let Some(headers) = trailers.and_then(s3s::TrailingHeaders::take) {
        let get = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        given.checksum_crc32 = given.checksum_crc32.or_else(|| get("x-amz-checksum-crc32"));
        given.checksum_crc32c = given
            .checksum_crc32c
            .or_else(|| get("x-amz-checksum-crc32c"));
        given.checksum_sha1 = given.checksum_sha1.or_else(|| get("x-amz-checksum-sha1"));
        given.checksum_sha256 = given
            .checksum_sha256
            .or_else(|| get("x-amz-checksum-sha256"));
        given.checksum_crc64nvme = given
            .checksum_crc64nvme
            .or_else(|| get("x-amz-checksum-crc64nvme"));
    }
    let pairs = [
        ("CRC32", &given.checksum_crc32, &computed.checksum_crc32),
        ("CRC32C", &given.checksum_crc32c, &computed.checksum_crc32c),
        ("SHA1", &given.checksum_sha1, &computed.checksum_sha1),
        ("SHA256", &given.checksum_sha256, &computed.checksum_sha256),
        (
            "CRC64NVME",
            &given.checksum_crc64nvme,
            &computed.checksum_crc64nvme,
        ),
    ];
    for (name, want, got) in pairs {
        if let Some(want) = want
            && Some(want) != got.as_ref()
        {
            return Err(s3_error!(
                BadDigest,
                "the {name} checksum does not match the data"
            ));
        }
    }
    Ok(())
}
