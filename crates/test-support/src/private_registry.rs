//! A private registry as companies run one: pypiserver that asks for a
//! password (an htpasswd file, as its `-P`/`-a` options read it), reached
//! over TLS whose certificate comes from a CA of the test's own. The TLS
//! end is a small front made here with rustls that passes each connection
//! on to the registry on 127.0.0.1.

use crate::registries::{
    build_wheel, free_port, npm_publish, npm_user_token, start_pypiserver, start_verdaccio, tool, Registry,
};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::process::Command;
use std::sync::Arc;

/// A CA made for one test.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    der: rustls::pki_types::CertificateDer<'static>,
    /// Its certificate (PEM), for a trust store.
    pub pem: String,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            pem: cert.pem(),
            der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A TLS server configuration for `host`, issued by this CA.
    pub fn server_config(&self, host: &str) -> Arc<rustls::ServerConfig> {
        let params = CertificateParams::new(vec![host.to_owned()]).unwrap();
        let key = KeyPair::generate().unwrap();
        let leaf = params.signed_by(&key, &self.issuer).unwrap();
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![leaf.der().clone(), self.der.clone()], private)
                .unwrap();
        Arc::new(config)
    }
}

/// TLS on 127.0.0.1 in front of a plain-HTTP server on `backend`; ends
/// when dropped.
pub struct TlsFront {
    pub port: u16,
    _accepting: tokio_util::task::AbortOnDropHandle<()>,
}

impl TlsFront {
    /// Shows a certificate for `localhost` issued by `ca`.
    pub async fn start(ca: &TestCa, backend: u16) -> TlsFront {
        let acceptor = tokio_rustls::TlsAcceptor::from(ca.server_config("localhost"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepting = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let _ = socket.set_nodelay(true);
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(socket).await else {
                        return;
                    };
                    let Ok(mut plain) = tokio::net::TcpStream::connect(("127.0.0.1", backend)).await else {
                        return;
                    };
                    let _ = plain.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront {
            port,
            _accepting: tokio_util::task::AbortOnDropHandle::new(accepting),
        }
    }
}

/// pypiserver on 127.0.0.1 holding one package, that lists and serves
/// only to `user` with `password` (401 with a challenge otherwise).
pub fn private_pypi_with(name: &str, version: &str, source: &str, user: &str, password: &str) -> Registry {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    std::fs::create_dir_all(&packages).unwrap();
    build_wheel(&packages, name, version, source);
    let python = tool("pypiserver-venv/bin/python");
    let htpasswd = dir.path().join("htpasswd");
    let made = Command::new(&python)
        .args([
            "-c",
            "import sys; from passlib.apache import HtpasswdFile as H; f = H(sys.argv[1], new=True); f.set_password(sys.argv[2], sys.argv[3]); f.save()",
        ])
        .arg(&htpasswd)
        .args([user, password])
        .status()
        .unwrap();
    assert!(
        made.success(),
        "writing the htpasswd file failed (scripts/dev-env.sh installs passlib beside pypiserver)"
    );
    let auth = [
        std::ffi::OsStr::new("-a"),
        std::ffi::OsStr::new("download,list,update"),
        std::ffi::OsStr::new("-P"),
        htpasswd.as_os_str(),
    ];
    start_pypiserver(dir, &auth, "/health")
}

/// verdaccio on 127.0.0.1 that serves only to its users (an htpasswd
/// file), holding one package, `name` `version` whose `index.js` is
/// `source`, behind a TLS front with a certificate from `ca`. Returns the
/// registry, the front (its public URL is `https://localhost:PORT/`) and
/// a token of the registry's user.
pub async fn private_npm_with(
    ca: &TestCa,
    name: &str,
    version: &str,
    source: &str,
) -> (Registry, TlsFront, String) {
    let port = free_port();
    let front = TlsFront::start(ca, port).await;
    // Tarball addresses in its answers name the TLS front.
    let public_url = format!("https://localhost:{}/", front.port);
    let registry = start_verdaccio(port, "$authenticated", Some(public_url));
    let token = npm_user_token(&registry, "reader", "reader-password-4471");
    npm_publish(&registry, &token, name, version, source);
    (registry, front, token)
}

/// Adds a package to a registry made by [`private_pypi_with`] (pypiserver
/// reads its folder on each listing).
pub fn add_wheel(registry: &Registry, name: &str, version: &str, source: &str) {
    build_wheel(&registry.dir.path().join("packages"), name, version, source);
}
