//! `proto/cosi.proto` declares exactly the KEP's eight RPCs,
//! `proto/v1alpha1/cosi.proto` exactly the v1alpha1 wire API, and both
//! compile with protoc as well as protox.

use std::path::PathBuf;
use std::process::Command;

use cosi_driver::testing::PROVISIONER_RPCS;

fn proto_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto")
}

/// `file` (under `proto/`) compiled by protox.
fn compiled(file: &str) -> protox::Compiler {
    let mut compiler = protox::Compiler::new([proto_dir()]).unwrap();
    compiler.open_file(file).unwrap();
    compiler
}

/// The services of `package` declared by `file`, each with its RPCs.
fn services(file: &str, package: &str) -> Vec<(String, Vec<String>)> {
    compiled(file)
        .descriptor_pool()
        .services()
        .filter(|s| s.package_name() == package)
        .map(|s| {
            let methods: Vec<String> = s.methods().map(|m| m.name().to_owned()).collect();
            (s.name().to_owned(), methods)
        })
        .collect()
}

/// Identity with DriverGetInfo, and Provisioner with `provisioner_rpcs`.
fn identity_and_provisioner(provisioner_rpcs: &[&str]) -> Vec<(String, Vec<String>)> {
    vec![
        ("Identity".to_owned(), vec!["DriverGetInfo".to_owned()]),
        (
            "Provisioner".to_owned(),
            provisioner_rpcs.iter().map(|r| r.to_string()).collect(),
        ),
    ]
}

#[test]
fn the_proto_declares_exactly_the_kep_rpcs() {
    assert_eq!(
        services("cosi.proto", "cosi.v1alpha2"),
        identity_and_provisioner(&PROVISIONER_RPCS)
    );
}

/// The v1alpha1 messages and their fields: the wire. A line each: the
/// message, `=`, then its fields by number, name and type, separated by
/// commas. A type is `string`, a message or enum of `cosi.v1alpha1`, or,
/// starting with `.`, a map entry nested in the message itself.
const V1ALPHA1_WIRE: &str = "
    DriverCreateBucketRequest = 1 name string, 2 parameters .ParametersEntry
    DriverCreateBucketResponse = 1 bucket_id string, 2 bucket_info Protocol
    DriverGrantBucketAccessRequest = 1 bucket_id string, 2 name string, \
        3 authentication_type AuthenticationType, 4 parameters .ParametersEntry
    DriverGrantBucketAccessResponse = 1 account_id string, 2 credentials .CredentialsEntry
    DriverRevokeBucketAccessRequest = 1 bucket_id string, 2 account_id string, \
        3 revoke_access_context .RevokeAccessContextEntry
    DriverDeleteBucketRequest = 1 bucket_id string, 2 delete_context .DeleteContextEntry
    Protocol = 1 s3 S3, 2 azureBlob AzureBlob, 3 gcs GCS
    S3 = 1 region string, 2 signature_version S3SignatureVersion
    GCS = 1 private_key_name string, 2 project_id string, 3 service_account string
    DriverGetInfoResponse = 1 name string
";

#[test]
fn the_v1alpha1_proto_declares_exactly_the_v1alpha1_wire_api() {
    assert_eq!(
        services("v1alpha1/cosi.proto", "cosi.v1alpha1"),
        identity_and_provisioner(&[
            "DriverCreateBucket",
            "DriverDeleteBucket",
            "DriverGrantBucketAccess",
            "DriverRevokeBucketAccess",
        ])
    );
    let pool = compiled("v1alpha1/cosi.proto").descriptor_pool();
    for line in V1ALPHA1_WIRE.lines().filter(|l| !l.trim().is_empty()) {
        let (message, expected) = line.split_once(" = ").unwrap();
        let message = message.trim();
        let full_name = format!("cosi.v1alpha1.{message}");
        let m = pool
            .get_message_by_name(&full_name)
            .unwrap_or_else(|| panic!("{message} is missing"));
        let fields: Vec<(u32, String, String)> = m
            .fields()
            .map(|f| (f.number(), f.name().to_owned(), format!("{:?}", f.kind())))
            .collect();
        let expected: Vec<(u32, String, String)> = expected
            .split(", ")
            .map(|field| {
                let [n, name, kind] = field.split_whitespace().collect::<Vec<_>>()[..] else {
                    panic!("not `number name type`: {field}");
                };
                let kind = match kind {
                    "string" => "string".to_owned(),
                    entry if entry.starts_with('.') => format!("{full_name}{entry}"),
                    other => format!("cosi.v1alpha1.{other}"),
                };
                (n.parse().unwrap(), name.to_owned(), kind)
            })
            .collect();
        assert_eq!(fields, expected, "{message}");
    }
}

fn protoc(file: &str, python_module: &str) {
    // protoc as shipped by PyPI's grpcio-tools (installed by .ci/run).
    let include = Command::new("python3")
        .args([
            "-c",
            "import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), '_proto'))",
        ])
        .output()
        .expect("python3 runs");
    assert!(
        include.status.success(),
        "grpcio-tools is missing: pip install -r requirements-test.txt"
    );
    let include = String::from_utf8(include.stdout).unwrap();
    let out = tempfile::tempdir().unwrap();
    let status = Command::new("python3")
        .args(["-m", "grpc_tools.protoc"])
        .arg(format!("-I{}", proto_dir().display()))
        .arg(format!("-I{}", include.trim()))
        .arg(format!(
            "--descriptor_set_out={}",
            out.path().join("cosi.pb").display()
        ))
        .arg(format!("--python_out={}", out.path().display()))
        .arg(file)
        .status()
        .expect("protoc runs");
    assert!(status.success(), "protoc rejected proto/{file}");
    assert!(out.path().join(python_module).exists());
}

#[test]
fn protoc_compiles_the_proto() {
    protoc("cosi.proto", "cosi_pb2.py");
}

#[test]
fn protoc_compiles_the_v1alpha1_proto() {
    protoc("v1alpha1/cosi.proto", "v1alpha1/cosi_pb2.py");
}
