//! The COSI driver calls ([`Driver`]). Each call runs on a blocking thread
//! holding the locks of the buckets and the account it touches (calls on
//! others run alongside), and is idempotent:
//!
//! - bucket IDs derive from Bucket names and account IDs from account
//!   names, so phase 1 creates nothing;
//! - DriverCreateBucket is one durable record (state `Ready`): a bucket has
//!   no directory until its first object is written, so there is nothing
//!   else to make, and a crash leaves either no bucket or a whole one;
//! - DriverDeleteBucket marks the bucket `Deleting`, removes its contents,
//!   then drops its records;
//! - DriverGrantBucketAccess writes the account and its only key in one
//!   transaction and hands the same key pair back on every repeat;
//! - DriverRevokeBucketAccess removes the account and its key in one
//!   transaction, once it has found the account granted on every bucket
//!   the request names (`check_revoked_buckets`: the account ID alone
//!   never revokes); an account already gone is OK.

use std::collections::{BTreeMap, HashMap};
use std::time::{SystemTime, UNIX_EPOCH};

use cosi_driver::proto::*;
use cosi_driver::{Driver, Status};

use crate::blobs;
use crate::credentials;
use crate::driver::{CrashPoint, LocalDriver};
use crate::ids;
use crate::key_locks::Key;
use crate::params::{self, BucketParams};
use crate::policy::{Mode, Modes};
use crate::store::{AccountRecord, BucketRecord, BucketState, StoreError};

/// The message for ServiceAccount authentication requests.
pub const SERVICE_ACCOUNT_UNSUPPORTED: &str = "cosi-driver-local supports only Key authentication: it has no way to trust Kubernetes ServiceAccount tokens; use a BucketAccessClass with authenticationType: Key";

