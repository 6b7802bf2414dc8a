//! dpkg's command line and configuration, read as dpkg reads them (lib/dpkg/options.c,
//! src/main/main.c), for the calls the front end runs itself.
//!
//! [`engine_action`] looks at the command line alone and says whether the call is one the
//! engine takes (`--unpack`, `-i`/`--install`); any other call is handed to the real dpkg
//! untouched, so its errors stay dpkg's. For an engine call, [`Invocation::read`] applies the
//! running system's configuration (`/etc/dpkg/dpkg.cfg.d/*` with run-parts names, sorted,
//! then `/etc/dpkg/dpkg.cfg`, then `~/.dpkg.cfg`: never ROOT's) and then the command line, each
//! option as dpkg applies it: `--opt=value` or `--opt value`, bundled short options, the
//! directory rules of `--root`, `--admindir` and `--instdir` with `DPKG_ROOT` and
//! `DPKG_ADMINDIR`, the force list starting from `DPKG_FORCE` or dpkg's defaults. An option
//! the engine cannot honour is refused with a message naming it; nothing here panics on any
//! input.

use super::report::say;
use crate::error::escape;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What the call asks of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `--unpack`.
    Unpack,
    /// `-i`, `--install`: the unpack, then the real dpkg's `--configure` of what unpacked.
    Install,
}

impl Action {
    /// The name dpkg gives it in messages and in `startup archives ...`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Unpack => "unpack",
            Action::Install => "install",
        }
    }
}

/// dpkg's force names (src/common/force.c), each known to dpkg 1.21 and 1.22.
const FORCE_NAMES: &[&str] = &[
    "security-mac",
    "downgrade",
    "configure-any",
    "hold",
    "not-root",
    "bad-path",
    "bad-verify",
    "bad-version",
    "statoverride-add",
    "statoverride-remove",
    "overwrite",
    "overwrite-diverted",
    "overwrite-dir",
    "unsafe-io",
    "script-chrootless",
    "confnew",
    "confold",
    "confdef",
    "confmiss",
    "confask",
    "architecture",
    "breaks",
    "conflicts",
    "depends",
    "depends-version",
    "remove-reinstreq",
    "remove-protected",
    "remove-essential",
];

/// The long options of dpkg that take a value (the force family aside).
const VALUED: &[&str] = &[
    "pre-invoke",
    "post-invoke",
    "path-exclude",
    "path-include",
    "verify-format",
    "status-logger",
    "status-fd",
    "log",
    "root",
    "abort-after",
    "admindir",
    "instdir",
    "ignore-depends",
    "debug",
    "command-fd",
];

/// A short option's long name, for those dpkg has; `None` for an unknown letter.
fn short(c: char) -> Option<&'static str> {
    Some(match c {
        'i' => "install",
        'a' => "pending",
        'R' => "recursive",
        'G' => "refuse-downgrade",
        'O' => "selected-only",
        'N' => "no-also-select",
        'E' => "skip-same-version",
        'B' => "auto-deconfigure",
        'D' => "debug",
        'c' => "command-fd",
        'A' => "record-avail",
        'r' => "remove",
        'P' => "purge",
        'V' => "verify",
        'C' => "audit",
        'L' => "listfiles",
        's' => "status",
        'p' => "print-avail",
        'l' => "list",
        'S' => "search",
        'b' => "build",
        'e' => "control",
        'I' => "info",
        'f' => "field",
        'x' => "extract",
        'X' => "vextract",
        '?' => "help",
        _ => return None,
    })
}

fn takes_value(long: &str) -> bool {
    VALUED.contains(&long) || matches!(long, "force" | "refuse" | "no-force")
}

/// One option of the command line or a configuration file: its long name and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Opt {
    name: String,
    value: Option<String>,
}

