//! The ar container of a .deb, written: what the synthetic packages, the crash test's older
//! versions and the tests' hostile packages are made with. The engine only reads this format
//! (`unpack::read::deb`, whose [`AR_MAGIC`](unpack::read::deb::AR_MAGIC) begins an archive); writing it is
//! the lab's business, so it lives here.

use std::io::{self, Write};

/// The length of a member's header.
pub const HEADER_LEN: usize = 60;

/// The 60-byte header of an ar member as dpkg-deb writes it (owner 0, mode 100644, `mtime`),
/// for the tools that make packages: the bench's synthetic ones, the crash test's older
/// versions, the tests' hostile ones.
pub fn ar_header(name: &str, mtime: u64, size: u64) -> [u8; HEADER_LEN] {
    let text = format!("{name:<16.16}{mtime:<12}{:<6}{:<6}{:<8}{size:<10}`\n", 0, 0, "100644");
    let mut header = [b' '; HEADER_LEN];
    let bytes = text.as_bytes();
    header.copy_from_slice(&bytes[..HEADER_LEN.min(bytes.len())]);
    header
}

/// Writes one ar member: header, bytes, padding to an even offset.
pub fn write_member(out: &mut impl Write, name: &str, mtime: u64, bytes: &[u8]) -> io::Result<()> {
    out.write_all(&ar_header(name, mtime, bytes.len() as u64))?;
    out.write_all(bytes)?;
    if bytes.len() % 2 == 1 {
        out.write_all(b"\n")?;
    }
    Ok(())
}
