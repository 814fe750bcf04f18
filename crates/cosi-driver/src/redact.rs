//! The `Debug` form of secret fields: whether a value is present, never the value.

use std::fmt;

/// Wraps a `cosi_secret` field for `Debug`: `<redacted>` when set, `""` when empty.
pub(crate) struct Redacted<'a>(pub(crate) &'a String);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("<redacted>")
        }
    }
}
