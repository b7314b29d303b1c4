//! Cheaply clonable UTF-8 text backed by [`bytes::Bytes`].

use std::fmt;
use std::ops::Deref;

use bytes::Bytes;

/// Immutable UTF-8 text that shares its storage with the network buffer it came from.
///
/// Cloning is a reference-count increment. A [`Utf8Bytes`] sliced out of an input chunk costs no
/// allocation, which is what lets the SSE parser hand out events without copying their data.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Utf8Bytes(Bytes);

impl Utf8Bytes {
    /// An empty string.
    pub const fn new() -> Self {
        Self(Bytes::new())
    }

    /// Wraps a static string without copying.
    pub const fn from_static(s: &'static str) -> Self {
        Self(Bytes::from_static(s.as_bytes()))
    }

    /// Wraps `bytes` if they are valid UTF-8; otherwise returns them back.
    pub fn try_from_bytes(bytes: Bytes) -> Result<Self, Bytes> {
        if std::str::from_utf8(&bytes).is_ok() {
            Ok(Self(bytes))
        } else {
            Err(bytes)
        }
    }

    /// Copies `s` into a new buffer.
    pub fn copy_from_str(s: &str) -> Self {
        Self(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// Wraps `bytes` without checking them.
    ///
    /// # Safety
    /// `bytes` must be valid UTF-8.
    pub(crate) unsafe fn from_bytes_unchecked(bytes: Bytes) -> Self {
        Self(bytes)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // SAFETY: every constructor guarantees the bytes are valid UTF-8: `try_from_bytes`
        // validates, `from_static`/`copy_from_str`/`From<String>` start from `str`, and the crate-internal
        // `from_bytes_unchecked` is only given slices of text the SSE parser validated. The field
        // is private, so nothing else can build one. Tested by `utf8_bytes_roundtrip` below.
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }

    /// The underlying bytes (a cheap clone).
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }

    /// Consumes the value, returning the underlying bytes.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }
}

impl Deref for Utf8Bytes {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Utf8Bytes {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for Utf8Bytes {
    fn from(s: String) -> Self {
        Self(Bytes::from(s.into_bytes()))
    }
}

impl From<&'static str> for Utf8Bytes {
    fn from(s: &'static str) -> Self {
        Self::from_static(s)
    }
}

impl PartialEq<str> for Utf8Bytes {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Utf8Bytes {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_bytes_roundtrip() {
        let b = Bytes::from_static("héllo 世界".as_bytes());
        let u = Utf8Bytes::try_from_bytes(b.clone()).unwrap_or_default();
        assert_eq!(u, "héllo 世界");
        assert_eq!(u.as_bytes(), &b);
        assert!(Utf8Bytes::try_from_bytes(Bytes::from_static(b"\xff")).is_err());
        assert_eq!(Utf8Bytes::from(String::from("x")).len(), 1);
    }
}
