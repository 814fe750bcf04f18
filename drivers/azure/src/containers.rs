//! Container operations: observe the container, let [`crate::decide`]
//! plan, carry the plan out. Containers are created private, with the
//! driver's mark in their metadata in the same call, so that a crash after
//! the create leaves a container a retry recognises.

use std::collections::BTreeMap;

use crate::decide::{self, DeletePlan, OWNER_METADATA};
use crate::errors::Error;
use crate::rest::BlobApi;

/// Creates `container`, or accepts the one this driver already created.
pub async fn create(api: &BlobApi, driver_name: &str, container: &str) -> Result<(), Error> {
    let existing = api.container(container).await?;
    if !decide::plan_create(container, existing.as_ref(), driver_name)? {
        return Ok(());
    }
    let metadata = BTreeMap::from([(OWNER_METADATA.to_owned(), driver_name.to_owned())]);
    if api.create_container(container, &metadata).await? {
        tracing::info!(container, "container created");
        return Ok(());
    }
    // Made by someone else between our look and our create: what it is
    // now decides.
    let existing = api.container(container).await?;
    if decide::plan_create(container, existing.as_ref(), driver_name)? {
        return Err(Error::FailedPrecondition(format!(
            "container {container:?} was reported to exist, then not to; the call is retried"
        )));
    }
    Ok(())
}

/// Checks that the static container `container` exists.
pub async fn get_static(api: &BlobApi, container: &str) -> Result<(), Error> {
    match api.container(container).await? {
        Some(_) => Ok(()),
        None => Err(Error::NotFound(format!(
            "container {container:?} does not exist in the storage account"
        ))),
    }
}

/// Deletes `container` if this driver created it: refused while it holds
/// blobs unless `delete_non_empty`. Azure's Delete Container deletes the
/// blobs with it, so emptiness is the driver's check.
pub async fn delete(
    api: &BlobApi,
    driver_name: &str,
    container: &str,
    delete_non_empty: bool,
) -> Result<(), Error> {
    let existing = api.container(container).await?;
    match decide::plan_delete(container, existing.as_ref(), driver_name)? {
        DeletePlan::Done => {
            tracing::info!(container, "container already absent");
            Ok(())
        }
        DeletePlan::Delete => {
            if !delete_non_empty && api.has_blobs(container).await? {
                return Err(decide::not_empty(container));
            }
            if api.delete_container(container).await? {
                tracing::info!(container, "container deleted");
            }
            Ok(())
        }
    }
}
