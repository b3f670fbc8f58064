//! SSH commit signatures as git's `gpg.format=ssh` writes them (the
//! SSHSIG format, namespace `git`, SHA-512), which GitHub and GitLab
//! verify against a user's registered signing keys. The private key comes
//! from the daemon's environment only; it never prints.

use ssh_key::{HashAlg, LineEnding, PrivateKey};

/// The namespace git signs commits in.
const NAMESPACE: &str = "git";

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("the key is not an OpenSSH private key ({0}); give the whole file `ssh-keygen -t ed25519` writes, from -----BEGIN OPENSSH PRIVATE KEY----- to its END line")]
    NotAKey(String),
    #[error("the key is protected by a passphrase; forgehand cannot ask for it: give a key without one (ssh-keygen -p -N \"\" -f FILE removes it from a copy)")]
    Encrypted,
    #[error("the key is a {0} key; forgehand signs with Ed25519 keys (make one with ssh-keygen -t ed25519)")]
    Algorithm(String),
    #[error("cannot sign the commit: {0}")]
    Sign(String),
}

/// A signing key, checked when the configuration is read.
pub struct CommitSigner {
    key: PrivateKey,
}

impl CommitSigner {
    /// Reads an unencrypted Ed25519 key in OpenSSH format.
    pub fn from_openssh(text: &str) -> Result<CommitSigner, SigningError> {
        // Keys pasted into an environment often lose their last newline or
        // carry `\r`: both are harmless.
        let text = format!("{}\n", text.replace('\r', "").trim());
        let key = PrivateKey::from_openssh(text).map_err(|e| SigningError::NotAKey(e.to_string()))?;
        if key.is_encrypted() {
            return Err(SigningError::Encrypted);
        }
        if key.algorithm() != ssh_key::Algorithm::Ed25519 {
            return Err(SigningError::Algorithm(key.algorithm().to_string()));
        }
        Ok(CommitSigner { key })
    }

    /// The public half, as `ssh-ed25519 AAAA...`: what is registered on
    /// the forge and listed in an allowed-signers file.
    pub fn public_key(&self) -> String {
        self.key
            .public_key()
            .to_openssh()
            .unwrap_or_else(|_| "(unprintable key)".into())
    }

    /// The fingerprint, for logs and the doctor.
    pub fn fingerprint(&self) -> String {
        self.key.public_key().fingerprint(HashAlg::Sha256).to_string()
    }

    /// The armoured signature of a commit object's text (without its
    /// `gpgsig` header), for that header.
    pub fn sign_commit(&self, content: &[u8]) -> Result<String, SigningError> {
        let signature = self
            .key
            .sign(NAMESPACE, HashAlg::Sha512, content)
            .map_err(|e| SigningError::Sign(e.to_string()))?;
        let armoured = signature
            .to_pem(LineEnding::LF)
            .map_err(|e| SigningError::Sign(e.to_string()))?;
        // The header's value ends at the armour's last line.
        Ok(armoured.trim_end().to_owned())
    }
}

impl std::fmt::Debug for CommitSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CommitSigner({})", self.fingerprint())
    }
}

impl PartialEq for CommitSigner {
    fn eq(&self, other: &CommitSigner) -> bool {
        self.key.public_key() == other.key.public_key()
    }
}