fn internal(e: StoreError) -> Status {
    tracing::error!(error = %e, "state store failure");
    Status::internal(e.to_string())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Checks requested protocols: only S3 (an empty list means S3).
fn s3_only(protocols: &[i32]) -> Result<(), Status> {
    for p in protocols {
        let p = ObjectProtocol::try_from(*p).unwrap_or(ObjectProtocol::Unspecified);
        if p != ObjectProtocol::S3 {
            return Err(Status::invalid_argument(format!(
                "cosi-driver-local supports only the S3 protocol, not {}",
                p.api_name().unwrap_or("an unspecified protocol")
            )));
        }
    }
    Ok(())
}

fn bucket_params(map: &HashMap<String, String>) -> Result<BucketParams, Status> {
    params::bucket_params(map).map_err(|e| Status::invalid_argument(e.to_string()))
}

/// The parameters of a bucket request, which must ask for S3 only.
fn s3_bucket_params(
    protocols: &[i32],
    parameters: &HashMap<String, String>,
) -> Result<BucketParams, Status> {
    s3_only(protocols)?;
    bucket_params(parameters)
}

fn describe(p: &BucketParams) -> String {
    match p.max_size_bytes {
        Some(n) => format!("maxSizeBytes {n}"),
        None => "no maxSizeBytes".to_owned(),
    }
}

fn incompatible_bucket(id: &str, have: &BucketParams, want: &BucketParams) -> Status {
    Status::already_exists(format!(
        "bucket {id} exists with {}, but the request asks for {}",
        describe(have),
        describe(want)
    ))
}

/// Checks what every access request must satisfy.
fn access_request(
    protocol: i32,
    authentication: i32,
    parameters: &HashMap<String, String>,
) -> Result<(), Status> {
    if protocol != ObjectProtocol::S3 as i32 {
        return s3_only(&[protocol]);
    }
    if authentication == AuthenticationType::ServiceAccount as i32 {
        return Err(Status::invalid_argument(SERVICE_ACCOUNT_UNSUPPORTED));
    }
    params::access_params(parameters).map_err(|e| Status::invalid_argument(e.to_string()))
}

fn mode(m: i32) -> Mode {
    match AccessMode::try_from(m) {
        Ok(AccessMode::ReadWrite) => Mode::ReadWrite,
        Ok(AccessMode::ReadOnly) => Mode::ReadOnly,
        Ok(AccessMode::WriteOnly) => Mode::WriteOnly,
        _ => Mode::None,
    }
}

/// The grants an access request asks for, by bucket ID.
pub(crate) fn requested_grants(buckets: &[AccessedBucket]) -> BTreeMap<String, Modes> {
    buckets
        .iter()
        .map(|b| {
            let m = b.access_mode.unwrap_or_default();
            (
                b.bucket_id.clone(),
                Modes {
                    object_data: mode(m.object_data),
                    object_metadata: mode(m.object_metadata),
                    bucket_metadata: mode(m.bucket_metadata),
                },
            )
        })
        .collect()
}

fn describe_grants(g: &BTreeMap<String, Modes>) -> String {
    let parts: Vec<String> = g
        .iter()
        .map(|(b, m)| {
            format!(
                "{b} (objectData {}, objectMetadata {}, bucketMetadata {})",
                m.object_data.name(),
                m.object_metadata.name(),
                m.bucket_metadata.name()
            )
        })
        .collect();
    parts.join(", ")
}

/// Refuses a grant to an account that holds another grant. The message
/// names only what the request asked: the account's own grant may be on
/// buckets the caller has no business knowing of.
fn incompatible_account(id: &str, want: &BTreeMap<String, Modes>) -> Status {
    Status::already_exists(format!(
        "account {id} already exists with a grant other than the one the request asks for ({}). Grants are never changed in place: revoke the access first",
        describe_grants(want)
    ))
}

/// Refuses (`FailedPrecondition`) a revoke of the account `account_id`,
/// holding `grants`, that names a bucket it was never granted: whoever
/// learns another tenant's account ID must not revoke it by naming buckets
/// of their own.
pub(crate) fn check_revoked_buckets(
    account_id: &str,
    grants: &BTreeMap<String, Modes>,
    named: &[RevokedBucket],
) -> Result<(), Status> {
    cosi_driver::revoke::check_named_buckets(account_id, named, |b| grants.contains_key(b))
        .map_err(Status::failed_precondition)
}

impl LocalDriver {
    /// Runs `f` on a blocking thread while holding the locks of `keys`.
    async fn provisioning<T: Send + 'static>(
        &self,
        keys: Vec<Key>,
        f: impl FnOnce(&LocalDriver) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let driver = self.clone();
        tokio::task::spawn_blocking(move || {
            let _guard = driver.inner.provisioning.lock(keys);
            let out = f(&driver)?;
            driver.inner.store.ensure_durable().map_err(internal)?;
            Ok(out)
        })
        .await
        .map_err(|e| Status::internal(format!("provisioning task failed: {e}")))?
    }

    fn bucket_info(&self, id: &str) -> ProtocolBucketInfo {
        ProtocolBucketInfo {
            s3: Some(S3BucketInfo {
                bucket_name: id.to_owned(),
                region: self.inner.region.clone(),
                endpoint: self.endpoint_url(),
                addressing_style: S3AddressingStyle::Path as i32,
            }),
            ..Default::default()
        }
    }

    fn create_bucket_blocking(&self, id: &str, params: BucketParams) -> Result<(), Status> {
        if !ids::is_valid_bucket_name(id) {
            return Err(Status::invalid_argument(format!(
                "bucket_id {id:?} is not a valid S3 bucket name; use the ID returned by DriverGenerateBucketId"
            )));
        }
        let store = &self.inner.store;
        let record = store
            .insert_bucket_if_absent(&BucketRecord {
                id: id.to_owned(),
                state: BucketState::Ready,
                params,
                created_ms: now_ms(),
                used_bytes: 0,
                pending_bytes: 0,
                tags: Vec::new(),
            })
            .map_err(internal)?;
        if record.params != params {
            return Err(incompatible_bucket(id, &record.params, &params));
        }
        match record.state {
            BucketState::Ready => {}
            BucketState::Deleting => {
                return Err(Status::failed_precondition(format!(
                    "bucket {id} is being deleted; retry DriverDeleteBucket first"
                )));
            }
            // Recorded by an earlier version of this driver, which made the
            // directory before marking the bucket ready; now the first
            // object write makes it.
            BucketState::Creating => {
                store
                    .set_bucket_state(id, BucketState::Ready)
                    .map_err(internal)?;
            }
        }
        self.crash_point(CrashPoint::AfterBucketRecorded)?;
        tracing::info!(bucket = %id, "bucket created");
        Ok(())
    }

    fn delete_bucket_blocking(&self, id: &str) -> Result<(), Status> {
        let store = &self.inner.store;
        let dir = self.bucket_dir(id);
        if store.bucket(id).map_err(internal)?.is_none() {
            return Ok(());
        }
        store
            .set_bucket_state(id, BucketState::Deleting)
            .map_err(internal)?;
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Status::internal(format!("removing {}: {e}", dir.display())));
            }
        }
        blobs::sync_dir(&blobs::buckets_dir(&self.inner.data_dir))
            .map_err(|e| Status::internal(format!("syncing the buckets directory: {e}")))?;
        self.crash_point(CrashPoint::AfterBucketDataRemoved)?;
        store.remove_bucket(id).map_err(internal)?;
        tracing::info!(bucket = %id, "bucket deleted");
        Ok(())
    }

    fn ready_bucket(&self, id: &str) -> Result<BucketRecord, Status> {
        match self.inner.store.bucket(id).map_err(internal)? {
            Some(b) if b.state == BucketState::Ready => Ok(b),
            _ => Err(Status::not_found(format!("bucket {id} does not exist"))),
        }
    }

    fn grant_blocking(
        &self,
        account_id: &str,
        grants: BTreeMap<String, Modes>,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        for bucket in grants.keys() {
            self.ready_bucket(bucket)?;
        }
        let store = &self.inner.store;
        let account = match store.account(account_id).map_err(internal)? {
            Some(existing) => existing,
            None => {
                let account = store
                    .insert_account_if_absent(&AccountRecord {
                        id: account_id.to_owned(),
                        access_key_id: credentials::new_access_key_id(),
                        secret_access_key: credentials::new_secret_access_key(),
                        grants: grants.clone(),
                        created_ms: now_ms(),
                    })
                    .map_err(internal)?;
                tracing::info!(account = %account_id, buckets = grants.len(), "access granted");
                self.crash_point(CrashPoint::AfterAccountRecorded)?;
                account
            }
        };
        if account.grants != grants {
            return Err(incompatible_account(account_id, &grants));
        }
        Ok(DriverGrantBucketAccessResponse {
            buckets: grants
                .keys()
                .map(|b| GrantedBucket {
                    bucket_id: b.clone(),
                    bucket_info: Some(self.bucket_info(b)),
                })
                .collect(),
            credentials: Some(Credentials {
                s3: Some(S3Credentials {
                    access_key_id: account.access_key_id,
                    access_secret_key: account.secret_access_key,
                }),
                ..Default::default()
            }),
        })
    }

    fn revoke_blocking(&self, account_id: &str, named: &[RevokedBucket]) -> Result<(), Status> {
        let store = &self.inner.store;
        let Some(account) = store.account(account_id).map_err(internal)? else {
            return Ok(());
        };
        check_revoked_buckets(account_id, &account.grants, named)?;
        if store.remove_account(account_id).map_err(internal)? {
            tracing::info!(account = %account_id, "access revoked");
        }
        self.crash_point(CrashPoint::AfterAccountRemoved)
    }
}

