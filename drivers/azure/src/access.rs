//! Key access: one stored access policy per access on its container, and
//! a service SAS bound to it.
//!
//! The container's policies are one document, replaced whole by Set
//! Container ACL; so a grant or revoke holds the container's lock
//! ([`cosi_driver::locks`]) for its read-modify-write, and reads the list back
//! afterwards: a second driver process writing the same container at the
//! same moment (which a single active sidecar never causes) is noticed and
//! the edit made again. Set Container ACL has no ETag condition (only
//! time-based ones, to the second), so the read-back is what catches it.
//!
//! The token is computed, not stored: it is a function of the account,
//! the container and the policy identifier, so a repeated grant returns
//! the very same token, and deleting the policy refuses it at once.

use std::time::{Duration, SystemTime};

use crate::config::Config;
use crate::decide::{self, GrantPlan};
use crate::errors::Error;
use crate::rest::{AclState, BlobApi};
use crate::sign::ContainerSas;
use cosi_driver::locks::KeyLocks;

/// How many times an edit is made again when it is found undone.
const ATTEMPTS: usize = 5;

/// A granted token.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// The container's SAS URL: resource URI, `?`, token.
    pub url: String,
    /// When it expires; `None` when its policy has no expiry.
    pub expiry: Option<SystemTime>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("url", &"<redacted>")
            .field("expiry", &self.expiry)
            .finish()
    }
}

async fn read(api: &BlobApi, container: &str) -> Result<AclState, Error> {
    api.get_acl(container).await.map_err(|e| {
        if e.code() == tonic::Code::NotFound {
            Error::NotFound(format!(
                "container {container:?} does not exist in the storage account (yet)"
            ))
        } else {
            e.into()
        }
    })
}

/// Ensures the policy `id` with `permission` on `container` and returns
/// the SAS URL bound to it.
pub async fn grant(
    api: &BlobApi,
    locks: &KeyLocks,
    cfg: &Config,
    container: &str,
    id: &str,
    permission: &str,
    lifetime: Duration,
) -> Result<Token, Error> {
    let _held = locks.lock(container).await;
    let mut expiry = None;
    let mut done = false;
    for _ in 0..ATTEMPTS {
        let state = read(api, container).await?;
        let plan = decide::plan_grant(
            container,
            &state.acl,
            id,
            permission,
            SystemTime::now(),
            lifetime,
        )?;
        match plan {
            GrantPlan::Keep { expiry: e } => {
                expiry = e;
                done = true;
                break;
            }
            GrantPlan::Put { acl, expiry: e } => {
                let next = AclState { acl, ..state };
                api.set_acl(container, &next).await?;
                let after = read(api, container).await?;
                let written = next.acl.get(id).cloned();
                if written.is_some_and(|w| decide::holds(&after.acl, &w)) {
                    tracing::info!(container, policy = id, permission, "access policy written");
                    expiry = Some(e);
                    done = true;
                    break;
                }
                tracing::warn!(
                    container,
                    policy = id,
                    "access policies changed by someone else meanwhile; writing again"
                );
            }
        }
    }
    if !done {
        return Err(edited_meanwhile(container, id));
    }
    let sas = ContainerSas {
        account: &cfg.account,
        container,
        identifier: id,
        protocol: cfg.sas_protocol(),
    };
    Ok(Token {
        url: format!(
            "{}?{}",
            cfg.container_url(container),
            sas.token(api.key().bytes())
        ),
        expiry,
    })
}

/// True when `container` holds the policy `id` (a container that is gone
/// holds none).
pub async fn holds(api: &BlobApi, container: &str, id: &str) -> Result<bool, Error> {
    match read(api, container).await {
        Ok(state) => Ok(state.acl.get(id).is_some()),
        Err(Error::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Deletes the policy `id` from `container`, which refuses every token
/// issued under it. A container or policy already gone needs nothing.
pub async fn revoke(
    api: &BlobApi,
    locks: &KeyLocks,
    container: &str,
    id: &str,
) -> Result<(), Error> {
    let _held = locks.lock(container).await;
    for _ in 0..ATTEMPTS {
        let state = match read(api, container).await {
            Ok(state) => state,
            Err(Error::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let Some(acl) = decide::plan_revoke(&state.acl, id) else {
            return Ok(());
        };
        let next = AclState { acl, ..state };
        match api.set_acl(container, &next).await {
            Ok(()) => {}
            Err(e) if e.code() == tonic::Code::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        match read(api, container).await {
            Ok(after) if after.acl.get(id).is_none() => {
                tracing::info!(container, policy = id, "access policy deleted");
                return Ok(());
            }
            Err(Error::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
            Ok(_) => tracing::warn!(
                container,
                policy = id,
                "access policies changed by someone else meanwhile; deleting again"
            ),
        }
    }
    Err(edited_meanwhile(container, id))
}

fn edited_meanwhile(container: &str, id: &str) -> Error {
    Error::FailedPrecondition(format!(
        "the access policies of container {container:?} kept changing while policy {id:?} was edited \
         {ATTEMPTS} times (is a second driver process serving the same account?); the call is retried"
    ))
}
