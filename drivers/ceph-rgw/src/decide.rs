//! The driver's decisions, as pure functions of what RGW reports: what a
//! create, a static-bucket lookup, a delete or a grant must do, and what it
//! must refuse. The I/O modules ([`crate::buckets`], [`crate::accounts`])
//! observe, call one of these, and carry out the plan.
//!
//! Every plan is safe to compute again after a crash halfway through
//! carrying out the previous one: a bucket or user created by an
//! interrupted call is found owned by the driver and completed, never
//! created twice. That is why a setting RGW reports as never set (no
//! quota, versioning never enabled) is applied rather than refused, while
//! a setting that is set to something else is `AlreadyExists`.

use std::collections::BTreeSet;

use cosi_driver::proto::RevokedBucket;
use cosi_driver::revoke::check_named_buckets;

use crate::admin::{BucketInfo, UserInfo};
use crate::errors::Error;
use crate::params::{BucketParams, PURGE_ON_DELETE, RELINK_FOREIGN_BUCKETS};

/// A bucket's versioning state, as S3 GetBucketVersioning reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Versioning {
    /// Never enabled.
    Never,
    /// Enabled.
    Enabled,
    /// Enabled once, now suspended.
    Suspended,
}

/// What RGW reports about an existing bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Existing {
    /// Admin Ops bucket info.
    pub info: BucketInfo,
    /// The versioning state; `None` when not read (the bucket is not the
    /// driver's, so S3 would refuse to tell).
    pub versioning: Option<Versioning>,
}

/// What DriverCreateBucket must do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreatePlan {
    /// Create the bucket (with the class's placement and storage class).
    pub create: bool,
    /// Enable versioning.
    pub enable_versioning: bool,
    /// Set the class's quota.
    pub set_quota: bool,
}

fn not_ours(bucket: &str, owner: &str) -> String {
    format!(
        "bucket {bucket:?} exists and belongs to the RGW user {owner:?}, not to the driver's admin user"
    )
}

/// Plans DriverCreateBucket: create what is missing, refuse a bucket of
/// another user or with other settings.
pub fn plan_create(
    bucket: &str,
    existing: Option<&Existing>,
    want: &BucketParams,
    admin_uid: &str,
) -> Result<CreatePlan, Error> {
    let Some(existing) = existing else {
        return Ok(CreatePlan {
            create: true,
            enable_versioning: want.versioning,
            set_quota: want.quota.is_set(),
        });
    };
    let info = &existing.info;
    if info.owner != admin_uid {
        return Err(Error::AlreadyExists(format!(
            "{}; bucket names are shared by every user of the object store: use another bucketNamePrefix in the \
             BucketClass, or import the bucket as a static Bucket",
            not_ours(bucket, &info.owner)
        )));
    }
    let mut problems = Vec::new();
    if let Some(p) = &want.placement
        && info.placement() != p
    {
        problems.push(format!(
            "placement {:?} (the BucketClass asks for {p:?})",
            info.placement()
        ));
    }
    let class = want.storage_class.as_deref().unwrap_or("STANDARD");
    if info.storage_class() != class {
        problems.push(format!(
            "storage class {:?} (the BucketClass asks for {class:?})",
            info.storage_class()
        ));
    }
    let versioning = existing.versioning.unwrap_or(Versioning::Never);
    if !want.versioning && versioning == Versioning::Enabled {
        problems.push("versioning enabled (the BucketClass leaves it off)".into());
    }
    let quota = &info.bucket_quota;
    let set_quota = if want.quota.is_set() {
        if quota.matches(&want.quota) {
            false
        } else if quota.limits_anything() {
            problems.push(format!(
                "another quota (max objects {}, max size {} bytes; negative means none)",
                quota.max_objects, quota.max_size
            ));
            false
        } else {
            true
        }
    } else {
        if quota.limits_anything() {
            problems.push("a quota (the BucketClass sets none)".into());
        }
        false
    };
    if !problems.is_empty() {
        return Err(Error::AlreadyExists(format!(
            "bucket {bucket:?} already exists with {}",
            problems.join(", ")
        )));
    }
    Ok(CreatePlan {
        create: false,
        enable_versioning: want.versioning && versioning != Versioning::Enabled,
        set_quota,
    })
}

