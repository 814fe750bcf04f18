//! Object-metadata helpers shared by the store and the handlers: reading and
//! writing `metadata.*` fields of JSON objects, RFC 3339 timestamps without a
//! date library, the human ages `kubectl get` shows, `generateName` suffixes,
//! and the name rules (DNS-1123 subdomain and label) the API server enforces.

use serde_json::{Map, Value, json};
use std::time::{SystemTime, UNIX_EPOCH};

/// `metadata.<field>` as a string, if present.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// `metadata.name` (empty when absent).
pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or("")
}

/// `metadata.namespace` (empty when absent).
pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace").unwrap_or("")
}

/// `metadata.uid` (empty when absent).
pub fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid").unwrap_or("")
}

/// `metadata.resourceVersion` (empty when absent).
pub fn resource_version(obj: &Value) -> &str {
    meta_str(obj, "resourceVersion").unwrap_or("")
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    strings(obj.get("metadata").and_then(|m| m.get("finalizers")))
}

/// Sets `metadata.finalizers`, removing the field when none are left.
pub fn set_finalizers(obj: &mut Value, finalizers: Vec<String>) {
    let value = (!finalizers.is_empty()).then(|| json!(finalizers));
    set_meta(obj, "finalizers", value);
}

/// The strings of a JSON array (other items skipped); empty when the value
/// is absent or not an array.
pub fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj.get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}

/// `metadata.labels` as a map (empty when absent).
pub fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata")?.get("labels")?.as_object()
}

/// The `metadata` object, created when missing or not an object.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let map = obj.as_object_mut().expect("object ensured above");
    let entry = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut().expect("object ensured above")
}

/// Sets `metadata.<field>`; `None` removes it.
pub fn set_meta(obj: &mut Value, field: &str, value: Option<Value>) {
    let meta = meta_mut(obj);
    match value {
        Some(v) => {
            meta.insert(field.to_string(), v);
        }
        None => {
            meta.remove(field);
        }
    }
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The current time as `2006-01-02T15:04:05Z`.
pub fn now_rfc3339() -> String {
    format_rfc3339(now_secs())
}

/// Formats epoch seconds as RFC 3339 UTC with second precision.
pub fn format_rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Parses an RFC 3339 timestamp (`Z` or `±hh:mm`, optional fraction) to
/// epoch seconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || (b[10] != b'T' && b[10] != b't') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) => {
            let oh: i64 = rest[1..3].parse().ok()?;
            let om: i64 = rest[4..6].parse().ok()?;
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se - offset)
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The age `kubectl get` shows (`5s`, `3m20s`, `7h`, `12d`), as
/// apimachinery's `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let minutes = s / 60;
    let hours = s / 3600;
    let days = s / 86_400;
    if s < 120 {
        format!("{s}s")
    } else if minutes < 10 {
        two_units(minutes, "m", s % 60, "s")
    } else if hours < 3 {
        format!("{minutes}m")
    } else if hours < 8 {
        two_units(hours, "h", minutes % 60, "m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 192 {
        two_units(days, "d", hours % 24, "h")
    } else if days < 365 * 2 {
        format!("{days}d")
    } else if days < 365 * 8 {
        two_units(days / 365, "y", days % 365, "d")
    } else {
        format!("{}y", days / 365)
    }
}

/// `3m20s`, or `3m` when the smaller unit is zero.
fn two_units(big: i64, big_unit: &str, small: i64, small_unit: &str) -> String {
    if small == 0 {
        format!("{big}{big_unit}")
    } else {
        format!("{big}{big_unit}{small}{small_unit}")
    }
}

/// The age of an RFC 3339 timestamp, or `<unknown>`.
pub fn age_of(timestamp: Option<&str>) -> String {
    match timestamp.and_then(parse_rfc3339) {
        Some(t) => human_duration(now_secs() - t),
        None => "<unknown>".into(),
    }
}

/// A random 5-character suffix for `generateName`, from the alphabet the
/// API server uses (no vowels, no confusable digits).
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Problems with a DNS-1123 subdomain (most object names), as messages.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let ok = !value.is_empty()
        && value.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    if !ok {
        errs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string());
    }
    errs
}

/// Problems with a DNS-1123 label (namespace names), as messages.
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if !ok {
        errs.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errs
}

/// Problems with a path-segment name (the lax rule some kinds use).
pub fn path_segment_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value == "." || value == ".." {
        errs.push(format!("may not be '{value}'"));
    }
    for bad in ["/", "%"] {
        if value.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

/// Problems with a label value.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    if !value.is_empty() && !qualified_part_ok(value) {
        errs.push("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".into());
    }
    errs
}

/// Problems with a qualified name (label and annotation keys).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let (prefix, name) = match value.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, value),
    };
    let mut errs = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            errs.push("prefix part must be non-empty".into());
        } else {
            for e in dns1123_subdomain_errors(prefix) {
                errs.push(format!("prefix part {e}"));
            }
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".into());
    } else if !qualified_part_ok(name) {
        errs.push("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into());
    }
    errs
}

fn qualified_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for secs in [0, 86_399, 951_782_400, 1_700_000_000, 4_102_444_800] {
            assert_eq!(parse_rfc3339(&format_rfc3339(secs)), Some(secs));
        }
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn timestamps_with_offsets_and_fractions_parse() {
        assert_eq!(
            parse_rfc3339("2000-02-29T01:00:00.123456+01:00"),
            Some(951_782_400)
        );
        assert_eq!(parse_rfc3339("not a time"), None);
        assert_eq!(parse_rfc3339("2000-13-29T01:00:00Z"), None);
    }

    #[test]
    fn human_durations_match_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(3600), "60m");
        assert_eq!(human_duration(5 * 3600 + 60), "5h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86_400), "3d");
        assert_eq!(human_duration(100 * 86_400), "100d");
    }

    #[test]
    fn names_are_checked_like_the_api_server() {
        assert!(dns1123_subdomain_errors("a.b-c").is_empty());
        assert!(!dns1123_subdomain_errors("A").is_empty());
        assert!(!dns1123_subdomain_errors("-a").is_empty());
        assert!(dns1123_label_errors("kube-system").is_empty());
        assert!(!dns1123_label_errors("a.b").is_empty());
        assert!(qualified_name_errors("example.com/my-key").is_empty());
        assert!(!qualified_name_errors("bad key").is_empty());
        assert!(label_value_errors("").is_empty());
        assert!(!label_value_errors("-x").is_empty());
    }

    #[test]
    fn random_suffix_has_five_safe_characters() {
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(
            s.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
    }
}
