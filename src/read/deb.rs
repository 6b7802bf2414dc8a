//! The .deb container: an ar archive holding `debian-binary`, `control.tar*` and `data.tar*`.
//!
//! Reads the container strictly the way dpkg does (format 2.x, members in order, `_` members
//! skipped, compressors by suffix) and streams each member: nothing here holds a member in
//! memory, so a 300 MB package costs what a 3 MB one does (a multi-block xz member is decoded
//! on several threads by `xz_blocks`, within a fixed budget). It never interprets the tar
//! streams: that is `entry.rs`'s job.
//!
//! A member's compressed stream carries its own checks (gzip's CRC32 and length, xz's block
//! checks, index and footer, zstd's content checksum, bzip2's CRCs), at its end, past the tar
//! archive's end blocks where a tar reader stops. So a member is read through a
//! [`MemberStream`], whose [`MemberStream::finish`] reads it to its end (what the tar archive
//! left is ignored, as GNU tar and dpkg-deb ignore it, within [`MAX_TRAILING`]) and requires the
//! member to end where the stream does. Nothing read from a member may be trusted, nor the
//! transaction committed, before `finish` returned `Ok`.
//!
//! The ar reader is hand-written: a .deb uses only the plain common ar format (no symbol table,
//! no GNU/BSD long-name tables, which dpkg rejects too), it is forty lines, and owning it lets
//! every error name the member and say what was expected, which a generic ar crate cannot.
//!
//! Public, with [`entry`](crate::read::entry) and [`control`](crate::read::control): the package reader a
//! tool that reads packages the way the engine does reuses ([`Deb::open`], [`Deb::control`],
//! [`Deb::data`], then [`entry::validate`](crate::read::entry::validate) on each tar entry), as the
//! lab's crash tester does to know what a package must leave in a root.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The ar archive's magic, the first 8 bytes of every .deb.
pub const AR_MAGIC: &[u8; 8] = b"!<arch>\n";

/// The most memory a decompressor may ask for. A hostile header can request a 1.5 GiB xz
/// dictionary or a 2 GiB zstd window; real packages need 8 MiB (xz -6, zstd -19) and at most
/// 64 MiB (xz -9). Beyond this the package is refused instead of the machine swapping.
pub const DECODER_MEMORY_LIMIT: u64 = 128 << 20;
const HEADER_LEN: usize = 60;

/// How a tar member is compressed, from its name's suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Xz,
    Zstd,
    Bzip2,
    /// The legacy LZMA "alone" format; dpkg accepts it for data.tar only.
    Lzma,
}

impl Compression {
    /// The compression of member `name`, which must be `{prefix}` plus a suffix dpkg knows for
    /// it (src/deb/extract.c): the control member only uncompressed, `.gz`, `.xz` or `.zst`;
    /// the data member also `.bz2` and `.lzma`.
    fn of(name: &str, prefix: &str, data: bool) -> Option<Compression> {
        match name.strip_prefix(prefix)? {
            "" => Some(Compression::None),
            ".gz" => Some(Compression::Gzip),
            ".xz" => Some(Compression::Xz),
            ".zst" => Some(Compression::Zstd),
            ".bz2" if data => Some(Compression::Bzip2),
            ".lzma" if data => Some(Compression::Lzma),
            _ => None,
        }
    }

