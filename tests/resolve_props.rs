//! Property tests of path resolution: `entry::clean_path`, the first stage, on random archive
//! paths; then the confined lookups of `root.rs`, against the kernel's own: random trees
//! of directories, files and symlinks (absolute, relative, dangling, looping, chained), random
//! pending entries of a transaction over them, and random paths with `.`, `..` and `//`.
//!
//! The oracle is openat2(RESOLVE_IN_ROOT), which resolves exactly as `Root::resolve_dir`
//! promises to ("as if the root were `/`"), on a copy of the tree where the pending entries
//! are made real. Whatever the engine answers must be what the kernel answers, the directory it
//! hands out must be inside the root, and a sibling `host` directory, where every escape would
//! land, must never change.

use proptest::prelude::*;
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use unpack::fs::root::{Create, CreatedDir, Pending, ResolveError, Root};
use unpack::read::entry::clean_path;

/// Names in the trees: few, so that paths and symlinks meet. `host` is also the sibling of
/// the root, so `../host` is what an escape looks like.
const NAMES: &[&str] = &["a", "b", "c", "host"];
/// Parts of symlink targets and queried paths.
const PARTS: &[&str] = &["a", "b", "c", "host", "..", ".", ""];

#[derive(Debug, Clone)]
enum Kind {
    Dir,
    File,
    Symlink(String),
}

/// A tree on disk and the transaction's pending entries over it, by path under the root.
#[derive(Debug, Clone)]
struct Tree {
    disk: Vec<(PathBuf, Kind)>,
    overlay: BTreeMap<PathBuf, Pending>,
}

/// `/`-joined parts, absolute or not; a symlink target is never empty.
fn path_string(absolute: bool, parts: &[usize]) -> String {
    let joined = parts.iter().map(|&i| PARTS[i]).collect::<Vec<_>>().join("/");
    let s = if absolute { format!("/{joined}") } else { joined };
    if s.is_empty() {
        ".".into()
    } else {
        s
    }
}

fn target() -> impl Strategy<Value = String> {
    (any::<bool>(), prop::collection::vec(0..PARTS.len(), 1..5))
        .prop_map(|(abs, parts)| path_string(abs, &parts))
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![3 => Just(Kind::Dir), 1 => Just(Kind::File), 3 => target().prop_map(Kind::Symlink)]
}

/// Up to 14 disk nodes, each under an earlier directory, and up to 5 pending entries: a
/// symlink or a non-directory anywhere under a disk directory, or a directory where the disk
/// has one (the engine makes its directories on disk at once).
fn tree() -> impl Strategy<Value = Tree> {
    let disk = prop::collection::vec((any::<prop::sample::Index>(), 0..NAMES.len(), kind()), 0..14);
    let pending = prop_oneof![
        target().prop_map(|t| Pending::Symlink(t.into())),
        Just(Pending::NotDir),
        Just(Pending::Dir),
    ];
    let overlay =
        prop::collection::vec((any::<prop::sample::Index>(), 0..NAMES.len(), pending), 0..5);
    (disk, overlay).prop_map(|(disk_specs, overlay_specs)| {
        let mut dirs = vec![PathBuf::new()];
        let mut disk: Vec<(PathBuf, Kind)> = Vec::new();
        for (parent, name, kind) in disk_specs {
            let path = parent.get(&dirs).join(NAMES[name]);
            if disk.iter().any(|(p, _)| *p == path) {
                continue;
            }
            if matches!(kind, Kind::Dir) {
                dirs.push(path.clone());
            }
            disk.push((path, kind));
        }
        let mut overlay = BTreeMap::new();
        for (at, name, pending) in overlay_specs {
            let path = match pending {
                Pending::Dir if dirs.len() > 1 => at.get(&dirs[1..]).clone(),
                Pending::Dir => continue,
                _ => at.get(&dirs).join(NAMES[name]),
            };
            overlay.entry(path).or_insert(pending);
        }
        Tree { disk, overlay }
    })
}

/// A query: a path of 0-5 parts, absolute or not.
fn query() -> impl Strategy<Value = String> {
    (any::<bool>(), prop::collection::vec(0..PARTS.len(), 0..6)).prop_map(|(abs, parts)| {
        if parts.is_empty() && !abs {
            String::new()
        } else {
            path_string(abs, &parts)
        }
    })
}

