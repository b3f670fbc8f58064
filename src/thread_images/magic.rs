//! An image's type and size read from its first bytes, never from its
//! name or the server's `Content-Type`: PNG, JPEG, GIF and WebP, the types
//! every provider forgehand speaks takes (Gemini all but GIF).

/// The media type of `bytes` and, when the header says, the image's
/// width and height; `None` when it is none of the four types.
pub fn sniff(bytes: &[u8]) -> Option<(&'static str, Option<(u32, u32)>)> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        let size = (bytes.len() >= 24 && &bytes[12..16] == b"IHDR")
            .then(|| (be32(&bytes[16..20]), be32(&bytes[20..24])));
        return Some(("image/png", size));
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        let size = (bytes.len() >= 10).then(|| (le16(&bytes[6..8]), le16(&bytes[8..10])));
        return Some(("image/gif", size));
    }
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Some(("image/jpeg", jpeg_size(bytes)));
    }
    if bytes.len() >= 16 && &bytes[0..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return Some(("image/webp", webp_size(bytes)));
    }
    None
}

/// Whether a GIF is animated: it has the looping application extension
/// (`NETSCAPE2.0`) that animations carry.
pub fn animated_gif(bytes: &[u8]) -> bool {
    bytes.starts_with(b"GIF8") && bytes.windows(11).any(|w| w == b"NETSCAPE2.0")
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn le16(b: &[u8]) -> u32 {
    u32::from(u16::from_le_bytes([b[0], b[1]]))
}

fn be16(b: &[u8]) -> u32 {
    u32::from(u16::from_be_bytes([b[0], b[1]]))
}

/// The size in the first start-of-frame segment.
fn jpeg_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let mut at = 2;
    while at + 9 <= bytes.len() {
        if bytes[at] != 0xFF {
            return None;
        }
        let marker = bytes[at + 1];
        let length = be16(&bytes[at + 2..at + 4]) as usize;
        // SOF0..SOF15, less DHT (C4), JPG (C8) and DAC (CC).
        if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
            return Some((be16(&bytes[at + 7..at + 9]), be16(&bytes[at + 5..at + 7])));
        }
        at += 2 + length;
    }
    None
}

fn webp_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let chunk = bytes.get(12..16)?;
    let b = |i: usize| bytes.get(i).copied().map(u32::from);
    match chunk {
        b"VP8 " => Some((
            (b(26)? | (b(27)? << 8)) & 0x3FFF,
            (b(28)? | (b(29)? << 8)) & 0x3FFF,
        )),
        b"VP8L" => Some((
            1 + (b(21)? | ((b(22)? & 0x3F) << 8)),
            1 + ((b(22)? >> 6) | (b(23)? << 2) | ((b(24)? & 0x0F) << 10)),
        )),
        b"VP8X" => Some((
            1 + (b(24)? | (b(25)? << 8) | (b(26)? << 16)),
            1 + (b(27)? | (b(28)? << 8) | (b(29)? << 16)),
        )),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 2×3 PNG's first bytes (signature and IHDR).
    pub(crate) fn png(width: u32, height: u32) -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        bytes.extend(width.to_be_bytes());
        bytes.extend(height.to_be_bytes());
        bytes.extend([8, 6, 0, 0, 0]);
        bytes
    }

    #[test]
    fn the_four_types_are_known_by_their_bytes() {
        assert_eq!(sniff(&png(2, 3)), Some(("image/png", Some((2, 3)))));
        assert_eq!(
            sniff(b"GIF89a\x05\x00\x07\x00"),
            Some(("image/gif", Some((5, 7))))
        );
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x20, 0x00,
            0x40, 0x03,
        ];
        assert_eq!(sniff(&jpeg), Some(("image/jpeg", Some((64, 32)))));
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        webp.extend([0x7F, 0x02, 0x00, 0xDF, 0x01, 0x00]);
        assert_eq!(sniff(&webp), Some(("image/webp", Some((640, 480)))));
    }

    #[test]
    fn a_name_or_a_text_is_no_image() {
        assert_eq!(sniff(b"<html><body>not found</body></html>"), None);
        assert_eq!(sniff(b"%PDF-1.7"), None);
        assert_eq!(sniff(b""), None);
    }

    #[test]
    fn a_looping_gif_is_animated() {
        assert!(animated_gif(
            b"GIF89a\x01\x00\x01\x00\x80\x00\x00!\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"
        ));
        assert!(!animated_gif(b"GIF89a\x01\x00\x01\x00\x80\x00\x00;"));
    }
}
