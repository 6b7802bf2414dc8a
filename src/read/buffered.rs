//! `Read` for a type that is a `BufRead` already: the writer's file data and the hashing reader
//! over it hand out what their buffer holds, so that no byte is copied into a buffer of its own
//! first. One home for the few lines both `Read` impls would otherwise repeat.

use std::io::{self, BufRead};

/// [`Read::read`](std::io::Read::read) through `reader`'s own buffer: what `fill_buf` holds, up
/// to `buf`'s length, consumed.
pub(crate) fn read<R: BufRead + ?Sized>(reader: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let available = reader.fill_buf()?;
    let n = buf.len().min(available.len());
    buf[..n].copy_from_slice(&available[..n]);
    reader.consume(n);
    Ok(n)
}
