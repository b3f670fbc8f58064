//! LFS pointer files (spec v1): the small text git keeps in place of a
//! large file's content.

use sha2::{Digest, Sha256};

/// The first line every v1 pointer has.
pub const VERSION_LINE: &str = "version https://git-lfs.github.com/spec/v1";

/// Pointers are small: git-lfs reads at most this many bytes of a blob
/// when it looks for one.
pub const MAX_POINTER_BYTES: usize = 1024;

/// An LFS object: its sha256 (lowercase hex) and size.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pointer {
    pub oid: String,
    pub size: u64,
}

impl Pointer {
    /// Parses a blob as a v1 pointer: `version` first, then keys in
    /// order, with `oid sha256:<64 hex>` and `size <n>`. `None`: not one.
    pub fn parse(blob: &[u8]) -> Option<Pointer> {
        if blob.len() > MAX_POINTER_BYTES {
            return None;
        }
        let text = std::str::from_utf8(blob).ok()?;
        let mut lines = text.lines();
        if lines.next()? != VERSION_LINE {
            return None;
        }
        let (mut oid, mut size) = (None, None);
        for line in lines {
            if line.is_empty() {
                continue;
            }
            let (key, value) = line.split_once(' ')?;
            match key {
                "oid" => oid = Some(value.strip_prefix("sha256:")?.to_owned()),
                "size" => size = Some(value.parse::<u64>().ok()?),
                // Extension lines (`ext-0-name ...`) and other keys are kept by git-lfs; not needed here.
                _ if key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.') => {}
                _ => return None,
            }
        }
        let oid = oid?;
        if oid.len() != 64
            || !oid
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        Some(Pointer { oid, size: size? })
    }

    /// The pointer of `content`.
    pub fn of(content: &[u8]) -> Pointer {
        Pointer {
            oid: hex::encode(Sha256::digest(content)),
            size: content.len() as u64,
        }
    }

    /// The canonical text git-lfs writes for this object.
    pub fn text(&self) -> String {
        format!("{VERSION_LINE}\noid sha256:{}\nsize {}\n", self.oid, self.size)
    }

    /// Whether `content` is this object.
    pub fn matches(&self, content: &[u8]) -> bool {
        content.len() as u64 == self.size && Pointer::of(content).oid == self.oid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_round_trip_and_other_text_is_not_one() {
        let pointer = Pointer::of(b"hello\n");
        assert_eq!(pointer.size, 6);
        assert_eq!(Pointer::parse(pointer.text().as_bytes()), Some(pointer.clone()));
        assert!(pointer.matches(b"hello\n"));
        assert!(!pointer.matches(b"hello"));
        assert_eq!(Pointer::parse(b"hello\n"), None);
        let bad_oid = format!("{VERSION_LINE}\noid sha256:XYZ\nsize 6\n");
        assert_eq!(Pointer::parse(bad_oid.as_bytes()), None);
        let no_size = format!("{VERSION_LINE}\noid sha256:{}\n", pointer.oid);
        assert_eq!(Pointer::parse(no_size.as_bytes()), None);
    }
}
