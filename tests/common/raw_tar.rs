//! Tar streams written record by record, raw: headers the tar crate would refuse to build
//! (hostile sizes, types, names) for the tests of what the engine and dpkg refuse.

use tar::{EntryType, Header};

/// One tar record: a header, filled in raw where the tar crate would refuse the value, and
/// the bytes that follow it.
pub struct Rec {
    pub header: Header,
    pub data: Vec<u8>,
}

/// A record for `path` (raw bytes, at most 100) of type `kind` holding `data`; mode 0644 (0755
/// for directories), mtime 1700000000, owner 0:0.
pub fn rec(path: &[u8], kind: EntryType, data: &[u8]) -> Rec {
    let mut header = Header::new_gnu();
    header.as_old_mut().name[..path.len()].copy_from_slice(path);
    header.set_entry_type(kind);
    header.set_size(data.len() as u64);
    header.set_mode(if kind == EntryType::Directory { 0o755 } else { 0o644 });
    header.set_mtime(1_700_000_000);
    header.set_uid(0);
    header.set_gid(0);
    header.set_cksum();
    Rec { header, data: data.to_vec() }
}

pub fn file(path: &str, data: &[u8]) -> Rec {
    rec(path.as_bytes(), EntryType::Regular, data)
}

pub fn dir(path: &str) -> Rec {
    rec(path.as_bytes(), EntryType::Directory, b"")
}

pub fn link(path: &str, kind: EntryType, target: &[u8]) -> Rec {
    let mut r = rec(path.as_bytes(), kind, b"");
    r.header.as_old_mut().linkname[..target.len()].copy_from_slice(target);
    r.header.set_cksum();
    r
}

/// `r` with its header changed by `f`, checksum recomputed.
pub fn with(mut r: Rec, f: impl FnOnce(&mut Header)) -> Rec {
    f(&mut r.header);
    r.header.set_cksum();
    r
}

/// A GNU `L` record: the next entry's path, of any length.
pub fn gnu_long_name(name: &[u8]) -> Rec {
    let mut data = name.to_vec();
    data.push(0);
    rec(b"././@LongLink", EntryType::GNULongName, &data)
}

/// A GNU `K` record: the next entry's link target, of any length.
pub fn gnu_long_link(target: &[u8]) -> Rec {
    let mut data = target.to_vec();
    data.push(0);
    rec(b"././@LongLink", EntryType::GNULongLink, &data)
}

/// A PAX record of type `kind` (`x` for the next entry, `g` global) with `records`.
pub fn pax(kind: EntryType, records: &[(&str, &[u8])]) -> Rec {
    let mut data = Vec::new();
    for (key, value) in records {
        // "LEN key=value\n", where LEN counts itself.
        let rest = key.len() + value.len() + 3;
        let mut len = rest + 1;
        while len.to_string().len() + rest != len {
            len += 1;
        }
        data.extend_from_slice(format!("{len} {key}=").as_bytes());
        data.extend_from_slice(value);
        data.push(b'\n');
    }
    rec(b"./PaxHeaders/x", kind, &data)
}

/// The records as a tar stream: each padded to 512 bytes, then the two end blocks.
pub fn tar(recs: impl IntoIterator<Item = Rec>) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        out.extend_from_slice(r.header.as_bytes());
        out.extend_from_slice(&r.data);
        out.resize(out.len().next_multiple_of(512), 0);
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

/// A GNU `L` record naming the next entry (any length), then that entry.
pub fn long(path: &[u8], kind: EntryType, data: &[u8]) -> [Rec; 2] {
    [gnu_long_name(path), rec(b"./long", kind, data)]
}

/// `recs` as a tar stream cut off after the first `keep` bytes of the last record's data, with
/// no end blocks: what a header that claims more data than there is looks like.
pub fn tar_cut(recs: Vec<Rec>, keep: usize) -> Vec<u8> {
    let last = recs.last().unwrap().data.len();
    let mut out = tar(recs);
    out.truncate(out.len() - 1024 - last.next_multiple_of(512) + keep);
    out
}
