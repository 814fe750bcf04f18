//! Shared Key authorization of REST calls and service SAS tokens bound to
//! a stored access policy, as Azure Storage defines them: pure functions
//! from the request (or the token's fields) to the string to sign and its
//! HMAC-SHA256 under the account key.
//!
//! The layouts follow Azure's "Authorize with Shared Key" (version
//! 2009-09-19 and later; an empty Content-Length for a body of 0 bytes, as
//! from version 2015-02-21) and "Create a service SAS" (version 2020-12-06
//! and later, with the encryption scope field), which Azurite implements
//! too. The tests check them against the examples of that documentation
//! and against signatures computed by Microsoft's own Python SDK.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, KeyInit, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use sha2::Sha256;

/// The service version of the SAS tokens the driver issues. Its string to
/// sign has the 16 fields of version 2020-12-06 and later.
pub const SAS_VERSION: &str = "2020-12-06";

/// Characters left unencoded in a query value: RFC 3986's unreserved set.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes a query parameter value.
pub fn encode_query_value(v: &str) -> String {
    utf8_percent_encode(v, QUERY_VALUE).to_string()
}

/// The base64 HMAC-SHA256 of `text` under the decoded account key.
pub fn hmac_base64(key: &[u8], text: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(text.as_bytes());
    BASE64.encode(mac.finalize().into_bytes())
}

/// The standard headers of the Shared Key string to sign, in order.
const STANDARD_HEADERS: [&str; 11] = [
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
];

fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map_or("", |(_, v)| v.as_str())
}

fn fold_whitespace(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The canonicalized resource: `/<account><path>` then, one per line and
/// sorted by name, each query parameter as `name:value` (names lowercased,
/// values decoded, several values of one name sorted and joined by `,`).
pub fn canonicalized_resource(account: &str, path: &str, query: &str) -> String {
    let mut out = format!("/{account}{}", if path.is_empty() { "/" } else { path });
    let mut params: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
        params
            .entry(decode(k).to_lowercase())
            .or_default()
            .push(decode(v));
    }
    for (k, mut values) in params {
        values.sort();
        out.push('\n');
        out.push_str(&k);
        out.push(':');
        out.push_str(&values.join(","));
    }
    out
}

/// The Shared Key string to sign of a request: `method`, the request's
/// `headers` (all of them; standard ones and `x-ms-*` are picked out),
/// and the URL's `path` (as sent, encoded) and `query` (without `?`).
pub fn shared_key_string_to_sign(
    account: &str,
    method: &str,
    path: &str,
    query: &str,
    headers: &[(String, String)],
) -> String {
    let mut out = String::new();
    out.push_str(&method.to_ascii_uppercase());
    out.push('\n');
    for name in STANDARD_HEADERS {
        let value = header(headers, name);
        let value = if name == "content-length" && value == "0" {
            ""
        } else {
            value
        };
        out.push_str(value);
        out.push('\n');
    }
    let mut ms: Vec<(String, String)> = headers
        .iter()
        .filter(|(k, _)| k.to_ascii_lowercase().starts_with("x-ms-"))
        .map(|(k, v)| (k.to_ascii_lowercase(), fold_whitespace(v)))
        .collect();
    ms.sort();
    for (k, v) in ms {
        out.push_str(&k);
        out.push(':');
        out.push_str(&v);
        out.push('\n');
    }
    out.push_str(&canonicalized_resource(account, path, query));
    out
}

/// The `Authorization` header value for a string to sign.
pub fn shared_key_authorization(account: &str, key: &[u8], string_to_sign: &str) -> String {
    format!("SharedKey {account}:{}", hmac_base64(key, string_to_sign))
}

/// A service SAS for a whole container, bound to the stored access policy
/// `identifier`: the policy holds the permissions and the expiry, so the
/// token carries neither and deleting the policy invalidates it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerSas<'a> {
    /// The storage account.
    pub account: &'a str,
    /// The container.
    pub container: &'a str,
    /// The stored access policy's identifier (`si`).
    pub identifier: &'a str,
    /// `Some("https")` to refuse the token over plain HTTP (`spr`).
    pub protocol: Option<&'a str>,
}

