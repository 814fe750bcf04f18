//! Short human-readable accounts of COSI objects: what a waiting step shows
//! (`Provisioned=Unknown (WaitingForBucket)`), and what a failure report
//! lists for a person to look at (every condition with its message, and the
//! Events about the objects involved).

use cosi_api::Condition;
use cosi_api::conditions::{Status, find, status_of};
use cosi_api::constants::condition_types::{
    ALL, PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED,
};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};

/// One line on the state of an object's conditions, naming only what
/// matters while waiting: `Provisioned`, plus `ResourcesValidated` when not
/// True and `ProvisionFailed` when True, each with its reason.
pub fn waiting_summary(conditions: &[Condition]) -> String {
    if conditions.is_empty() {
        return "no conditions yet".to_owned();
    }
    let mut parts = vec![condition_brief(conditions, PROVISIONED)];
    if status_of(conditions, RESOURCES_VALIDATED) != Status::True
        && find(conditions, RESOURCES_VALIDATED).is_some()
    {
        parts.push(condition_brief(conditions, RESOURCES_VALIDATED));
    }
    if status_of(conditions, PROVISION_FAILED) == Status::True {
        parts.push(condition_brief(conditions, PROVISION_FAILED));
    }
    parts.join(", ")
}

/// `Type=Status (Reason)`, or `Type not set`.
pub fn condition_brief(conditions: &[Condition], type_: &str) -> String {
    match find(conditions, type_) {
        None => format!("{type_} not set"),
        Some(c) if c.reason.is_empty() => format!("{type_}={}", c.status),
        Some(c) => format!("{type_}={} ({})", c.status, c.reason),
    }
}

/// Every COSI condition with its message, one line each:
/// `Provisioned=False (Reason): message`.
pub fn condition_lines(conditions: &[Condition]) -> Vec<String> {
    if conditions.is_empty() {
        return vec!["no conditions yet".to_owned()];
    }
    ALL.iter()
        .filter(|t| find(conditions, t).is_some())
        .map(|t| {
            let brief = condition_brief(conditions, t);
            match find(conditions, t).map(|c| c.message.as_str()) {
                Some(m) if !m.is_empty() => format!("{brief}: {m}"),
                _ => brief,
            }
        })
        .collect()
}

/// One line for an Event: `Warning FailedCreateBucket (x3): message`.
pub fn event_line(event: &Event) -> String {
    let count = event
        .series
        .as_ref()
        .map(|s| s.count)
        .or(event.deprecated_count)
        .filter(|n| *n > 1)
        .map(|n| format!(" (x{n})"))
        .unwrap_or_default();
    format!(
        "{} {}{count}: {}",
        event.type_.as_deref().unwrap_or("Normal"),
        event.reason.as_deref().unwrap_or(""),
        event.note.as_deref().unwrap_or("")
    )
}

/// The Events about objects named `name` of `kind`, in every namespace
/// (those about cluster-scoped objects land in `default`), oldest first.
pub async fn events_about(client: &Client, kind: &str, name: &str) -> kube::Result<Vec<Event>> {
    let api: Api<Event> = Api::all(client.clone());
    let mut events: Vec<Event> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .collect();
    events.sort_by(|a, b| {
        let at = |e: &Event| {
            e.event_time.as_ref().map(|t| t.0).or(e
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0))
        };
        at(a).cmp(&at(b))
    });
    Ok(events)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::events::v1::EventSeries;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            observed_generation: Some(1),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn waiting_summary_names_provisioned_and_only_the_conditions_that_are_wrong() {
        // (Provisioned, ResourcesValidated and ProvisionFailed as
        // (status, reason); the summary expected)
        let cases = [
            (
                [
                    ("Unknown", "WaitingForBucket"),
                    ("True", "Valid"),
                    ("False", "Provisioned"),
                ],
                "Provisioned=Unknown (WaitingForBucket)",
            ),
            (
                [
                    ("Unknown", "DriverUnavailable"),
                    ("False", "InvalidBucketClass"),
                    ("True", "Unavailable"),
                ],
                "Provisioned=Unknown (DriverUnavailable), ResourcesValidated=False (InvalidBucketClass), ProvisionFailed=True (Unavailable)",
            ),
        ];
        for (states, summary) in cases {
            let conditions: Vec<Condition> =
                ["Provisioned", "ResourcesValidated", "ProvisionFailed"]
                    .into_iter()
                    .zip(states)
                    .map(|(type_, (status, reason))| cond(type_, status, reason, ""))
                    .collect();
            assert_eq!(waiting_summary(&conditions), summary);
        }
        assert_eq!(waiting_summary(&[]), "no conditions yet");
    }

    #[test]
    fn condition_lines_carry_every_message_in_a_fixed_order() {
        let conds = [
            cond(
                "ProvisionFailed",
                "True",
                "Unavailable",
                "driver not reachable",
            ),
            cond("Provisioned", "Unknown", "", ""),
        ];
        assert_eq!(
            condition_lines(&conds),
            vec![
                "Provisioned=Unknown".to_owned(),
                "ProvisionFailed=True (Unavailable): driver not reachable".to_owned()
            ]
        );
    }

    #[test]
    fn event_line_shows_type_reason_count_and_note() {
        let event = Event {
            type_: Some("Warning".into()),
            reason: Some("FailedCreateBucket".into()),
            note: Some("driver said no".into()),
            series: Some(EventSeries {
                count: 3,
                last_observed_time: MicroTime(Timestamp::UNIX_EPOCH),
            }),
            regarding: Some(ObjectReference::default()),
            ..Event::default()
        };
        assert_eq!(
            event_line(&event),
            "Warning FailedCreateBucket (x3): driver said no"
        );
    }
}
