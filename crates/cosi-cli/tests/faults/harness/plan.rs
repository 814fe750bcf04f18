//! A fault scenario drawn from a seed: which pairs exist, which are
//! deleted and how, and which faults strike (component crashes between API
//! writes, driver crashes and errors, API errors and dropped watches).
//! Pure: the same seed always gives the same plan.

use std::fmt;

use cosi_driver::{Code, DriverApi};
use cosi_driver_local::CrashPoint;

use super::rng::Rng;
use cosi_cli::driver_host::{DriverFault, FaultAction, Method, When};

/// The main kind of fault a run exercises (runs cycle through them; the
/// last one mixes all of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The controller crashes between API writes.
    ControllerCrash,
    /// The sidecar crashes between API writes.
    SidecarCrash,
    /// The driver crashes between RPCs or inside one.
    DriverCrash,
    /// The driver answers retryable errors.
    DriverRetryable,
    /// The driver refuses requests (non-retryable errors).
    DriverRefusal,
    /// The API server answers 409 Conflict.
    ApiConflict,
    /// The API server answers 429 Too Many Requests.
    ApiThrottle,
    /// The API server answers 500 Internal Error.
    ApiError,
    /// Watches are dropped.
    DroppedWatches,
    /// A bit of everything.
    Mixed,
}

impl Kind {
    /// Every kind, in the order runs cycle through them.
    pub const ALL: [Kind; 10] = [
        Kind::ControllerCrash,
        Kind::SidecarCrash,
        Kind::DriverCrash,
        Kind::DriverRetryable,
        Kind::DriverRefusal,
        Kind::ApiConflict,
        Kind::ApiThrottle,
        Kind::ApiError,
        Kind::DroppedWatches,
        Kind::Mixed,
    ];

    /// The kind of the run with `seed`.
    pub fn of_seed(seed: u64) -> Kind {
        Kind::ALL[(seed % Kind::ALL.len() as u64) as usize]
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The deletion policy of a pair's claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// The backend bucket goes with the claim.
    Delete,
    /// The backend bucket (and its Bucket) stay.
    Retain,
}

/// How a pair is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteOrder {
    /// The access first, the claim once the access is gone.
    AccessFirst,
    /// The claim first (it waits for the access), then the access.
    ClaimFirst,
    /// Both at once.
    Together,
}

/// One BucketClaim + BucketAccess pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairPlan {
    /// Name of the claim, the access and the Secret.
    pub name: String,
    /// The claim's deletion policy.
    pub policy: Policy,
    /// Created after the first phase settled (alongside the deletions).
    pub late: bool,
    /// Deleted in the second phase, and how.
    pub delete: Option<DeleteOrder>,
    /// Kept, but in the second phase a user deletes its Secret and strips
    /// COSI's finalizer: the sidecar must write it again.
    pub force_secret: bool,
    /// Its credentials are rotated once it is ready (early pairs only, not
    /// those whose Secret is forced away), while the second phase's
    /// deletions and faults go on.
    pub rotate: bool,
}

/// An API error rule for the components (never the suite's own requests).
#[derive(Clone, Debug, PartialEq)]
pub struct ApiFault {
    /// HTTP status.
    pub status: u16,
    /// Only this verb (`None`: any).
    pub verb: Option<&'static str>,
    /// Failure probability per matching request.
    pub rate: f64,
    /// At most this many failures per component.
    pub times: u64,
}

/// Everything a run does.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The seed it was drawn from.
    pub seed: u64,
    /// The main kind of fault.
    pub kind: Kind,
    /// The driver API the driver serves.
    pub api: DriverApi,
    /// The pairs.
    pub pairs: Vec<PairPlan>,
    /// Controller crashes, in order: at the nth write of an incarnation.
    pub controller_crashes: Vec<(u64, When)>,
    /// Sidecar crashes, likewise.
    pub sidecar_crashes: Vec<(u64, When)>,
    /// Driver errors and crashes on chosen calls.
    pub driver_faults: Vec<DriverFault>,
    /// Crash points inside the local driver, armed one per incarnation.
    pub driver_crash_points: Vec<CrashPoint>,
    /// API errors.
    pub api_faults: Vec<ApiFault>,
    /// Every watch ends after this many events.
    pub drop_watches_after: Option<u64>,
    /// Drop every open watch when the second phase starts.
    pub drop_watches_midway: bool,
}

