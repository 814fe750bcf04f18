//! The COSI services: [`S3Driver`] is a [`Driver`], answering each call by
//! checking the request (pure functions below), then calling
//! [`crate::buckets`] and [`crate::accounts`].

use std::collections::HashMap;
use std::sync::Arc;

use cosi_driver::proto::*;
use cosi_driver::{Driver, Status};
use cosi_driver_s3_common::requests::{self, check_s3_key_access, check_s3_protocols};

use crate::backend::{AdminCredentials, Backend};
use crate::config::{Config, ConfigError};
use crate::errors::Error;
use crate::params::{AccessParams, BucketParams, LOCATION_CONSTRAINT};
use crate::{accounts, buckets, names, policy};
use cosi_driver_s3_common::params::purge_on_delete;

/// The S3 + IAM COSI driver.
#[derive(Clone, Debug)]
pub struct S3Driver {
    cfg: Arc<Config>,
    backend: Backend,
}

impl S3Driver {
    /// Builds the driver's clients from `cfg` and the admin credentials.
    pub async fn new(cfg: Config, credentials: AdminCredentials) -> Result<Self, ConfigError> {
        let backend = Backend::connect(&cfg, credentials).await?;
        Ok(Self {
            cfg: Arc::new(cfg),
            backend,
        })
    }

    /// The driver's configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The backend clients (admin).
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    fn bucket_info(&self, located: &buckets::Located) -> ProtocolBucketInfo {
        ProtocolBucketInfo {
            s3: Some(S3BucketInfo {
                bucket_name: located.name.clone(),
                region: located.region.clone(),
                endpoint: self.cfg.client_endpoint(&located.region),
                addressing_style: self.cfg.effective_addressing_style().to_proto() as i32,
            }),
            ..Default::default()
        }
    }
}

/// Refuses any protocol other than S3.
pub fn check_protocols(protocols: &[i32]) -> Result<(), Error> {
    check_s3_protocols(protocols).map_err(invalid)
}

/// Refuses what an access request asks that this driver cannot provide.
pub fn check_access(protocol: i32, authentication_type: i32) -> Result<(), Error> {
    check_s3_key_access(protocol, authentication_type, "IAM access keys").map_err(invalid)
}

fn invalid(e: String) -> Error {
    Error::InvalidArgument(e)
}

/// The IAM user name for an access (the account ID).
pub fn account_id_for(
    account_name: &str,
    params: &HashMap<String, String>,
) -> Result<String, Error> {
    let params = AccessParams::parse(params).map_err(invalid)?;
    names::user_name(&params.user_name_prefix, account_name).map_err(invalid)
}

/// The policy for an access, checked against the configured size limit.
pub fn access_policy(cfg: &Config, buckets: &[AccessedBucket]) -> Result<String, Error> {
    let grants: Vec<(String, AccessModes)> = buckets
        .iter()
        .map(|b| (b.bucket_id.clone(), b.access_mode.unwrap_or_default()))
        .collect();
    let doc = policy::document(&cfg.arn_partition, &grants).ok_or_else(|| {
        Error::InvalidArgument("the request grants no access to any bucket".into())
    })?;
    let limit = cfg.max_inline_policy_size;
    if limit > 0 && doc.len() > limit {
        return Err(Error::OutOfRange(format!(
            "the IAM policy for {} bucket(s) with the requested access modes is {} characters, over the \
             backend's limit of {limit} (--max-inline-policy-size): request fewer buckets or narrower modes per \
             BucketAccess",
            buckets.len(),
            doc.len()
        )));
    }
    Ok(doc)
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
    requests::check_bucket_id(id, "S3 bucket name").map_err(invalid)
}

fn check_bucket_ids(buckets: &[AccessedBucket]) -> Result<(), Error> {
    buckets
        .iter()
        .try_for_each(|b| check_bucket_id(&b.bucket_id))
}

fn bucket_ids(buckets: &[AccessedBucket]) -> impl Iterator<Item = &str> {
    buckets.iter().map(|b| b.bucket_id.as_str())
}

fn check_user(account_id: &str) -> Result<(), Error> {
    if names::is_valid_user_name(account_id) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "account_id {account_id:?} is not an IAM user name this driver generates"
        )))
    }
}