/// What DriverGetBucket must do with a static bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StaticPlan {
    /// The driver's admin user owns it: use it as it is.
    Use,
    /// Another user owns it and the class allows relinking: make the
    /// driver's admin user its owner.
    Relink {
        /// The current owner.
        from: String,
    },
}

/// Plans DriverGetBucket. A bucket owned by another RGW user (the usual
/// case for a bucket an ObjectBucketClaim made) cannot be shared through
/// the driver's bucket policies, so it is refused with a message naming
/// the owner, unless the parameters allow relinking it.
pub fn plan_static(
    bucket: &str,
    info: Option<&BucketInfo>,
    admin_uid: &str,
    relink: bool,
) -> Result<StaticPlan, Error> {
    let Some(info) = info else {
        return Err(Error::NotFound(format!(
            "bucket {bucket:?} does not exist in RGW"
        )));
    };
    if info.owner == admin_uid {
        Ok(StaticPlan::Use)
    } else if relink {
        Ok(StaticPlan::Relink {
            from: info.owner.clone(),
        })
    } else {
        Err(Error::FailedPrecondition(format!(
            "{}; the driver grants access through bucket policies, which only the owner can write. Relink the \
             bucket to the admin user (radosgw-admin bucket link --bucket {bucket} --uid {admin_uid}), or set \
             the parameter {RELINK_FOREIGN_BUCKETS}: \"true\" to let the driver do it; the previous owner then \
             keeps access only to the objects it wrote",
            not_ours(bucket, &info.owner)
        )))
    }
}

/// What DriverDeleteBucket must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeletePlan {
    /// The bucket is already gone.
    Done,
    /// Delete it (emptying it first when the class says so).
    Delete,
}

/// Plans DriverDeleteBucket: absent is done; a bucket of another user is
/// never deleted.
pub fn plan_delete(
    bucket: &str,
    info: Option<&BucketInfo>,
    admin_uid: &str,
) -> Result<DeletePlan, Error> {
    match info {
        None => Ok(DeletePlan::Done),
        Some(info) if info.owner == admin_uid => Ok(DeletePlan::Delete),
        Some(info) => Err(Error::FailedPrecondition(format!(
            "{}; the driver deletes only buckets its admin user owns",
            not_ours(bucket, &info.owner)
        ))),
    }
}

/// The message for a bucket that is not empty.
pub fn not_empty(bucket: &str) -> Error {
    Error::FailedPrecondition(format!(
        "bucket {bucket:?} is not empty; it is deleted once emptied (retried), or set the BucketClass parameter \
         {PURGE_ON_DELETE}: \"true\" to let the driver delete its objects, versions and unfinished uploads"
    ))
}

/// Checks that access to `bucket` can be granted: it exists and the
/// driver's admin user owns it.
pub fn check_grantable(
    bucket: &str,
    info: Option<&BucketInfo>,
    admin_uid: &str,
) -> Result<(), Error> {
    match info {
        None => Err(Error::NotFound(format!(
            "bucket {bucket:?} does not exist in RGW (yet)"
        ))),
        Some(info) if info.owner == admin_uid => Ok(()),
        Some(info) => Err(Error::FailedPrecondition(format!(
            "{}; access can be granted only to buckets the driver's admin user owns (see {RELINK_FOREIGN_BUCKETS})",
            not_ours(bucket, &info.owner)
        ))),
    }
}

/// The display name marking the RGW users this driver creates.
/// INVARIANT: users created by earlier versions carry it; it never changes.
pub fn user_display_name(driver_name: &str, uid: &str) -> String {
    format!("COSI access {uid} of {driver_name}")
}

/// What a grant must do about the access's RGW user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserPlan {
    /// Create it (with one key, bucket creation disabled).
    Create,
    /// Reuse it.
    Reuse {
        /// Someone let it create buckets: take that back.
        disable_buckets: bool,
        /// It has no key left: make one.
        create_key: bool,
    },
}

