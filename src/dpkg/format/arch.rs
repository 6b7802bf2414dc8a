//! `ADMINDIR/arch`: the architectures `dpkg --add-architecture` enabled, one a line, as
//! lib/dpkg/arch.c dpkg_arch_load_list reads it.
//!
//! dpkg refuses the whole file (and with it every command: exit 2) for a line without its
//! newline or of 2,048 bytes or more, and silently ignores a line that is no valid architecture
//! name; so does this parser. Pure: the file's bytes in, the names out.

use super::{byte_lines, valid_arch, ParseError};

/// The longest line dpkg reads, its newline included (`_POSIX2_LINE_MAX` less the NUL).
const MAX_LINE: usize = 2047;

/// The valid architecture names of the file, in file order (the native one, `all` and `any`
/// included if listed: what each means is the caller's business).
pub fn parse(bytes: &[u8]) -> Result<Vec<String>, ParseError> {
    let mut names = Vec::new();
    for line in byte_lines(bytes) {
        let (n, line) =
            line.map_err(|e| ParseError::new(e.line, "too-long line or missing newline"))?;
        if line.len() + 1 > MAX_LINE || line.contains(&0) {
            return Err(ParseError::new(n, "too-long line or missing newline"));
        }
        if let Some(name) = std::str::from_utf8(line).ok().filter(|l| valid_arch(l)) {
            names.push(name.to_string());
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_and_ignores_what_dpkg_ignores() {
        assert_eq!(parse(b"amd64\ni386\n").unwrap(), ["amd64", "i386"]);
        assert_eq!(parse(b"").unwrap(), Vec::<String>::new());
        assert_eq!(parse(b"\nam_d64\n\xff\narm64\n").unwrap(), ["arm64"]);
        assert_eq!(parse(b"i386").unwrap_err().line, 1);
        assert_eq!(parse(b"i386\n\0\n").unwrap_err().line, 2);
        let long = format!("{}\n", "a".repeat(2046));
        assert_eq!(parse(long.as_bytes()).unwrap().len(), 1);
        let longer = format!("{}\n", "a".repeat(2047));
        assert!(parse(longer.as_bytes()).is_err());
    }

    /// What this parser refuses, dpkg refuses too (`dpkg --print-foreign-architectures` reads
    /// the file and exits 2); what it reads, dpkg lists the same.
    #[test]
    fn dpkg_reads_the_arch_file_as_we_do() {
        let root = crate::dpkg::format::oracle::root();
        let admin = root.path().join("var/lib/dpkg");
        let dpkg = |bytes: &[u8]| {
            std::fs::write(admin.join("arch"), bytes).unwrap();
            std::process::Command::new("dpkg")
                .arg(format!("--admindir={}", admin.display()))
                .arg("--print-foreign-architectures")
                .output()
                .unwrap()
        };
        for bad in [&b"i386"[..], b"i386\n\0x\n", format!("{}\n", "a".repeat(2047)).as_bytes()] {
            assert!(parse(bad).is_err());
            assert!(!dpkg(bad).status.success(), "{bad:?}");
        }
        let good = b"i386\nam_d64\n\narm64\n";
        let theirs = String::from_utf8(dpkg(good).stdout).unwrap();
        let ours: Vec<String> = parse(good).unwrap();
        assert_eq!(theirs.lines().collect::<Vec<_>>(), ours);
    }
}
