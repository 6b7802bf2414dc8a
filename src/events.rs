//! What a call in database mode tells its caller as it goes, in dpkg's order: the events a
//! dpkg front end turns into apt's status-fd protocol and dpkg.log's lines (and plain `unpack`
//! into ROOT/var/log/dpkg.log), so that neither ever diffs the database afterwards.
//!
//! A leaf: the engine's layers emit these through the [`EventFn`] of
//! [`Options::events`](crate::options::Options::events); this module holds no behaviour.

/// A package as dpkg names it in an event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Package {
    pub name: String,
    pub arch: String,
    /// `Multi-Arch: same`: dpkg names it `NAME:ARCH` on status-fd whatever its architecture.
    pub multi_arch_same: bool,
}

impl Package {
    pub fn new(name: &str, arch: &str, multi_arch_same: bool) -> Package {
        Package { name: name.to_string(), arch: arch.to_string(), multi_arch_same }
    }

    /// `NAME:ARCH`, as dpkg.log names every package.
    pub fn with_arch(&self) -> String {
        format!("{}:{}", self.name, self.arch)
    }
}

/// One event of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A package of the call starts: dpkg's `processing: install|upgrade: PKG` on status-fd,
    /// `install PKG:ARCH <none> VERSION` or `upgrade PKG:ARCH OLD NEW` in dpkg.log. `old` is
    /// the version it upgrades (none for an install, or over config files only).
    Unpacking { package: Package, old: Option<String>, version: String },
    /// A package's state changed in the database, as dpkg notes it: status-fd's `status: PKG:
    /// STATE`, dpkg.log's `status STATE PKG:ARCH VERSION`.
    Status { package: Package, state: String, version: String },
    /// A package whose every file another took disappeared: status-fd's `processing:
    /// disappear: PKG`, dpkg.log's `disappear PKG:ARCH VERSION <none>` (then its
    /// `not-installed` status).
    Disappeared { package: Package, version: String },
    /// The package being unpacked failed, before its unwinding (whose states follow as
    /// [`Event::Status`]): dpkg's `status: ARCHIVE : error : REASON` and its `error processing
    /// archive` message, which it writes at that point. `reason` is the error on one line.
    Failed { reason: String },
    /// What dpkg says on its way about the others a package affects ("considering removing
    /// OLD in favour of NEW ...", "yes, will deconfigure ...", the warning of a `--force-*`
    /// that let a problem through): a front end prints it on standard error as dpkg does.
    Notice { message: String },
}

/// Called with each event of a call, from the engine's one writing thread.
pub type EventFn = dyn Fn(&Event) + Send + Sync;