/// Plans the user of a grant: create it, or reuse the one this driver
/// created (returning its existing key, never a new one); refuse a user of
/// that ID this driver did not create.
pub fn plan_user(
    uid: &str,
    existing: Option<&UserInfo>,
    driver_name: &str,
) -> Result<UserPlan, Error> {
    let Some(user) = existing else {
        return Ok(UserPlan::Create);
    };
    if user.display_name != user_display_name(driver_name, uid) {
        return Err(Error::AlreadyExists(format!(
            "RGW user {uid:?} already exists but was not created by driver {driver_name:?} (its display name is \
             {:?}); delete or rename that user",
            user.display_name
        )));
    }
    Ok(UserPlan::Reuse {
        disable_buckets: user.max_buckets >= 0,
        create_key: user.keys.is_empty(),
    })
}

/// True when `user` was created by this driver for `uid`.
pub fn is_ours(uid: &str, user: &UserInfo, driver_name: &str) -> bool {
    user.display_name == user_display_name(driver_name, uid)
}

/// What DriverRevokeBucketAccess must do about the access's RGW user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RevokePlan {
    /// Delete the user, then remove its statements from the named buckets.
    Revoke,
    /// The user is gone, or is not the driver's: only remove what
    /// statements of it are left in the named buckets.
    Finish,
}

