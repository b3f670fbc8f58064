//! One sandbox's certificate authority: made when the sandbox is, trusted
//! by that sandbox alone (its certificate, never its key, is written into
//! the sandbox's CA bundle), and used only to issue the certificates the
//! relay shows for the hosts it adds a credential for. The key stays in
//! the daemon's memory and goes with the sandbox.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Why a certificate could not be made (a library error, never a secret).
#[derive(Debug, thiserror::Error)]
pub enum AuthorityError {
    #[error("cannot make a certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("cannot use the certificate for TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// A sandbox's CA and the server configurations issued by it, per host.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    certificate: CertificateDer<'static>,
    pem: String,
    issued: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// A new CA with a fresh key.
    pub fn new() -> Result<Authority, AuthorityError> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "forgehand sandbox egress CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let certificate = params.self_signed(&key)?;
        Ok(Authority {
            pem: certificate.pem(),
            certificate: certificate.der().clone(),
            issuer: Issuer::new(params, key),
            issued: Mutex::default(),
        })
    }

    /// The CA's certificate (PEM), for the sandbox's trust store.
    pub fn certificate_pem(&self) -> &str {
        &self.pem
    }

    /// The TLS server configuration the relay shows the sandbox for
    /// `host`: a certificate for that name issued by this CA, HTTP/1.1
    /// only (the relay reads HTTP/1.1).
    pub fn server_config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, AuthorityError> {
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(config) = issued.get(host) {
            return Ok(config.clone());
        }
        let mut params = CertificateParams::new(vec![host.to_owned()])?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let leaf = params.signed_by(&key, &self.issuer)?;
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()?
                .with_no_client_auth()
                .with_single_cert(vec![leaf.der().clone(), self.certificate.clone()], private)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        issued.insert(host.to_owned(), config.clone());
        Ok(config)
    }
}