    /// A decoder over `input` that stops at the end of the first compressed stream (for gzip,
    /// of the last of its members), so that what follows it in the member can be seen.
    fn decoder(self, input: Input<'_>) -> io::Result<Decoder<'_>> {
        Ok(match self {
            Compression::None => Decoder::Plain(input),
            Compression::Gzip => Decoder::Gzip(GzipMembers {
                member: Some(flate2::bufread::GzDecoder::new(input)),
                trailing: 0,
            }),
            Compression::Xz => {
                let stream = liblzma::stream::Stream::new_stream_decoder(DECODER_MEMORY_LIMIT, 0)
                    .map_err(io::Error::other)?;
                Decoder::Xz(liblzma::bufread::XzDecoder::new_stream(input, stream))
            }
            Compression::Zstd => {
                let mut decoder = zstd::stream::read::Decoder::with_buffer(input)?.single_frame();
                decoder.window_log_max(DECODER_MEMORY_LIMIT.ilog2())?;
                Decoder::Zstd(decoder)
            }
            Compression::Bzip2 => Decoder::Bzip2(bzip2::bufread::BzDecoder::new(input)),
            Compression::Lzma => {
                let stream = liblzma::stream::Stream::new_lzma_decoder(DECODER_MEMORY_LIMIT)
                    .map_err(io::Error::other)?;
                Decoder::Lzma(liblzma::bufread::XzDecoder::new_stream(input, stream))
            }
        })
    }
}

/// A member's bytes, read from the package file.
type Input<'a> = io::Take<&'a mut BufReader<CountingReader<File>>>;

/// A member's decoder. An enum rather than a `dyn Read`: what the decoder left of its input
/// is what follows the compressed stream, which [`MemberStream::finish`] must see.
enum Decoder<'a> {
    Plain(Input<'a>),
    Gzip(GzipMembers<'a>),
    /// One xz stream.
    Xz(liblzma::bufread::XzDecoder<Input<'a>>),
    /// The LZMA alone format.
    Lzma(liblzma::bufread::XzDecoder<Input<'a>>),
    Zstd(zstd::stream::read::Decoder<'static, Input<'a>>),
    Bzip2(bzip2::bufread::BzDecoder<Input<'a>>),
    /// A multi-block xz stream, which exactly fills the member (`xz_blocks` checks that).
    ParallelXz(crate::read::xz_blocks::ParallelXz),
}

impl Decoder<'_> {
    /// Bytes of the member the decoder has not consumed: once it has reached its end, what
    /// follows the compressed stream.
    fn unread(&self) -> u64 {
        match self {
            Decoder::Plain(input) => input.limit(),
            Decoder::Gzip(d) => d.member.as_ref().map_or(0, |m| m.get_ref().limit()),
            Decoder::Xz(d) | Decoder::Lzma(d) => d.get_ref().limit(),
            Decoder::Zstd(d) => d.get_ref().limit(),
            Decoder::Bzip2(d) => d.get_ref().limit(),
            Decoder::ParallelXz(_) => 0,
        }
    }

    /// `e` in words that say what failed, where the library's do not: liblzma and bzip2 say
    /// "data error" alike for damaged data and for a check that does not verify.
    fn explain(&self, e: io::Error) -> io::Error {
        let lzma_data = matches!(
            e.get_ref().and_then(|i| i.downcast_ref()),
            Some(liblzma::stream::Error::Data)
        );
        let bzip2_data =
            matches!(e.get_ref().and_then(|i| i.downcast_ref()), Some(bzip2::Error::Data));
        let what = match self {
            Decoder::Xz(_) if lzma_data => "the xz stream is corrupt: its data, a block's check, its index or its footer does not verify",
            Decoder::Lzma(_) if lzma_data => "the lzma stream is corrupt",
            Decoder::Bzip2(_) if bzip2_data => "the bzip2 stream is corrupt: its data or a CRC does not verify",
            _ => return e,
        };
        io::Error::new(io::ErrorKind::InvalidData, what)
    }
}

/// gzip's members one after another, as gzip, zlib and dpkg-deb read them: a member that ends
/// with bytes left in the ar member is followed by another, which those bytes must start.
struct GzipMembers<'a> {
    /// `None` only while one member gives its input to the next.
    member: Option<flate2::bufread::GzDecoder<Input<'a>>>,
    /// The bytes that were left when the current member started, if it is not the first.
    trailing: u64,
}

impl Read for GzipMembers<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(member) = &mut self.member else { return Ok(0) };
            let n = match member.read(buf) {
                Err(e) if self.trailing > 0 && member.header().is_none() => {
                    let n = self.trailing;
                    return Err(io::Error::new(e.kind(), format!("{n} bytes follow the end of the compressed stream, not a gzip member ({e})")));
                }
                n => n?,
            };
            let left = member.get_ref().limit();
            if n > 0 || buf.is_empty() || left == 0 {
                return Ok(n);
            }
            let input = self.member.take().map(flate2::bufread::GzDecoder::into_inner);
            self.member = input.map(flate2::bufread::GzDecoder::new);
            self.trailing = left;
        }
    }
}