#[cosi_driver::async_trait]
impl Driver for LocalDriver {
    async fn get_info(&self) -> Result<DriverGetInfoResponse, Status> {
        Ok(DriverGetInfoResponse {
            name: self.inner.driver_name.clone(),
            supported_protocols: vec![ObjectProtocol::S3 as i32],
        })
    }

    async fn generate_bucket_id(
        &self,
        r: DriverGenerateBucketIdRequest,
    ) -> Result<DriverGenerateBucketIdResponse, Status> {
        let params = s3_bucket_params(&r.protocols, &r.parameters)?;
        let id = ids::bucket_id_for(&r.name);
        self.provisioning(vec![Key::Bucket(id.clone())], move |d| {
            if let Some(existing) = d.inner.store.bucket(&id).map_err(internal)?
                && existing.params != params
            {
                return Err(incompatible_bucket(&id, &existing.params, &params));
            }
            Ok(DriverGenerateBucketIdResponse { bucket_id: id })
        })
        .await
    }

    async fn create_bucket(
        &self,
        r: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status> {
        let params = s3_bucket_params(&r.protocols, &r.parameters)?;
        self.provisioning(vec![Key::Bucket(r.bucket_id.clone())], move |d| {
            d.create_bucket_blocking(&r.bucket_id, params)?;
            Ok(DriverCreateBucketResponse {
                protocols: Some(d.bucket_info(&r.bucket_id)),
            })
        })
        .await
    }

    async fn get_bucket(
        &self,
        r: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status> {
        let params = s3_bucket_params(&r.protocols, &r.parameters)?;
        self.provisioning(vec![Key::Bucket(r.bucket_id.clone())], move |d| {
            let bucket = d.ready_bucket(&r.bucket_id)?;
            // Parameters are optional here; when given they must match.
            if !r.parameters.is_empty() && bucket.params != params {
                return Err(incompatible_bucket(&r.bucket_id, &bucket.params, &params));
            }
            Ok(DriverGetBucketResponse {
                protocols: Some(d.bucket_info(&r.bucket_id)),
            })
        })
        .await
    }

    async fn delete_bucket(
        &self,
        r: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status> {
        self.provisioning(vec![Key::Bucket(r.bucket_id.clone())], move |d| {
            d.delete_bucket_blocking(&r.bucket_id)?;
            Ok(DriverDeleteBucketResponse {})
        })
        .await
    }

    async fn generate_bucket_access_id(
        &self,
        r: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status> {
        access_request(r.protocol, r.authentication_type, &r.parameters)?;
        let id = ids::account_id_for(&r.account_name);
        let grants = requested_grants(&r.buckets);
        self.provisioning(vec![Key::Account(id.clone())], move |d| {
            if let Some(existing) = d.inner.store.account(&id).map_err(internal)?
                && existing.grants != grants
            {
                return Err(incompatible_account(&id, &grants));
            }
            Ok(DriverGenerateBucketAccessIdResponse { account_id: id })
        })
        .await
    }

    async fn grant_bucket_access(
        &self,
        r: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        access_request(r.protocol, r.authentication_type, &r.parameters)?;
        let grants = requested_grants(&r.buckets);
        // The buckets too: none may be deleted while it is being granted.
        let keys = grants
            .keys()
            .map(|b| Key::Bucket(b.clone()))
            .chain([Key::Account(r.account_id.clone())])
            .collect();
        self.provisioning(keys, move |d| d.grant_blocking(&r.account_id, grants))
            .await
    }

    async fn revoke_bucket_access(
        &self,
        r: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        self.provisioning(vec![Key::Account(r.account_id.clone())], move |d| {
            d.revoke_blocking(&r.account_id, &r.buckets)?;
            Ok(DriverRevokeBucketAccessResponse {})
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_authentication_is_refused_clearly() {
        let err = access_request(
            ObjectProtocol::S3 as i32,
            AuthenticationType::ServiceAccount as i32,
            &HashMap::new(),
        )
        .unwrap_err();
        assert_eq!(err.code(), cosi_driver::Code::InvalidArgument);
        assert!(
            err.message()
                .starts_with("cosi-driver-local supports only Key authentication")
        );
    }

    #[test]
    fn only_s3_is_supported() {
        s3_only(&[]).unwrap();
        s3_only(&[ObjectProtocol::S3 as i32]).unwrap();
        let err = s3_only(&[ObjectProtocol::S3 as i32, ObjectProtocol::Azure as i32]).unwrap_err();
        assert_eq!(
            err.message(),
            "cosi-driver-local supports only the S3 protocol, not Azure"
        );
        assert!(
            access_request(
                ObjectProtocol::Gcs as i32,
                AuthenticationType::Key as i32,
                &HashMap::new()
            )
            .is_err()
        );
    }

    #[test]
    fn requested_modes_map_per_category() {
        let g = requested_grants(&[AccessedBucket {
            bucket_id: "b".into(),
            access_mode: Some(AccessModes {
                object_data: AccessMode::ReadOnly as i32,
                object_metadata: AccessMode::Unspecified as i32,
                bucket_metadata: AccessMode::WriteOnly as i32,
            }),
        }]);
        assert_eq!(
            g["b"],
            Modes {
                object_data: Mode::ReadOnly,
                object_metadata: Mode::None,
                bucket_metadata: Mode::WriteOnly
            }
        );
    }

    #[test]
    fn a_revoke_is_refused_unless_every_bucket_it_names_was_granted() {
        let grants = requested_grants(&[
            AccessedBucket::object_data_only("bc-a", AccessMode::ReadWrite),
            AccessedBucket::object_data_only("bc-b", AccessMode::ReadOnly),
        ]);
        use cosi_driver::testing::revoked_buckets as named;
        check_revoked_buckets("ba-1", &grants, &named(&["bc-a", "bc-b"])).unwrap();
        check_revoked_buckets("ba-1", &grants, &named(&["bc-b"])).unwrap();
        let err =
            check_revoked_buckets("ba-1", &grants, &named(&["bc-a", "bc-x", "bc-x"])).unwrap_err();
        assert_eq!(err.code(), cosi_driver::Code::FailedPrecondition);
        assert_eq!(
            err.message(),
            "refusing to revoke account \"ba-1\": it was never granted bucket \"bc-x\", which the request \
             names; a revoke must name the buckets of the account's grant, so nothing was revoked"
        );
    }

    #[test]
    fn a_refused_grant_names_only_what_the_request_asked() {
        let want = requested_grants(&[AccessedBucket::object_data_only(
            "bc-mine",
            AccessMode::ReadWrite,
        )]);
        let err = incompatible_account("ba-1", &want);
        assert_eq!(err.code(), cosi_driver::Code::AlreadyExists);
        assert!(err.message().contains("bc-mine"), "{}", err.message());
        // The account's own grant (another tenant's bucket, say) is not
        // among the arguments, so it cannot be quoted.
        assert!(!err.message().contains("ReadOnly"), "{}", err.message());
    }

    #[test]
    fn a_bucket_left_creating_by_an_earlier_version_is_made_ready_by_a_retry() {
        let dir = tempfile::tempdir().unwrap();
        let driver = LocalDriver::open(&crate::Config::new(dir.path())).unwrap();
        let store = &driver.inner.store;
        store
            .insert_bucket_if_absent(&BucketRecord {
                id: "bc-old".into(),
                state: BucketState::Creating,
                params: BucketParams::default(),
                created_ms: 0,
                used_bytes: 0,
                pending_bytes: 0,
                tags: Vec::new(),
            })
            .unwrap();
        driver
            .create_bucket_blocking("bc-old", BucketParams::default())
            .unwrap();
        let stored = store.bucket("bc-old").unwrap().unwrap();
        assert_eq!(stored.state, BucketState::Ready);
        assert_eq!(stored.created_ms, 0, "the earlier record is kept");
    }
}
