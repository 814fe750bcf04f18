//! Which buckets a revoke may name. DriverRevokeBucketAccess carries the
//! account ID and the buckets of the grant; a driver that acted on the
//! account ID alone would let anyone who can send a revoke and knows
//! another tenant's account ID revoke that account, naming buckets of
//! their own. So a driver revokes an account only when it holds a grant
//! on every named bucket, as the backend records it (the local driver: its
//! account records; the S3 driver: its IAM user's tags; the RGW driver:
//! the bucket policies naming its user; the Azure driver: the container
//! holding its policy), and refuses the revoke otherwise with
//! `FailedPrecondition`, changing nothing. An account that is already gone
//! needs no check: the revoke answers OK, as the KEP's idempotency asks.

use crate::proto::RevokedBucket;

/// The named buckets for which `granted` is false, each once, in the
/// order the request names them.
pub fn not_granted(named: &[RevokedBucket], granted: impl Fn(&str) -> bool) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for id in named.iter().map(|b| b.bucket_id.as_str()) {
        if !granted(id) && !out.contains(&id) {
            out.push(id);
        }
    }
    out
}

/// The message refusing a revoke of `account_id` that names `buckets`
/// the account was never granted. It names only what the request named:
/// never the buckets the account does hold, nor anyone else's.
pub fn not_granted_message(account_id: &str, buckets: &[&str]) -> String {
    let quoted: Vec<String> = buckets.iter().map(|b| format!("{b:?}")).collect();
    let noun = if buckets.len() == 1 {
        "bucket"
    } else {
        "buckets"
    };
    format!(
        "refusing to revoke account {account_id:?}: it was never granted {noun} {}, which the request names; \
         a revoke must name the buckets of the account's grant, so nothing was revoked",
        quoted.join(", ")
    )
}

/// Refuses a revoke of `account_id` naming a bucket for which `granted`
/// is false: the message of the `FailedPrecondition` a driver answers.
pub fn check_named_buckets(
    account_id: &str,
    named: &[RevokedBucket],
    granted: impl Fn(&str) -> bool,
) -> Result<(), String> {
    let missing = not_granted(named, granted);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(not_granted_message(account_id, &missing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::revoked_buckets as named;

    #[test]
    fn a_revoke_naming_only_granted_buckets_passes() {
        let granted = |b: &str| ["bc-a", "bc-b"].contains(&b);
        assert!(check_named_buckets("ba-1", &named(&["bc-a"]), granted).is_ok());
        assert!(check_named_buckets("ba-1", &named(&["bc-b", "bc-a"]), granted).is_ok());
    }

    #[test]
    fn a_revoke_naming_a_bucket_never_granted_is_refused_naming_only_what_it_sent() {
        let granted = |b: &str| ["bc-mine", "bc-other-of-mine"].contains(&b);
        let msg = check_named_buckets("ba-victim", &named(&["bc-theirs"]), granted).unwrap_err();
        assert_eq!(
            msg,
            "refusing to revoke account \"ba-victim\": it was never granted bucket \"bc-theirs\", which the \
             request names; a revoke must name the buckets of the account's grant, so nothing was revoked"
        );
        assert!(!msg.contains("bc-mine") && !msg.contains("bc-other-of-mine"));
    }

    #[test]
    fn every_bucket_never_granted_is_named_once_in_the_order_sent() {
        let granted = |b: &str| b == "bc-a";
        let request = named(&["bc-z", "bc-a", "bc-y", "bc-z"]);
        assert_eq!(not_granted(&request, granted), ["bc-z", "bc-y"]);
        let msg = check_named_buckets("ba-1", &request, granted).unwrap_err();
        assert!(msg.contains("buckets \"bc-z\", \"bc-y\","), "{msg}");
    }
}