impl ContainerSas<'_> {
    /// The string to sign (service SAS, version 2020-12-06 layout): the
    /// permissions, start and expiry are empty as the policy holds them.
    pub fn string_to_sign(&self) -> String {
        [
            "",                                                    // sp
            "",                                                    // st
            "",                                                    // se
            &format!("/blob/{}/{}", self.account, self.container), // canonicalized resource
            self.identifier,                                       // si
            "",                                                    // sip
            self.protocol.unwrap_or(""),                           // spr
            SAS_VERSION,                                           // sv
            "c",                                                   // sr
            "",                                                    // snapshot time
            "",                                                    // ses
            "",                                                    // rscc
            "",                                                    // rscd
            "",                                                    // rsce
            "",                                                    // rscl
            "",                                                    // rsct
        ]
        .join("\n")
    }

    /// The token (the query string, without `?`), signed with `key`.
    pub fn token(&self, key: &[u8]) -> String {
        let sig = hmac_base64(key, &self.string_to_sign());
        let mut out = String::new();
        if let Some(p) = self.protocol {
            out.push_str(&format!("spr={}&", encode_query_value(p)));
        }
        out.push_str(&format!(
            "sv={SAS_VERSION}&si={}&sr=c&sig={}",
            encode_query_value(self.identifier),
            encode_query_value(&sig)
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Azurite's development account key, published by Microsoft.
    const DEV_KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    fn key() -> Vec<u8> {
        BASE64.decode(DEV_KEY).unwrap()
    }

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn canonicalized_resources_match_the_documentation_examples() {
        // "Shared Key format for 2009-09-19 and later" of Azure's
        // "Authorize with Shared Key".
        assert_eq!(
            canonicalized_resource(
                "myaccount",
                "/mycontainer",
                "restype=container&comp=metadata"
            ),
            "/myaccount/mycontainer\ncomp:metadata\nrestype:container"
        );
        assert_eq!(
            canonicalized_resource(
                "myaccount",
                "/mycontainer",
                "restype=container&comp=list&include=snapshots&include=metadata&include=uncommittedblobs"
            ),
            "/myaccount/mycontainer\ncomp:list\ninclude:metadata,snapshots,uncommittedblobs\nrestype:container"
        );
        // The emulator's path-style URLs carry the account twice.
        assert_eq!(
            canonicalized_resource("devstoreaccount1", "/devstoreaccount1/c", ""),
            "/devstoreaccount1/devstoreaccount1/c"
        );
    }

    #[test]
    fn the_string_to_sign_has_the_documented_layout() {
        let s = shared_key_string_to_sign(
            "myaccount",
            "get",
            "/mycontainer",
            "restype=container&comp=acl",
            &h(&[
                ("X-MS-Version", "2021-12-02"),
                ("x-ms-date", "Sun, 11 Oct 2009 21:49:13 GMT"),
                ("Content-Length", "0"),
                ("x-ms-meta-a", "  two   words "),
            ]),
        );
        assert_eq!(
            s,
            "GET\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:Sun, 11 Oct 2009 21:49:13 GMT\nx-ms-meta-a:two words\n\
             x-ms-version:2021-12-02\n/myaccount/mycontainer\ncomp:acl\nrestype:container"
        );
    }

    #[test]
    fn shared_key_signatures_match_microsofts_python_sdk() {
        let date = "Fri, 27 Nov 2026 03:21:10 GMT";
        let get = shared_key_string_to_sign(
            "devstoreaccount1",
            "GET",
            "/devstoreaccount1/bc-1",
            "restype=container&comp=acl",
            &h(&[("x-ms-date", date), ("x-ms-version", "2021-12-02")]),
        );
        assert_eq!(
            shared_key_authorization("devstoreaccount1", &key(), &get),
            "SharedKey devstoreaccount1:gumtChHa017tLZ+171M6YdjuLOCcl8uc6FlHyEphkqs="
        );
        let put = shared_key_string_to_sign(
            "devstoreaccount1",
            "PUT",
            "/devstoreaccount1/bc-1",
            "restype=container&comp=acl",
            &h(&[
                ("x-ms-date", date),
                ("x-ms-version", "2021-12-02"),
                ("Content-Length", "77"),
                ("Content-Type", "application/xml"),
            ]),
        );
        assert_eq!(
            shared_key_authorization("devstoreaccount1", &key(), &put),
            "SharedKey devstoreaccount1:aNeqTBGpqb6fSOxsnfn9AHtvTCD7N9l8IQubj2AruAk="
        );
    }

    #[test]
    fn container_sas_tokens_match_microsofts_python_sdk() {
        let sas = ContainerSas {
            account: "devstoreaccount1",
            container: "bc-1",
            identifier: "ba-1",
            protocol: None,
        };
        assert_eq!(
            sas.string_to_sign(),
            "\n\n\n/blob/devstoreaccount1/bc-1\nba-1\n\n\n2020-12-06\nc\n\n\n\n\n\n\n"
        );
        assert_eq!(
            sas.token(&key()),
            "sv=2020-12-06&si=ba-1&sr=c&sig=up0c5x3WfCInI8hCIJeFkQagCR71YhosM3RKigELSVM%3D"
        );
        let https = ContainerSas {
            protocol: Some("https"),
            ..sas
        };
        assert_eq!(
            https.token(&key()),
            "spr=https&sv=2020-12-06&si=ba-1&sr=c&sig=v%2FCQNwrCghVQFqq5MtQdV5pwqQJQzlerF9KgoNKmo5g%3D"
        );
    }
}
