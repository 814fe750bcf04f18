//! `proto/cosi.proto` declares exactly the KEP's eight RPCs,
//! `proto/v1alpha1/cosi.proto` exactly the v1alpha1 wire API, and both
//! compile with protoc as well as protox.

use std::path::PathBuf;
use std::process::Command;

use cosi_driver::testing::PROVISIONER_RPCS;

fn proto_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto")
}

#[test]
fn the_proto_declares_exactly_the_kep_rpcs() {
    let mut compiler = protox::Compiler::new([proto_dir()]).unwrap();
    compiler.open_file("cosi.proto").unwrap();
    let pool = compiler.descriptor_pool();
    let services: Vec<_> = pool
        .services()
        .filter(|s| s.package_name() == "cosi.v1alpha2")
        .map(|s| {
            let methods: Vec<String> = s.methods().map(|m| m.name().to_owned()).collect();
            (s.name().to_owned(), methods)
        })
        .collect();
    assert_eq!(
        services,
        vec![
            ("Identity".to_owned(), vec!["DriverGetInfo".to_owned()]),
            (
                "Provisioner".to_owned(),
                PROVISIONER_RPCS.map(String::from).to_vec()
            ),
        ]
    );
}

fn services(file: &str, package: &str) -> Vec<(String, Vec<String>)> {
    let mut compiler = protox::Compiler::new([proto_dir()]).unwrap();
    compiler.open_file(file).unwrap();
    compiler
        .descriptor_pool()
        .services()
        .filter(|s| s.package_name() == package)
        .map(|s| {
            let methods: Vec<String> = s.methods().map(|m| m.name().to_owned()).collect();
            (s.name().to_owned(), methods)
        })
        .collect()
}

#[test]
fn the_v1alpha1_proto_declares_exactly_the_v1alpha1_wire_api() {
    assert_eq!(
        services("v1alpha1/cosi.proto", "cosi.v1alpha1"),
        vec![
            ("Identity".to_owned(), vec!["DriverGetInfo".to_owned()]),
            (
                "Provisioner".to_owned(),
                [
                    "DriverCreateBucket",
                    "DriverDeleteBucket",
                    "DriverGrantBucketAccess",
                    "DriverRevokeBucketAccess",
                ]
                .map(String::from)
                .to_vec()
            ),
        ]
    );
    // Every message's fields, by number, name and type: the wire.
    let mut compiler = protox::Compiler::new([proto_dir()]).unwrap();
    compiler.open_file("v1alpha1/cosi.proto").unwrap();
    let pool = compiler.descriptor_pool();
    let fields = |message: &str| -> Vec<(u32, String, String)> {
        let m = pool
            .get_message_by_name(&format!("cosi.v1alpha1.{message}"))
            .unwrap_or_else(|| panic!("{message} is missing"));
        m.fields()
            .map(|f| (f.number(), f.name().to_owned(), format!("{:?}", f.kind())))
            .collect()
    };
    let f = |n: u32, name: &str, kind: &str| (n, name.to_owned(), kind.to_owned());
    assert_eq!(
        fields("DriverCreateBucketRequest"),
        [
            f(1, "name", "string"),
            f(
                2,
                "parameters",
                "cosi.v1alpha1.DriverCreateBucketRequest.ParametersEntry"
            )
        ]
    );
    assert_eq!(
        fields("DriverCreateBucketResponse"),
        [
            f(1, "bucket_id", "string"),
            f(2, "bucket_info", "cosi.v1alpha1.Protocol")
        ]
    );
    assert_eq!(
        fields("DriverGrantBucketAccessRequest"),
        [
            f(1, "bucket_id", "string"),
            f(2, "name", "string"),
            f(3, "authentication_type", "cosi.v1alpha1.AuthenticationType"),
            f(
                4,
                "parameters",
                "cosi.v1alpha1.DriverGrantBucketAccessRequest.ParametersEntry"
            ),
        ]
    );
    assert_eq!(
        fields("DriverGrantBucketAccessResponse"),
        [
            f(1, "account_id", "string"),
            f(
                2,
                "credentials",
                "cosi.v1alpha1.DriverGrantBucketAccessResponse.CredentialsEntry"
            ),
        ]
    );
    assert_eq!(
        fields("DriverRevokeBucketAccessRequest"),
        [
            f(1, "bucket_id", "string"),
            f(2, "account_id", "string"),
            f(
                3,
                "revoke_access_context",
                "cosi.v1alpha1.DriverRevokeBucketAccessRequest.RevokeAccessContextEntry"
            ),
        ]
    );
    assert_eq!(
        fields("DriverDeleteBucketRequest"),
        [
            f(1, "bucket_id", "string"),
            f(
                2,
                "delete_context",
                "cosi.v1alpha1.DriverDeleteBucketRequest.DeleteContextEntry"
            )
        ]
    );
    assert_eq!(
        fields("Protocol"),
        [
            f(1, "s3", "cosi.v1alpha1.S3"),
            f(2, "azureBlob", "cosi.v1alpha1.AzureBlob"),
            f(3, "gcs", "cosi.v1alpha1.GCS")
        ]
    );
    assert_eq!(
        fields("S3"),
        [
            f(1, "region", "string"),
            f(2, "signature_version", "cosi.v1alpha1.S3SignatureVersion")
        ]
    );
    assert_eq!(
        fields("GCS"),
        [
            f(1, "private_key_name", "string"),
            f(2, "project_id", "string"),
            f(3, "service_account", "string")
        ]
    );
    assert_eq!(fields("DriverGetInfoResponse"), [f(1, "name", "string")]);
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
