//! The driver's decisions, as pure functions of what the storage service
//! reports: which SAS permissions an access's modes give, what a create,
//! a delete, a grant and a revoke must do, and what they must refuse. The
//! I/O modules ([`crate::containers`], [`crate::access`]) observe, call one
//! of these, and carry out the plan.
//!
//! Every plan is safe to compute again after a crash halfway through
//! carrying out the previous one: a container created by an interrupted
//! call carries the driver's mark and is accepted, and an access policy
//! written by an interrupted grant is found and reused, never doubled.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use cosi_driver::proto::{AccessMode, AccessModes, RevokedBucket};
use cosi_driver::revoke;

use crate::acl::{Acl, MAX_POLICIES, Policy};
use crate::errors::Error;
use crate::params::DELETE_NON_EMPTY;
use crate::rest::ContainerInfo;
use crate::time;

/// The metadata key marking the containers this driver created; its
/// value is the driver name. INVARIANT: containers created by earlier
/// versions carry it; it never changes.
pub const OWNER_METADATA: &str = "cosidriver";

/// SAS permissions of a read-only access: read blobs (content, properties
/// and metadata) and list them.
pub const READ_ONLY: &str = "rl";
/// SAS permissions of a write-only access: add, create, write and delete
/// blobs (content, properties and metadata), without reading or listing.
pub const WRITE_ONLY: &str = "acwd";
/// SAS permissions of a read-write access.
pub const READ_WRITE: &str = "racwdl";

fn mode(v: i32) -> AccessMode {
    AccessMode::try_from(v).unwrap_or(AccessMode::Unspecified)
}

fn mode_name(m: AccessMode) -> &'static str {
    m.api_name().unwrap_or("unspecified")
}

/// The SAS permissions for an access's modes. Azure does not separate
/// object metadata from object data (a token that reads a blob reads its
/// metadata, one that writes it writes its metadata) and a SAS can neither
/// read nor write a container's own metadata; so a combination SAS cannot
/// honour exactly is refused with `InvalidArgument`, never granted wider.
/// An unset category means the user does not care.
pub fn permissions(bucket: &str, modes: &AccessModes) -> Result<&'static str, Error> {
    let (data, meta, bucket_meta) = (
        mode(modes.object_data),
        mode(modes.object_metadata),
        mode(modes.bucket_metadata),
    );
    let mut problems = Vec::new();
    if bucket_meta != AccessMode::Unspecified {
        problems.push(format!(
            "bucketMetadata {} cannot be granted: a SAS token can neither read nor write a container's own \
             metadata or properties; leave bucketMetadata unset",
            mode_name(bucket_meta)
        ));
    }
    if data != AccessMode::Unspecified && meta != AccessMode::Unspecified && data != meta {
        problems.push(format!(
            "objectData {} with objectMetadata {} cannot be granted exactly: Azure does not separate object \
             metadata permissions from object data permissions (a token that reads or writes a blob reads or \
             writes its metadata too); ask for the same mode for both, or leave objectMetadata unset",
            mode_name(data),
            mode_name(meta)
        ));
    }
    if !problems.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "bucket {bucket:?}: {}",
            problems.join("; ")
        )));
    }
    let wanted = if data != AccessMode::Unspecified {
        data
    } else {
        meta
    };
    match wanted {
        AccessMode::ReadOnly => Ok(READ_ONLY),
        AccessMode::WriteOnly => Ok(WRITE_ONLY),
        AccessMode::ReadWrite => Ok(READ_WRITE),
        AccessMode::Unspecified => Err(Error::InvalidArgument(format!(
            "bucket {bucket:?}: no access mode is set for objectData or objectMetadata"
        ))),
    }
}

/// True when `info` carries this driver's mark.
pub fn is_ours(info: &ContainerInfo, driver_name: &str) -> bool {
    info.metadata.get(OWNER_METADATA).map(String::as_str) == Some(driver_name)
}

/// Plans DriverCreateBucket: `true` to create the container, `false` when
/// the driver's own container of that name is already there; a container
/// of that name without the driver's mark is refused.
pub fn plan_create(
    container: &str,
    existing: Option<&ContainerInfo>,
    driver_name: &str,
) -> Result<bool, Error> {
    match existing {
        None => Ok(true),
        Some(info) if is_ours(info, driver_name) => Ok(false),
        Some(_) => Err(Error::AlreadyExists(format!(
            "container {container:?} already exists and was not created by driver {driver_name:?} (it lacks the \
             metadata {OWNER_METADATA}={driver_name}); use another containerNamePrefix in the BucketClass, or \
             import the container as a static Bucket"
        ))),
    }
}