impl Read for Decoder<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Decoder::Plain(r) => r.read(buf),
            Decoder::Gzip(r) => r.read(buf),
            Decoder::Xz(r) | Decoder::Lzma(r) => r.read(buf),
            Decoder::Zstd(r) => r.read(buf),
            Decoder::Bzip2(r) => r.read(buf),
            Decoder::ParallelXz(r) => r.read(buf),
        }
    }
}

/// The most bytes read and ignored after the end of a member's tar archive. dpkg-deb pads its
/// tar streams with zeros to a 10 KiB record, other tools write 1 KiB of end blocks; GNU tar
/// (and so `dpkg-deb -x`) ignores whatever follows the end, zeros or not, and so does the
/// engine. But the stream's checksums are at its very end: reaching them through more than
/// this would let a few KiB of package keep the engine decoding a decompression bomb, with no
/// file being written and no signal looked at, so a longer tail is refused instead.
pub const MAX_TRAILING: u64 = 16 << 20;

/// A member's decompressed stream. Its compressed stream's own checks (gzip's CRC32 and
/// length, xz's block checks, index and footer, zstd's content checksum, bzip2's CRCs) are
/// verified only when it is read to its end: a tar reader stops at the archive's end blocks,
/// so whoever reads the member must call [`MemberStream::finish`] after it, and trust nothing
/// read from it before that returned `Ok`.
pub struct MemberStream<'a> {
    package: &'a Path,
    name: String,
    decoder: Decoder<'a>,
}

impl MemberStream<'_> {
    /// Reads the rest of the stream (at most [`MAX_TRAILING`] bytes, ignored) to its end,
    /// which verifies its checks, then requires that the member ends with the stream.
    ///
    /// Bytes after the compressed stream are refused, although `dpkg-deb` ignores them (after
    /// the first stream of xz, zstd, bzip2 and lzma, after the last member of gzip): nothing
    /// writes them and nothing checks them, and `xz -d`, `zstd -d` and `bzip2 -d` would
    /// decode a second stream there, so a package holding one would be two different trees to
    /// two tools. gzip's further members are decoded, as by gzip, zlib and dpkg-deb alike.
    pub fn finish(&mut self) -> Result<()> {
        if let Decoder::Plain(_) = self.decoder {
            // No checks to reach: what follows the archive is ignored unread, as by GNU tar.
            return Ok(());
        }
        let tail = io::copy(&mut self.take(MAX_TRAILING + 1), &mut io::sink());
        let bad = |reason: String| Error::bad(self.package, format!("{}: {reason}", self.name));
        if tail.map_err(|e| bad(e.to_string()))? > MAX_TRAILING {
            return Err(bad(format!(
                "more than {} MiB follow the end of the tar archive (tar pads it to 10 KiB); refused rather than decoded to reach the stream's checksums",
                MAX_TRAILING >> 20
            )));
        }
        match self.decoder.unread() {
            0 => Ok(()),
            n => Err(bad(format!("{n} bytes follow the end of the compressed stream"))),
        }
    }
}

impl Read for MemberStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.decoder.read(buf).map_err(|e| self.decoder.explain(e))
    }
}

/// One member's header.
#[derive(Debug, Clone)]
struct Member {
    name: String,
    /// Where its bytes start in the package file.
    offset: u64,
    size: u64,
}

