//! Small helpers over `cosi_api::conditions` used by both reconcilers'
//! decisions: comparing a desired set with what an object shows, and
//! keeping a condition exactly as it is.

use cosi_api::Condition;
use cosi_api::conditions::{Desired, Status, find, is_current};
use cosi_api::constants::condition_types::{PROVISIONED, RESOURCES_VALIDATED};

/// True when every condition in `desired` is already shown, with this
/// generation, so writing them would change nothing.
pub fn all_current(conditions: &[Condition], desired: &[Desired], generation: Option<i64>) -> bool {
    desired
        .iter()
        .all(|d| is_current(conditions, d, generation))
}

/// The condition of `type_` as a desired condition, unchanged; `None` when absent.
pub fn existing(conditions: &[Condition], type_: &'static str) -> Option<Desired> {
    find(conditions, type_).map(|c| {
        Desired::new(
            type_,
            Status::parse(&c.status),
            c.reason.clone(),
            c.message.clone(),
        )
    })
}

/// Provisioned and ResourcesValidated Unknown, both for `reason` with
/// `message`: waiting on something that does not exist yet.
pub fn waiting_for(reason: &'static str, message: &str) -> [Desired; 2] {
    [PROVISIONED, RESOURCES_VALIDATED]
        .map(|type_| Desired::new(type_, Status::Unknown, reason, message))
}

/// True when `desired` would change the status (not only the message) of its type.
pub fn transitions(conditions: &[Condition], desired: &Desired) -> bool {
    find(conditions, desired.type_).is_none_or(|c| c.status != desired.status.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_api::conditions::set;
    use cosi_api::constants::condition_types::PROVISIONED;
    use k8s_openapi::jiff::Timestamp;

    #[test]
    fn a_kept_condition_is_current() {
        let mut conds = Vec::new();
        let d = Desired::new(PROVISIONED, Status::True, "Provisioned", "done");
        set(&mut conds, &d, Some(1), Timestamp::UNIX_EPOCH);
        let kept = existing(&conds, PROVISIONED).unwrap();
        assert!(all_current(&conds, std::slice::from_ref(&kept), Some(1)));
        assert!(!all_current(&conds, &[kept], Some(2)));
        assert!(!transitions(&conds, &d));
        assert!(transitions(
            &conds,
            &Desired::new(PROVISIONED, Status::False, "X", "")
        ));
        assert!(transitions(&[], &d));
    }
}