/// What a lookup came to, in terms both the engine and the kernel can say.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// A directory, by its path under the root (only plain components).
    Dir(PathBuf),
    Loop,
    NotDir,
    Missing,
}

/// `root/path` holds a real directory, reached through real directories only.
fn is_real_dir_under(root: &Path, path: &Path) -> bool {
    let mut at = root.to_path_buf();
    path.components().all(|c| {
        let Component::Normal(name) = c else { return false };
        at.push(name);
        std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir())
    })
}

/// Makes `tree` under `root`: the disk nodes, and with `pending` the overlay made real (what
/// the tree will be once the transaction commits).
fn build(root: &Path, tree: &Tree, pending: bool) {
    std::fs::create_dir(root).unwrap();
    for (path, kind) in &tree.disk {
        let full = root.join(path);
        match kind {
            Kind::Dir => std::fs::create_dir(&full).unwrap(),
            Kind::File => std::fs::write(&full, "file").unwrap(),
            Kind::Symlink(t) => std::os::unix::fs::symlink(t, &full).unwrap(),
        }
    }
    if !pending {
        return;
    }
    for (path, p) in &tree.overlay {
        // Only where the engine could meet it: under real directories.
        if !is_real_dir_under(root, path.parent().unwrap()) {
            continue;
        }
        let full = root.join(path);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() && *p != Pending::Dir => std::fs::remove_dir_all(&full).unwrap(),
            Ok(m) if !m.is_dir() => std::fs::remove_file(&full).unwrap(),
            _ => {}
        }
        match p {
            Pending::Symlink(t) => std::os::unix::fs::symlink(t, &full).unwrap(),
            Pending::NotDir => std::fs::write(&full, "pending").unwrap(),
            Pending::Dir | Pending::Nothing => {}
        }
    }
}

/// Where the descriptor `fd` really is.
/// `rel` with the temporary suffix of new trees taken off its names.
fn unstaged(rel: &Path) -> PathBuf {
    rel.iter().map(|n| n.to_str().unwrap().trim_end_matches(".unpack-new")).collect()
}

fn fd_path(fd: impl AsFd) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd())).unwrap()
}

/// The kernel's answer: openat2 with RESOLVE_IN_ROOT from `root`.
fn kernel(root: &Path, query: &str) -> Outcome {
    let dir =
        rustix::fs::open(root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .unwrap();
    let query = if query.is_empty() { "." } else { query };
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    // EAGAIN: a rename anywhere on the machine raced with a `..`; the kernel asks to retry.
    let attempt = || rustix::fs::openat2(&dir, query, flags, Mode::empty(), ResolveFlags::IN_ROOT);
    let mut result = attempt();
    for _ in 0..1000 {
        if !matches!(result, Err(Errno::AGAIN)) {
            break;
        }
        result = attempt();
    }
    match result {
        Ok(fd) => Outcome::Dir(fd_path(&fd).strip_prefix(root).unwrap().to_path_buf()),
        Err(Errno::LOOP) => Outcome::Loop,
        Err(Errno::NOTDIR) => Outcome::NotDir,
        Err(Errno::NOENT) => Outcome::Missing,
        Err(e) => panic!("openat2 {query}: {e}"),
    }
}

/// The engine's answer, checking on the way that a directory it hands out is inside `root`.
/// With `created`, missing directories are made as for a transaction: new trees under their
/// temporary names, which the checks take off.
fn engine(
    handle: &mut Root,
    root: &Path,
    query: &str,
    created: Option<&mut Vec<CreatedDir>>,
    overlay: &dyn Fn(&Path) -> Pending,
) -> Outcome {
    let create = match created {
        Some(list) => Create::Staged(list),
        None => Create::Never,
    };
    match handle.resolve_dir(Path::new(query), create, overlay) {
        Ok((canon, dir)) => {
            assert!(
                canon.components().all(|c| matches!(c, Component::Normal(_))),
                "{query}: canonical path {canon:?}"
            );
            let on_disk = fd_path(dir.fd());
            let rel = on_disk
                .strip_prefix(root)
                .unwrap_or_else(|_| panic!("{query}: {on_disk:?} is outside the root"));
            assert_eq!(
                unstaged(rel),
                canon,
                "{query}: the directory handed out is not the one named"
            );
            assert!(
                is_real_dir_under(root, rel),
                "{query}: {rel:?} is not a real directory inside the root"
            );
            Outcome::Dir(canon)
        }
        Err(ResolveError::Loop(_)) => Outcome::Loop,
        Err(ResolveError::NotDir { .. }) => Outcome::NotDir,
        Err(ResolveError::Io { source, .. })
            if source.raw_os_error() == Some(Errno::NOENT.raw_os_error()) =>
        {
            Outcome::Missing
        }
        Err(e) => panic!("{query}: {e:?}"),
    }
}

/// A sandbox: `root` for the engine, `kernel` for the oracle, and `host` beside them, with
/// content an escape would change.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new(tree: &Tree) -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("host/a/b/c")).unwrap();
        std::fs::write(dir.path().join("host/secret"), "host").unwrap();
        let s = Sandbox { dir };
        build(&s.root(), tree, false);
        build(&s.kernel_root(), tree, true);
        s
    }

    fn base(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn root(&self) -> PathBuf {
        self.base().join("root")
    }

    fn kernel_root(&self) -> PathBuf {
        self.base().join("kernel")
    }

    /// Everything outside the two roots, with file contents: it must never change.
    fn host(&self) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        let mut todo = vec![self.base()];
        while let Some(dir) = todo.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let m = std::fs::symlink_metadata(&path).unwrap();
                if m.is_dir() && path != self.root() && path != self.kernel_root() {
                    todo.push(path.clone());
                }
                out.push((path.clone(), m.is_file().then(|| std::fs::read(&path).unwrap())));
            }
        }
        out.sort();
        out
    }
}

