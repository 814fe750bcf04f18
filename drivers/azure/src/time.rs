//! The two time formats Azure Storage speaks: ISO 8601 in UTC for access
//! policies and SAS fields (`2026-11-27T03:21:10Z`), and RFC 1123 for the
//! `x-ms-date` header. Whole seconds only: Azure stores policy times to
//! the second for SAS use, and a token's expiry is compared at that grain.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (`civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Formats `t` (truncated to the second) as `YYYY-MM-DDThh:mm:ssZ`.
pub fn iso8601(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Parses an ISO 8601 UTC time as Azure writes it: `2026-11-27T03:21:10Z`,
/// with or without fractional seconds (`.0000000Z`). Fractions are dropped.
pub fn parse_iso8601(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    let rest = text.strip_suffix('Z')?;
    let (date, time) = rest.split_once('T')?;
    let mut date = date.splitn(3, '-');
    let y: i64 = date.next()?.parse().ok()?;
    let m: u32 = date.next()?.parse().ok()?;
    let d: u32 = date.next()?.parse().ok()?;
    let time = time.split('.').next()?;
    let mut hms = time.splitn(3, ':');
    let hh: u64 = hms.next()?.parse().ok()?;
    let mm: u64 = hms.next()?.parse().ok()?;
    let ss: u64 = hms.next().unwrap_or("0").parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let days = days_from_civil(y, m, d);
    let secs = u64::try_from(days).ok()? * 86_400 + hh * 3600 + mm * 60 + ss;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

/// Formats `t` as the `x-ms-date` header wants it (RFC 1123, GMT).
pub fn rfc1123(t: SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

/// `t` as a protobuf timestamp (whole seconds).
pub fn to_timestamp(t: SystemTime) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0),
        nanos: 0,
    }
}

/// Truncates `t` to the whole second, as policies store it.
pub fn whole_seconds(t: SystemTime) -> SystemTime {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// Parses a duration in Go's notation as Kubernetes users write it:
/// `168h`, `30m`, `1h30m`, `45s` (units `h`, `m`, `s`; at least one).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration such as 168h, 30m or 1h30m");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit = match rest.chars().next() {
            Some('h') => 3600,
            Some('m') => 60,
            Some('s') => 1,
            _ => return Err(bad()),
        };
        rest = &rest[1..];
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(bad)?;
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_round_trips_and_matches_known_dates() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(iso8601(t), "2023-11-14T22:13:20Z");
        assert_eq!(parse_iso8601("2023-11-14T22:13:20Z"), Some(t));
        assert_eq!(parse_iso8601("2023-11-14T22:13:20.0000000Z"), Some(t));
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let leap = parse_iso8601("2024-02-29T00:00:00Z").unwrap();
        assert_eq!(iso8601(leap), "2024-02-29T00:00:00Z");
        assert_eq!(
            iso8601(leap + Duration::from_secs(86_400)),
            "2024-03-01T00:00:00Z"
        );
    }

    #[test]
    fn malformed_times_are_refused() {
        for bad in [
            "",
            "2023-11-14",
            "2023-11-14T22:13:20",
            "2023-13-01T00:00:00Z",
            "x-1-1T0:0:0Z",
        ] {
            assert_eq!(parse_iso8601(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_date_header_is_rfc1123() {
        let t = UNIX_EPOCH + Duration::from_secs(1_255_297_753);
        assert_eq!(rfc1123(t), "Sun, 11 Oct 2009 21:49:13 GMT");
    }

    #[test]
    fn durations_read_like_go_durations() {
        assert_eq!(
            parse_duration("168h").unwrap(),
            Duration::from_secs(604_800)
        );
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("45s").unwrap(), Duration::from_secs(45));
        for bad in ["", "7d", "h", "10", "1.5h", "-1h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
