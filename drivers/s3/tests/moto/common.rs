//! Test harness: a real moto server (S3 + IAM on one port) with
//! authentication enforced, an admin user bootstrapped in its first calls,
//! the driver served over a real UNIX socket, and real S3/IAM clients.

#![allow(dead_code)]

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use aws_credential_types::Credentials;
use aws_sdk_s3::config::{BehaviorVersion, Region};
use cosi_driver::proto::*;
use cosi_driver_s3::accounts::MANAGED_TAG;
use cosi_driver_s3::{AdminCredentials, Config, S3Driver};
use cosi_driver_s3_common::testing;
pub use cosi_driver_s3_common::testing::{
    access, assert_denied, delete, get, list, map, put, start_upload,
};

/// Calls moto serves without authentication: exactly the three that
/// bootstrap the admin (CreateUser, PutUserPolicy, CreateAccessKey).
const NO_AUTH_CALLS: &str = "3";
const ADMIN_USER: &str = "cosi-admin";

/// Runs a command and kills it when the test process's end closes its
/// stdin, so a server shared by a whole test binary never outlives it.
const SUPERVISOR: &str = r#"
import subprocess, sys, threading
p = subprocess.Popen(sys.argv[1:])
def watch():
    try:
        sys.stdin.read()
    finally:
        p.kill()
threading.Thread(target=watch, daemon=True).start()
sys.exit(p.wait())
"#;

/// Access key and secret.
#[derive(Clone)]
pub struct Keys {
    pub id: String,
    pub secret: String,
}

impl Keys {
    pub fn credentials(&self) -> Credentials {
        Credentials::new(&self.id, &self.secret, None, None, "test")
    }
}

/// A moto server; stopped when dropped (or when the test process ends).
pub struct Moto {
    child: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    _dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT` (or `https://` with TLS).
    pub endpoint: String,
    /// The bootstrapped admin's keys (AdministratorAccess-like inline policy).
    pub admin: Keys,
    /// The CA that signed the server's certificate, with TLS.
    pub ca_pem: Option<String>,
}

impl Drop for Moto {
    fn drop(&mut self) {
        drop(self.stdin.take());
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

impl Moto {
    /// The server shared by every test of this binary.
    pub fn shared() -> &'static Moto {
        static SHARED: OnceLock<Moto> = OnceLock::new();
        SHARED.get_or_init(|| Moto::start(false))
    }

    /// Starts a new server (with a self-signed CA and TLS when `tls`) and
    /// bootstraps the admin. Blocking; safe to call from async tests.
    pub fn start(tls: bool) -> Moto {
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let mut moto = Moto::spawn(tls);
            moto.admin = rt.block_on(bootstrap_admin(&moto.endpoint, moto.ca_pem.as_deref()));
            moto
        })
        .join()
        .expect("moto bootstrap thread")
    }

    fn spawn(tls: bool) -> Moto {
        let dir = tempfile::tempdir().expect("temp dir");
        let tls_files = tls.then(|| make_tls_files(dir.path()));
        let log = dir.path().join("moto.log");
        for _attempt in 0..5 {
            let port = free_port();
            let mut cmd = Command::new("python3");
            cmd.arg("-c").arg(SUPERVISOR).args([
                "moto_server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ]);
            if let Some((cert, key, _)) = &tls_files {
                cmd.arg("-c").arg(cert).arg("-k").arg(key);
            }
            let logfile = std::fs::File::create(&log).expect("moto log");
            let mut child = cmd
                .env("INITIAL_NO_AUTH_ACTION_COUNT", NO_AUTH_CALLS)
                .stdin(Stdio::piped())
                .stdout(logfile.try_clone().expect("log"))
                .stderr(logfile)
                .spawn()
                .expect("start moto_server (pip install 'moto[server]==5.2.5')");
            let stdin = child.stdin.take();
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let mut ready = false;
            for _ in 0..300 {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    ready = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if ready && matches!(child.try_wait(), Ok(None)) {
                let scheme = if tls { "https" } else { "http" };
                return Moto {
                    child,
                    stdin,
                    log,
                    _dir: dir,
                    endpoint: format!("{scheme}://127.0.0.1:{port}"),
                    admin: Keys {
                        id: String::new(),
                        secret: String::new(),
                    },
                    ca_pem: tls_files.map(|(_, _, ca)| ca),
                };
            }
            drop(stdin);
            let _ = child.kill();
            let _ = child.wait();
        }
        let mut text = String::new();
        let _ = std::fs::File::open(&log).and_then(|mut f| f.read_to_string(&mut text));
        panic!("moto_server did not start after 5 attempts; last log:\n{text}");
    }

    /// An S3 client for `keys` (path-style, as workloads of this driver use).
    pub fn s3(&self, keys: &Keys) -> aws_sdk_s3::Client {
        s3_client(&self.endpoint, keys, self.ca_pem.as_deref())
    }

    /// An IAM client for the admin.
    pub fn iam(&self) -> aws_sdk_iam::Client {
        iam_client(&self.endpoint, &self.admin, self.ca_pem.as_deref())
    }

    /// A driver configuration for this server with a unique IAM user path.
    pub fn config(&self) -> Config {
        Config {
            s3_endpoint: Some(self.endpoint.clone()),
            iam_endpoint: Some(self.endpoint.clone()),
            ca_pem: self.ca_pem.clone(),
            user_path: format!(
                "/cosi-test-{}/",
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            ),
            ..Config::default()
        }
    }
}

fn make_tls_files(dir: &Path) -> (PathBuf, PathBuf, String) {
    // moto depends on `cryptography`, so it is always there next to moto.
    let script = r#"
import datetime, sys
from cryptography import x509
from cryptography.x509.oid import NameOID
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
import ipaddress
out = sys.argv[1]
now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
later = now + datetime.timedelta(days=30)
ca_key = ec.generate_private_key(ec.SECP256R1())
ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cosi-rs test CA")])
ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
      .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
      .not_valid_before(now).not_valid_after(later)
      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
      .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
          data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
          encipher_only=False, decipher_only=False), critical=True)
      .sign(ca_key, hashes.SHA256()))