#[cosi_driver::async_trait]
impl Driver for S3Driver {
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
        let located = buckets::create(&self.backend.s3, &self.cfg, &r.bucket_id, &params).await?;
        Ok(DriverCreateBucketResponse {
            protocols: Some(self.bucket_info(&located)),
        })
    }

    async fn get_bucket(
        &self,
        r: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status> {
        let params = bucket_params(&r.protocols, &r.parameters)?;
        if !names::is_plausible_existing_bucket_name(&r.bucket_id) {
            return Err(invalid(format!(
                "existing bucket ID {:?} is not an S3 bucket name",
                r.bucket_id
            ))
            .into());
        }
        let hint = params
            .location_constraint
            .unwrap_or_else(|| self.cfg.region.clone());
        let located = buckets::locate(&self.backend.s3, &self.cfg, &r.bucket_id, &hint).await?;
        Ok(DriverGetBucketResponse {
            protocols: Some(self.bucket_info(&located)),
        })
    }

    async fn delete_bucket(
        &self,
        r: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status> {
        // Only the two keys deletion needs are read, so that a class edited
        // (or a driver upgraded) after creation can never block deletion.
        let purge = purge_on_delete(&r.parameters);
        let hint = r
            .parameters
            .get(LOCATION_CONSTRAINT)
            .cloned()
            .unwrap_or_else(|| self.cfg.region.clone());
        check_bucket_id(&r.bucket_id)?;
        buckets::delete(&self.backend.s3, &self.cfg, &r.bucket_id, &hint, purge).await?;
        Ok(DriverDeleteBucketResponse {})
    }

    async fn generate_bucket_access_id(
        &self,
        r: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status> {
        check_access(r.protocol, r.authentication_type)?;
        check_bucket_ids(&r.buckets)?;
        let account_id = account_id_for(&r.account_name, &r.parameters)?;
        access_policy(&self.cfg, &r.buckets)?;
        accounts::grant_record(bucket_ids(&r.buckets))?;
        Ok(DriverGenerateBucketAccessIdResponse { account_id })
    }

    async fn grant_bucket_access(
        &self,
        r: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        check_access(r.protocol, r.authentication_type)?;
        AccessParams::parse(&r.parameters).map_err(invalid)?;
        check_user(&r.account_id)?;
        check_bucket_ids(&r.buckets)?;
        let doc = access_policy(&self.cfg, &r.buckets)?;
        let record = accounts::grant_record(bucket_ids(&r.buckets))?;
        let mut granted = Vec::with_capacity(r.buckets.len());
        for b in &r.buckets {
            let located =
                buckets::locate(&self.backend.s3, &self.cfg, &b.bucket_id, &self.cfg.region)
                    .await?;
            granted.push(GrantedBucket {
                bucket_id: b.bucket_id.clone(),
                bucket_info: Some(self.bucket_info(&located)),
            });
        }
        let key =
            accounts::grant(&self.backend.iam, &self.cfg, &r.account_id, &doc, &record).await?;
        Ok(DriverGrantBucketAccessResponse {
            buckets: granted,
            credentials: Some(requests::s3_credentials(
                key.access_key_id,
                key.secret_access_key,
                self.cfg.ca_pem.as_deref(),
            )),
        })
    }

    async fn revoke_bucket_access(
        &self,
        r: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        check_user(&r.account_id)?;
        accounts::revoke(&self.backend.iam, &self.cfg, &r.account_id, &r.buckets).await?;
        Ok(DriverRevokeBucketAccessResponse {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::{accessed_bucket as bucket, assert_serves_only};
    use tonic::Code;

    #[test]
    fn only_s3_with_keys_is_served_and_service_accounts_are_refused_clearly() {
        assert_serves_only(
            ObjectProtocol::S3,
            &[ObjectProtocol::Azure, ObjectProtocol::Gcs],
            check_protocols,
            check_access,
            "authenticationType: Key",
        );
    }

    #[test]
    fn account_ids_are_user_names_with_the_class_prefix() {
        let mut params = HashMap::new();
        assert_eq!(account_id_for("ba-1", &params).unwrap(), "ba-1");
        params.insert("userNamePrefix".into(), "team-".into());
        assert_eq!(account_id_for("ba-1", &params).unwrap(), "team-ba-1");
        params.insert("bogus".into(), "x".into());
        assert_eq!(
            account_id_for("ba-1", &params).unwrap_err().code(),
            Code::InvalidArgument
        );
    }

    #[test]
    fn oversized_policies_are_out_of_range() {
        let cfg = Config::default();
        let many: Vec<_> = (0..40)
            .map(|i| {
                bucket(
                    &format!("bc-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f{i:02}"),
                    AccessMode::ReadWrite,
                )
            })
            .collect();
        assert_eq!(
            access_policy(&cfg, &many).unwrap_err().code(),
            Code::OutOfRange
        );
        let unlimited = Config {
            max_inline_policy_size: 0,
            ..Config::default()
        };
        assert!(access_policy(&unlimited, &many).is_ok());
        assert!(access_policy(&cfg, &many[..1]).is_ok());
    }
}
