//! Values with units that operators write by hand: sizes ("4g", "512m") and
//! durations ("30m", "1800s"). Parsed while deserializing, so a bad value is
//! reported with the key path it was found under.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;
use std::time::Duration;

/// A number of bytes, written the way Docker accepts it: a plain integer or a
/// number followed by `b`, `k`, `m`, `g` or `t` (powers of 1024; `kb`, `kib`,
/// `mb`, `mib`, ... mean the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn bytes(self) -> u64 {
        self.0
    }

    pub fn parse(text: &str) -> Option<ByteSize> {
        let text = text.trim().to_ascii_lowercase();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let unit = unit.trim();
        let multiplier: u64 = match unit {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            "t" | "tb" | "tib" => 1 << 40,
            _ => return None,
        };
        if number.is_empty() {
            return None;
        }
        if let Ok(whole) = number.parse::<u64>() {
            return whole.checked_mul(multiplier).map(ByteSize);
        }
        let fractional: f64 = number.parse().ok()?;
        let bytes = fractional * multiplier as f64;
        (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then_some(ByteSize(bytes as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [(1 << 40, "t"), (1 << 30, "g"), (1 << 20, "m"), (1 << 10, "k")];
        for (size, suffix) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{}", self.0 / size, suffix);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl Visitor<'_> for SizeVisitor {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#"a size such as "4g", "512m" or a number of bytes"#)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("{v} is not a size; sizes cannot be negative")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).ok_or_else(|| {
                    E::custom(format!(
                        r#""{v}" is not a size; use e.g. "4g", "512m" or a number of bytes"#
                    ))
                })
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

/// A duration written as humans write it: "90s", "30m", "1h 30m", "250ms".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl Visitor<'_> for DurationVisitor {
            type Value = HumanDuration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#"a duration such as "30s", "30m" or "1h""#)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<HumanDuration, E> {
                Err(E::custom(format!(
                    r#"{v} has no unit; write a duration such as "{v}s" or "{v}m""#
                )))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<HumanDuration, E> {
                self.visit_u64(v.unsigned_abs())
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<HumanDuration, E> {
                humantime::parse_duration(v.trim())
                    .map(HumanDuration)
                    .map_err(|_| {
                        E::custom(format!(
                            r#""{v}" is not a duration; use e.g. "30s", "30m" or "1h""#
                        ))
                    })
            }
        }
        deserializer.deserialize_any(DurationVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_like_docker() {
        assert_eq!(ByteSize::parse("4g"), Some(ByteSize(4 << 30)));
        assert_eq!(ByteSize::parse("512m"), Some(ByteSize(512 << 20)));
        assert_eq!(ByteSize::parse("1MiB"), Some(ByteSize(1 << 20)));
        assert_eq!(ByteSize::parse("1.5k"), Some(ByteSize(1536)));
        assert_eq!(ByteSize::parse("100"), Some(ByteSize(100)));
        assert_eq!(ByteSize::parse("4 gigs"), None);
        assert_eq!(ByteSize::parse("g"), None);
        assert_eq!(ByteSize::parse(""), None);
        assert_eq!(ByteSize::parse("99999999999999t"), None);
    }

    #[test]
    fn sizes_display_in_their_largest_whole_unit() {
        assert_eq!(ByteSize(4 << 30).to_string(), "4g");
        assert_eq!(ByteSize(1536).to_string(), "1536");
        assert_eq!(ByteSize(3 << 10).to_string(), "3k");
    }
}
