//! The COSI services: [`AzureDriver`] is a [`Driver`], answering each call by
//! checking the request (pure functions below), then calling
//! [`crate::containers`] and [`crate::access`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use cosi_driver::proto::*;
use cosi_driver::requests;
use cosi_driver::{Driver, Status};

use crate::config::{AccountKey, Config};
use crate::errors::Error;
use crate::params::{AccessParams, BucketParams, DELETE_NON_EMPTY};
use crate::rest::BlobApi;
use crate::{access, containers, decide, names, time};
use cosi_driver::locks::KeyLocks;

/// The Azure Blob COSI driver.
#[derive(Clone, Debug)]
pub struct AzureDriver {
    cfg: Arc<Config>,
    api: BlobApi,
    locks: Arc<KeyLocks>,
}

impl AzureDriver {
    /// Builds the client and lists one container, so that a wrong account
    /// name, key or endpoint is reported at start-up. The error never
    /// holds the key.
    pub async fn connect(cfg: Config, key: AccountKey) -> Result<Self, String> {
        let driver = Self::new(cfg, key)?;
        driver.api.check_access().await.map_err(|e| {
            format!(
                "cannot list the containers of storage account {:?} at {}: {e}",
                driver.cfg.account,
                driver.cfg.endpoint()
            )
        })?;
        Ok(driver)
    }

    /// Builds the client without sending anything.
    pub fn new(cfg: Config, key: AccountKey) -> Result<Self, String> {
        let api = BlobApi::new(&cfg, key).map_err(|e| e.to_string())?;
        Ok(Self {
            cfg: Arc::new(cfg),
            api,
            locks: Arc::default(),
        })
    }

    /// The driver's configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The Blob service client.
    pub fn api(&self) -> &BlobApi {
        &self.api
    }

    fn bucket_info(&self) -> ProtocolBucketInfo {
        ProtocolBucketInfo {
            azure: Some(AzureBucketInfo {
                storage_account: self.cfg.account.clone(),
            }),
            ..Default::default()
        }
    }
}

fn invalid(e: String) -> Error {
    Error::InvalidArgument(e)
}

/// Refuses any protocol other than Azure.
pub fn check_protocols(protocols: &[i32]) -> Result<(), Error> {
    requests::check_protocols(protocols, ObjectProtocol::Azure).map_err(invalid)
}

/// Refuses what an access request asks that a SAS cannot provide.
pub fn check_access(protocol: i32, authentication_type: i32) -> Result<(), Error> {
    requests::check_key_access(
        protocol,
        ObjectProtocol::Azure,
        authentication_type,
        "it cannot assign Azure roles to a workload identity, and granting nothing while answering OK would \
         be a lie. Use a BucketAccessClass with authenticationType: Key (a SAS token), or grant the workload \
         identity an Azure role yourself",
    )
    .map_err(invalid)
}

/// The BucketClass parameters of a request for `protocols`.
fn bucket_params(
    protocols: &[i32],
    parameters: &HashMap<String, String>,
) -> Result<BucketParams, Error> {
    check_protocols(protocols)?;
    BucketParams::parse(parameters).map_err(invalid)
}

fn check_new_container_id(id: &str) -> Result<(), Error> {
    if names::is_valid_container_name(id) {
        Ok(())
    } else {
        Err(invalid(format!(
            "bucket_id {id:?} is not a valid container name; use the ID DriverGenerateBucketId returned"
        )))
    }
}

fn check_container_id(id: &str) -> Result<(), Error> {
    let special = matches!(id, "$root" | "$web");
    if names::is_valid_container_name(id) || special {
        Ok(())
    } else {
        Err(invalid(format!("bucket_id {id:?} is not a container name")))
    }
}

fn check_account_id(id: &str) -> Result<(), Error> {
    if names::is_valid_policy_id(id) {
        Ok(())
    } else {
        Err(invalid(format!(
            "account_id {id:?} is not an access policy identifier this driver generates; use the ID \
             DriverGenerateBucketAccessId returned"
        )))
    }
}

/// The one container of a Key access and its SAS permissions. A SAS
/// reaches one container only, so a request for several is `OutOfRange`
/// as the KEP asks; a container named twice with different modes, or
/// modes a SAS cannot honour exactly, are `InvalidArgument`.
pub fn single_container(buckets: &[AccessedBucket]) -> Result<(String, &'static str), Error> {
    if buckets.is_empty() {
        return Err(invalid("the request names no bucket".into()));
    }
    let mut grants: BTreeMap<&str, &'static str> = BTreeMap::new();
    for b in buckets {
        check_container_id(&b.bucket_id)?;
        let permission = decide::permissions(&b.bucket_id, &b.access_mode.unwrap_or_default())?;
        if let Some(previous) = grants.insert(&b.bucket_id, permission)
            && previous != permission
        {
            return Err(invalid(format!(
                "bucket {:?} is named twice with different access modes",
                b.bucket_id
            )));
        }
    }
    if grants.len() > 1 {
        return Err(Error::OutOfRange(format!(
            "a SAS token reaches one container only, so one credential cannot be made for the {} buckets of this \
             access; use one BucketAccess per bucket",
            grants.len()
        )));
    }
    let (container, permission) = grants.into_iter().next().expect("one bucket");
    Ok((container.to_owned(), permission))
}

#[cosi_driver::async_trait]
impl Driver for AzureDriver {
    async fn get_info(&self) -> Result<DriverGetInfoResponse, Status> {
        Ok(DriverGetInfoResponse {
            name: self.cfg.driver_name.clone(),
            supported_protocols: vec![ObjectProtocol::Azure as i32],
        })
    }

