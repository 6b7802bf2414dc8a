//! The first stage's record of what it wrote, kept for the second stage to adopt. It only
//! remembers and stamps (one `statat` per name, through the root's confined resolution); it
//! must never write, and a stamp that differs means "read the package again", never "trust it".

use super::plan::Plan;
use crate::dpkg::database::Database;
use crate::error::{Error, Result};
use crate::fs::root::{Pending, Root, Stamp};
use crate::read::control::ControlArchive;
use crate::read::entry::{Entry, Kind};
use crate::read::lanes::FileData;
use crate::txn::transaction::Transaction;
use crate::txn::write_phase::{Package, Stage};
use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;

/// The biggest conffile whose bytes the first stage keeps for the second (which writes it
/// again as `NAME.dpkg-new`): conffiles are small files under `/etc`; a package with a bigger
/// one is read again.
const KEPT_CONFFILE: u64 = 1 << 20;

/// The most conffile bytes the first stage keeps in all (a minbase's are about 400 KiB): past
/// it, a package's conffiles are not kept and it is read again, so that a package of many
/// conffiles costs no more memory than any other (300 of 1 MiB kept whole peaked at 310 MiB).
const KEPT_IN_ALL: u64 = 8 << 20;

/// What the first stage wrote, kept for the second stage to *adopt*: a package whose files are
/// still as the first stage's commit left them (no maintainer script changed one, nothing
/// diverts or overrides one) has them taken as they are, claimed in the second transaction
/// without being decompressed, written, flushed or renamed again. The first stage's commit
/// made them durable with the same strategy. Anything else is read from its archive again,
/// as debootstrap's dpkg reads every package again.
#[derive(Default)]
pub(crate) struct FirstStage {
    /// By the package's index in the call.
    packages: HashMap<usize, Written>,
    /// The first stage's package number (its index in [`Plan::first`]) -> the call's.
    indices: Vec<usize>,
    /// The names of the packages the second stage adopted, for the report.
    pub adopted: Vec<String>,
    /// The conffile bytes kept so far ([`KEPT_IN_ALL`] at most).
    kept: u64,
}

/// One package the first stage wrote.
pub(crate) struct Written {
    pub control: ControlArchive,
    /// Every entry in archive order, with a conffile's bytes.
    pub entries: Vec<(Entry, Option<Vec<u8>>)>,
    /// What each entry that is not a directory was after the first stage's commit, by entry.
    pub stamps: Vec<Option<Stamp>>,
    conffiles: Vec<PathBuf>,
}

impl FirstStage {
    pub fn new(plan: &Plan) -> FirstStage {
        FirstStage { indices: plan.first_indices.clone(), ..FirstStage::default() }
    }

    /// The first stage's package number `first` starts.
    pub fn begin(&mut self, first: usize, control: &ControlArchive) {
        let conffiles = match control.members.iter().find(|m| m.name == "conffiles") {
            Some(m) => crate::dpkg::format::list::parse_conffiles_member(&m.bytes)
                .map(|c| c.into_iter().map(|c| c.path).collect())
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let index = self.indices.get(first).copied().unwrap_or(usize::MAX);
        self.packages.insert(
            index,
            Written {
                control: control.clone(),
                entries: Vec::new(),
                stamps: Vec::new(),
                conffiles,
            },
        );
    }

    /// Whether the bytes of `entry`, of the package begun last, are to be kept: a conffile's.
    pub fn keeps(&self, first: usize, entry: &Entry) -> bool {
        let Some(w) = self.indices.get(first).and_then(|i| self.packages.get(i)) else {
            return false;
        };
        matches!(entry.kind, Kind::File { size } if size <= KEPT_CONFFILE && self.kept + size <= KEPT_IN_ALL)
            && w.conffiles.iter().any(|c| c.strip_prefix("/") == Ok(entry.path.as_path()))
    }

    /// An entry of the first stage's package number `first`, written.
    pub fn entry(&mut self, first: usize, entry: Entry, bytes: Option<Vec<u8>>) {
        self.kept += bytes.as_ref().map_or(0, |b| b.len() as u64);
        if let Some(w) = self.indices.get(first).and_then(|i| self.packages.get_mut(i)) {
            w.entries.push((entry, bytes));
        }
    }

    /// After the first stage's commit: what each written name is now.
    pub fn stamp(&mut self, root: &mut Root) {
        // The directory cache still marks the trees the first stage made as new, whose
        // children are only what it wrote: look on disk, as the second stage will.
        root.forget_dirs();
        for w in self.packages.values_mut() {
            w.stamps = w
                .entries
                .iter()
                .map(|(e, _)| {
                    (e.kind != Kind::Dir)
                        .then(|| root.stamp(&e.path, &|_| Pending::Nothing))
                        .flatten()
                        .map(|(_, s)| s)
                })
                .collect();
        }
    }

    /// The call's package `index` as the first stage wrote it, if the first stage wrote it and
    /// from the same control archive.
    pub fn written(&self, index: usize, control: &ControlArchive) -> Option<&Written> {
        self.packages.get(&index).filter(|w| w.control == *control)
    }

    /// Whether the first stage wrote the call's package `index`.
    pub fn wrote(&self, index: usize) -> bool {
        self.packages.contains_key(&index)
    }

    /// By the call's package index: whether the first stage wrote it.
    pub fn wrote_all(&self, count: usize) -> Vec<bool> {
        (0..count).map(|i| self.wrote(i)).collect()
    }
}

/// The first stage: every entry is written as in any transaction, and remembered (with a
/// conffile's bytes) for the second stage to adopt.
pub(crate) struct Keeping<'f>(pub &'f mut FirstStage);

impl Stage for Keeping<'_> {
    fn begin(&mut self, index: usize, control: &ControlArchive) -> bool {
        self.0.begin(index, control);
        false
    }

    fn write(
        &mut self,
        tx: &mut Transaction<'_>,
        _database: Option<&mut Database>,
        at: Package<'_>,
        entry: Entry,
        data: &mut FileData<'_>,
    ) -> Result<()> {
        let Package { index, path } = at;
        if !self.0.keeps(index, &entry) {
            let added = tx.add(index, path, &entry, data);
            self.0.entry(index, entry, None);
            return added;
        }
        let mut bytes = Vec::new();
        data.read_to_end(&mut bytes).map_err(|e| Error::bad(path, e.to_string()))?;
        let added = tx.add(index, path, &entry, &mut bytes.as_slice());
        self.0.entry(index, entry, Some(bytes));
        added
    }
}
