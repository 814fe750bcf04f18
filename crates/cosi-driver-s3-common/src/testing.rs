//! The harness of an S3 driver's tests (feature `testing`): the driver on
//! a temporary UNIX socket with a connected client ([`Served`]), one helper
//! per driver call as the tests make it, the data-path helpers that
//! report an S3 failure by its error code, and the driver binary run as a
//! process ([`driver_command`], [`RunningBinary`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use cosi_driver::proto::*;
use cosi_driver::testing::{self, TestServer};
use cosi_driver::{DriverClient, Endpoint, Identity, Provisioner};

/// A driver served on a temporary UNIX socket, with a connected client.
pub struct Served<D> {
    /// The client connected to the socket.
    pub client: DriverClient,
    /// The driver being served (a clone of the one the server holds).
    pub driver: D,
    server: TestServer,
}

impl<D: Identity + Provisioner + Clone> Served<D> {
    /// Serves `driver` and connects to it; panics when the socket does not
    /// answer within ten seconds.
    pub async fn serve(driver: D) -> Self {
        let (client, server) = testing::serve(driver.clone(), driver.clone()).await;
        Served {
            client,
            driver,
            server,
        }
    }
}

impl<D> Served<D> {
    /// The socket.
    pub fn endpoint(&self) -> &Endpoint {
        self.server.endpoint()
    }

    /// Stops the server and waits for it.
    pub async fn stop(self) {
        self.server.stop().await;
    }

    /// DriverGenerateBucketId for the S3 protocol.
    pub async fn generate_bucket_id(
        &self,
        name: &str,
        params: &[(&str, &str)],
    ) -> Result<String, tonic::Status> {
        let mut p = self.client.provisioner.clone();
        Ok(p.driver_generate_bucket_id(DriverGenerateBucketIdRequest {
            name: name.into(),
            protocols: vec![ObjectProtocol::S3 as i32],
            parameters: map(params),
        })
        .await?
        .into_inner()
        .bucket_id)
    }

    /// DriverCreateBucket for the S3 protocol, returning the S3 bucket info.
    pub async fn create_bucket(
        &self,
        id: &str,
        params: &[(&str, &str)],
    ) -> Result<S3BucketInfo, tonic::Status> {
        let mut p = self.client.provisioner.clone();
        let info = p
            .driver_create_bucket(DriverCreateBucketRequest {
                bucket_id: id.into(),
                protocols: vec![ObjectProtocol::S3 as i32],
                parameters: map(params),
            })
            .await?
            .into_inner();
        Ok(info.protocols.and_then(|p| p.s3).expect("S3 info"))
    }

    /// Generates an ID for a fresh `bc-<uuid>` name and creates the bucket.
    pub async fn new_bucket(&self, params: &[(&str, &str)]) -> String {
        let name = format!("bc-{}", uuid::Uuid::new_v4());
        let id = self
            .generate_bucket_id(&name, params)
            .await
            .expect("generate bucket id");
        self.create_bucket(&id, params)
            .await
            .expect("create bucket");
        id
    }

    /// DriverGetBucket for the S3 protocol, returning the S3 bucket info.
    pub async fn get_bucket(
        &self,
        id: &str,
        params: &[(&str, &str)],
    ) -> Result<S3BucketInfo, tonic::Status> {
        let mut p = self.client.provisioner.clone();
        let info = p
            .driver_get_bucket(DriverGetBucketRequest {
                bucket_id: id.into(),
                protocols: vec![ObjectProtocol::S3 as i32],
                parameters: map(params),
            })
            .await?
            .into_inner();
        Ok(info.protocols.and_then(|p| p.s3).expect("S3 info"))
    }

    /// DriverDeleteBucket.
    pub async fn delete_bucket(
        &self,
        id: &str,
        params: &[(&str, &str)],
    ) -> Result<(), tonic::Status> {
        let mut p = self.client.provisioner.clone();
        p.driver_delete_bucket(DriverDeleteBucketRequest {
            bucket_id: id.into(),
            parameters: map(params),
        })
        .await?;
        Ok(())
    }

    /// DriverGenerateBucketAccessId for S3 with Key authentication.
    pub async fn generate_access_id(
        &self,
        account_name: &str,
        buckets: &[AccessedBucket],
    ) -> Result<String, tonic::Status> {
        let mut p = self.client.provisioner.clone();
        Ok(
            p.driver_generate_bucket_access_id(testing::access_id_request(
                ObjectProtocol::S3,
                account_name,
                buckets.to_vec(),
            ))
            .await?
            .into_inner()
            .account_id,
        )
    }

    /// DriverGrantBucketAccess for S3 with Key authentication.
    pub async fn grant(
        &self,
        account_id: &str,
        buckets: &[AccessedBucket],
    ) -> Result<DriverGrantBucketAccessResponse, tonic::Status> {
        let mut p = self.client.provisioner.clone();
        Ok(p.driver_grant_bucket_access(testing::grant_request(
            ObjectProtocol::S3,
            account_id,
            buckets.to_vec(),
        ))
        .await?
        .into_inner())
    }

