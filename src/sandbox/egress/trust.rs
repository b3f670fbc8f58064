//! Where a sandbox's tools find its CA: a bundle of the image's own roots
//! and the sandbox's CA (so other hosts still verify through the plain
//! tunnel), in the sandbox's `/tmp`, named by the variables stock clients
//! read. Only the CA's certificate is written; its key never leaves the
//! daemon.

/// The folder in the sandbox that holds the bundle and the CA.
pub const TRUST_DIR: &str = "/tmp/.forgehand-egress";
/// The image's roots and the sandbox's CA, concatenated.
pub const BUNDLE: &str = "/tmp/.forgehand-egress/ca-bundle.pem";
/// The sandbox's CA alone (for variables that add to the usual roots).
pub const CA: &str = "/tmp/.forgehand-egress/egress-ca.pem";
/// The JDK's default trust store with the sandbox's CA added (Java reads
/// no PEM bundle; Maven and Gradle run on Java).
pub const JAVA_STORE: &str = "/tmp/.forgehand-egress/cacerts";
/// The JDKs' stock password of `cacerts`: the store holds certificates
/// only, so the password guards nothing secret.
const JAVA_STORE_PASSWORD: &str = "changeit";

/// Where images keep their system bundle (Debian and Ubuntu, Fedora and
/// RHEL, Alpine and others).
const SYSTEM_BUNDLES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// `proxy_env` with the variables that point stock clients at the bundle:
/// OpenSSL's (curl, Python's ssl, Ruby), requests and pip, Node (npm),
/// cargo, git; and every JVM (java, Maven, Gradle) at [`JAVA_STORE`],
/// added to the proxy's `JAVA_TOOL_OPTIONS`.
///
/// The environment is fixed when the sandbox is created, before anything
/// can look for Java in the image, so the store is named in every sandbox
/// that trusts the relay. That is harmless where it is not written (no
/// `keytool`): without Java nothing reads it, and a JDK (11 and later)
/// whose named trust store is missing uses its own.
pub fn with_trust(proxy_env: Vec<String>) -> Vec<String> {
    let java = format!(
        " -Djavax.net.ssl.trustStore={JAVA_STORE} -Djavax.net.ssl.trustStorePassword={JAVA_STORE_PASSWORD}"
    );
    let mut env: Vec<String> = proxy_env
        .into_iter()
        .map(|pair| {
            if pair.starts_with("JAVA_TOOL_OPTIONS=") {
                pair + &java
            } else {
                pair
            }
        })
        .collect();
    env.extend(
        [
            "SSL_CERT_FILE",
            "REQUESTS_CA_BUNDLE",
            "PIP_CERT",
            "CURL_CA_BUNDLE",
            "CARGO_HTTP_CAINFO",
            "GIT_SSL_CAINFO",
        ]
        .iter()
        .map(|var| format!("{var}={BUNDLE}")),
    );
    env.push(format!("NODE_EXTRA_CA_CERTS={CA}"));
    env
}

/// The shell command that, where `keytool` is on the PATH, copies the
/// JDK's default trust store to [`JAVA_STORE`] and adds the CA at [`CA`].
/// A JDK whose store is not found fails the command: a store with the CA
/// alone would make every other host fail to verify.
fn java_store_command() -> String {
    format!(
        "if command -v keytool >/dev/null 2>&1; then \
jdk_store=''; \
for f in \"${{JAVA_HOME:-/nonexistent}}/lib/security/cacerts\" \"$(dirname \"$(readlink -f \"$(command -v keytool)\")\")/../lib/security/cacerts\" /etc/ssl/certs/java/cacerts; do \
if [ -s \"$f\" ]; then jdk_store=\"$f\"; break; fi; done; \
if [ -z \"$jdk_store\" ]; then echo 'keytool is on the PATH but no JDK trust store (lib/security/cacerts) was found' >&2; exit 1; fi; \
cp \"$jdk_store\" {JAVA_STORE}; chmod 644 {JAVA_STORE}; \
keytool -importcert -noprompt -alias forgehand-egress -file {CA} -keystore {JAVA_STORE} -storepass {JAVA_STORE_PASSWORD} >/dev/null; \
chmod 444 {JAVA_STORE}; fi"
    )
}

/// The shell command that writes the bundle: the image's roots (the first
/// system bundle found) followed by `ca_pem`, read-only afterwards.
pub fn install_command(ca_pem: &str) -> String {
    let systems = SYSTEM_BUNDLES.join(" ");
    // A PEM holds base64, dashes and spaces only: safe in single quotes.
    let pem = ca_pem.trim_end();
    format!(
        "set -e; umask 022; mkdir -p {TRUST_DIR}; printf '%s\\n' '{pem}' > {CA}; : > {BUNDLE}; for f in {systems}; do if [ -s \"$f\" ]; then cat \"$f\" >> {BUNDLE}; echo >> {BUNDLE}; break; fi; done; cat {CA} >> {BUNDLE}; chmod 444 {CA} {BUNDLE}; {}",
        java_store_command()
    )
}

/// Writes the bundle into `sandbox` when its relay adds credentials.
pub async fn install(sandbox: &dyn crate::sandbox::Sandbox) -> Result<(), crate::sandbox::SandboxError> {
    let Some(egress) = sandbox.egress() else {
        return Ok(());
    };
    let Some(pem) = egress.ca_pem() else {
        return Ok(());
    };
    let output = sandbox
        .exec(&install_command(pem), Some(std::time::Duration::from_secs(60)))
        .await?;
    if output.exit_code != Some(0) {
        return Err(crate::sandbox::SandboxError::InSandbox {
            action: format!("write the egress relay's CA bundle to {BUNDLE}"),
            detail: format!("exit code {:?}: {}", output.exit_code, output.stderr.trim()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_is_named_for_every_client_and_holds_no_quote() {
        let env = with_trust(Vec::new());
        assert!(env.contains(&format!("PIP_CERT={BUNDLE}")));
        assert!(env.contains(&format!("NODE_EXTRA_CA_CERTS={CA}")));
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let command = install_command(pem);
        assert!(command.contains("'-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----'"));
        assert!(command.contains("/etc/ssl/certs/ca-certificates.crt"));
    }

    #[test]
    fn java_is_pointed_at_a_copy_of_its_own_store_with_the_ca_added() {
        let env = with_trust(vec!["JAVA_TOOL_OPTIONS=-Dhttps.proxyPort=1".to_owned()]);
        assert!(env.contains(&format!(
            "JAVA_TOOL_OPTIONS=-Dhttps.proxyPort=1 -Djavax.net.ssl.trustStore={JAVA_STORE} -Djavax.net.ssl.trustStorePassword=changeit"
        )));
        let command = install_command("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
        let java = command.find("command -v keytool").unwrap();
        // The CA is written before the store imports it.
        assert!(command.find("> /tmp/.forgehand-egress/egress-ca.pem").unwrap() < java);
        assert!(command.contains("/etc/ssl/certs/java/cacerts"));
        assert!(command.contains(
            "keytool -importcert -noprompt -alias forgehand-egress -file /tmp/.forgehand-egress/egress-ca.pem -keystore /tmp/.forgehand-egress/cacerts -storepass changeit"
        ));
    }
}