/// What DriverDeleteBucket must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeletePlan {
    /// The container is already gone.
    Done,
    /// Check that it is empty (unless the class allows otherwise), then
    /// delete it.
    Delete,
}

/// Plans DriverDeleteBucket: absent is done; a container the driver did
/// not create is never deleted.
pub fn plan_delete(
    container: &str,
    existing: Option<&ContainerInfo>,
    driver_name: &str,
) -> Result<DeletePlan, Error> {
    match existing {
        None => Ok(DeletePlan::Done),
        Some(info) if is_ours(info, driver_name) => Ok(DeletePlan::Delete),
        Some(_) => Err(Error::FailedPrecondition(format!(
            "container {container:?} was not created by driver {driver_name:?} (it lacks the metadata \
             {OWNER_METADATA}={driver_name}); the driver deletes only containers it created"
        ))),
    }
}

/// The error for a container that still holds blobs.
pub fn not_empty(container: &str) -> Error {
    Error::FailedPrecondition(format!(
        "container {container:?} is not empty; it is deleted once emptied (retried), or set the BucketClass \
         parameter {DELETE_NON_EMPTY}: \"true\" to let the driver delete it with its blobs"
    ))
}

/// What a grant must do with the container's access policies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrantPlan {
    /// The access's policy is there as wanted: tokens expire at `expiry`.
    Keep {
        /// The policy's expiry; `None` when it has none.
        expiry: Option<SystemTime>,
    },
    /// Write `acl` (the access's policy added or renewed); tokens expire at
    /// `expiry`.
    Put {
        /// The new list of policies.
        acl: Acl,
        /// The expiry of the access's policy.
        expiry: SystemTime,
    },
}

/// Plans a grant of `permission` to the policy `id` on `container`. A
/// repeat finds the policy and keeps it (same token, same expiry); a
/// policy that has expired is renewed for `lifetime` (its tokens belong to
/// this access alone); a sixth policy is refused, as Azure allows five.
pub fn plan_grant(
    container: &str,
    acl: &Acl,
    id: &str,
    permission: &str,
    now: SystemTime,
    lifetime: Duration,
) -> Result<GrantPlan, Error> {
    let expiry = time::whole_seconds(now + lifetime);
    if let Some(existing) = acl.get(id) {
        if existing.permission != permission {
            return Err(Error::AlreadyExists(format!(
                "access policy {id:?} of container {container:?} exists with permissions {:?}, not {permission:?} \
                 as this request asks; revoke the access first",
                existing.permission
            )));
        }
        let current = existing.expiry.as_deref().and_then(time::parse_iso8601);
        if current.is_some_and(|t| t > now) || existing.expiry.is_none() {
            return Ok(GrantPlan::Keep { expiry: current });
        }
        let mut renewed = acl.clone();
        for p in &mut renewed.policies {
            if p.id == id {
                p.expiry = Some(time::iso8601(expiry));
            }
        }
        return Ok(GrantPlan::Put {
            acl: renewed,
            expiry,
        });
    }
    if acl.policies.len() >= MAX_POLICIES {
        let ids: Vec<&str> = acl.policies.iter().map(|p| p.id.as_str()).collect();
        return Err(Error::ResourceExhausted(format!(
            "container {container:?} already has {} stored access policies ({}), the most Azure allows on one \
             container; every Key BucketAccess of the bucket takes one, and a credential rotation takes a second \
             one until its grace period ends. Delete a BucketAccess of this bucket that is no longer used, or \
             wait for a rotation to finish; the grant is retried",
            acl.policies.len(),
            ids.join(", ")
        )));
    }
    let mut next = acl.clone();
    next.policies.push(Policy {
        id: id.to_owned(),
        start: None,
        expiry: Some(time::iso8601(expiry)),
        permission: permission.to_owned(),
    });
    Ok(GrantPlan::Put { acl: next, expiry })
}

/// True when `acl` holds `want` as written: same permission and the same
/// times, whatever the precision the service reports them with.
pub fn holds(acl: &Acl, want: &Policy) -> bool {
    let t = |v: &Option<String>| v.as_deref().map(time::parse_iso8601);
    acl.get(&want.id).is_some_and(|p| {
        p.permission == want.permission
            && t(&p.expiry) == t(&want.expiry)
            && t(&p.start) == t(&want.start)
    })
}