/// The options and the rest of `args` (the command line without the program's name), split as
/// dpkg splits them: options up to the first argument that is not one (`-` alone is an
/// argument, `--` ends the options and is dropped).
fn split(args: &[String]) -> Result<(Vec<Opt>, Vec<String>), String> {
    let mut opts = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            break;
        }
        if arg == "-" || !arg.starts_with('-') {
            i -= 1;
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (long.to_string(), None),
            };
            let family = ["force-", "refuse-", "no-force-"].iter().any(|p| name.starts_with(p));
            if matches!(name.as_str(), "force" | "refuse" | "no-force") && inline.is_some() {
                return Err(format!("unknown option --{}", escape(long)));
            }
            let value = if takes_value(&name) {
                match inline {
                    Some(v) => Some(v),
                    None => {
                        let v = args.get(i).ok_or(format!("--{name} needs a value"))?;
                        i += 1;
                        Some(v.clone())
                    }
                }
            } else if let Some(v) = inline {
                if family {
                    return Err(format!("unknown option --{}", escape(long)));
                }
                return Err(format!("--{name} takes no value, given '{}'", escape(&v)));
            } else {
                None
            };
            opts.push(Opt { name, value });
            continue;
        }
        let letters: Vec<char> = arg[1..].chars().collect();
        for (k, &c) in letters.iter().enumerate() {
            let name = short(c).ok_or(format!("unknown option -{}", escape(&c.to_string())))?;
            if takes_value(name) {
                let rest: String = letters[k + 1..].iter().collect();
                let rest = rest.strip_prefix('=').unwrap_or(&rest).to_string();
                let value = if rest.is_empty() {
                    let v = args.get(i).ok_or(format!("-{c} needs a value"))?;
                    i += 1;
                    v.clone()
                } else {
                    rest
                };
                opts.push(Opt { name: name.to_string(), value: Some(value) });
                break;
            }
            opts.push(Opt { name: name.to_string(), value: None });
        }
    }
    Ok((opts, args[i..].to_vec()))
}

/// The engine's action of the call, if it is one: the command line has `--unpack` or
/// `-i`/`--install` among its options and no other action, no `--no-act` and no `--force-help`.
/// Anything else (another action, a command line dpkg would refuse) is the real dpkg's.
pub fn engine_action(args: &[String]) -> Option<Action> {
    let (opts, _) = split(args).ok()?;
    let mut action = None;
    for o in &opts {
        let this = match o.name.as_str() {
            "unpack" => Action::Unpack,
            "install" => Action::Install,
            "no-act" | "dry-run" | "simulate" | "force-help" | "help" | "version" => return None,
            n if is_option(n) => continue,
            _ => return None,
        };
        if action.is_some_and(|a| a != this) {
            return None;
        }
        action = Some(this);
    }
    action
}

/// Whether `name` is one of dpkg's options (not an action).
fn is_option(name: &str) -> bool {
    const FLAGS: &[&str] = &[
        "pending",
        "recursive",
        "no-pager",
        "no-debsig",
        "refuse-downgrade",
        "selected-only",
        "triggers",
        "no-triggers",
        "no-also-select",
        "skip-same-version",
        "auto-deconfigure",
        "robot",
    ];
    FLAGS.contains(&name)
        || takes_value(name)
        || ["force-", "refuse-", "no-force-"].iter().any(|p| name.starts_with(p))
}

/// An engine call, its configuration and command line applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub action: Action,
    /// dpkg's instdir: the root, `/` for none.
    pub instdir: PathBuf,
    pub admindir: PathBuf,
    /// `--log`: a path of the running system, as dpkg opens it.
    pub log: Option<PathBuf>,
    pub status_fds: Vec<i32>,
    /// `--abort-after` (dpkg's default 50).
    pub abort_after: u32,
    pub recursive: bool,
    pub auto_deconfigure: bool,
    pub no_triggers: bool,
    /// The force names in effect.
    pub force: BTreeSet<String>,
    /// `path-exclude` (false) and `path-include` (true) globs, in order.
    pub filters: Vec<(String, bool)>,
    /// The archives (or with `recursive`, the paths to walk), as given.
    pub args: Vec<String>,
    /// The options of the command line again, each `--NAME[=VALUE]`, for the real dpkg's
    /// `--configure` after an `--install`.
    pub forwarded: Vec<String>,
}

