//! A byte collector that keeps the head and the tail of a stream up to a
//! limit, so a command that prints gigabytes neither exhausts memory nor
//! hides its last lines (where errors usually are).

use std::collections::VecDeque;

#[derive(Debug)]
pub struct CappedOutput {
    limit: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl CappedOutput {
    pub fn new(limit: usize) -> CappedOutput {
        CappedOutput {
            limit,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let head_room = (self.limit / 2).saturating_sub(self.head.len());
        let into_head = head_room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        let tail_limit = self.limit - self.limit / 2;
        if bytes.len() >= tail_limit {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - tail_limit..]);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(tail_limit);
            self.tail.drain(..overflow);
            self.tail.extend(bytes);
        }
    }

    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    pub fn is_truncated(&self) -> bool {
        self.total > (self.head.len() + self.tail.len()) as u64
    }

    /// The kept text, lossily decoded, with a marker where bytes were dropped.
    pub fn finish(self) -> (String, bool) {
        let truncated = self.is_truncated();
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if truncated {
            let omitted = self.total - (self.head.len() + self.tail.len()) as u64;
            text.push_str(&format!(
                "\n[... forgehand: output truncated, {omitted} bytes omitted (limit {} bytes per stream); redirect the output to a file and read parts of it ...]\n",
                self.limit
            ));
        }
        let (a, b) = self.tail.as_slices();
        let mut tail = Vec::with_capacity(a.len() + b.len());
        tail.extend_from_slice(a);
        tail.extend_from_slice(b);
        text.push_str(&String::from_utf8_lossy(&tail));
        (text, truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut out = CappedOutput::new(100);
        out.push(b"hello ");
        out.push(b"world");
        assert_eq!(out.finish(), ("hello world".to_owned(), false));
    }

    #[test]
    fn long_output_keeps_head_and_tail_with_a_marker() {
        let mut out = CappedOutput::new(10);
        for chunk in [b"0123".as_slice(), b"456789", b"abcdefgh", b"XYZ"] {
            out.push(chunk);
        }
        assert_eq!(out.total_bytes(), 21);
        let (text, truncated) = out.finish();
        assert!(truncated);
        assert!(
            text.starts_with("01234\n[... forgehand: output truncated, 11 bytes omitted"),
            "{text}"
        );
        assert!(text.ends_with("ghXYZ"), "{text}");
    }

    #[test]
    fn one_huge_chunk_is_cut_the_same_way() {
        let mut out = CappedOutput::new(8);
        out.push(&[b'a'; 4]);
        out.push(&[b'b'; 1000]);
        let (text, truncated) = out.finish();
        assert!(truncated && text.starts_with("aaaa\n") && text.ends_with("bbbb"));
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        let mut out = CappedOutput::new(100);
        out.push(&[0x66, 0xff, 0xfe, 0x67]);
        assert_eq!(out.finish().0, "f\u{fffd}\u{fffd}g");
    }
}
