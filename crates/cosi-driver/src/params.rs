//! Reading a class's parameter map the way every driver of this workspace
//! does: unknown keys are refused so that a typo in a class is reported
//! instead of silently ignored, and every problem is collected so that an
//! admin fixes them all at once. Which keys a driver knows and what they
//! mean stay in the driver.

use std::collections::HashMap;

/// One problem per key of `map` that is not in `known`, sorted by key.
pub fn unknown_keys(map: &HashMap<String, String>, known: &[&str]) -> Vec<String> {
    let mut unknown: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|k| !known.contains(k))
        .collect();
    unknown.sort_unstable();
    unknown
        .into_iter()
        .map(|k| format!("unknown parameter {k:?} (known: {})", known.join(", ")))
        .collect()
}

/// The boolean parameter `key`: absent or `"false"` is false, `"true"` is
/// true, anything else is a problem (and false).
pub fn boolean(map: &HashMap<String, String>, key: &str, problems: &mut Vec<String>) -> bool {
    match map.get(key).map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            problems.push(format!("{key} must be \"true\" or \"false\""));
            false
        }
    }
}

/// The name prefix parameter `key`, checked with `check`; empty when
/// absent or refused (a refusal is a problem).
pub fn name_prefix(
    map: &HashMap<String, String>,
    key: &str,
    check: impl FnOnce(&str) -> Result<(), String>,
    problems: &mut Vec<String>,
) -> String {
    match map.get(key) {
        None => String::new(),
        Some(p) => match check(p) {
            Ok(()) => p.clone(),
            Err(e) => {
                problems.push(format!("{key} {e}"));
                String::new()
            }
        },
    }
}

/// `value` when there are no problems, else one error naming the `class`
/// kind and every problem.
pub fn finish<T>(value: T, problems: Vec<String>, class: &str) -> Result<T, String> {
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(format!(
            "invalid {class} parameters: {}",
            problems.join("; ")
        ))
    }
}

/// Parses a positive size like `1048576`, `10Mi` or `2G`, exactly: digits
/// and at most one of the suffixes `k`, `M`, `G`, `T` (powers of 1000) or
/// `Ki`, `Mi`, `Gi`, `Ti` (powers of 1024); no sign, no spaces. `None` for
/// anything else, zero, or a size past `u64`.
pub fn parse_size(value: &str) -> Option<u64> {
    let digits = value.bytes().take_while(u8::is_ascii_digit).count();
    let (number, suffix) = value.split_at(digits);
    let multiplier: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return None,
    };
    let n: u64 = number.parse().ok()?;
    n.checked_mul(multiplier).filter(|n| *n > 0)
}