/// Plans a revoke of `uid` that names the buckets `named`, from its user
/// as RGW reports it and the named buckets whose policies grant it
/// (`granted`). A grant writes its statements into every bucket before it
/// makes the user, and a revoke deletes the user first, so a user of the
/// driver's exists only while every bucket of its grant grants it: a named
/// bucket that does not was never granted, and the revoke is refused
/// (`FailedPrecondition`) before anything changes. With the user gone (a
/// revoke cut short after deleting it, or a grant cut short before making
/// it, or never granted at all) the revoke finishes: it removes that
/// account's statements and nothing else.
pub fn plan_revoke(
    uid: &str,
    user: Option<&UserInfo>,
    driver_name: &str,
    named: &[RevokedBucket],
    granted: &BTreeSet<String>,
) -> Result<RevokePlan, Error> {
    match user {
        Some(user) if is_ours(uid, user, driver_name) => {
            check_named_buckets(uid, named, |b| granted.contains(b))
                .map_err(Error::FailedPrecondition)?;
            Ok(RevokePlan::Revoke)
        }
        _ => Ok(RevokePlan::Finish),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::{BucketQuota, S3Key};
    use crate::params::Quota;
    use tonic::Code;

    const ADMIN: &str = "cosi-admin";
    const B: &str = "bc-1";

    fn info(owner: &str) -> BucketInfo {
        BucketInfo {
            bucket: B.into(),
            id: "zone.1.1".into(),
            owner: owner.into(),
            placement_rule: "default-placement".into(),
            bucket_quota: BucketQuota {
                enabled: false,
                max_size: -1,
                max_objects: -1,
            },
        }
    }

    fn existing(info: BucketInfo, versioning: Versioning) -> Existing {
        Existing {
            info,
            versioning: Some(versioning),
        }
    }

    /// Plans creating bucket `B` for `want` over the existing bucket `info`
    /// with `versioning`.
    fn plan_over(
        info: BucketInfo,
        versioning: Versioning,
        want: &BucketParams,
    ) -> Result<CreatePlan, Error> {
        plan_create(B, Some(&existing(info, versioning)), want, ADMIN)
    }

    fn quota(objects: u64) -> BucketParams {
        BucketParams {
            quota: Quota {
                max_size_kb: None,
                max_objects: Some(objects),
            },
            ..BucketParams::default()
        }
    }

    fn with_quota(objects: i64) -> BucketInfo {
        BucketInfo {
            bucket_quota: BucketQuota {
                enabled: true,
                max_size: -1024,
                max_objects: objects,
            },
            ..info(ADMIN)
        }
    }

    #[test]
    fn a_missing_bucket_is_created_with_every_setting() {
        let want = BucketParams {
            versioning: true,
            ..quota(10)
        };
        assert_eq!(
            plan_create(B, None, &want, ADMIN).unwrap(),
            CreatePlan {
                create: true,
                enable_versioning: true,
                set_quota: true
            }
        );
        assert_eq!(
            plan_create(B, None, &BucketParams::default(), ADMIN).unwrap(),
            CreatePlan {
                create: true,
                ..CreatePlan::default()
            }
        );
    }

    #[test]
    fn a_crash_after_create_before_the_settings_resumes_with_the_settings() {
        let want = BucketParams {
            versioning: true,
            ..quota(10)
        };
        let plan = plan_over(info(ADMIN), Versioning::Never, &want).unwrap();
        assert_eq!(
            plan,
            CreatePlan {
                create: false,
                enable_versioning: true,
                set_quota: true
            }
        );
    }

    #[test]
    fn an_identical_repeat_does_nothing() {
        let want = BucketParams {
            versioning: true,
            ..quota(10)
        };
        let plan = plan_over(with_quota(10), Versioning::Enabled, &want).unwrap();
        assert_eq!(plan, CreatePlan::default());
    }

    #[test]
    fn a_bucket_of_another_user_is_already_exists_naming_the_owner() {
        let e = plan_over(
            info("obc-user"),
            Versioning::Never,
            &BucketParams::default(),
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::AlreadyExists);
        assert!(e.to_string().contains("\"obc-user\""), "{e}");
    }

    #[test]
    fn other_settings_are_already_exists_listing_each() {
        let e = plan_over(with_quota(5), Versioning::Enabled, &quota(10)).unwrap_err();
        assert_eq!(e.code(), Code::AlreadyExists);
        let msg = e.to_string();
        assert!(
            msg.contains("another quota") && msg.contains("versioning enabled"),
            "{msg}"
        );
        let e = plan_over(with_quota(5), Versioning::Never, &BucketParams::default()).unwrap_err();
        assert!(e.to_string().contains("a quota"), "{e}");
        let placed = BucketParams {
            placement: Some("fast".into()),
            storage_class: Some("COLD".into()),
            ..BucketParams::default()
        };
        let e = plan_over(info(ADMIN), Versioning::Never, &placed).unwrap_err();
        assert!(
            e.to_string().contains("placement") && e.to_string().contains("storage class"),
            "{e}"
        );
        let right = BucketInfo {
            placement_rule: "fast/COLD".into(),
            ..info(ADMIN)
        };
        assert!(plan_over(right, Versioning::Never, &placed).is_ok());
    }

    #[test]
    fn a_suspended_versioning_is_compatible_with_off_and_enabled_again_when_asked() {
        let off = BucketParams::default();
        assert!(plan_over(info(ADMIN), Versioning::Suspended, &off).is_ok());
        let on = BucketParams {
            versioning: true,
            ..off
        };
        let plan = plan_over(info(ADMIN), Versioning::Suspended, &on).unwrap();
        assert!(plan.enable_versioning);
    }

    #[test]
    fn static_buckets_of_other_users_are_refused_unless_relinking_is_allowed() {
        assert_eq!(
            plan_static(B, Some(&info(ADMIN)), ADMIN, false).unwrap(),
            StaticPlan::Use
        );
        let e = plan_static(B, Some(&info("obc-photos-1")), ADMIN, false).unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition);
        let msg = e.to_string();
        assert!(
            msg.contains("\"obc-photos-1\"") && msg.contains(RELINK_FOREIGN_BUCKETS),
            "{msg}"
        );
        assert!(
            msg.contains("radosgw-admin bucket link --bucket bc-1 --uid cosi-admin"),
            "{msg}"
        );
        assert_eq!(
            plan_static(B, Some(&info("obc-photos-1")), ADMIN, true).unwrap(),
            StaticPlan::Relink {
                from: "obc-photos-1".into()
            }
        );
        assert_eq!(
            plan_static(B, None, ADMIN, true).unwrap_err().code(),
            Code::NotFound
        );
    }

    #[test]
    fn deletion_of_an_absent_bucket_is_done_and_of_a_foreign_one_refused() {
        assert_eq!(plan_delete(B, None, ADMIN).unwrap(), DeletePlan::Done);
        assert_eq!(
            plan_delete(B, Some(&info(ADMIN)), ADMIN).unwrap(),
            DeletePlan::Delete
        );
        assert_eq!(
            plan_delete(B, Some(&info("someone")), ADMIN)
                .unwrap_err()
                .code(),
            Code::FailedPrecondition
        );
    }

    #[test]
    fn grants_wait_for_missing_buckets_and_refuse_foreign_ones() {
        assert_eq!(
            check_grantable(B, None, ADMIN).unwrap_err().code(),
            Code::NotFound
        );
        assert!(check_grantable(B, Some(&info(ADMIN)), ADMIN).is_ok());
        assert_eq!(
            check_grantable(B, Some(&info("x")), ADMIN)
                .unwrap_err()
                .code(),
            Code::FailedPrecondition
        );
    }

    fn user(display_name: &str, max_buckets: i64, keys: usize) -> UserInfo {
        UserInfo {
            user_id: "ba-1".into(),
            tenant: String::new(),
            display_name: display_name.into(),
            max_buckets,
            keys: (0..keys)
                .map(|i| S3Key {
                    access_key: format!("K{i}"),
                    secret_key: "s".into(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_repeated_grant_reuses_the_user_and_its_key() {
        let ours = user_display_name("d", "ba-1");
        assert_eq!(plan_user("ba-1", None, "d").unwrap(), UserPlan::Create);
        assert_eq!(
            plan_user("ba-1", Some(&user(&ours, -1, 1)), "d").unwrap(),
            UserPlan::Reuse {
                disable_buckets: false,
                create_key: false
            }
        );
        assert_eq!(
            plan_user("ba-1", Some(&user(&ours, 0, 0)), "d").unwrap(),
            UserPlan::Reuse {
                disable_buckets: true,
                create_key: true
            }
        );
    }

    use cosi_driver::testing::revoked_buckets as named;

    #[test]
    fn a_revoke_deletes_the_user_only_when_every_named_bucket_grants_it() {
        let ours = user(&user_display_name("d", "ba-1"), -1, 1);
        let granted: BTreeSet<String> = ["bc-a".to_owned(), "bc-b".to_owned()].into();
        assert_eq!(
            plan_revoke(
                "ba-1",
                Some(&ours),
                "d",
                &named(&["bc-a", "bc-b"]),
                &granted
            )
            .unwrap(),
            RevokePlan::Revoke
        );
        let e = plan_revoke(
            "ba-1",
            Some(&ours),
            "d",
            &named(&["bc-a", "bc-own"]),
            &granted,
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition);
        assert!(e.to_string().contains("\"bc-own\""), "{e}");
        assert!(!e.to_string().contains("bc-b"), "{e}");
    }

    #[test]
    fn a_revoke_of_a_user_gone_or_not_ours_only_finishes_its_statements() {
        let none = BTreeSet::new();
        let bc = named(&["bc-a"]);
        assert_eq!(
            plan_revoke("ba-1", None, "d", &bc, &none).unwrap(),
            RevokePlan::Finish
        );
        let jane = user("Jane", -1, 1);
        assert_eq!(
            plan_revoke("ba-1", Some(&jane), "d", &bc, &none).unwrap(),
            RevokePlan::Finish
        );
    }

    #[test]
    fn a_user_the_driver_did_not_create_is_never_taken_over() {
        let e = plan_user("ba-1", Some(&user("Jane", -1, 1)), "d").unwrap_err();
        assert_eq!(e.code(), Code::AlreadyExists);
        assert!(!is_ours("ba-1", &user("Jane", -1, 1), "d"));
        assert!(is_ours(
            "ba-1",
            &user(&user_display_name("d", "ba-1"), -1, 1),
            "d"
        ));
    }
}
