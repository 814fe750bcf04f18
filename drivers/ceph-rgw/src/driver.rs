//! The COSI services: [`RgwDriver`] is a [`Driver`], answering each call by
//! checking the request (pure functions below), then calling
//! [`crate::buckets`] and [`crate::accounts`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cosi_driver::proto::*;
use cosi_driver::{Driver, Status};
use cosi_driver_s3_common::requests::{self, check_s3_key_access, check_s3_protocols};

use crate::backend::Backend;
use crate::config::{AdminKeys, Config};
use crate::errors::Error;
use crate::params::{self, BucketParams};
use crate::policy::{self, Grant};
use crate::{accounts, buckets, names};
use cosi_driver::locks::KeyLocks;
use cosi_driver_s3_common::params::purge_on_delete;

/// The Ceph RGW COSI driver.
#[derive(Clone, Debug)]
pub struct RgwDriver {
    cfg: Arc<Config>,
    backend: Backend,
    admin_uid: Arc<str>,
    locks: Arc<KeyLocks>,
}

impl RgwDriver {
    /// Builds the clients and identifies the admin user through Admin Ops,
    /// so that wrong keys, a wrong endpoint or missing caps are reported
    /// at start-up. The error never holds a key.
    pub async fn connect(cfg: Config, keys: AdminKeys) -> Result<Self, String> {
        let backend = Backend::new(&cfg, keys).map_err(|e| e.to_string())?;
        let admin = backend.admin_user().await?;
        Ok(Self {
            cfg: Arc::new(cfg),
            backend,
            admin_uid: admin.user_id.into(),
            locks: Arc::default(),
        })
    }

    /// The driver's configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The RGW user the driver acts as (and which owns its buckets).
    pub fn admin_uid(&self) -> &str {
        &self.admin_uid
    }

    /// The S3 and Admin Ops clients.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    fn bucket_info(&self, bucket: &str) -> ProtocolBucketInfo {
        ProtocolBucketInfo {
            s3: Some(S3BucketInfo {
                bucket_name: bucket.to_owned(),
                region: self.cfg.region.clone(),
                endpoint: self.cfg.client_endpoint(),
                addressing_style: self.cfg.addressing_style.to_proto() as i32,
            }),
            ..Default::default()
        }
    }
}

fn invalid(e: String) -> Error {
    Error::InvalidArgument(e)
}

/// Refuses any protocol other than S3.
pub fn check_protocols(protocols: &[i32]) -> Result<(), Error> {
    check_s3_protocols(protocols).map_err(invalid)
}

/// Refuses what an access request asks that RGW users cannot provide.
pub fn check_access(protocol: i32, authentication_type: i32) -> Result<(), Error> {
    check_s3_key_access(protocol, authentication_type, "RGW S3 keys").map_err(invalid)
}

/// The BucketClass parameters of a request for `protocols`.
fn bucket_params(
    protocols: &[i32],
    parameters: &HashMap<String, String>,
) -> Result<BucketParams, Error> {
    requests::bucket_params(protocols, parameters, BucketParams::parse).map_err(invalid)
}

fn check_new_bucket_id(id: &str) -> Result<(), Error> {
    names::NEW_BUCKETS.check_id(id).map_err(invalid)
}

fn check_bucket_id(id: &str) -> Result<(), Error> {
    requests::check_bucket_id(id, "RGW bucket name").map_err(invalid)
}

fn check_account_id(id: &str) -> Result<(), Error> {
    if names::is_valid_user_id(id) {
        Ok(())
    } else {
        Err(invalid(format!(
            "account_id {id:?} is not an RGW user ID this driver generates; use the ID \
             DriverGenerateBucketAccessId returned"
        )))
    }
}

/// The grant for each requested bucket, one per bucket name: a bucket
/// named twice with other modes, or with no mode at all, is refused.
pub fn grants_for(buckets: &[AccessedBucket]) -> Result<BTreeMap<String, Grant>, Error> {
    if buckets.is_empty() {
        return Err(invalid("the request names no bucket".into()));
    }
    let mut out = BTreeMap::new();
    for b in buckets {
        check_bucket_id(&b.bucket_id)?;
        let grant = Grant::for_modes(&b.access_mode.unwrap_or_default());
        if grant.is_empty() {
            return Err(invalid(format!(
                "bucket {:?}: no access mode is set in any category (object data, object metadata, bucket \
                 metadata)",
                b.bucket_id
            )));
        }
        if let Some(previous) = out.insert(b.bucket_id.clone(), grant.clone())
            && previous != grant
        {
            return Err(invalid(format!(
                "bucket {:?} is named twice with different access modes",
                b.bucket_id
            )));
        }
    }
    Ok(out)
}

#[cosi_driver::async_trait]
impl Driver for RgwDriver {
    async fn get_info(&self) -> Result<DriverGetInfoResponse, Status> {
        Ok(requests::s3_driver_info(&self.cfg.driver_name))
    }

    async fn generate_bucket_id(
        &self,
        r: DriverGenerateBucketIdRequest,
    ) -> Result<DriverGenerateBucketIdResponse, Status> {
        let params = bucket_params(&r.protocols, &r.parameters)?;
        let bucket_id = names::bucket_name(&params.name_prefix, &r.name).map_err(invalid)?;
        Ok(DriverGenerateBucketIdResponse { bucket_id })
    }

