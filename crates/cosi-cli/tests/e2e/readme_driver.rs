//! The driver skeleton the README shows driver authors, compiled and served
//! here so the README never shows code that does not build or answer.

// README example begins
use cosi_driver::proto::*;
use cosi_driver::{Driver, Status};

/// A driver for the object store at `endpoint`.
pub struct MyDriver {
    pub endpoint: String,
}

#[cosi_driver::async_trait]
impl Driver for MyDriver {
    async fn get_info(&self) -> Result<DriverGetInfoResponse, Status> {
        Ok(DriverGetInfoResponse {
            name: "objects.example.com".into(), // BucketClass/BucketAccessClass driverName
            supported_protocols: vec![ObjectProtocol::S3 as i32],
        })
    }

    async fn generate_bucket_id(
        &self,
        request: DriverGenerateBucketIdRequest,
    ) -> Result<DriverGenerateBucketIdResponse, Status> {
        // Phase 1 creates nothing: the same name must always give the same ID.
        Ok(DriverGenerateBucketIdResponse {
            bucket_id: request.name, // "bc-<BucketClaim UID>"
        })
    }

    async fn create_bucket(
        &self,
        request: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status> {
        // Create `bucket_id` in the object store here; OK when it already
        // exists with the same parameters, AlreadyExists when they differ.
        Ok(DriverCreateBucketResponse {
            protocols: Some(ProtocolBucketInfo {
                s3: Some(S3BucketInfo {
                    bucket_name: request.bucket_id,
                    region: "us-east-1".into(),
                    endpoint: self.endpoint.clone(),
                    addressing_style: S3AddressingStyle::Path as i32,
                }),
                ..Default::default()
            }),
        })
    }

    async fn get_bucket(
        &self,
        _: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status> {
        // Static provisioning: NotFound unless the bucket exists.
        Err(Status::not_found("look the bucket up in the object store"))
    }

    async fn delete_bucket(
        &self,
        _: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status> {
        // Delete the bucket; OK when it is already gone.
        Ok(DriverDeleteBucketResponse {})
    }

    async fn generate_bucket_access_id(
        &self,
        request: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status> {
        Ok(DriverGenerateBucketAccessIdResponse {
            account_id: request.account_name, // "ba-<BucketAccess UID>"
        })
    }

    async fn grant_bucket_access(
        &self,
        _: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        // Create the account and its key with the requested modes on each
        // bucket; a repeat returns the same key. InvalidArgument for what
        // the store cannot honour.
        Err(Status::unimplemented("grant access in the object store"))
    }

    async fn revoke_bucket_access(
        &self,
        _: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        // Delete the account and its keys; OK when already gone.
        Ok(DriverRevokeBucketAccessResponse {})
    }
}
// README example ends

#[allow(dead_code)]
// README main begins
#[tokio::main]
async fn main() -> Result<(), cosi_driver::ServeError> {
    // Serves on COSI_ENDPOINT until SIGTERM/SIGINT.
    let driver = || MyDriver {
        endpoint: "https://objects.example.com".into(),
    };
    cosi_driver::serve_from_env(driver(), driver()).await
}
// README main ends

use cosi_driver::{DriverClient, Endpoint};

use crate::common::generate_s3_bucket_id;

/// The lines between the `// README <part> begins` and `ends` markers above.
fn example_source(part: &str) -> String {
    let source = include_str!("readme_driver.rs");
    let begin = format!("// README {part} begins\n");
    let start = source.find(&begin).unwrap() + begin.len();
    let end = source.find(&format!("// README {part} ends")).unwrap();
    source[start..end].to_owned()
}

#[test]
fn the_readme_shows_the_driver_example_exactly_as_compiled_here() {
    let readme = include_str!("../../../../README.md");
    for part in ["example", "main"] {
        assert!(
            readme.contains(&format!("```rust\n{}```", example_source(part))),
            "README.md's driver {part} differs from tests/e2e/readme_driver.rs"
        );
    }
}

#[tokio::test]
async fn the_readme_driver_example_answers_over_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    let endpoint = Endpoint::from_path(dir.path().join("cosi.sock")).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = {
        let endpoint = endpoint.clone();
        let driver = || MyDriver {
            endpoint: "https://objects.example.com".into(),
        };
        tokio::spawn(async move {
            cosi_driver::serve(&endpoint, driver(), driver(), async {
                let _ = stopped.await;
            })
            .await
        })
    };
    let client = DriverClient::connect_lazy(&endpoint);
    let mut info = None;
    for _ in 0..200 {
        if let Ok(i) = client.get_info().await {
            info = Some(i);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        info.expect("the driver answers").name,
        "objects.example.com"
    );
    let id = generate_s3_bucket_id(&client, "bc-1").await;
    assert_eq!(id, "bc-1");
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
