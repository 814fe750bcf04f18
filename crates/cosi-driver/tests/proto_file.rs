//! `proto/cosi.proto` declares exactly the KEP's eight RPCs and compiles
//! with protoc as well as protox.

use std::path::PathBuf;
use std::process::Command;

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
                [
                    "DriverGenerateBucketId",
                    "DriverCreateBucket",
                    "DriverGetBucket",
                    "DriverDeleteBucket",
                    "DriverGenerateBucketAccessId",
                    "DriverGrantBucketAccess",
                    "DriverRevokeBucketAccess",
                ]
                .map(String::from)
                .to_vec()
            ),
        ]
    );
}

#[test]
fn protoc_compiles_the_proto() {
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
        .arg("cosi.proto")
        .status()
        .expect("protoc runs");
    assert!(status.success(), "protoc rejected proto/cosi.proto");
    assert!(out.path().join("cosi_pb2.py").exists());
}
