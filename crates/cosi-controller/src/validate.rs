//! Checks of class contents that the API schema cannot express: the driver
//! name form and the size of the opaque parameter map (COSI driver
//! conventions: driver names in domain-name notation of at most 63
//! characters, parameter maps of at most 4 KiB). A class that fails them
//! would only be refused later by the driver, with a less helpful message.

use std::collections::BTreeMap;

/// The longest driver name COSI accepts.
pub const MAX_DRIVER_NAME: usize = 63;
/// The largest parameter map (keys plus values, in bytes) COSI passes to a driver.
pub const MAX_PARAMETERS_BYTES: usize = 4096;

/// Problems with a driver name, as sentences (empty when it is valid).
pub fn driver_name(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name.is_empty() {
        problems.push("driverName is empty".to_owned());
        return problems;
    }
    if name.len() > MAX_DRIVER_NAME {
        problems.push(format!(
            "driverName {name:?} is {} characters long; the limit is {MAX_DRIVER_NAME}",
            name.len()
        ));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        problems.push(format!(
            "driverName {name:?} must begin and end with a letter or digit"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '.'))
    {
        problems.push(format!(
            "driverName {name:?} contains {c:?}; only letters, digits, '-' and '.' are allowed"
        ));
    }
    problems
}

/// Problems with an opaque parameter map (empty when it is valid). Values
/// are never quoted: parameters may hold things an admin would not want in
/// an Event.
pub fn parameters(params: &BTreeMap<String, String>) -> Vec<String> {
    let mut problems = Vec::new();
    let size: usize = params.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_PARAMETERS_BYTES {
        problems.push(format!(
            "parameters hold {size} bytes of keys and values; the limit is {MAX_PARAMETERS_BYTES}"
        ));
    }
    if params.keys().any(String::is_empty) {
        problems.push("parameters contain an empty key".to_owned());
    }
    problems
}

/// Problems with a class's driver name and parameters together.
pub fn class(driver: &str, params: &BTreeMap<String, String>) -> Vec<String> {
    let mut problems = driver_name(driver);
    problems.extend(parameters(params));
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_style_driver_names_are_valid() {
        for name in ["s3.amazonaws.com", "local.cosi-rs.dev", "a"] {
            assert!(driver_name(name).is_empty(), "{name}");
        }
    }

    #[test]
    fn malformed_driver_names_are_explained() {
        assert_eq!(driver_name(""), vec!["driverName is empty"]);
        assert!(driver_name("-x")[0].contains("begin and end"));
        assert!(driver_name("my_driver")[0].contains("'_'"));
        assert!(driver_name(&"a".repeat(64))[0].contains("limit is 63"));
    }

    #[test]
    fn oversized_or_keyless_parameters_are_refused_without_quoting_values() {
        let mut p = BTreeMap::new();
        p.insert("k".to_owned(), "secret-ish".repeat(500));
        let problems = parameters(&p);
        assert_eq!(problems.len(), 1);
        assert!(!problems[0].contains("secret-ish"));
        let mut p = BTreeMap::new();
        p.insert(String::new(), "v".to_owned());
        assert_eq!(parameters(&p), vec!["parameters contain an empty key"]);
        assert!(class("d.example", &BTreeMap::new()).is_empty());
    }
}