    /// Generates an account ID for a fresh `ba-<uuid>` name.
    pub async fn new_access_id(&self, buckets: &[AccessedBucket]) -> String {
        let name = format!("ba-{}", uuid::Uuid::new_v4());
        self.generate_access_id(&name, buckets)
            .await
            .expect("generate access id")
    }

    /// Generates an account ID for a fresh `ba-<uuid>` name and grants it,
    /// returning the account ID and the grant.
    pub async fn new_grant(
        &self,
        buckets: &[AccessedBucket],
    ) -> (String, DriverGrantBucketAccessResponse) {
        let id = self.new_access_id(buckets).await;
        let resp = self.grant(&id, buckets).await.expect("grant");
        (id, resp)
    }

    /// DriverRevokeBucketAccess for S3 with Key authentication.
    pub async fn revoke(&self, account_id: &str, buckets: &[&str]) -> Result<(), tonic::Status> {
        let mut p = self.client.provisioner.clone();
        p.driver_revoke_bucket_access(testing::revoke_request(
            ObjectProtocol::S3,
            account_id,
            buckets,
        ))
        .await?;
        Ok(())
    }
}

/// A parameter map from pairs.
pub use cosi_driver::testing::params as map;

/// A bucket with `object_data` access only.
pub use cosi_driver::testing::accessed_bucket as access;

/// A bucket with a mode per category.
pub fn access_all(
    bucket: &str,
    data: AccessMode,
    object_meta: AccessMode,
    bucket_meta: AccessMode,
) -> AccessedBucket {
    AccessedBucket {
        bucket_id: bucket.into(),
        access_mode: Some(testing::access_modes(data, object_meta, bucket_meta)),
    }
}

/// The S3 access key ID and secret access key of a grant response.
pub fn s3_keys(resp: &DriverGrantBucketAccessResponse) -> (String, String) {
    let s3 = resp
        .credentials
        .as_ref()
        .and_then(|c| c.s3.as_ref())
        .expect("S3 credentials");
    (s3.access_key_id.clone(), s3.access_secret_key.clone())
}

/// Asserts that an S3 call (one of [`put`], [`get`], [`list`], ...) was
/// refused with `AccessDenied`.
#[track_caller]
pub fn assert_denied<T: std::fmt::Debug>(result: Result<T, String>) {
    assert_eq!(result.unwrap_err(), "AccessDenied");
}

/// Asserts a driver's S3 bucket naming: `bucket_name` derives names as
/// [`testing::assert_derives_bucket_names`] says, hashes a dotted name into
/// a distinct one without dots and a short one into a valid one;
/// `is_valid_new_bucket_name` holds to the S3 rules and also refuses
/// `also_invalid`; and the shared checks of a `bucketNamePrefix` and of an
/// existing bucket's name hold.
pub fn assert_s3_bucket_names(
    bucket_name: fn(&str, &str) -> Result<String, String>,
    is_valid_new_bucket_name: fn(&str) -> bool,
    also_invalid: &[&str],
) {
    use crate::names::{MAX_PREFIX, check_bucket_prefix, is_plausible_existing_bucket_name};
    use testing::BUCKET_NAME;

    assert_eq!(BUCKET_NAME.len(), 39);
    testing::assert_derives_bucket_names(bucket_name, is_valid_new_bucket_name, MAX_PREFIX);
    let dotted = bucket_name("", "my.bucket").unwrap();
    assert!(
        dotted.starts_with("my-bucket-") && !dotted.contains('.'),
        "{dotted}"
    );
    assert_ne!(dotted, bucket_name("", "my-bucket").unwrap());
    let short = bucket_name("", "ab").unwrap();
    assert!(is_valid_new_bucket_name(&short), "{short}");

    for ok in ["abc", "my-bucket", "a.b.c", BUCKET_NAME] {
        assert!(is_valid_new_bucket_name(ok), "{ok}");
    }
    let invalid = ["ab", "-abc", "abc-", "ABC", "a..b", "192.168.1.1", "a_b"];
    for bad in invalid.iter().chain(also_invalid) {
        assert!(!is_valid_new_bucket_name(bad), "{bad}");
    }
    assert!(is_plausible_existing_bucket_name("Legacy_Bucket"));
    assert!(!is_plausible_existing_bucket_name("a/b"));

    assert!(check_bucket_prefix("").is_ok());
    assert!(check_bucket_prefix("team-a-").is_ok());
    assert!(check_bucket_prefix("-team").is_err());
    assert!(check_bucket_prefix("Team").is_err());
    assert!(check_bucket_prefix(&"a".repeat(25)).is_err());
}

/// Asserts that an S3 CreateBucket refused with AccessDenied and `detail`
/// reads `message` (name, target, code and detail) followed by a hint
/// holding `hint`, and reaches the client as PermissionDenied.
pub fn assert_access_denied_reads<D: crate::errors::Dialect + std::fmt::Debug>(
    detail: &str,
    message: &str,
    hint: &str,
) {
    let e = crate::errors::BackendError::<D>::answered(
        "S3 CreateBucket",
        "bucket \"bc-1\"",
        403,
        Some("AccessDenied".into()),
        detail,
    );
    let msg = e.to_string();
    assert!(msg.starts_with(message), "{msg}");
    assert!(msg.contains(hint), "{msg}");
    let e = crate::errors::Error::from(e);
    assert_eq!(e.code(), tonic::Code::PermissionDenied);
}