key = ec.generate_private_key(ec.SECP256R1())
cert = (x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(later)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256()))
open(out + "/ca.pem", "wb").write(ca.public_bytes(serialization.Encoding.PEM))
open(out + "/cert.pem", "wb").write(cert.public_bytes(serialization.Encoding.PEM))
open(out + "/key.pem", "wb").write(key.private_bytes(serialization.Encoding.PEM,
    serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
"#;
    let status = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir)
        .status()
        .expect("run python3");
    assert!(status.success(), "generating test certificates failed");
    let ca = std::fs::read_to_string(dir.join("ca.pem")).expect("ca.pem");
    (dir.join("cert.pem"), dir.join("key.pem"), ca)
}

/// An S3 client (path-style) for `keys`.
pub fn s3_client(endpoint: &str, keys: &Keys, ca_pem: Option<&str>) -> aws_sdk_s3::Client {
    let mut conf = aws_sdk_s3::config::Builder::new()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .credentials_provider(keys.credentials());
    if let Some(http) = cosi_driver_s3::tls::https_client(ca_pem).expect("test CA") {
        conf = conf.http_client(http);
    }
    aws_sdk_s3::Client::from_conf(conf.build())
}

/// An IAM client for `keys`.
pub fn iam_client(endpoint: &str, keys: &Keys, ca_pem: Option<&str>) -> aws_sdk_iam::Client {
    let mut conf = aws_sdk_iam::config::Builder::new()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(keys.credentials());
    if let Some(http) = cosi_driver_s3::tls::https_client(ca_pem).expect("test CA") {
        conf = conf.http_client(http);
    }
    aws_sdk_iam::Client::from_conf(conf.build())
}