/// Where the configuration is read from; tests give their own.
pub struct Sources<'a> {
    /// `/etc/dpkg`.
    pub config_dir: &'a Path,
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// The environment variable `name`.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// The state of the directory options, as lib/dpkg/options-dirs.c keeps it.
struct Dirs<'e> {
    instdir: String,
    admindir: Option<String>,
    env: &'e dyn Fn(&str) -> Option<String>,
}

impl Dirs<'_> {
    fn default_admindir(&self) -> String {
        (self.env)("DPKG_ADMINDIR").unwrap_or_else(|| format!("{}/var/lib/dpkg", self.instdir))
    }
}

fn trim_dir(dir: &str) -> String {
    let mut d = dir.to_string();
    loop {
        if let Some(s) = d.strip_suffix("/.") {
            d = s.to_string();
        } else if d.len() > 1 && d.ends_with('/') {
            d.pop();
        } else {
            break;
        }
    }
    if d == "/" {
        String::new()
    } else {
        d
    }
}

impl Invocation {
    /// The call `args` (the command line without the program's name) as dpkg reads it, its
    /// configuration from `sources`; `action` from [`engine_action`]. Errors are dpkg's usage
    /// and configuration errors (exit 2), each naming the option or the file and line.
    pub fn read(args: &[String], action: Action, sources: &Sources<'_>) -> Result<Self, String> {
        let env = sources.env;
        let mut inv = Invocation {
            action,
            instdir: PathBuf::new(),
            admindir: PathBuf::new(),
            log: None,
            status_fds: Vec::new(),
            abort_after: 50,
            recursive: false,
            auto_deconfigure: false,
            no_triggers: false,
            force: match env("DPKG_FORCE") {
                Some(list) => force_list(&list)?.into_iter().collect(),
                None => ["security-mac", "downgrade"].iter().map(|s| s.to_string()).collect(),
            },
            filters: Vec::new(),
            args: Vec::new(),
            forwarded: Vec::new(),
        };
        let mut dirs =
            Dirs { instdir: trim_dir(&env("DPKG_ROOT").unwrap_or_default()), admindir: None, env };
        for (file, opts) in config_files(sources)? {
            for (line, o) in opts {
                inv.apply(&o, &mut dirs)
                    .map_err(|e| format!("configuration error: {}:{line}: {e}", escape(&file)))?;
            }
        }
        let (opts, rest) = split(args)?;
        for o in &opts {
            inv.apply(o, &mut dirs)?;
            if !matches!(o.name.as_str(), "unpack" | "install" | "recursive") {
                inv.forwarded.push(match &o.value {
                    Some(v) => format!("--{}={v}", o.name),
                    None => format!("--{}", o.name),
                });
            }
        }
        inv.args = rest;
        let admindir = dirs.admindir.clone().unwrap_or_else(|| dirs.default_admindir());
        inv.instdir = PathBuf::from(if dirs.instdir.is_empty() { "/" } else { &dirs.instdir });
        inv.admindir = PathBuf::from(admindir);
        if inv.args.is_empty() {
            return Err(format!(
                "--{}{} needs at least one {} argument",
                action.name(),
                if inv.recursive { " --recursive" } else { "" },
                if inv.recursive { "path" } else { "package archive file" }
            ));
        }
        Ok(inv)
    }

