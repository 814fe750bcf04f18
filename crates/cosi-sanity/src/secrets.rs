//! The credential values a run has seen, so that later error messages and
//! bucket info can be checked for leaks and reasons never quote one.

use std::fmt;

use cosi_driver::proto::{Credentials, ProtocolBucketInfo};

/// Values shorter than this are not searched for: a 3-character key ID
/// would match ordinary words and give false alarms.
pub const MIN_SECRET_LEN: usize = 6;

/// The shown replacement of a credential.
pub const REDACTED: &str = "<redacted>";

/// Every credential value returned by grants so far.
#[derive(Clone, Default)]
pub struct SecretSet {
    values: Vec<String>,
}

impl fmt::Debug for SecretSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretSet({} values)", self.values.len())
    }
}

impl SecretSet {
    /// Remembers `value` as a credential (if long enough to search for).
    pub fn add(&mut self, value: &str) {
        if value.len() >= MIN_SECRET_LEN && !self.values.iter().any(|known| known == value) {
            self.values.push(value.to_owned());
        }
    }

    /// Remembers every secret field of `creds` (those marked `cosi_secret`).
    pub fn collect(&mut self, creds: &Credentials) {
        let mut add = |v: &str| self.add(v);
        if let Some(s3) = &creds.s3 {
            add(&s3.access_key_id);
            add(&s3.access_secret_key);
        }
        if let Some(azure) = &creds.azure {
            add(&azure.access_token);
        }
        if let Some(gcs) = &creds.gcs {
            add(&gcs.private_key_id);
            add(&gcs.private_key);
            add(&gcs.hmac_access_id);
            add(&gcs.hmac_secret);
        }
    }

    /// How many values are known.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when no value is known yet.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// True when `text` contains a known credential.
    pub fn found_in(&self, text: &str) -> bool {
        self.values.iter().any(|v| text.contains(v.as_str()))
    }

    /// True when any field of `info` contains a known credential.
    pub fn found_in_info(&self, info: &ProtocolBucketInfo) -> bool {
        let mut fields: Vec<&str> = Vec::new();
        if let Some(s3) = &info.s3 {
            fields.extend([s3.bucket_name.as_str(), &s3.region, &s3.endpoint]);
        }
        if let Some(azure) = &info.azure {
            fields.push(&azure.storage_account);
        }
        if let Some(gcs) = &info.gcs {
            fields.extend([gcs.project_id.as_str(), &gcs.bucket_name]);
        }
        fields.into_iter().any(|f| self.found_in(f))
    }

    /// `text` with every known credential replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        // Longest first, so a value containing another is replaced whole.
        let mut values: Vec<&String> = self.values.iter().collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values
            .into_iter()
            .fold(text.to_owned(), |acc, v| acc.replace(v.as_str(), REDACTED))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::s3_bucket_info;

    use crate::checks::tests::s3_creds as creds;

    #[test]
    fn collected_secrets_are_found_and_redacted() {
        let mut set = SecretSet::default();
        set.collect(&creds("AKIAEXAMPLE1", "wJalrXUtnFEMI"));
        assert_eq!(set.len(), 2);
        assert!(set.found_in("denied for key AKIAEXAMPLE1"));
        assert!(!set.found_in("denied"));
        assert_eq!(
            set.redact("key AKIAEXAMPLE1 secret wJalrXUtnFEMI"),
            "key <redacted> secret <redacted>"
        );
    }

    #[test]
    fn short_values_are_not_searched_for() {
        let mut set = SecretSet::default();
        set.collect(&creds("AK1", "s"));
        assert!(set.is_empty());
        assert!(!set.found_in("AK1 is short"));
    }

    #[test]
    fn the_same_value_is_kept_once() {
        let mut set = SecretSet::default();
        set.collect(&creds("AKIAEXAMPLE1", "wJalrXUtnFEMI"));
        set.collect(&creds("AKIAEXAMPLE1", "wJalrXUtnFEMI"));
        assert_eq!(set.len(), 2);
    }

    #[test]
    fn bucket_info_is_searched_field_by_field() {
        let mut set = SecretSet::default();
        set.collect(&creds("AKIAEXAMPLE1", "wJalrXUtnFEMI"));
        let mut info = s3_bucket_info("b", "us-east-1", "http://127.0.0.1:9000");
        assert!(!set.found_in_info(&info));
        info.s3.as_mut().unwrap().endpoint = "http://AKIAEXAMPLE1:wJalrXUtnFEMI@host".into();
        assert!(set.found_in_info(&info));
    }

    #[test]
    fn debug_output_shows_no_value() {
        let mut set = SecretSet::default();
        set.collect(&creds("AKIAEXAMPLE1", "wJalrXUtnFEMI"));
        let shown = format!("{set:?}");
        assert_eq!(shown, "SecretSet(2 values)");
    }
}
