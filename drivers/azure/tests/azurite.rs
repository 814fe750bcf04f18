//! The driver on Azurite, through a real gRPC server on a temporary UNIX
//! socket: what cosi-sanity does not cover because it is Azure's own
//! (the five-policy limit, concurrent grants on one container, expiry,
//! policies and public access that are not the driver's, containers that
//! still hold blobs), checked on the emulator's answers and with the
//! tokens themselves.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use cosi_driver::proto::*;
use cosi_driver::testing::params as map;
use cosi_driver::testing::{self, TestServer, assert_status};
use cosi_driver::{Code, DriverClient};
use cosi_driver_azure::AzureDriver;
use cosi_driver_azure::acl::{Acl, Policy};
use cosi_driver_azure::rest::AclState;
use cosi_driver_azure::testing::Azurite;
use cosi_sanity::azure::AzureTarget;
use cosi_sanity::s3::Access;

struct Served {
    client: DriverClient,
    _server: TestServer,
}

fn azurite() -> &'static Azurite {
    let a = Azurite::shared();
    a.announce();
    a
}

async fn serve() -> Served {
    let azurite = tokio::task::spawn_blocking(azurite).await.unwrap();
    let driver = AzureDriver::connect(azurite.config(), azurite.key())
        .await
        .expect("driver");
    let (client, server) = testing::serve(driver.clone(), driver).await;
    Served {
        client,
        _server: server,
    }
}

/// The driver served, with a new container made through it.
async fn serve_with_container() -> (Served, String) {
    let s = serve().await;
    let c = s.new_container(&[]).await;
    (s, c)
}

fn uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

impl Served {
    async fn new_container(&self, params: &[(&str, &str)]) -> String {
        let mut p = self.client.provisioner.clone();
        let protocols = vec![ObjectProtocol::Azure as i32];
        let request = DriverGenerateBucketIdRequest {
            name: format!("bc-{}", uid()),
            protocols: protocols.clone(),
            parameters: map(params),
        };
        let reply = p.driver_generate_bucket_id(request).await.unwrap();
        let id = reply.into_inner().bucket_id;
        let request = DriverCreateBucketRequest {
            bucket_id: id.clone(),
            protocols,
            parameters: map(params),
        };
        let created = p.driver_create_bucket(request).await.unwrap().into_inner();
        let info = created.protocols.and_then(|p| p.azure).expect("Azure info");
        assert_eq!(info.storage_account, "devstoreaccount1");
        id
    }

    /// DriverGetBucket of container `id` for the Azure protocol, without
    /// parameters.
    async fn get_container(&self, id: &str) -> Result<DriverGetBucketResponse, tonic::Status> {
        let request = DriverGetBucketRequest {
            bucket_id: id.into(),
            protocols: vec![ObjectProtocol::Azure as i32],
            parameters: HashMap::new(),
        };
        let mut p = self.client.provisioner.clone();
        Ok(p.driver_get_bucket(request).await?.into_inner())
    }

    async fn delete_container(
        &self,
        id: &str,
        params: &[(&str, &str)],
    ) -> Result<(), tonic::Status> {
        let mut p = self.client.provisioner.clone();
        p.driver_delete_bucket(DriverDeleteBucketRequest {
            bucket_id: id.into(),
            parameters: map(params),
        })
        .await
        .map(drop)
    }

    fn buckets(container: &str, mode: AccessMode) -> Vec<AccessedBucket> {
        vec![testing::accessed_bucket(container, mode)]
    }

    /// Generates an account for a fresh access and grants it.
    async fn grant(
        &self,
        container: &str,
        mode: AccessMode,
        params: &[(&str, &str)],
    ) -> Result<(String, AzureCredentials), tonic::Status> {
        let name = format!("ba-{}", uid());
        let buckets = Self::buckets(container, mode);
        let mut request = testing::access_id_request(ObjectProtocol::Azure, &name, buckets);
        request.parameters = map(params);
        let mut p = self.client.provisioner.clone();
        let reply = p.driver_generate_bucket_access_id(request).await?;
        let account_id = reply.into_inner().account_id;
        let creds = self
            .grant_again(container, &account_id, mode, params)
            .await?;
        Ok((account_id, creds))
    }

