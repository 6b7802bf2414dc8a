//! The md5sums dpkg computes for a package that ships none: each regular file hashed while it
//! is written, from the bytes the writer takes, so nothing is read twice.

use md5::{Digest, Md5};
use std::io::{BufRead, Read};

/// The hex md5 of everything `reader` has from where it stands.
pub fn of_reader(reader: impl Read) -> std::io::Result<String> {
    let mut reader = std::io::BufReader::new(reader);
    let mut hashing = Hashing::new(&mut reader);
    std::io::copy(&mut hashing, &mut std::io::sink())?;
    Ok(hashing.finish())
}

/// A `BufRead` that hashes what its reader consumes.
pub struct Hashing<'a> {
    inner: &'a mut dyn BufRead,
    md5: Md5,
}

impl<'a> Hashing<'a> {
    pub fn new(inner: &'a mut dyn BufRead) -> Hashing<'a> {
        Hashing { inner, md5: Md5::new() }
    }

    /// The hex digest of everything consumed.
    pub fn finish(self) -> String {
        hex(&self.md5.finalize())
    }
}

impl Read for Hashing<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        crate::read::buffered::read(self, buf)
    }
}

impl BufRead for Hashing<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        // The buffer fill_buf returned is still there until consumed: asking again reads nothing.
        if let Ok(buf) = self.inner.fill_buf() {
            self.md5.update(&buf[..n.min(buf.len())]);
        }
        self.inner.consume(n);
    }
}

/// Lowercase hex, as md5sums files hold it.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_what_is_consumed_through_either_interface() {
        let data = b"hello world\n".repeat(1000);
        let mut reader = std::io::BufReader::with_capacity(7, &data[..]);
        let mut h = Hashing::new(&mut reader);
        let mut out = Vec::new();
        std::io::copy(&mut h, &mut out).unwrap();
        assert_eq!(out, data);
        // md5sum of the same bytes, as coreutils prints it.
        let expected = std::process::Command::new("md5sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(&data)?;
                c.wait_with_output()
            })
            .unwrap();
        assert_eq!(h.finish(), String::from_utf8_lossy(&expected.stdout)[..32]);
    }
}