const PROVISIONING_RPCS: [Method; 4] = [
    Method::GenerateBucketId,
    Method::CreateBucket,
    Method::GenerateBucketAccessId,
    Method::GrantBucketAccess,
];
const ALL_WRITE_RPCS: [Method; 6] = [
    Method::GenerateBucketId,
    Method::CreateBucket,
    Method::DeleteBucket,
    Method::GenerateBucketAccessId,
    Method::GrantBucketAccess,
    Method::RevokeBucketAccess,
];
/// Codes the sidecar retries with backoff.
const RETRYABLE: [Code; 5] = [
    Code::Unavailable,
    Code::Internal,
    Code::DeadlineExceeded,
    Code::ResourceExhausted,
    Code::Aborted,
];
/// Codes the sidecar does not retry until the object changes.
const REFUSALS: [Code; 3] = [
    Code::InvalidArgument,
    Code::PermissionDenied,
    Code::AlreadyExists,
];
const CRASH_POINTS: [CrashPoint; 3] = [
    CrashPoint::AfterBucketRecorded,
    CrashPoint::AfterBucketDataRemoved,
    CrashPoint::AfterAccountRecorded,
];

fn when(rng: &mut Rng) -> When {
    if rng.chance(0.5) {
        When::Before
    } else {
        When::After
    }
}

/// Crashes at increasing write numbers of successive incarnations: up to
/// `max` crashes, each within the first `span` writes of an incarnation.
fn crashes(rng: &mut Rng, max: u64, span: u64) -> Vec<(u64, When)> {
    (0..rng.between(1, max))
        .map(|_| (rng.between(1, span), when(rng)))
        .collect()
}

fn driver_errors(rng: &mut Rng, codes: &[Code], rpcs: &[Method], n: u64) -> Vec<DriverFault> {
    (0..n)
        .map(|_| DriverFault {
            rpc: Some(rng.pick(rpcs)),
            nth: rng.between(1, 4),
            when: when(rng),
            action: FaultAction::Fail(rng.pick(codes)),
        })
        .collect()
}

fn api_fault(rng: &mut Rng, status: u16) -> ApiFault {
    ApiFault {
        status,
        verb: if rng.chance(0.5) {
            Some(rng.pick(&["patch", "create", "get", "delete"]))
        } else {
            None
        },
        rate: [0.05, 0.1, 0.2][rng.below(3) as usize],
        times: rng.between(2, 8),
    }
}

/// The driver APIs runs cycle through, in order.
pub const APIS: [DriverApi; 3] = [
    DriverApi::V1alpha2,
    DriverApi::V1alpha1,
    DriverApi::Upstream,
];

/// The driver API of the run with `seed`: runs cycle through every kind
/// of fault on the v1alpha2 API, then on the v1alpha1 API, then on
/// upstream's v1alpha2 API (served through the SDK's bridge), and so on.
pub fn api_of_seed(seed: u64) -> DriverApi {
    let block = seed / Kind::ALL.len() as u64;
    APIS[(block % APIS.len() as u64) as usize]
}