    async fn grant_again(
        &self,
        container: &str,
        account_id: &str,
        mode: AccessMode,
        params: &[(&str, &str)],
    ) -> Result<AzureCredentials, tonic::Status> {
        let buckets = Self::buckets(container, mode);
        let mut request = testing::grant_request(ObjectProtocol::Azure, account_id, buckets);
        request.parameters = map(params);
        let mut p = self.client.provisioner.clone();
        let r = p.driver_grant_bucket_access(request).await?.into_inner();
        Ok(r.credentials
            .and_then(|c| c.azure)
            .expect("Azure credentials"))
    }

    async fn revoke(&self, container: &str, account_id: &str) {
        self.revoke_from(&[container], account_id)
            .await
            .expect("revoke");
    }

    /// DriverRevokeBucketAccess of `account_id` naming `containers`.
    async fn revoke_from(
        &self,
        containers: &[&str],
        account_id: &str,
    ) -> Result<(), tonic::Status> {
        let mut p = self.client.provisioner.clone();
        let request = testing::revoke_request(ObjectProtocol::Azure, account_id, containers);
        p.driver_revoke_bucket_access(request).await.map(drop)
    }
}

fn target(creds: &AzureCredentials) -> AzureTarget {
    AzureTarget::new(&creds.access_token, None, Duration::from_secs(10)).expect("a SAS URL")
}