    async fn create_bucket(
        &self,
        r: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status> {
        let params = bucket_params(&r.protocols, &r.parameters)?;
        check_new_bucket_id(&r.bucket_id)?;
        buckets::create(&self.backend, &self.admin_uid, &r.bucket_id, &params).await?;
        Ok(DriverCreateBucketResponse {
            protocols: Some(self.bucket_info(&r.bucket_id)),
        })
    }

    async fn get_bucket(
        &self,
        r: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status> {
        let params = bucket_params(&r.protocols, &r.parameters)?;
        check_bucket_id(&r.bucket_id)?;
        buckets::get_static(
            &self.backend,
            &self.admin_uid,
            &r.bucket_id,
            params.relink_foreign_buckets,
        )
        .await?;
        Ok(DriverGetBucketResponse {
            protocols: Some(self.bucket_info(&r.bucket_id)),
        })
    }

    async fn delete_bucket(
        &self,
        r: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status> {
        let purge = purge_on_delete(&r.parameters);
        check_bucket_id(&r.bucket_id)?;
        buckets::delete(&self.backend, &self.admin_uid, &r.bucket_id, purge).await?;
        Ok(DriverDeleteBucketResponse {})
    }

    async fn generate_bucket_access_id(
        &self,
        r: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status> {
        check_access(r.protocol, r.authentication_type)?;
        params::check_access_params(&r.parameters).map_err(invalid)?;
        grants_for(&r.buckets)?;
        let account_id = names::user_id(&r.account_name).map_err(invalid)?;
        Ok(DriverGenerateBucketAccessIdResponse { account_id })
    }

    async fn grant_bucket_access(
        &self,
        r: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        check_access(r.protocol, r.authentication_type)?;
        params::check_access_params(&r.parameters).map_err(invalid)?;
        check_account_id(&r.account_id)?;
        let grants = grants_for(&r.buckets)?;
        // Everything that can refuse the grant is checked before the user
        // is created, so that a refused grant leaves nothing behind.
        for (bucket, grant) in &grants {
            let info = self
                .backend
                .admin
                .bucket(bucket)
                .await
                .map_err(Error::from)?;
            crate::decide::check_grantable(bucket, info.as_ref(), &self.admin_uid)?;
            let statements = policy::statements(bucket, &r.account_id, grant);
            accounts::check_fits(&self.backend, &self.cfg, bucket, &r.account_id, statements)
                .await?;
        }
        accounts::check_user(&self.backend, &self.cfg.driver_name, &r.account_id).await?;
        // The statements before the user: a revoke takes a user of the
        // driver's as proof that every bucket of its grant names it.
        for (bucket, grant) in &grants {
            let statements = policy::statements(bucket, &r.account_id, grant);
            accounts::set_statements(
                &self.backend,
                &self.locks,
                &self.cfg,
                bucket,
                &r.account_id,
                statements,
            )
            .await?;
        }
        let key = match accounts::ensure_user(&self.backend, &self.cfg.driver_name, &r.account_id)
            .await
        {
            // Someone else made a user of that ID since check_user: the
            // statements just written must not grant it anything.
            Err(e @ Error::AlreadyExists(_)) => {
                for bucket in grants.keys() {
                    accounts::remove_statements(
                        &self.backend,
                        &self.locks,
                        &self.cfg,
                        &self.admin_uid,
                        bucket,
                        &r.account_id,
                    )
                    .await?;
                }
                return Err(e.into());
            }
            other => other?,
        };
        let granted = r
            .buckets
            .iter()
            .map(|b| GrantedBucket {
                bucket_id: b.bucket_id.clone(),
                bucket_info: Some(self.bucket_info(&b.bucket_id)),
            })
            .collect();
        Ok(DriverGrantBucketAccessResponse {
            buckets: granted,
            credentials: Some(requests::s3_credentials(
                key.access_key,
                key.secret_key,
                self.cfg.ca_pem.as_deref(),
            )),
        })
    }

    async fn revoke_bucket_access(
        &self,
        r: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        check_account_id(&r.account_id)?;
        for b in &r.buckets {
            check_bucket_id(&b.bucket_id)?;
        }
        accounts::revoke(
            &self.backend,
            &self.locks,
            &self.cfg,
            &self.admin_uid,
            &r.account_id,
            &r.buckets,
        )
        .await?;
        Ok(DriverRevokeBucketAccessResponse {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::{accessed_bucket as bucket, assert_serves_only};
    use tonic::Code;

    #[test]
    fn only_s3_with_keys_is_served() {
        assert_serves_only(
            ObjectProtocol::S3,
            &[ObjectProtocol::Azure],
            check_protocols,
            check_access,
            "authenticationType: Key",
        );
    }

    #[test]
    fn each_bucket_gets_one_grant_and_contradictions_are_refused() {
        let g = grants_for(&[
            bucket("bkt-b", AccessMode::ReadOnly),
            bucket("bkt-a", AccessMode::ReadWrite),
            bucket("bkt-b", AccessMode::ReadOnly),
        ])
        .unwrap();
        assert_eq!(g.keys().collect::<Vec<_>>(), ["bkt-a", "bkt-b"]);
        let e = grants_for(&[
            bucket("bkt-a", AccessMode::ReadOnly),
            bucket("bkt-a", AccessMode::WriteOnly),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        let e = grants_for(&[bucket("bkt-a", AccessMode::Unspecified)]).unwrap_err();
        assert!(e.to_string().contains("no access mode"), "{e}");
        assert_eq!(grants_for(&[]).unwrap_err().code(), Code::InvalidArgument);
        assert_eq!(
            grants_for(&[bucket("a/b", AccessMode::ReadOnly)])
                .unwrap_err()
                .code(),
            Code::InvalidArgument
        );
    }

    #[test]
    fn account_ids_must_be_ones_the_driver_generates() {
        assert!(check_account_id("ba-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60").is_ok());
        for bad in ["", "Admin", "a.b", "tenant$user"] {
            assert!(check_account_id(bad).is_err(), "{bad}");
        }
    }
}