impl Plan {
    /// The plan of `seed`.
    pub fn from_seed(seed: u64) -> Plan {
        let mut rng = Rng::new(seed);
        let kind = Kind::of_seed(seed);
        let api = api_of_seed(seed);
        let mut pairs_rng = rng.fork();
        let mut faults_rng = rng.fork();
        let mut rotations_rng = rng.fork();
        let mut pairs = pairs(&mut pairs_rng);
        for p in &mut pairs {
            p.rotate = !p.late && !p.force_secret && rotations_rng.chance(0.5);
        }
        let mut plan = Plan {
            seed,
            kind,
            api,
            pairs,
            controller_crashes: Vec::new(),
            sidecar_crashes: Vec::new(),
            driver_faults: Vec::new(),
            driver_crash_points: Vec::new(),
            api_faults: Vec::new(),
            drop_watches_after: None,
            drop_watches_midway: false,
        };
        let r = &mut faults_rng;
        // A pair costs the controller about 8 writes and the sidecar about
        // 6 (its deletion a few more): crashes land anywhere in a run.
        let pairs = plan.pairs.len() as u64;
        let mixed = kind == Kind::Mixed;
        if kind == Kind::ControllerCrash || mixed {
            plan.controller_crashes = crashes(r, if mixed { 2 } else { 4 }, pairs * 8);
        }
        if kind == Kind::SidecarCrash || mixed {
            plan.sidecar_crashes = crashes(r, if mixed { 2 } else { 4 }, pairs * 6);
        }
        if kind == Kind::DriverCrash || mixed {
            for _ in 0..r.between(1, 2) {
                if r.chance(0.5) {
                    plan.driver_crash_points.push(r.pick(&CRASH_POINTS));
                } else {
                    plan.driver_faults.push(DriverFault {
                        rpc: None,
                        nth: r.between(1, plan.pairs.len() as u64 * 4),
                        when: when(r),
                        action: FaultAction::Crash,
                    });
                }
            }
        }
        if kind == Kind::DriverRetryable || mixed {
            let n = r.between(1, 4);
            plan.driver_faults
                .extend(driver_errors(r, &RETRYABLE, &ALL_WRITE_RPCS, n));
        }
        if kind == Kind::DriverRefusal || mixed {
            let rpcs: &[Method] = if r.chance(0.25) {
                &ALL_WRITE_RPCS
            } else {
                &PROVISIONING_RPCS
            };
            let n = r.between(1, 2);
            plan.driver_faults
                .extend(driver_errors(r, &REFUSALS, rpcs, n));
            if api.phase_one_creates() {
                // A refusal after the backend acted: the bucket or account
                // exists, its ID is never persisted, and deleting the
                // refused pair must find it by name.
                plan.driver_faults.push(DriverFault {
                    rpc: Some(r.pick(&[Method::CreateBucket, Method::GrantBucketAccess])),
                    nth: r.between(1, 3),
                    when: When::After,
                    action: FaultAction::Fail(Code::InvalidArgument),
                });
            }
        }
        for (k, status) in [
            (Kind::ApiConflict, 409),
            (Kind::ApiThrottle, 429),
            (Kind::ApiError, 500),
        ] {
            if kind == k || (mixed && r.chance(0.5)) {
                plan.api_faults.push(api_fault(r, status));
            }
        }
        if kind == Kind::DroppedWatches || mixed {
            plan.drop_watches_after = Some(r.between(3, 25));
            plan.drop_watches_midway = true;
        }
        plan
    }

    /// True when the driver may refuse requests in this run.
    pub fn has_refusals(&self) -> bool {
        self.driver_faults
            .iter()
            .any(|f| matches!(f.action, FaultAction::Fail(c) if REFUSALS.contains(&c)))
    }

    /// A one-line description for logs.
    pub fn summary(&self) -> String {
        let deleted = self.pairs.iter().filter(|p| p.delete.is_some()).count();
        let late = self.pairs.iter().filter(|p| p.late).count();
        let forced = self.pairs.iter().filter(|p| p.force_secret).count();
        let rotated = self.pairs.iter().filter(|p| p.rotate).count();
        format!(
            "seed {} kind {} on {}: {} pairs ({} late, {} deleted, {} Secrets forced away, {} rotated), controller crashes {:?}, sidecar crashes {:?}, driver faults {:?}, driver crash points {:?}, API faults {:?}, watches dropped after {:?} events{}",
            self.seed,
            self.kind,
            self.api,
            self.pairs.len(),
            late,
            deleted,
            forced,
            rotated,
            self.controller_crashes,
            self.sidecar_crashes,
            self.driver_faults,
            self.driver_crash_points,
            self.api_faults,
            self.drop_watches_after,
            if self.drop_watches_midway {
                " and all at mid-run"
            } else {
                ""
            },
        )
    }
}