async fn policy_ids(container: &str) -> Vec<String> {
    let state = azurite().api().get_acl(container).await.expect("get ACL");
    state.acl.policies.into_iter().map(|p| p.id).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sixth_access_to_one_container_is_resource_exhausted_until_a_slot_frees() {
    let (s, c) = serve_with_container().await;
    let mut accounts = Vec::new();
    for _ in 0..5 {
        accounts.push(s.grant(&c, AccessMode::ReadWrite, &[]).await.unwrap().0);
    }
    let e = assert_status(
        s.grant(&c, AccessMode::ReadOnly, &[]).await,
        Code::ResourceExhausted,
        &[],
    );
    assert!(
        e.message().contains("five") || e.message().contains("5 stored access policies"),
        "{}",
        e.message()
    );
    assert!(e.message().contains("rotation"), "{}", e.message());
    assert_eq!(policy_ids(&c).await.len(), 5, "nothing was written");
    // A repeat of a granted access still works at the limit.
    s.grant_again(&c, &accounts[0], AccessMode::ReadWrite, &[])
        .await
        .unwrap();
    s.revoke(&c, &accounts[0]).await;
    s.grant(&c, AccessMode::ReadOnly, &[])
        .await
        .expect("a freed slot is used");
    for id in policy_ids(&c).await {
        s.revoke(&c, &id).await;
    }
    s.delete_container(&c, &[]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_grants_to_one_container_keep_every_policy() {
    let (s, c) = serve_with_container().await;
    let grants =
        futures::future::join_all((0..4).map(|_| s.grant(&c, AccessMode::ReadWrite, &[]))).await;
    let mut ids: Vec<String> = grants.into_iter().map(|g| g.unwrap().0).collect();
    ids.sort();
    let mut stored = policy_ids(&c).await;
    stored.sort();
    assert_eq!(stored, ids, "a concurrent read-modify-write lost a policy");
    futures::future::join_all(ids.iter().map(|id| s.revoke(&c, id))).await;
    assert!(policy_ids(&c).await.is_empty());
    s.delete_container(&c, &[]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoke_refuses_its_token_at_once_and_leaves_the_others_working() {
    let (s, c) = serve_with_container().await;
    let (a, creds_a) = s.grant(&c, AccessMode::ReadWrite, &[]).await.unwrap();
    let (b, creds_b) = s.grant(&c, AccessMode::ReadWrite, &[]).await.unwrap();
    let (ta, tb) = (target(&creds_a), target(&creds_b));
    assert_eq!(ta.put("x", b"1").await, Access::Allowed(()));
    assert_eq!(tb.get("x").await, Access::Allowed(b"1".to_vec()));
    s.revoke(&c, &a).await;
    assert!(
        matches!(ta.get("x").await, Access::Denied(_)),
        "the revoked token still reads"
    );
    assert!(
        matches!(ta.put("y", b"2").await, Access::Denied(_)),
        "the revoked token still writes"
    );
    assert_eq!(
        tb.get("x").await,
        Access::Allowed(b"1".to_vec()),
        "another access lost its token"
    );
    assert_eq!(tb.delete("x").await, Access::Allowed(()));
    s.revoke(&c, &b).await;
    s.revoke(&c, &b).await;
    s.delete_container(&c, &[]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoke_naming_a_container_the_account_was_never_granted_leaves_its_token_working() {
    let s = serve().await;
    let (victim_c, own_c) = (s.new_container(&[]).await, s.new_container(&[]).await);
    let (victim, creds) = s
        .grant(&victim_c, AccessMode::ReadWrite, &[])
        .await
        .unwrap();
    let (own, _) = s.grant(&own_c, AccessMode::ReadWrite, &[]).await.unwrap();
    let token = target(&creds);
    assert_eq!(token.put("x", b"1").await, Access::Allowed(()));

    // The account holds no policy on the container named: nothing there to
    // revoke, and the one it holds elsewhere is left alone.
    s.revoke_from(&[&own_c], &victim).await.unwrap();
    // Named beside the container it holds: refused, nothing changes.
    let err = assert_status(
        s.revoke_from(&[&victim_c, &own_c], &victim).await,
        Code::FailedPrecondition,
        &[&victim, &own_c, "nothing was revoked"],
    );
    assert!(
        !err.message().contains(&format!("{victim_c:?}")),
        "{}",
        err.message()
    );
    assert_eq!(policy_ids(&victim_c).await, [victim.as_str()]);
    assert_eq!(policy_ids(&own_c).await, [own.as_str()]);
    assert_eq!(token.get("x").await, Access::Allowed(b"1".to_vec()));
    assert_eq!(token.delete("x").await, Access::Allowed(()));

    s.revoke(&victim_c, &victim).await;
    s.revoke(&own_c, &own).await;
    s.delete_container(&victim_c, &[]).await.unwrap();
    s.delete_container(&own_c, &[]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoke_of_an_account_already_gone_is_ok_and_touches_no_other_policy() {
    let (s, c) = serve_with_container().await;
    let (a, creds) = s.grant(&c, AccessMode::ReadWrite, &[]).await.unwrap();
    s.revoke(&c, &format!("ba-{}", uid())).await;
    s.revoke("no-such-container", &a).await;
    assert_eq!(policy_ids(&c).await, [a.as_str()]);
    assert_eq!(target(&creds).put("x", b"1").await, Access::Allowed(()));
    assert_eq!(target(&creds).delete("x").await, Access::Allowed(()));
    s.revoke(&c, &a).await;
    s.delete_container(&c, &[]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoke_cut_short_after_deleting_the_policy_is_completed_by_its_retry() {
    let (s, c) = serve_with_container().await;
    let (a, creds) = s.grant(&c, AccessMode::ReadWrite, &[]).await.unwrap();
    let (b, _) = s.grant(&c, AccessMode::ReadOnly, &[]).await.unwrap();
    // The revoke's one write, as a crash before its answer leaves it.
    let api = azurite().api();
    let mut state = api.get_acl(&c).await.unwrap();
    state.acl.policies.retain(|p| p.id != a);
    api.set_acl(&c, &state).await.unwrap();

    s.revoke(&c, &a).await;
    assert_eq!(policy_ids(&c).await, [b.as_str()]);
    assert!(
        matches!(target(&creds).get("x").await, Access::Denied(_)),
        "the revoked token still reads"
    );
    s.revoke(&c, &b).await;
    s.delete_container(&c, &[]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_works_until_its_expiry_timestamp_and_not_after() {
    let (s, c) = serve_with_container().await;
    let before = SystemTime::now();
    let (a, creds) = s
        .grant(&c, AccessMode::ReadWrite, &[("sasTokenLifetime", "10s")])
        .await
        .unwrap();
    let expiry = creds.expiry_timestamp.expect("an expiry timestamp");
    let expiry = SystemTime::UNIX_EPOCH + Duration::from_secs(expiry.seconds as u64);
    let lifetime = expiry.duration_since(before).unwrap();
    assert!(
        (Duration::from_secs(9)..=Duration::from_secs(11)).contains(&lifetime),
        "the token lives {lifetime:?}, not the class's 10s"
    );
    let t = target(&creds);
    assert_eq!(t.put("x", b"1").await, Access::Allowed(()));
    // A repeat returns the same token and expiry, not a longer one.
    let again = s
        .grant_again(
            &c,
            &a,
            AccessMode::ReadWrite,
            &[("sasTokenLifetime", "10s")],
        )
        .await
        .unwrap();
    assert_eq!(again, creds);
    let wait =
        expiry.duration_since(SystemTime::now()).unwrap_or_default() + Duration::from_secs(2);
    tokio::time::sleep(wait).await;
    assert!(
        matches!(t.get("x").await, Access::Denied(_)),
        "the expired token still reads"
    );
    s.revoke(&c, &a).await;
    s.delete_container(&c, &[("deleteNonEmptyContainers", "true")])
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_with_blobs_is_kept_unless_the_class_allows_deleting_it() {
    let (s, c) = serve_with_container().await;
    let (a, creds) = s.grant(&c, AccessMode::WriteOnly, &[]).await.unwrap();
    assert_eq!(target(&creds).put("x", b"1").await, Access::Allowed(()));
    s.revoke(&c, &a).await;
    assert_status(
        s.delete_container(&c, &[]).await,
        Code::FailedPrecondition,
        &["deleteNonEmptyContainers"],
    );
    assert!(
        azurite().api().container(&c).await.unwrap().is_some(),
        "the data is gone"
    );
    s.delete_container(&c, &[("deleteNonEmptyContainers", "true")])
        .await
        .unwrap();
    assert!(azurite().api().container(&c).await.unwrap().is_none());
    s.delete_container(&c, &[])
        .await
        .expect("deleting again is OK");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_static_container_keeps_its_own_policies_and_public_access_and_is_never_deleted() {
    let s = serve().await;
    let api = azurite().api();
    let c = format!("legacy-{}", &uid()[..8]);
    assert!(api.create_container(&c, &Default::default()).await.unwrap());
    let theirs = Policy {
        id: "admin-policy".into(),
        start: None,
        expiry: Some("2099-01-01T00:00:00Z".into()),
        permission: "r".into(),
    };
    api.set_acl(
        &c,
        &AclState {
            acl: Acl {
                policies: vec![theirs.clone()],
            },
            public_access: Some("blob".into()),
        },
    )
    .await
    .unwrap();
    let info = s.get_container(&c).await.unwrap();
    assert!(info.protocols.and_then(|p| p.azure).is_some());
    let (a, _) = s.grant(&c, AccessMode::ReadOnly, &[]).await.unwrap();
    let state = api.get_acl(&c).await.unwrap();
    assert_eq!(
        state.public_access.as_deref(),
        Some("blob"),
        "public access was reset"
    );
    assert!(
        cosi_driver_azure::decide::holds(&state.acl, &theirs),
        "{state:?}"
    );
    s.revoke(&c, &a).await;
    assert_eq!(policy_ids(&c).await, ["admin-policy"]);
    assert_status(
        s.delete_container(&c, &[]).await,
        Code::FailedPrecondition,
        &[],
    );
    let mut p = s.client.provisioner.clone();
    assert_status(
        p.driver_create_bucket(DriverCreateBucketRequest {
            bucket_id: c.clone(),
            protocols: vec![ObjectProtocol::Azure as i32],
            parameters: HashMap::new(),
        })
        .await,
        Code::AlreadyExists,
        &[],
    );
    let missing = s.get_container("no-such-container").await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    assert!(api.delete_container(&c).await.unwrap());
}