/// The error code of an S3 SDK error (`AccessDenied`, `InvalidAccessKeyId`,
/// ...), `HTTP <status>` for a reply without one (a HEAD's), or the error
/// itself when no reply came.
pub fn s3_error_code<E: ProvideErrorMetadata + std::fmt::Debug>(
    err: &SdkError<E, HttpResponse>,
) -> String {
    if let Some(code) = err.code() {
        return code.to_owned();
    }
    match err.raw_response() {
        Some(r) => format!("HTTP {}", r.status().as_u16()),
        None => format!("{err:?}"),
    }
}

/// The result of an S3 SDK call, its error the S3 error code (see
/// [`s3_error_code`]).
pub fn s3_result<T, E: ProvideErrorMetadata + std::fmt::Debug>(
    result: Result<T, SdkError<E, HttpResponse>>,
) -> Result<T, String> {
    result.map_err(|e| s3_error_code(&e))
}

/// Puts `data` at `key`, returning the S3 error code on failure.
pub async fn put(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    data: impl AsRef<[u8]>,
) -> Result<(), String> {
    let call = s3.put_object().bucket(bucket).key(key);
    s3_result(call.body(data.as_ref().to_vec().into()).send().await).map(drop)
}

/// Reads `key`, returning the S3 error code on failure.
pub async fn get(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<String, String> {
    let out = s3_result(s3.get_object().bucket(bucket).key(key).send().await)?;
    let data = out.body.collect().await.map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&data.into_bytes()).into_owned())
}

/// Deletes `key`, returning the S3 error code on failure.
pub async fn delete(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<(), String> {
    s3_result(s3.delete_object().bucket(bucket).key(key).send().await).map(drop)
}

/// Starts a multipart upload of `key`, returning its upload ID or the S3
/// error code.
pub async fn start_upload(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
) -> Result<String, String> {
    let call = s3.create_multipart_upload().bucket(bucket).key(key);
    let out = s3_result(call.send().await)?;
    out.upload_id()
        .map(str::to_owned)
        .ok_or_else(|| "no upload ID".to_owned())
}

/// Lists the keys of a bucket, returning the S3 error code on failure.
pub async fn list(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<Vec<String>, String> {
    let out = s3_result(s3.list_objects_v2().bucket(bucket).send().await)?;
    Ok(out
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect())
}

/// A command running the driver binary `bin` with a clean environment:
/// only `HOME` (`dir`) and `COSI_ENDPOINT` (`dir/cosi.sock`), no stdin.
pub fn driver_command(bin: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("HOME", dir)
        .env(
            "COSI_ENDPOINT",
            format!("unix://{}", dir.join("cosi.sock").display()),
        )
        .stdin(Stdio::null());
    cmd
}

/// A driver binary serving its socket, logging to a file.
pub struct RunningBinary {
    /// The driver's process.
    pub child: Child,
    /// A client connected to its socket.
    pub client: DriverClient,
    /// Its socket, `cosi.sock` in the directory it was started for.
    pub socket: PathBuf,
    /// Its log (stdout and stderr), `driver.log` in that directory.
    pub log: PathBuf,
}

impl RunningBinary {
    /// Starts `cmd` (a [`driver_command`] for `dir`) with its output to
    /// `dir/driver.log` and waits until it serves its socket; panics with
    /// the log when it exits first or does not serve within 10 s.
    pub async fn start(mut cmd: Command, dir: &Path) -> Self {
        let log = dir.join("driver.log");
        let logfile = std::fs::File::create(&log).unwrap();
        let mut child = cmd
            .stdout(logfile.try_clone().unwrap())
            .stderr(logfile)
            .spawn()
            .expect("start the driver binary");
        let socket = dir.join("cosi.sock");
        let endpoint = Endpoint::from_path(&socket).unwrap();
        let mut client = None;
        for _ in 0..200 {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "driver exited with {status}: {}",
                    std::fs::read_to_string(&log).unwrap()
                );
            }
            if socket.exists()
                && let Ok(c) = DriverClient::connect(&endpoint).await
            {
                client = Some(c);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        RunningBinary {
            child,
            client: client.expect("the driver serves its socket"),
            socket,
            log,
        }
    }

    /// Sends SIGTERM and waits for the driver to exit; returns its exit
    /// status and its log.
    pub async fn terminate(mut self) -> (ExitStatus, String) {
        let kill = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let status = wait_exit(&mut self.child).await;
        (status, std::fs::read_to_string(&self.log).unwrap())
    }
}

/// Waits without blocking the runtime, so the test's client connection
/// keeps answering the server's graceful shutdown as a live sidecar would;
/// panics (after killing it) when the driver does not exit within 10 s.
pub async fn wait_exit(child: &mut Child) -> ExitStatus {
    for _ in 0..200 {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    panic!("the driver did not exit within 10 s");
}

/// Panics unless every non-empty line of `log` is JSON.
pub fn assert_json_lines(log: &str) {
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
}
