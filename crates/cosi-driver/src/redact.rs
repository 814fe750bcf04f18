//! The `Debug` form of secret fields: whether a value is present, never the value.

use std::collections::HashMap;
use std::fmt;

/// Wraps a `cosi_secret` field for `Debug`: a string shows `<redacted>`
/// when set and `""` when empty; a map shows its keys, each value redacted.
pub(crate) struct Redacted<'a, T>(pub(crate) &'a T);

impl fmt::Debug for Redacted<'_, String> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("<redacted>")
        }
    }
}

impl fmt::Debug for Redacted<'_, HashMap<String, String>> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut keys: Vec<&String> = self.0.keys().collect();
        keys.sort();
        f.debug_map()
            .entries(keys.into_iter().map(|k| (k, Redacted(&self.0[k]))))
            .finish()
    }
}
