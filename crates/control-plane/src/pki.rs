//! The control plane's keys and certificates: a CA, kube-apiserver's
//! serving certificate for 127.0.0.1 and `localhost` signed by it, and the
//! key that signs ServiceAccount tokens. All ECDSA P-256, written as PEM.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::Error;

/// The files of a [`Pki`], in the directory it was written to.
#[derive(Clone, Debug)]
pub struct Pki {
    /// The CA certificate clients trust.
    pub ca_cert: PathBuf,
    /// The CA certificate, DER (for kube clients).
    pub ca_der: Vec<u8>,
    /// kube-apiserver's serving certificate.
    pub serving_cert: PathBuf,
    /// Its key.
    pub serving_key: PathBuf,
    /// The ServiceAccount token signing key.
    pub service_account_key: PathBuf,
    /// Its public half, which verifies the tokens.
    pub service_account_public_key: PathBuf,
}

impl Pki {
    /// Generates every key and certificate into `dir` (mode 0600 for keys).
    pub fn generate(dir: &Path) -> Result<Pki, Error> {
        let pki = |e: rcgen::Error| Error::Pki(e.to_string());
        std::fs::create_dir_all(dir)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(pki)?;
        ca.distinguished_name
            .push(DnType::CommonName, "control-plane test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca =
            CertifiedIssuer::self_signed(ca, KeyPair::generate().map_err(pki)?).map_err(pki)?;

        let mut serving = CertificateParams::new(vec![
            "127.0.0.1".to_owned(),
            "localhost".to_owned(),
            "kubernetes".to_owned(),
            "kubernetes.default".to_owned(),
            "kubernetes.default.svc".to_owned(),
        ])
        .map_err(pki)?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let serving_key = KeyPair::generate().map_err(pki)?;
        let serving_cert = serving.signed_by(&serving_key, &ca).map_err(pki)?;
        let service_account_key = KeyPair::generate().map_err(pki)?;

        let files = Pki {
            ca_cert: dir.join("ca.crt"),
            ca_der: ca.der().to_vec(),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            service_account_key: dir.join("service-account.key"),
            service_account_public_key: dir.join("service-account.pub"),
        };
        std::fs::write(&files.ca_cert, ca.pem())?;
        std::fs::write(&files.serving_cert, serving_cert.pem())?;
        write_secret(&files.serving_key, &serving_key.serialize_pem())?;
        write_secret(
            &files.service_account_key,
            &service_account_key.serialize_pem(),
        )?;
        std::fs::write(
            &files.service_account_public_key,
            service_account_key.public_key_pem(),
        )?;
        Ok(files)
    }
}

/// Writes `text` to `path`, readable by its owner only.
pub(crate) fn write_secret(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())
}
