//! A bounds-checked little-endian reader over the file's bytes: every read checks the bytes that
//! remain first and fails with a message naming what was being read.

use magpie_core::{Error, Result};

pub(crate) fn err(msg: impl Into<String>) -> Error {
    Error::io("gguf", msg)
}

/// A position in a byte slice.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    /// The offset of the next byte to read.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left after the position.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The next `n` bytes, or an error naming `what` if the file ends first.
    pub(crate) fn take(&mut self, n: usize, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(err(format!(
                "file ends while reading {} at byte {} (needs {n} bytes, {} left)",
                what(),
                self.pos,
                self.remaining()
            )));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, what: &dyn Fn() -> String) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub(crate) fn u16(&mut self, what: &dyn Fn() -> String) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    pub(crate) fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub(crate) fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: a u64 byte length, then that many bytes of UTF-8. The length is checked
    /// against the bytes left before anything is allocated.
    pub(crate) fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let len = self.u64(&|| format!("the length of {}", what()))?;
        if len > self.remaining() as u64 {
            return Err(err(format!(
                "string length {len} of {} exceeds the {} bytes left in the file (at byte {})",
                what(),
                self.remaining(),
                self.pos
            )));
        }
        let s = self.take(len as usize, what)?;
        match std::str::from_utf8(s) {
            Ok(s) => Ok(s.to_string()),
            Err(e) => Err(err(format!("{} is not valid UTF-8 ({e})", what()))),
        }
    }
}