    /// Applies one option, as dpkg does.
    fn apply(&mut self, o: &Opt, dirs: &mut Dirs<'_>) -> Result<(), String> {
        let value = || o.value.clone().ok_or(format!("--{} needs a value", o.name));
        let refuse =
            |why: &str| Err(format!("--{} is not supported by unpack-dpkg: {why}", o.name));
        if apply_place(o, dirs, &mut self.force)? {
            return Ok(());
        }
        match o.name.as_str() {
            "unpack" | "install" => {}
            "log" => self.log = Some(PathBuf::from(value()?)),
            "status-fd" => self.status_fds.push(int(&value()?, "status-fd")? as i32),
            "abort-after" => self.abort_after = int(&value()?, "abort-after")?,
            "recursive" => self.recursive = true,
            "auto-deconfigure" => self.auto_deconfigure = true,
            "no-triggers" => self.no_triggers = true,
            "triggers" => self.no_triggers = false,
            "path-exclude" => self.filters.push((value()?, false)),
            "path-include" => self.filters.push((value()?, true)),
            // What changes nothing in the unpack phase: signatures dpkg does not check by
            // default either, a pager, the obsolete -N, debugging output.
            "no-debsig" | "no-pager" | "no-also-select" | "debug" => {}
            "refuse-downgrade" => {
                return refuse("the engine does not compare versions to refuse a downgrade")
            }
            "pre-invoke" | "post-invoke" | "status-logger" | "ignore-depends" | "verify-format"
            | "pending" | "selected-only" | "skip-same-version" | "robot" | "command-fd" => {
                return refuse("the engine does not implement it; run dpkg itself")
            }
            other => return Err(format!("unknown option '{}'", escape(other))),
        }
        Ok(())
    }
}