/// Found by the lookups property: `/a` handed openat the name `/`, which is the host's root
/// whatever directory it is opened from.
#[test]
fn an_absolute_path_is_looked_up_from_the_root() {
    let tree = Tree { disk: vec![(PathBuf::from("a"), Kind::Dir)], overlay: BTreeMap::new() };
    let sandbox = Sandbox::new(&tree);
    let root = sandbox.root();
    let mut handle = Root::open(&root).unwrap();
    let nothing = |_: &Path| Pending::Nothing;
    assert_eq!(engine(&mut handle, &root, "/", None, &nothing), Outcome::Dir(PathBuf::new()));
    assert_eq!(engine(&mut handle, &root, "/a", None, &nothing), Outcome::Dir(PathBuf::from("a")));
    assert_eq!(engine(&mut handle, &root, "/tmp", None, &nothing), Outcome::Missing);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Without creating anything, the engine finds what the kernel finds, nothing else.
    #[test]
    fn lookups_resolve_as_the_kernel_does_in_root(tree in tree(), queries in prop::collection::vec(query(), 1..6)) {
        let sandbox = Sandbox::new(&tree);
        let host = sandbox.host();
        let root = sandbox.root();
        let mut handle = Root::open(&root).unwrap();
        let overlay = |p: &Path| tree.overlay.get(p).cloned().unwrap_or(Pending::Nothing);
        // One handle for all queries, as in a transaction: the directory cache is under test too.
        for q in &queries {
            let ours = engine(&mut handle, &root, q, None, &overlay);
            prop_assert_eq!(ours, kernel(&sandbox.kernel_root(), q), "query {:?} in {:?}", q, tree);
        }
        prop_assert_eq!(sandbox.host(), host);
    }

    /// Creating what is missing: only real directories inside the root are made, a lookup that
    /// found a directory finds the same one and makes nothing, and nothing else is "missing".
    #[test]
    fn creating_lookups_only_make_directories_inside_the_root(tree in tree(), queries in prop::collection::vec(query(), 1..6)) {
        let sandbox = Sandbox::new(&tree);
        let host = sandbox.host();
        let root = sandbox.root();
        let mut handle = Root::open(&root).unwrap();
        let overlay = |p: &Path| tree.overlay.get(p).cloned().unwrap_or(Pending::Nothing);
        for q in &queries {
            let plain = engine(&mut handle, &root, q, None, &overlay);
            let mut created = Vec::new();
            let made = engine(&mut handle, &root, q, Some(&mut created), &overlay);
            for c in &created {
                let on_disk = fd_path(c.parent.fd()).join(&c.name);
                let rel = on_disk.strip_prefix(&root).unwrap_or_else(|_| panic!("{q:?}: made {on_disk:?} outside the root"));
                prop_assert!(is_real_dir_under(&root, rel), "{:?}: made {:?}, not a real directory", q, c.canon);
                prop_assert_eq!(unstaged(rel), c.canon.clone());
            }
            match plain {
                Outcome::Dir(_) => {
                    prop_assert_eq!(&made, &plain);
                    prop_assert!(created.is_empty());
                }
                Outcome::Missing => prop_assert!(made != Outcome::Missing, "{:?}", q),
                Outcome::Loop | Outcome::NotDir => prop_assert_eq!(&made, &plain),
            }
        }
        prop_assert_eq!(sandbox.host(), host);
    }

    /// A cycle of symlinks, however spelt and whether on disk or pending, is a loop error.
    #[test]
    fn symlink_cycles_are_loop_errors(len in 1usize..45, forms in prop::collection::vec((0..5usize, any::<bool>()), 45), suffix in query()) {
        let name = |i: usize| format!("s{}", i % len);
        let mut tree = Tree { disk: vec![(PathBuf::from("d"), Kind::Dir)], overlay: BTreeMap::new() };
        for (i, &(form, pending)) in forms.iter().take(len).enumerate() {
            let next = name(i + 1);
            let t = match form {
                0 => next,
                1 => format!("./{next}"),
                2 => format!("/{next}"),
                3 => format!("d/../{next}"),
                _ => format!("../../{next}/"),
            };
            if pending {
                tree.overlay.insert(PathBuf::from(name(i)), Pending::Symlink(t.into()));
            } else {
                tree.disk.push((PathBuf::from(name(i)), Kind::Symlink(t)));
            }
        }
        let sandbox = Sandbox::new(&tree);
        let root = sandbox.root();
        let mut handle = Root::open(&root).unwrap();
        let overlay = |p: &Path| tree.overlay.get(p).cloned().unwrap_or(Pending::Nothing);
        let q = format!("s0/{suffix}");
        let mut created = Vec::new();
        prop_assert_eq!(engine(&mut handle, &root, &q, None, &overlay), Outcome::Loop);
        prop_assert_eq!(engine(&mut handle, &root, &q, Some(&mut created), &overlay), Outcome::Loop);
        prop_assert!(created.is_empty());
        prop_assert_eq!(kernel(&sandbox.kernel_root(), &q), Outcome::Loop);
    }
}