fn pairs(rng: &mut Rng) -> Vec<PairPlan> {
    let n = rng.between(3, 6);
    (0..n)
        .map(|i| {
            let late = i > 0 && rng.chance(0.2);
            let policy = if rng.chance(0.7) {
                Policy::Delete
            } else {
                Policy::Retain
            };
            let delete = (!late && rng.chance(0.5)).then(|| {
                rng.pick(&[
                    DeleteOrder::AccessFirst,
                    DeleteOrder::ClaimFirst,
                    DeleteOrder::Together,
                ])
            });
            PairPlan {
                name: format!("p{i}"),
                policy,
                late,
                force_secret: !late && delete.is_none() && rng.chance(0.4),
                delete,
                rotate: false,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_always_gives_the_same_plan() {
        for seed in 0..50 {
            assert_eq!(Plan::from_seed(seed), Plan::from_seed(seed));
        }
    }

    #[test]
    fn runs_cycle_through_every_kind_of_fault() {
        let kinds: Vec<Kind> = (0..10).map(|s| Plan::from_seed(s).kind).collect();
        assert_eq!(kinds, Kind::ALL);
    }

    #[test]
    fn every_kind_runs_on_every_driver_api() {
        let apis: Vec<DriverApi> = [0, 9, 10, 19, 20, 29, 30]
            .map(|s| Plan::from_seed(s).api)
            .to_vec();
        use DriverApi::{Upstream, V1alpha1, V1alpha2};
        assert_eq!(
            apis,
            [
                V1alpha2, V1alpha2, V1alpha1, V1alpha1, Upstream, Upstream, V1alpha2
            ]
        );
        // The refusal runs of the one-call APIs refuse after the backend acted.
        for seeds in [10..20, 20..30] {
            let refusal = seeds
                .map(Plan::from_seed)
                .find(|p| p.kind == Kind::DriverRefusal)
                .unwrap();
            assert!(refusal.driver_faults.iter().any(|f| f.when == When::After
                && matches!(
                    f.rpc,
                    Some(Method::CreateBucket | Method::GrantBucketAccess)
                )
                && matches!(f.action, FaultAction::Fail(c) if REFUSALS.contains(&c))));
        }
    }

    #[test]
    fn each_kind_plans_its_own_faults() {
        for seed in 0..100 {
            let p = Plan::from_seed(seed);
            let has = match p.kind {
                Kind::ControllerCrash => !p.controller_crashes.is_empty(),
                Kind::SidecarCrash => !p.sidecar_crashes.is_empty(),
                Kind::DriverCrash => {
                    !p.driver_crash_points.is_empty()
                        || p.driver_faults
                            .iter()
                            .any(|f| f.action == FaultAction::Crash)
                }
                Kind::DriverRetryable => !p.driver_faults.is_empty() && !p.has_refusals(),
                Kind::DriverRefusal => p.has_refusals(),
                Kind::ApiConflict => p.api_faults.iter().any(|f| f.status == 409),
                Kind::ApiThrottle => p.api_faults.iter().any(|f| f.status == 429),
                Kind::ApiError => p.api_faults.iter().any(|f| f.status == 500),
                Kind::DroppedWatches => p.drop_watches_after.is_some(),
                Kind::Mixed => !p.controller_crashes.is_empty() && !p.sidecar_crashes.is_empty(),
            };
            assert!(has, "{}", p.summary());
        }
    }

    #[test]
    fn some_runs_force_a_secret_away() {
        let forced = (0..40)
            .filter(|s| Plan::from_seed(*s).pairs.iter().any(|p| p.force_secret))
            .count();
        assert!(forced >= 10, "{forced} of 40 runs");
    }

    #[test]
    fn runs_rotate_some_pairs_and_keep_the_rest_of_their_plan() {
        let rotating = (0..40)
            .filter(|s| Plan::from_seed(*s).pairs.iter().any(|p| p.rotate))
            .count();
        assert!((10..40).contains(&rotating), "{rotating} of 40 runs rotate");
    }

    #[test]
    fn late_pairs_are_never_deleted_and_names_are_unique() {
        for seed in 0..100 {
            let p = Plan::from_seed(seed);
            assert!((3..=6).contains(&p.pairs.len()));
            assert!(p.pairs.iter().all(|x| !(x.late && x.delete.is_some())));
            assert!(
                p.pairs
                    .iter()
                    .all(|x| !x.force_secret || (!x.late && x.delete.is_none()))
            );
            assert!(p.pairs.iter().all(|x| !(x.late && x.rotate)));
            assert!(p.pairs.iter().all(|x| !(x.force_secret && x.rotate)));
            let mut names: Vec<&str> = p.pairs.iter().map(|x| x.name.as_str()).collect();
            names.dedup();
            assert_eq!(names.len(), p.pairs.len());
        }
    }
}