    async fn generate_bucket_id(
        &self,
        r: DriverGenerateBucketIdRequest,
    ) -> Result<DriverGenerateBucketIdResponse, Status> {
        let params = bucket_params(&r.protocols, &r.parameters)?;
        let bucket_id = names::container_name(&params.name_prefix, &r.name).map_err(invalid)?;
        Ok(DriverGenerateBucketIdResponse { bucket_id })
    }

    async fn create_bucket(
        &self,
        r: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status> {
        bucket_params(&r.protocols, &r.parameters)?;
        check_new_container_id(&r.bucket_id)?;
        containers::create(&self.api, &self.cfg.driver_name, &r.bucket_id).await?;
        Ok(DriverCreateBucketResponse {
            protocols: Some(self.bucket_info()),
        })
    }

    async fn get_bucket(
        &self,
        r: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status> {
        bucket_params(&r.protocols, &r.parameters)?;
        check_container_id(&r.bucket_id)?;
        containers::get_static(&self.api, &r.bucket_id).await?;
        Ok(DriverGetBucketResponse {
            protocols: Some(self.bucket_info()),
        })
    }

    async fn delete_bucket(
        &self,
        r: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status> {
        // Only the key deletion needs is read, so that a class edited (or
        // a driver upgraded) after creation can never block deletion.
        let delete_non_empty = r
            .parameters
            .get(DELETE_NON_EMPTY)
            .is_some_and(|v| v == "true");
        check_container_id(&r.bucket_id)?;
        containers::delete(
            &self.api,
            &self.cfg.driver_name,
            &r.bucket_id,
            delete_non_empty,
        )
        .await?;
        Ok(DriverDeleteBucketResponse {})
    }

    async fn generate_bucket_access_id(
        &self,
        r: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status> {
        check_access(r.protocol, r.authentication_type)?;
        AccessParams::parse(&r.parameters).map_err(invalid)?;
        single_container(&r.buckets)?;
        let account_id = names::policy_id(&r.account_name).map_err(invalid)?;
        Ok(DriverGenerateBucketAccessIdResponse { account_id })
    }

    async fn grant_bucket_access(
        &self,
        r: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        check_access(r.protocol, r.authentication_type)?;
        let params = AccessParams::parse(&r.parameters).map_err(invalid)?;
        check_account_id(&r.account_id)?;
        let (container, permission) = single_container(&r.buckets)?;
        let token = access::grant(
            &self.api,
            &self.locks,
            &self.cfg,
            &container,
            &r.account_id,
            permission,
            params.token_lifetime,
        )
        .await?;
        Ok(DriverGrantBucketAccessResponse {
            buckets: vec![GrantedBucket {
                bucket_id: container,
                bucket_info: Some(self.bucket_info()),
            }],
            credentials: Some(Credentials {
                azure: Some(AzureCredentials {
                    access_token: token.url,
                    expiry_timestamp: token.expiry.map(time::to_timestamp),
                }),
                certificate_authority: self.cfg.ca_pem.clone().unwrap_or_default(),
                ..Default::default()
            }),
        })
    }

    async fn revoke_bucket_access(
        &self,
        r: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        check_account_id(&r.account_id)?;
        for b in &r.buckets {
            check_container_id(&b.bucket_id)?;
        }
        let mut holding = BTreeSet::new();
        for b in &r.buckets {
            if access::holds(&self.api, &b.bucket_id, &r.account_id).await? {
                holding.insert(b.bucket_id.clone());
            }
        }
        for container in decide::revoke_targets(&r.account_id, &r.buckets, &holding)? {
            access::revoke(&self.api, &self.locks, &container, &r.account_id).await?;
        }
        Ok(DriverRevokeBucketAccessResponse {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::{accessed_bucket as bucket, assert_serves_only};
    use tonic::Code;

    #[test]
    fn only_azure_with_keys_is_served_and_service_accounts_are_refused_with_the_reason() {
        assert_serves_only(
            ObjectProtocol::Azure,
            &[ObjectProtocol::S3],
            check_protocols,
            check_access,
            "cannot assign Azure roles",
        );
    }

    #[test]
    fn several_containers_are_out_of_range_and_one_named_twice_is_one() {
        let e = single_container(&[
            bucket("bc-a", AccessMode::ReadWrite),
            bucket("bc-b", AccessMode::ReadWrite),
        ])
        .unwrap_err();
        assert_eq!(e.code(), Code::OutOfRange);
        assert_eq!(
            single_container(&[
                bucket("bc-a", AccessMode::ReadOnly),
                bucket("bc-a", AccessMode::ReadOnly)
            ])
            .unwrap(),
            ("bc-a".to_owned(), decide::READ_ONLY)
        );
        let e = single_container(&[
            bucket("bc-a", AccessMode::ReadOnly),
            bucket("bc-a", AccessMode::WriteOnly),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        assert_eq!(
            single_container(&[]).unwrap_err().code(),
            Code::InvalidArgument
        );
        assert_eq!(
            single_container(&[bucket("a/b", AccessMode::ReadOnly)])
                .unwrap_err()
                .code(),
            Code::InvalidArgument
        );
    }

    #[test]
    fn account_ids_must_be_ones_the_driver_generates() {
        assert!(check_account_id("ba-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60-r1").is_ok());
        for bad in ["", "Admin", "a.b", &"a".repeat(65)] {
            assert!(check_account_id(bad).is_err(), "{bad}");
        }
    }
}
