//! Provisioning throughput of the local driver over real gRPC on a UNIX
//! socket: concurrent callers each create buckets and grant access to them
//! (both phases of each), as a sidecar's workers do. Prints a human line
//! and a JSON line, including how many durable commits the driver's state
//! took per pair.
//!
//! Run with `cargo bench -p cosi-driver-local --bench provisioning`
//! (optionally `-- <pairs> <callers>`; defaults 2000 and 16, the sidecar's
//! default of 8 workers for each of Buckets and BucketAccesses). The data
//! directory is a temporary directory, so the disk under it sets the cost
//! of each durable commit.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cosi_driver::proto::*;
use cosi_driver::{DriverClient, Endpoint};
use cosi_driver_local::{Config, LocalDriver};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<usize>().ok());
    let pairs = args.next().unwrap_or(2000).max(1);
    let callers = args.next().unwrap_or(16).clamp(1, pairs);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(pairs, callers));
}

async fn run(pairs: usize, callers: usize) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut config = Config::new(dir.path().join("data"));
    config.s3_address = "127.0.0.1:0".parse().expect("address");
    let driver = LocalDriver::open(&config).expect("driver opens");
    let endpoint = Endpoint::from_path(dir.path().join("cosi.sock")).expect("endpoint");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn({
        let (endpoint, driver) = (endpoint.clone(), driver.clone());
        async move {
            cosi_driver::serve(&endpoint, driver.clone(), driver, async {
                let _ = stopped.await;
            })
            .await
        }
    });
    let client = connect(&endpoint).await;

    let commits_before = driver.durable_commits();
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|c| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in (c..pairs).step_by(callers) {
                    provision_pair(&client, i).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("caller task");
    }
    let seconds = started.elapsed().as_secs_f64();
    let commits = driver.durable_commits() - commits_before;

    let state = driver.backend_state().expect("backend state");
    assert_eq!(state.buckets.len(), pairs, "every bucket recorded once");
    assert_eq!(state.accounts.len(), pairs, "every account recorded once");

    let rate = pairs as f64 / seconds;
    let per_pair = commits as f64 / pairs as f64;
    println!(
        "local driver provisioning: {rate:.0} pairs/s ({pairs} pairs, {callers} concurrent callers, 4 calls each); {commits} durable commits, {per_pair:.2} per pair (3 changes per pair)"
    );
    println!(
        "{{\"bench\":\"local_driver_provisioning\",\"pairs\":{pairs},\"callers\":{callers},\"pairs_per_s\":{rate:.1},\"durable_commits_per_pair\":{per_pair:.3}}}"
    );
    let _ = stop.send(());
    let _ = server.await;
}

/// Both phases of a bucket, then both phases of an access to it.
async fn provision_pair(client: &DriverClient, i: usize) {
    let mut p = client.provisioner.clone();
    let bucket_id = p
        .driver_generate_bucket_id(DriverGenerateBucketIdRequest {
            name: format!("bc-{i}"),
            protocols: vec![ObjectProtocol::S3 as i32],
            parameters: HashMap::new(),
        })
        .await
        .expect("DriverGenerateBucketId")
        .into_inner()
        .bucket_id;
    p.driver_create_bucket(DriverCreateBucketRequest {
        bucket_id: bucket_id.clone(),
        protocols: vec![ObjectProtocol::S3 as i32],
        parameters: HashMap::new(),
    })
    .await
    .expect("DriverCreateBucket");
    let buckets = vec![AccessedBucket {
        bucket_id,
        access_mode: Some(AccessModes {
            object_data: AccessMode::ReadWrite as i32,
            object_metadata: AccessMode::ReadWrite as i32,
            bucket_metadata: AccessMode::ReadOnly as i32,
        }),
    }];
    let account_id = p
        .driver_generate_bucket_access_id(DriverGenerateBucketAccessIdRequest {
            account_name: format!("ba-{i}"),
            buckets: buckets.clone(),
            protocol: ObjectProtocol::S3 as i32,
            authentication_type: AuthenticationType::Key as i32,
            service_account: None,
            parameters: HashMap::new(),
        })
        .await
        .expect("DriverGenerateBucketAccessId")
        .into_inner()
        .account_id;
    p.driver_grant_bucket_access(DriverGrantBucketAccessRequest {
        account_id,
        buckets,
        protocol: ObjectProtocol::S3 as i32,
        authentication_type: AuthenticationType::Key as i32,
        service_account: None,
        parameters: HashMap::new(),
    })
    .await
    .expect("DriverGrantBucketAccess");
}

async fn connect(endpoint: &Endpoint) -> DriverClient {
    for _ in 0..200 {
        if let Ok(c) = DriverClient::connect(endpoint).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("driver did not start listening on {endpoint}");
}