/// Applies `o` if it says where the call works (`--root`, `--admindir`, `--instdir`, as
/// lib/dpkg/options-dirs.c) or what it forces (the force family): true when it did.
fn apply_place(o: &Opt, dirs: &mut Dirs<'_>, force: &mut BTreeSet<String>) -> Result<bool, String> {
    let value = || o.value.clone().ok_or(format!("--{} needs a value", o.name));
    match o.name.as_str() {
        // dpkg's -G, not of the force family.
        "refuse-downgrade" => return Ok(false),
        "root" => {
            dirs.instdir = trim_dir(&value()?);
            dirs.admindir = Some(format!("{}/var/lib/dpkg", dirs.instdir));
        }
        "admindir" => dirs.admindir = Some(value()?),
        "instdir" => {
            if dirs.admindir.is_none() {
                dirs.admindir = Some(dirs.default_admindir());
            }
            dirs.instdir = trim_dir(&value()?);
        }
        "force" => force.extend(force_list(&value()?)?),
        "refuse" | "no-force" => {
            for name in force_list(&value()?)? {
                force.remove(&name);
            }
        }
        n if n.starts_with("force-") => force.extend(force_list(&n[6..])?),
        n if n.starts_with("refuse-") || n.starts_with("no-force-") => {
            let list = n.trim_start_matches("refuse-").trim_start_matches("no-force-");
            for name in force_list(list)? {
                force.remove(&name);
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A `--configure` call of the real dpkg, which the front end runs under its configure guard
/// (`src/dpkg/configure_guard.rs`): where it works and whether it forces unsafe I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configure {
    /// dpkg's instdir: the root, `/` for none.
    pub instdir: PathBuf,
    pub admindir: PathBuf,
    pub unsafe_io: bool,
}

/// The call `args` if it is dpkg's `--configure` (its only action, no `--no-act`), read with
/// its configuration as [`Invocation::read`] reads an engine call's, but only for where it
/// works and what it forces: the real dpkg gets the call unchanged and judges the rest. `None`
/// for any other call, and for one the real dpkg will refuse (its message is the one to see).
pub fn configure_call(args: &[String], sources: &Sources<'_>) -> Option<Configure> {
    let (opts, _) = split(args).ok()?;
    let mut configure = false;
    for o in &opts {
        match o.name.as_str() {
            "configure" => configure = true,
            "no-act" | "dry-run" | "simulate" | "force-help" | "help" | "version" => return None,
            n if is_option(n) => {}
            _ => return None,
        }
    }
    if !configure {
        return None;
    }
    let env = sources.env;
    let mut force: BTreeSet<String> = match env("DPKG_FORCE") {
        Some(list) => force_list(&list).ok()?.into_iter().collect(),
        None => BTreeSet::new(),
    };
    let mut dirs =
        Dirs { instdir: trim_dir(&env("DPKG_ROOT").unwrap_or_default()), admindir: None, env };
    let config = config_files(sources).ok()?;
    for o in config.iter().flat_map(|(_, opts)| opts.iter().map(|(_, o)| o)).chain(&opts) {
        apply_place(o, &mut dirs, &mut force).ok()?;
    }
    let admindir = dirs.admindir.clone().unwrap_or_else(|| dirs.default_admindir());
    let instdir = if dirs.instdir.is_empty() { "/".to_string() } else { dirs.instdir };
    Some(Configure {
        instdir: PathBuf::from(instdir),
        admindir: PathBuf::from(admindir),
        unsafe_io: force.contains("unsafe-io"),
    })
}

/// A comma-separated force list, `all` expanded; an unknown name is an error.
fn force_list(list: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for name in list.split(',').filter(|n| !n.is_empty()) {
        if name == "all" {
            names.extend(FORCE_NAMES.iter().map(|s| s.to_string()));
        } else if FORCE_NAMES.contains(&name) {
            names.push(name.to_string());
        } else {
            return Err(format!("unknown force/refuse option '{}'", escape(name)));
        }
    }
    Ok(names)
}

/// dpkg's integer option values: `strtol(_, _, 0)`, 0 to `INT_MAX`.
fn int(text: &str, what: &str) -> Result<u32, String> {
    let parsed = if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        u32::from_str_radix(hex, 16)
    } else if text.len() > 1 && text.starts_with('0') {
        u32::from_str_radix(&text[1..], 8)
    } else {
        text.parse()
    };
    parsed
        .ok()
        .filter(|&n| n <= i32::MAX as u32)
        .ok_or(format!("invalid integer for --{what}: '{}'", escape(text)))
}

/// The configuration files in dpkg's order, each with its options by line number.
type Config = Vec<(PathBuf, Vec<(usize, Opt)>)>;

fn config_files(sources: &Sources<'_>) -> Result<Config, String> {
    let mut files = Vec::new();
    let dir = sources.config_dir.join("dpkg.cfg.d");
    match std::fs::read_dir(&dir) {
        Ok(entries) => {
            let mut names: Vec<String> = Vec::new();
            for e in entries {
                let e = e.map_err(|e| format!("{}: {e}", escape(&dir)))?;
                let name = e.file_name().to_string_lossy().into_owned();
                let valid = !name.starts_with('.')
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                if valid {
                    names.push(name);
                }
            }
            names.sort();
            files.extend(names.into_iter().map(|n| dir.join(n)));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(format!("error opening configuration directory {}: {e}", escape(&dir)))
        }
    }
    files.push(sources.config_dir.join("dpkg.cfg"));
    if let Some(home) = &sources.home {
        files.push(home.join(".dpkg.cfg"));
    }
    let mut out = Vec::new();
    for file in files {
        match std::fs::read(&file) {
            Ok(bytes) => {
                let opts =
                    parse_config(&String::from_utf8_lossy(&bytes)).map_err(|(line, e)| {
                        format!("configuration error: {}:{line}: {e}", escape(&file))
                    })?;
                out.push((file, opts));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => {
                return Err(format!("configuration error: {}: a directory", escape(&file)))
            }
            // dpkg warns and goes on.
            Err(e) => say(&format!(
                "unpack-dpkg: warning: failed to open configuration file '{}' for reading: {e}",
                escape(&file)
            )),
        }
    }
    Ok(out)
}

/// A configuration file's lines as options (lib/dpkg/options.c `dpkg_options_load_file`):
/// `NAME`, `NAME VALUE` or `NAME=VALUE`, quotes around the value stripped; `#` comments.
fn parse_config(text: &str) -> Result<Vec<(usize, Opt)>, (usize, String)> {
    let mut opts = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let end =
            line.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).unwrap_or(line.len());
        let name = &line[..end];
        let mut rest = line.get(end + 1..).unwrap_or("");
        if end < line.len() && line.as_bytes()[end] != b'=' {
            rest = rest.strip_prefix('=').unwrap_or(rest);
        }
        let rest = rest.trim_start();
        let value = if rest.is_empty() {
            None
        } else {
            Some(
                strip_quotes(rest)
                    .ok_or((n + 1, format!("unbalanced quotes in '{}'", escape(line))))?,
            )
        };
        if name.is_empty() {
            return Err((n + 1, format!("unknown option '{}'", escape(line))));
        }
        opts.push((n + 1, Opt { name: name.to_string(), value }));
    }
    Ok(opts)
}

fn strip_quotes(value: &str) -> Option<String> {
    for q in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(q) {
            return inner.strip_suffix(q).map(str::to_string);
        }
    }
    Some(value.to_string())
}

