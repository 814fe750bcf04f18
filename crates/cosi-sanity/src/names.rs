//! Unique names per run, so that parallel runs against one driver never
//! collide: Buckets are named like the sidecar names them (`bc-<uuid>`),
//! accounts like BucketAccesses (`ba-<uuid>`).

use uuid::Uuid;

/// A fresh Bucket name, `bc-<uuid v4>`.
pub fn bucket_name() -> String {
    format!("bc-{}", Uuid::new_v4())
}

/// A fresh account name, `ba-<uuid v4>`.
pub fn account_name() -> String {
    format!("ba-{}", Uuid::new_v4())
}

/// A fresh object key for data-plane checks.
pub fn object_key() -> String {
    format!("cosi-sanity-{}", Uuid::new_v4())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_have_the_sidecar_prefixes_and_are_valid_object_names() {
        let b = bucket_name();
        let a = account_name();
        assert!(b.starts_with("bc-") && a.starts_with("ba-"));
        cosi_driver::validate::object_name("name", &b).unwrap();
        cosi_driver::validate::object_name("account_name", &a).unwrap();
    }

    #[test]
    fn every_name_is_new() {
        assert_ne!(bucket_name(), bucket_name());
        assert_ne!(account_name(), account_name());
        assert_ne!(object_key(), object_key());
    }
}