async fn bootstrap_admin(endpoint: &str, ca_pem: Option<&str>) -> Keys {
    let anyone = Keys {
        id: "AKIAIOSFODNN7BOOTSTR".into(),
        secret: "bootstrap".into(),
    };
    let iam = iam_client(endpoint, &anyone, ca_pem);
    iam.create_user()
        .user_name(ADMIN_USER)
        .send()
        .await
        .expect("bootstrap CreateUser");
    iam.put_user_policy()
        .user_name(ADMIN_USER)
        .policy_name("admin")
        .policy_document(r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#)
        .send()
        .await
        .expect("bootstrap PutUserPolicy");
    new_access_key(&iam, ADMIN_USER).await
}

/// Creates an access key for IAM user `user`; its keys.
pub async fn new_access_key(iam: &aws_sdk_iam::Client, user: &str) -> Keys {
    let request = iam.create_access_key().user_name(user);
    let out = request.send().await.expect("CreateAccessKey");
    let key = out.access_key().expect("access key");
    Keys {
        id: key.access_key_id().to_owned(),
        secret: key.secret_access_key().to_owned(),
    }
}

/// The driver served on a temporary UNIX socket, with a connected client
/// and one helper per driver call.
pub struct Served(testing::Served<S3Driver>);

impl Deref for Served {
    type Target = testing::Served<S3Driver>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Served {
    /// Serves a driver for `cfg` with the given admin keys.
    pub async fn start(cfg: Config, admin: &Keys) -> Served {
        let driver = S3Driver::new(cfg, AdminCredentials::Static(admin.credentials()))
            .await
            .expect("driver");
        Served(testing::Served::serve(driver).await)
    }

    /// Serves a driver for `moto` with its admin.
    pub async fn on(moto: &Moto) -> Served {
        Served::start(moto.config(), &moto.admin).await
    }

    /// Serves a driver for the shared Moto server, returned with it.
    pub async fn on_shared() -> (&'static Moto, Served) {
        let moto = Moto::shared();
        (moto, Served::on(moto).await)
    }

    /// Serves a driver for the shared Moto server, returned with it and
    /// the IAM path of the users this driver makes (its own).
    pub async fn on_shared_path() -> (&'static Moto, Served, String) {
        let moto = Moto::shared();
        let cfg = moto.config();
        let path = cfg.user_path.clone();
        (moto, Served::start(cfg, &moto.admin).await, path)
    }

    /// Stops the server and waits for it.
    pub async fn stop(self) {
        self.0.stop().await
    }

    /// Generates an account ID for a fresh `ba-<uuid>` name and grants it,
    /// returning the account ID and the issued keys.
    pub async fn new_access(&self, buckets: &[AccessedBucket]) -> (String, Keys) {
        let (id, resp) = self.0.new_grant(buckets).await;
        (id, keys_of(&resp))
    }

    /// Grants a fresh account `mode` access to `bucket`, returning the
    /// account ID and an S3 client of `moto` for the issued keys.
    pub async fn new_client(
        &self,
        moto: &Moto,
        bucket: &str,
        mode: AccessMode,
    ) -> (String, aws_sdk_s3::Client) {
        let (id, keys) = self.new_access(&[access(bucket, mode)]).await;
        (id, moto.s3(&keys))
    }
}

/// The S3 keys of a grant response.
pub fn keys_of(resp: &DriverGrantBucketAccessResponse) -> Keys {
    let (id, secret) = testing::s3_keys(resp);
    Keys { id, secret }
}

/// Asserts that user `account` carries the tag saying driver `driver` manages it.
pub async fn assert_managed_by(iam: &aws_sdk_iam::Client, account: &str, driver: &str) {
    let tags = iam
        .list_user_tags()
        .user_name(account)
        .send()
        .await
        .unwrap();
    assert!(
        tags.tags()
            .iter()
            .any(|t| t.key() == MANAGED_TAG && t.value() == driver),
        "{account} lacks the {MANAGED_TAG} tag of {driver}"
    );
}

/// The users under `path`, as the admin sees them.
pub async fn users_under(iam: &aws_sdk_iam::Client, path: &str) -> Vec<String> {
    let request = iam.list_users().path_prefix(path);
    let out = request.send().await.expect("ListUsers");
    out.users()
        .iter()
        .map(|u| u.user_name().to_owned())
        .collect()
}

/// The access key IDs of `user`.
pub async fn keys_of_user(iam: &aws_sdk_iam::Client, user: &str) -> Vec<String> {
    let request = iam.list_access_keys().user_name(user);
    let out = request.send().await.expect("ListAccessKeys");
    out.access_key_metadata()
        .iter()
        .filter_map(|k| k.access_key_id().map(str::to_owned))
        .collect()
}