/// The front end's own configuration: where it says which strategy to use.
pub const CONFIG: &str = "/etc/unpack/unpack-dpkg.conf";

/// The durability strategy of an engine call: `chosen` (the `UNPACK_DPKG_STRATEGY`
/// environment variable), else the `strategy NAME` line of the front end's configuration
/// `config` (a missing file says nothing; `#` starts a comment), else `none` under
/// `--force-unsafe-io` (`unsafe_io`), else `syncfs`: an explicit choice of the front end wins.
/// With the strategy, why it was chosen. A line the file cannot have is an error naming it.
pub fn strategy(
    chosen: Option<String>,
    config: &Path,
    unsafe_io: bool,
) -> Result<(String, String), String> {
    if let Some(name) = chosen {
        return Ok((name, "UNPACK_DPKG_STRATEGY".into()));
    }
    let text = match std::fs::read_to_string(config) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{}: {e}", escape(config))),
    };
    let mut from_file = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line
            .split_once(|c: char| c == '=' || c.is_whitespace())
            .map_or((line, ""), |(k, v)| (k.trim(), v.trim()));
        match (key, value) {
            ("strategy", name) if !name.is_empty() => from_file = Some(name.to_string()),
            _ => {
                return Err(format!(
                    "{}:{}: unknown line '{}' (known: strategy NAME)",
                    escape(config),
                    n + 1,
                    escape(line)
                ))
            }
        }
    }
    Ok(match (from_file, unsafe_io) {
        (Some(name), _) => (name, escape(config).to_string()),
        (None, true) => ("none".into(), "--force-unsafe-io".into()),
        (None, false) => ("syncfs".into(), "the default".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    fn read(
        args: &[&str],
        env: &[(&str, &str)],
        config: &[(&str, &str)],
    ) -> Result<Invocation, String> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in config {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let env: Vec<(String, String)> =
            env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let lookup = move |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let args = strings(args);
        let action = engine_action(&args).expect("an engine action");
        Invocation::read(
            &args,
            action,
            &Sources { config_dir: dir.path(), home: None, env: &lookup },
        )
    }

    fn configure(args: &[&str], config: &[(&str, &str)]) -> Option<Configure> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in config {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let none = |_: &str| None;
        configure_call(&strings(args), &Sources { config_dir: dir.path(), home: None, env: &none })
    }

    #[test]
    fn a_configure_call_is_guarded_where_it_works_and_no_other_is() {
        let plain = |instdir: &str, admindir: &str, unsafe_io| Configure {
            instdir: PathBuf::from(instdir),
            admindir: PathBuf::from(admindir),
            unsafe_io,
        };
        let apt = ["--status-fd", "19", "--configure", "al-00:all", "al-01:all"];
        assert_eq!(configure(&apt, &[]), Some(plain("/", "/var/lib/dpkg", false)));
        let pending = ["--status-fd", "19", "--configure", "--pending"];
        assert_eq!(configure(&pending, &[]), Some(plain("/", "/var/lib/dpkg", false)));
        let rooted = ["--root=/r/", "--configure", "-a"];
        assert_eq!(configure(&rooted, &[]), Some(plain("/r", "/r/var/lib/dpkg", false)));
        // The running system's dpkg.cfg.d counts, and the command line after it.
        let cfg = [("dpkg.cfg.d/unsafe", "force-unsafe-io\n")];
        assert_eq!(configure(&apt, &cfg), Some(plain("/", "/var/lib/dpkg", true)));
        let refused = ["--refuse-unsafe-io", "--configure", "-a"];
        assert_eq!(configure(&refused, &cfg), Some(plain("/", "/var/lib/dpkg", false)));
        // Not a configure, or one dpkg will refuse or not do: the real dpkg's alone.
        for other in [
            &["--remove", "al-00"][..],
            &["--configure", "--no-act", "-a"],
            &["--configure", "--remove", "x"],
            &["--configure", "--force-nonsense", "-a"],
            &["--unpack", "/a.deb"],
        ] {
            assert_eq!(configure(other, &[]), None, "{other:?}");
        }
    }

    #[test]
    fn apts_unpack_call_is_the_engines_and_other_calls_are_dpkgs() {
        let apt = strings(&[
            "--status-fd",
            "3",
            "--no-triggers",
            "--unpack",
            "--auto-deconfigure",
            "/a.deb",
        ]);
        assert_eq!(engine_action(&apt), Some(Action::Unpack));
        assert_eq!(engine_action(&strings(&["-iR", "/d"])), Some(Action::Install));
        for other in [
            &["--configure", "a"][..],
            &["--status-fd", "3", "--configure", "--pending"],
            &["-l"],
            &["--unpack", "--no-act", "/a.deb"],
            &["--unpack", "--remove", "a"],
            &["--unpack", "--force=depends", "/a.deb"],
            &["--force-help"],
            &["--unpack", "--no-triggers=1", "/a.deb"],
        ] {
            assert_eq!(engine_action(&strings(other)), None, "{other:?}");
        }
    }

    #[test]
    fn options_after_the_first_archive_are_archives_and_values_come_either_way() {
        let inv = read(
            &["--status-fd=3", "--log", "/l", "--unpack", "/a.deb", "--no-triggers"],
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(inv.status_fds, [3]);
        assert_eq!(inv.log, Some(PathBuf::from("/l")));
        assert!(!inv.no_triggers);
        assert_eq!(inv.args, ["/a.deb", "--no-triggers"]);
        assert_eq!(inv.forwarded, ["--status-fd=3", "--log=/l"]);
    }

    #[test]
    fn directories_follow_dpkgs_precedence() {
        let dirs = |args: &[&str], env: &[(&str, &str)]| {
            let mut all = args.to_vec();
            all.extend(["--unpack", "/a.deb"]);
            let inv = read(&all, env, &[]).unwrap();
            (inv.instdir.display().to_string(), inv.admindir.display().to_string())
        };
        assert_eq!(dirs(&[], &[]), ("/".into(), "/var/lib/dpkg".into()));
        assert_eq!(dirs(&["--root=/R1/"], &[]), ("/R1".into(), "/R1/var/lib/dpkg".into()));
        assert_eq!(dirs(&["--root=/R1", "--admindir=/A1"], &[]), ("/R1".into(), "/A1".into()));
        assert_eq!(
            dirs(&["--admindir=/A1", "--root=/R1"], &[]),
            ("/R1".into(), "/R1/var/lib/dpkg".into())
        );
        assert_eq!(dirs(&["--instdir=/I1"], &[]), ("/I1".into(), "/var/lib/dpkg".into()));
        assert_eq!(
            dirs(&["--root", "/R1", "--instdir", "/I1"], &[]),
            ("/I1".into(), "/R1/var/lib/dpkg".into())
        );
        assert_eq!(dirs(&[], &[("DPKG_ROOT", "/E1")]), ("/E1".into(), "/E1/var/lib/dpkg".into()));
        assert_eq!(
            dirs(&[], &[("DPKG_ROOT", "/E1"), ("DPKG_ADMINDIR", "/EA")]),
            ("/E1".into(), "/EA".into())
        );
        assert_eq!(
            dirs(&["--instdir=/I1"], &[("DPKG_ADMINDIR", "/EA")]),
            ("/I1".into(), "/EA".into())
        );
    }

    #[test]
    fn configuration_comes_first_from_run_parts_names_in_order() {
        let config = [
            ("dpkg.cfg.d/10filter", "# comment\npath-exclude=/usr/share/doc/*\n"),
            ("dpkg.cfg.d/20ignored.cfg", "path-exclude=/ignored/*\n"),
            ("dpkg.cfg.d/05unsafe", "force-unsafe-io\n"),
            (
                "dpkg.cfg",
                "no-debsig\nlog /var/log/dpkg.log\npath-include \"/usr/share/doc/*/copyright\"\n",
            ),
        ];
        let inv = read(&["--log=/mine", "--unpack", "/a.deb"], &[], &config).unwrap();
        assert_eq!(inv.log, Some(PathBuf::from("/mine")));
        assert!(inv.force.contains("unsafe-io"));
        assert_eq!(
            inv.filters,
            [
                ("/usr/share/doc/*".to_string(), false),
                ("/usr/share/doc/*/copyright".to_string(), true)
            ]
        );
        let bad =
            read(&["--unpack", "/a.deb"], &[], &[("dpkg.cfg", "\nfrobnicate\n")]).unwrap_err();
        assert!(bad.contains("dpkg.cfg:2: unknown option 'frobnicate'"), "{bad}");
        let quotes = read(&["--unpack", "/a.deb"], &[], &[("dpkg.cfg", "log \"/x\n")]).unwrap_err();
        assert!(quotes.contains("dpkg.cfg:1: unbalanced quotes"), "{quotes}");
    }

    #[test]
    fn forces_start_from_dpkgs_defaults_or_dpkg_force() {
        let inv = read(
            &["--force-overwrite,depends", "--refuse-downgrade-nope", "--unpack", "/a.deb"],
            &[],
            &[],
        );
        assert!(inv.unwrap_err().contains("unknown force/refuse option 'downgrade-nope'"));
        let inv = read(
            &["--force-overwrite,depends", "--no-force-depends", "--unpack", "/a.deb"],
            &[],
            &[],
        )
        .unwrap();
        let names: Vec<&str> = inv.force.iter().map(String::as_str).collect();
        assert_eq!(names, ["downgrade", "overwrite", "security-mac"]);
        let inv = read(&["--force", "conflicts", "--unpack", "/a.deb"], &[("DPKG_FORCE", "")], &[])
            .unwrap();
        assert_eq!(inv.force.iter().collect::<Vec<_>>(), ["conflicts"]);
    }

    #[test]
    fn the_front_ends_strategy_wins_over_unsafe_io() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("unpack-dpkg.conf");
        let pick = |env: Option<&str>, unsafe_io| {
            strategy(env.map(String::from), &conf, unsafe_io).map(|(name, _)| name)
        };
        assert_eq!(pick(None, false).unwrap(), "syncfs");
        assert_eq!(pick(None, true).unwrap(), "none");
        std::fs::write(&conf, "# the barrier\nstrategy fsync\n").unwrap();
        assert_eq!(pick(None, true).unwrap(), "fsync");
        assert_eq!(pick(Some("writeback"), true).unwrap(), "writeback");
        std::fs::write(&conf, "strategy=batch\n").unwrap();
        assert_eq!(pick(None, false).unwrap(), "batch");
        std::fs::write(&conf, "\nstrateg fsync\n").unwrap();
        let e = pick(None, false).unwrap_err();
        assert!(e.contains("unpack-dpkg.conf:2: unknown line 'strateg fsync'"), "{e}");
    }

    #[test]
    fn what_the_engine_cannot_honour_is_refused_by_name() {
        let e = read(&["--pre-invoke=true", "--unpack", "/a.deb"], &[], &[]).unwrap_err();
        assert!(e.contains("--pre-invoke is not supported"), "{e}");
        let e = read(&["-G", "--unpack", "/a.deb"], &[], &[]).unwrap_err();
        assert!(e.contains("--refuse-downgrade"), "{e}");
        let e = read(&["--abort-after=x", "--unpack", "/a.deb"], &[], &[]).unwrap_err();
        assert!(e.contains("invalid integer for --abort-after"), "{e}");
        assert_eq!(
            read(&["--abort-after=0x10", "--unpack", "/a"], &[], &[]).unwrap().abort_after,
            16
        );
        let octal = read(&["--abort-after=010", "--unpack", "/a"], &[], &[]).unwrap();
        assert_eq!(octal.abort_after, 8);
        let e = read(&["--unpack"], &[], &[]).unwrap_err();
        assert!(e.contains("needs at least one package archive file argument"), "{e}");
    }
}