/// Plans a revoke: the list without the policy `id`, or `None` when it is
/// already gone.
pub fn plan_revoke(acl: &Acl, id: &str) -> Option<Acl> {
    acl.get(id)?;
    Some(Acl {
        policies: acl
            .policies
            .iter()
            .filter(|p| p.id != id)
            .cloned()
            .collect(),
    })
}

/// The containers a revoke of the account `id` deletes its policy from,
/// given the named containers that hold one (`holding`). An account is one
/// policy on the one container of its grant. When no named container holds
/// it, the account is gone (a repeat, or a revoke whose reply was lost) or
/// lives on a container the request does not name, which the revoke must
/// not touch: nothing to do either way, and telling the two apart would
/// take reading every container of the storage account. When some hold it
/// and others do not, the request names containers the account was never
/// granted: `FailedPrecondition`, and nothing changes.
pub fn revoke_targets(
    id: &str,
    named: &[RevokedBucket],
    holding: &BTreeSet<String>,
) -> Result<Vec<String>, Error> {
    if holding.is_empty() {
        return Ok(Vec::new());
    }
    revoke::check_named_buckets(id, named, |c| holding.contains(c))
        .map_err(Error::FailedPrecondition)?;
    Ok(holding.iter().cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::access_modes as modes;
    use std::collections::BTreeMap;
    use std::time::UNIX_EPOCH;
    use tonic::Code;

    const C: &str = "bc-1";
    const DRIVER: &str = "azure.cosi-rs.dev";

    use AccessMode::{ReadOnly as RO, ReadWrite as RW, Unspecified as U, WriteOnly as WO};

    #[test]
    fn access_modes_become_sas_permissions_exactly() {
        let table = [
            (RW, U, READ_WRITE),
            (RO, U, READ_ONLY),
            (WO, U, WRITE_ONLY),
            (RO, RO, READ_ONLY),
            (RW, RW, READ_WRITE),
            (U, WO, WRITE_ONLY),
        ];
        for (data, meta, want) in table {
            assert_eq!(
                permissions(C, &modes(data, meta, U)).unwrap(),
                want,
                "{data:?} {meta:?}"
            );
        }
    }

    #[test]
    fn combinations_a_sas_cannot_honour_are_invalid_argument_never_wider() {
        for (data, meta, bucket) in [
            (RO, RW, U),
            (RW, RO, U),
            (WO, RO, U),
            (RW, U, RO),
            (RO, U, RW),
            (U, U, RW),
        ] {
            let e = permissions(C, &modes(data, meta, bucket)).unwrap_err();
            assert_eq!(
                e.code(),
                Code::InvalidArgument,
                "{data:?} {meta:?} {bucket:?}"
            );
        }
        let e = permissions(C, &modes(RO, RW, RW)).unwrap_err().to_string();
        assert!(
            e.contains("bucketMetadata") && e.contains("objectMetadata"),
            "{e}"
        );
        assert!(
            permissions(C, &modes(U, U, U))
                .unwrap_err()
                .to_string()
                .contains("no access mode")
        );
    }

    fn info(owner: Option<&str>) -> ContainerInfo {
        ContainerInfo {
            metadata: owner
                .map(|o| BTreeMap::from([(OWNER_METADATA.to_owned(), o.to_owned())]))
                .unwrap_or_default(),
        }
    }

    #[test]
    fn a_crash_after_create_finds_the_marked_container_and_accepts_it() {
        assert!(plan_create(C, None, DRIVER).unwrap());
        assert!(!plan_create(C, Some(&info(Some(DRIVER))), DRIVER).unwrap());
        let e = plan_create(C, Some(&info(None)), DRIVER).unwrap_err();
        assert_eq!(e.code(), Code::AlreadyExists);
        assert_eq!(
            plan_create(C, Some(&info(Some("other.driver"))), DRIVER)
                .unwrap_err()
                .code(),
            Code::AlreadyExists
        );
    }

    #[test]
    fn only_the_drivers_own_containers_are_deleted() {
        assert_eq!(plan_delete(C, None, DRIVER).unwrap(), DeletePlan::Done);
        assert_eq!(
            plan_delete(C, Some(&info(Some(DRIVER))), DRIVER).unwrap(),
            DeletePlan::Delete
        );
        assert_eq!(
            plan_delete(C, Some(&info(None)), DRIVER)
                .unwrap_err()
                .code(),
            Code::FailedPrecondition
        );
        assert!(not_empty(C).to_string().contains(DELETE_NON_EMPTY));
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn policy(id: &str, expiry: u64) -> Policy {
        Policy {
            id: id.into(),
            start: None,
            expiry: Some(time::iso8601(at(expiry))),
            permission: READ_WRITE.into(),
        }
    }

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn a_first_grant_adds_a_policy_that_expires_after_the_lifetime() {
        let now = at(1_700_000_000);
        let plan = plan_grant(C, &Acl::default(), "ba-1", READ_WRITE, now, DAY).unwrap();
        let GrantPlan::Put { acl, expiry } = plan else {
            panic!("{plan:?}")
        };
        assert_eq!(expiry, at(1_700_086_400));
        assert_eq!(acl.policies, [policy("ba-1", 1_700_086_400)]);
    }

    #[test]
    fn a_repeated_grant_keeps_the_policy_and_its_expiry() {
        let acl = Acl {
            policies: vec![policy("ba-1", 1_700_086_400)],
        };
        let later = at(1_700_000_500);
        assert_eq!(
            plan_grant(C, &acl, "ba-1", READ_WRITE, later, DAY).unwrap(),
            GrantPlan::Keep {
                expiry: Some(at(1_700_086_400))
            }
        );
        let e = plan_grant(C, &acl, "ba-1", READ_ONLY, later, DAY).unwrap_err();
        assert_eq!(e.code(), Code::AlreadyExists);
    }

    #[test]
    fn an_expired_policy_of_the_same_access_is_renewed() {
        let acl = Acl {
            policies: vec![policy("other", 1), policy("ba-1", 1_700_000_000)],
        };
        let now = at(1_700_000_001);
        let GrantPlan::Put { acl: next, expiry } =
            plan_grant(C, &acl, "ba-1", READ_WRITE, now, DAY).unwrap()
        else {
            panic!("not renewed")
        };
        assert_eq!(expiry, at(1_700_086_401));
        assert_eq!(next.policies.len(), 2);
        assert_eq!(
            next.policies[0], acl.policies[0],
            "another policy is left alone"
        );
    }

    #[test]
    fn the_sixth_policy_is_resource_exhausted_saying_why_and_what_to_do() {
        let acl = Acl {
            policies: (1..=5)
                .map(|i| policy(&format!("ba-{i}"), 2_000_000_000))
                .collect(),
        };
        let e = plan_grant(C, &acl, "ba-6", READ_WRITE, at(1_700_000_000), DAY).unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted);
        let msg = e.to_string();
        assert!(
            msg.contains("5 stored access policies") && msg.contains("rotation"),
            "{msg}"
        );
        assert!(msg.contains("Delete a BucketAccess"), "{msg}");
        // A repeat of one of the five still works.
        assert!(plan_grant(C, &acl, "ba-5", READ_WRITE, at(1_700_000_000), DAY).is_ok());
    }

    #[test]
    fn a_policy_read_back_with_fractional_seconds_is_the_one_written() {
        let written = policy("ba-1", 1_700_000_000);
        let read_back = Acl {
            policies: vec![Policy {
                expiry: Some("2023-11-14T22:13:20.0000000Z".into()),
                ..written.clone()
            }],
        };
        assert!(holds(&read_back, &written));
        assert!(!holds(&read_back, &policy("ba-1", 1_700_000_001)));
        assert!(!holds(&Acl::default(), &written));
    }

    #[test]
    fn a_revoke_removes_only_its_policy_and_a_repeat_does_nothing() {
        let acl = Acl {
            policies: vec![policy("ba-1", 5), policy("ba-2", 5)],
        };
        let next = plan_revoke(&acl, "ba-1").unwrap();
        assert_eq!(next.policies, [policy("ba-2", 5)]);
        assert_eq!(plan_revoke(&next, "ba-1"), None);
    }

    use cosi_driver::testing::revoked_buckets as named;

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|id| (*id).to_owned()).collect()
    }

    #[test]
    fn a_revoke_deletes_the_policy_where_it_is_and_nothing_where_it_is_not() {
        assert_eq!(
            revoke_targets("ba-1", &named(&[C]), &set(&[C])).unwrap(),
            [C]
        );
        assert!(
            revoke_targets("ba-1", &named(&[C]), &set(&[]))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_revoke_naming_containers_beside_the_one_the_account_holds_is_refused() {
        let e = revoke_targets("ba-1", &named(&[C, "bc-own", "bc-own"]), &set(&[C])).unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition);
        assert_eq!(
            e.to_string(),
            "refusing to revoke account \"ba-1\": it was never granted bucket \"bc-own\", which the request \
             names; a revoke must name the buckets of the account's grant, so nothing was revoked"
        );
    }
}