/// An open .deb, positioned between members.
pub struct Deb {
    path: PathBuf,
    file_len: u64,
    /// Where the next member header starts (past the current member and its padding).
    next_header: u64,
    reader: BufReader<CountingReader<File>>,
    consumed: Arc<AtomicU64>,
}

impl Deb {
    /// Opens `path`, checks the ar magic and the `debian-binary` member (format 2.x).
    pub fn open(path: &Path) -> Result<Deb> {
        // Non-blocking, so that a named pipe nobody writes to is refused below instead of
        // hanging the open; the flag is cleared once the file is known to be regular, for a
        // filesystem that would honour it (a FUSE server may).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| Error::bad(path, format!("cannot open: {e}")))?;
        let metadata =
            file.metadata().map_err(|e| Error::bad(path, format!("cannot stat: {e}")))?;
        // The xz reader and the progress bar need the members' offsets and the file's size: a
        // pipe (`curl ... | unpack /dev/stdin`) has neither. dpkg, too, unpacks only files.
        if !metadata.is_file() {
            return Err(Error::bad(path, "not a regular file (a pipe, device or directory); save the package to a file first"));
        }
        rustix::fs::fcntl_getfl(&file)
            .and_then(|flags| rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK))
            .map_err(|e| Error::bad(path, format!("cannot open: {e}")))?;
        let file_len = metadata.len();
        let consumed = Arc::new(AtomicU64::new(0));
        let reader = BufReader::with_capacity(
            256 * 1024,
            CountingReader { inner: file, read: 0, count: consumed.clone() },
        );
        let mut deb = Deb { path: path.to_path_buf(), file_len, next_header: 8, reader, consumed };
        deb.check_magic()?;
        deb.check_version()?;
        Ok(deb)
    }

    /// The package file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The package file's size in bytes.
    pub fn len(&self) -> u64 {
        self.file_len
    }

    /// True for an empty package file (never a valid .deb).
    pub fn is_empty(&self) -> bool {
        self.file_len == 0
    }

    /// How many bytes of the package file have been read so far, for a progress bar.
    pub fn consumed(&self) -> Arc<AtomicU64> {
        self.consumed.clone()
    }

    fn check_magic(&mut self) -> Result<()> {
        let mut magic = [0u8; 8];
        let n = read_full(&mut self.reader, &mut magic).map_err(|e| self.read_error(e))?;
        if n == 0 {
            return Err(Error::bad(&self.path, "empty file, not a Debian package"));
        }
        if n < magic.len() || &magic != AR_MAGIC {
            return Err(Error::bad(&self.path, "not a Debian package (no ar archive magic)"));
        }
        Ok(())
    }

    /// The `debian-binary` member, read as dpkg-deb reads it (src/deb/extract.c,
    /// lib/dpkg/deb-version.c): its first line, before any NUL, is the format version `X.Y`,
    /// digits each, and X must be 2. What follows the first line is ignored, as by dpkg-deb;
    /// only its first [`MAX_VERSION_LINE`] bytes are read, so a first line longer than that is
    /// refused (dpkg reads on: a version of that length could only be zeros and digits).
    fn check_version(&mut self) -> Result<()> {
        let member = self
            .next_member()?
            .ok_or_else(|| Error::bad(&self.path, "no members; expected debian-binary first"))?;
        if member.name != "debian-binary" {
            return Err(Error::bad(
                &self.path,
                format!("first member is '{}', expected 'debian-binary'", member.name),
            ));
        }
        let mut text = vec![0u8; member.size.min(MAX_VERSION_LINE) as usize];
        self.reader.read_exact(&mut text).map_err(|e| self.read_error(e))?;
        let before_nul = text.split(|&b| b == 0).next().unwrap_or_default();
        let Some(end) = before_nul.iter().position(|&b| b == b'\n') else {
            return Err(Error::bad(
                &self.path,
                match member.size > MAX_VERSION_LINE {
                    true => {
                        format!("debian-binary: no newline in its first {MAX_VERSION_LINE} bytes")
                    }
                    false => "debian-binary: archive has no newlines in header".to_string(),
                },
            ));
        };
        let line = &text[..end];
        let (major, minor) = format_version(line).map_err(|why| {
            let shown = crate::error::escape(std::ffi::OsStr::from_bytes(line));
            Error::bad(
                &self.path,
                format!("debian-binary: archive has invalid format version '{shown}': {why}"),
            )
        })?;
        if major != 2 {
            return Err(Error::bad(
                &self.path,
                format!("debian-binary: archive is format version {major}.{minor}; only 2.x is supported"),
            ));
        }
        Ok(())
    }

    /// Reads the next member's header, skipping `_`-members. `None` at the end of the archive.
    fn next_member(&mut self) -> Result<Option<Member>> {
        loop {
            self.skip_to(self.next_header)?;
            let mut header = [0u8; HEADER_LEN];
            let n = read_full(&mut self.reader, &mut header).map_err(|e| self.read_error(e))?;
            if n == 0 {
                return Ok(None);
            }
            if n < HEADER_LEN {
                return Err(Error::bad(
                    &self.path,
                    format!("truncated ar member header at offset {}", self.next_header),
                ));
            }
            if &header[58..60] != b"`\n" {
                return Err(Error::bad(
                    &self.path,
                    format!("corrupt ar member header at offset {}", self.next_header),
                ));
            }
            let name = member_name(&header[0..16]);
            let size = member_size(&header[48..58]).map_err(|c| {
                let c = crate::error::escape(std::ffi::OsStr::from_bytes(&[c])).to_string();
                Error::bad(
                    &self.path,
                    format!("invalid character '{c}' in the size field of member '{name}'"),
                )
            })?;
            let start = self.next_header + HEADER_LEN as u64;
            if start + size > self.file_len {
                return Err(Error::bad(
                    &self.path,
                    format!(
                        "member '{name}' is truncated: {size} bytes declared, {} present",
                        self.file_len.saturating_sub(start)
                    ),
                ));
            }
            // ar pads members to an even length.
            self.next_header = start + size + size % 2;
            if name.starts_with('_') {
                continue;
            }
            return Ok(Some(Member { name, offset: start, size }));
        }
    }

    /// The absolute offset of the next byte the buffered reader will hand out.
    fn position(&self) -> u64 {
        self.reader.get_ref().read - self.reader.buffer().len() as u64
    }

    /// Reads forward to `offset`: members are skipped by reading, so a package can come from a
    /// pipe one day as well as from a file.
    fn skip_to(&mut self, offset: u64) -> Result<()> {
        let gap = offset.saturating_sub(self.position());
        let skipped = io::copy(&mut (&mut self.reader).take(gap), &mut io::sink())
            .map_err(|e| self.read_error(e))?;
        if skipped < gap && offset <= self.file_len {
            return Err(Error::bad(&self.path, format!("truncated at offset {}", self.position())));
        }
        Ok(())
    }

    /// The next member, which must be `{prefix}` with a known compression; its stream.
    fn member(&mut self, prefix: &str, data: bool) -> Result<(String, MemberStream<'_>)> {
        let member = self
            .next_member()?
            .ok_or_else(|| Error::bad(&self.path, format!("missing member {prefix}.*")))?;
        let Some(compression) = Compression::of(&member.name, prefix, data) else {
            return Err(if member.name.starts_with(prefix) {
                Error::bad(
                    &self.path,
                    format!(
                        "member '{}' uses a compression dpkg does not accept for it",
                        member.name
                    ),
                )
            } else {
                Error::bad(
                    &self.path,
                    format!("member '{}' where {prefix}.* was expected", member.name),
                )
            });
        };
        let parallel = match compression {
            Compression::Xz => crate::read::xz_blocks::open(
                &self.reader.get_ref().inner,
                member.offset,
                member.size,
                self.consumed.clone(),
            ),
            _ => None,
        };
        let decoder = match parallel {
            Some(parallel) => Decoder::ParallelXz(parallel),
            None => compression.decoder((&mut self.reader).take(member.size)).map_err(|e| {
                Error::bad(&self.path, format!("{}: cannot start decompressing: {e}", member.name))
            })?,
        };
        Ok((member.name.clone(), MemberStream { package: &self.path, name: member.name, decoder }))
    }

    /// The `control.tar*` member, decompressed. Read it (as far as needed) before [`Deb::data`].
    pub fn control(&mut self) -> Result<(String, MemberStream<'_>)> {
        self.member("control.tar", false)
    }

    /// The `data.tar*` member, decompressed.
    pub fn data(&mut self) -> Result<(String, MemberStream<'_>)> {
        self.member("data.tar", true)
    }

    fn read_error(&self, e: io::Error) -> Error {
        Error::bad(&self.path, format!("read error at offset {}: {e}", self.position()))
    }
}