/// Parts of archive paths: plain names, the dot names, empty ones (from `//`), and the ones
/// the engine refuses: `..`, too long, with a NUL, its own temporary names.
fn archive_part() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => "[a-z]{1,3}".prop_map(String::into_bytes),
        1 => Just(b"".to_vec()),
        1 => Just(b".".to_vec()),
        1 => Just(b"..".to_vec()),
        1 => (250usize..260).prop_map(|n| vec![b'x'; n]),
        1 => Just(b"a\0b".to_vec()),
        1 => Just(b"x.unpack-new".to_vec()),
        2 => prop::collection::vec(any::<u8>().prop_filter("a part has no slash", |b| *b != b'/'), 1..4),
    ]
}

proptest! {
    /// A clean path is the archive path's names and nothing else: no `.`, no empty name, no
    /// root; and it is refused exactly when a name is `..`, too long, has a NUL or is a
    /// temporary name.
    #[test]
    fn clean_paths_are_the_plain_names_or_refused(absolute in any::<bool>(), parts in prop::collection::vec(archive_part(), 0..8), trailing in any::<bool>()) {
        let mut raw = if absolute { b"/".to_vec() } else { Vec::new() };
        raw.extend(parts.join(&b'/'));
        if trailing {
            raw.push(b'/');
        }
        let refused = parts.iter().any(|p| p == b".." || p.len() > 255 || p.contains(&0) || p.ends_with(b".unpack-new"));
        match clean_path(&raw) {
            Ok(path) => {
                prop_assert!(!refused, "{:?} accepted as {:?}", raw, path);
                let names: Vec<&[u8]> = path.components().map(|c| match c {
                    Component::Normal(n) => n.as_bytes(),
                    other => panic!("{other:?} in {path:?}"),
                }).collect();
                let expected: Vec<&[u8]> = parts.iter().map(Vec::as_slice).filter(|p| !p.is_empty() && *p != b".").collect();
                prop_assert_eq!(names, expected);
                prop_assert_eq!(clean_path(path.as_os_str().as_bytes()), Ok(path.clone()));
            }
            Err(_) => prop_assert!(refused, "{:?} refused", raw),
        }
    }
}