/// The most bytes of `debian-binary` read: its first line must end in them.
const MAX_VERSION_LINE: u64 = 64;

/// A member's name as lib/dpkg/ar.c dpkg_ar_normalize_name makes it: trailing spaces removed,
/// then one trailing `/` (GNU ar's terminator). Bytes that are not UTF-8 are shown replaced:
/// such a name matches no member dpkg knows.
fn member_name(field: &[u8]) -> String {
    let end = field.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    let name = field[..end].strip_suffix(b"/").unwrap_or(&field[..end]);
    String::from_utf8_lossy(name).into_owned()
}

/// A member's size as lib/dpkg/ar.c dpkg_ar_member_get_size reads it: leading spaces skipped,
/// then decimal digits up to a space or the field's end. Any other byte is the error (`+`, `-`,
/// a NUL); a field of spaces is 0.
fn member_size(field: &[u8]) -> Result<u64, u8> {
    let mut digits = field.iter().skip_while(|&&b| b == b' ').take_while(|&&b| b != b' ');
    digits.try_fold(0u64, |n, &b| match b {
        b'0'..=b'9' => Ok(n * 10 + u64::from(b - b'0')),
        bad => Err(bad),
    })
}

/// A `.deb` format version as lib/dpkg/deb-version.c deb_version_parse reads it: digits, a dot,
/// digits, each part within `i32`, nothing after (the caller cut the line at its newline).
fn format_version(line: &[u8]) -> Result<(u32, u32), &'static str> {
    let number = |part: &[u8], what: &'static str| -> Result<u32, &'static str> {
        if part.is_empty() {
            return Err(what);
        }
        part.iter().try_fold(0u32, |n, &b| {
            n.checked_mul(10)
                .and_then(|n| n.checked_add(u32::from(b - b'0')))
                .filter(|&n| n <= i32::MAX as u32)
                .ok_or("format version with a too big component")
        })
    };
    let major_end = line.iter().position(|b| !b.is_ascii_digit()).unwrap_or(line.len());
    let major = number(&line[..major_end], "format version with empty major component")?;
    let Some(rest) = line[major_end..].strip_prefix(b".") else {
        return Err("format version has no dot");
    };
    let minor_end = rest.iter().position(|b| !b.is_ascii_digit()).unwrap_or(rest.len());
    let minor = number(&rest[..minor_end], "format version with empty minor component")?;
    if minor_end != rest.len() {
        return Err("format version followed by junk");
    }
    Ok((major, minor))
}

/// Reads until `buf` is full or the end of input; returns how much it read.
pub(crate) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Counts the bytes read from the package file: `read` through this reader, for offsets;
/// `count` for progress, shared with the decoders that read the file on threads of their own.
struct CountingReader<R> {
    inner: R,
    read: u64,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        self.count.fetch_add(n as u64, Relaxed);
        Ok(n)
    }
}
