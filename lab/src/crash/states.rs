//! Crash states: the disk contents a power cut could leave, read off the device's write log.
//!
//! Why this shape: a device acknowledges writes before they are stable and may persist them in
//! any order, until a cache flush completes; then everything acknowledged before the flush is
//! stable. So the log is cut into *epochs*: each opens at a flush (the first at the `start`
//! mark, taken right after the old version was synced) and holds the writes up to the next
//! flush. A crash state is one epoch's opening prefix (everything before it, on disk for sure)
//! plus any subset of that epoch's writes, applied in log order. A logged write is cut into
//! 4 KiB-aligned units ([`UNIT_SECTORS`]) first: the loop device merges neighbouring writes
//! into one request (syncfs's data arrives as a single write of hundreds of KiB), while a drive
//! persists the blocks of a request independently, so the unit of loss is the block, not the
//! request. The candidates, in the order they are considered:
//!
//! 1. the prefix at every flush from the epoch holding the `returned` mark on, and the state at
//!    the `settled` mark (everything logged): the states a crash after a successful exit can
//!    leave, where the classic loss lives (the periodic journal commit records the renames
//!    before delayed allocation writes the data);
//! 2. then, alternating, the prefixes at the earlier flushes (seeded shuffle) and the states
//!    inside epochs, one epoch after another round-robin: all subsets of an epoch of at most
//!    [`EXHAUSTIVE`] writes (in-order prefixes first), else its in-order prefixes and seeded
//!    random subsets.
//!
//! Candidates are deduplicated by content before anything is built: each sector's content has a
//! 128-bit hash (zero for a zero sector), a disk's hash is their sum, and a state's hash is its
//! epoch's base sum plus the change of the sectors its writes touch. Equal sums, equal disks
//! (up to hash collisions), so the budget is spent on distinct states only. Selection depends
//! only on the log, the budget and the seed, so `--replay` finds the same state again.
//!
//! A FUA write (never logged by the loop device, which has no FUA) is taken as a write followed
//! by a flush, which can only hide states, never invent one. Writes before `start` are the base
//! of every state: the harness syncs right before that mark. This module never touches an image.

use super::CrashError;
use crate::vdisk::log::{LogEntry, LogReader, SECTOR_SIZE};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hasher};
use std::path::Path;

/// The mark taken when the root holds the scenario's starting state, synced.
pub const MARK_START: &str = "start";
/// The mark taken when the unpacker has exited.
pub const MARK_RETURNED: &str = "returned";
/// The mark taken at the end of the settle time, before the filesystem is unmounted.
pub const MARK_SETTLED: &str = "settled";

/// An epoch with at most this many writes has every subset of them tried.
pub const EXHAUSTIVE: usize = 10;

/// The unit a device persists on its own: 4 KiB (the block of modern drives and filesystems,
/// the page), aligned on the disk, in 512-byte sectors. A write of less stays one unit.
pub const UNIT_SECTORS: u64 = 8;

/// The writes between two flushes, and what the disk held when the first flush completed.
#[derive(Debug, Clone, Default)]
pub struct Epoch {
    /// The log index of the entry that opens it: the `start` mark or a flush.
    pub opened_by: u64,
    /// The sum of the sector hashes of the whole disk at the opening.
    base_hash: u128,
    /// The hash at the opening of every sector the epoch's writes touch.
    base: HashMap<u64, u128>,
    /// The writes and discards, in log order.
    pub writes: Vec<Write>,
}

/// One unit of a logged write (or a whole discard, as zeros) of an epoch.
#[derive(Debug, Clone)]
pub struct Write {
    /// The log index of the write it is part of.
    pub index: u64,
    /// The first sector it covers.
    pub sector: u64,
    /// The hash of each sector it leaves behind.
    hashes: Vec<u128>,
}

impl Write {
    /// How many sectors it covers.
    pub fn sectors(&self) -> u64 {
        self.hashes.len() as u64
    }
}

/// A log read as epochs.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub epochs: Vec<Epoch>,
    /// The epoch holding the `returned` mark; `None` when the log has none.
    pub returned_epoch: Option<usize>,
    /// Entries in the whole log.
    pub entries: u64,
    /// Flushes between `start` and `settled`.
    pub flushes: usize,
    /// Flushes after the `returned` mark with no write since the previous flush (or the mark).
    /// The filesystem under test never flushes an idle device by itself; another process's
    /// sync(2), which flushes every filesystem of the machine, does, and it writes delayed data
    /// too, which can close the window in which an unsafe strategy loses data.
    pub idle_flushes_after_returned: usize,
}

/// Where a state comes from, for people reading the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// Everything up to the `start` mark: the scenario's starting state.
    Start,
    /// Everything up to a flush.
    Flush,
    /// Everything up to the `settled` mark.
    End,
    /// A flush, then the first writes after it.
    InOrder,
    /// A flush, then some of the writes after it.
    Subset,
}

/// One crash state: an epoch's opening prefix plus some of its writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub epoch: usize,
    /// Positions in the epoch's writes that reached the disk, ascending.
    pub writes: Vec<usize>,
    pub origin: Origin,
}

/// A state described for the report.
#[derive(Debug, Clone, Serialize)]
pub struct StateInfo {
    pub id: usize,
    pub origin: Origin,
    pub epoch: usize,
    /// Everything up to this log entry is on the disk.
    pub after_log_entry: u64,
    /// The units after it that are on the disk too: `[log index, first sector, sectors]`.
    pub writes: Vec<[u64; 3]>,
    /// How many writes the epoch has.
    pub of: usize,
    /// A crash after the unpacker returned can leave this state.
    pub after_returned: bool,
}

/// The states chosen for a cell, in id order.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub states: Vec<State>,
    /// Candidates considered.
    pub candidates: usize,
    /// Candidates left out because an earlier one had the same content.
    pub duplicates: usize,
}

impl Timeline {
    /// Reads the log at `path` of a disk of `disk_bytes`.
    pub fn read(path: &Path, disk_bytes: u64) -> Result<Timeline, CrashError> {
        let bad = |reason: String| CrashError::BadLog { path: path.to_path_buf(), reason };
        let sectors = usize::try_from(disk_bytes / u64::from(SECTOR_SIZE))
            .map_err(|_| bad("disk too large".into()))?;
        let mut reader = LogReader::open(path)?;
        if reader.sector_size() != SECTOR_SIZE {
            return Err(bad(format!(
                "sector size {} (expected {SECTOR_SIZE})",
                reader.sector_size()
            )));
        }
        let mut disk = vec![0u128; sectors];
        let mut total = 0u128;
        let mut t = Timeline { entries: reader.nr_entries(), ..Timeline::default() };
        let mut started = false;
        // Writes since the last flush, counted only once the unpacker has returned.
        let mut idle: Option<usize> = None;
        while let Some(e) = reader.next_entry()? {
            if e.is_write() || e.is_discard() {
                within(&e, disk.len()).map_err(bad)?;
            }
            if !started {
                if e.mark.as_deref() == Some(MARK_START) {
                    started = true;
                    t.epochs.push(Epoch {
                        opened_by: e.index,
                        base_hash: total,
                        ..Epoch::default()
                    });
                } else {
                    apply(&mut disk, &mut total, &e).map_err(bad)?;
                }
                continue;
            }
            match e.mark.as_deref() {
                Some(MARK_SETTLED) => break,
                Some(MARK_RETURNED) => {
                    t.returned_epoch = Some(t.epochs.len() - 1);
                    idle = Some(0);
                }
                _ => {}
            }
            if e.is_flush() {
                t.flushes += 1;
                if idle == Some(0) {
                    t.idle_flushes_after_returned += 1;
                }
                idle = idle.map(|_| 0);
                t.epochs.push(Epoch { opened_by: e.index, base_hash: total, ..Epoch::default() });
            }
            if e.is_write() || e.is_discard() {
                idle = idle.map(|n| n + 1);
                let hashes = sector_hashes(&e);
                if let Some(epoch) = t.epochs.last_mut() {
                    for (i, _) in hashes.iter().enumerate() {
                        let s = e.sector + i as u64;
                        let before = disk.get(s as usize).copied().unwrap_or(0);
                        epoch.base.entry(s).or_insert(before);
                    }
                    epoch.writes.extend(units(&e, hashes));
                }
                apply(&mut disk, &mut total, &e).map_err(bad)?;
                if e.is_fua() {
                    t.epochs.push(Epoch {
                        opened_by: e.index,
                        base_hash: total,
                        ..Epoch::default()
                    });
                }
            }
        }
        if !started {
            return Err(bad(format!("no '{MARK_START}' mark")));
        }
        Ok(t)
    }

    /// True when a crash after the unpacker returned can leave `state`: its epoch opened at or
    /// after the last flush before the `returned` mark.
    pub fn after_returned(&self, state: &State) -> bool {
        self.returned_epoch.is_some_and(|r| state.epoch >= r)
    }

    /// The content hash of the disk in `state`.
    pub fn hash_of(&self, state: &State) -> u128 {
        let Some(epoch) = self.epochs.get(state.epoch) else { return 0 };
        let mut last: HashMap<u64, u128> = HashMap::new();
        for w in state.writes.iter().filter_map(|&i| epoch.writes.get(i)) {
            for (i, h) in w.hashes.iter().enumerate() {
                last.insert(w.sector + i as u64, *h);
            }
        }
        last.into_iter().fold(epoch.base_hash, |sum, (s, h)| {
            sum.wrapping_sub(epoch.base.get(&s).copied().unwrap_or(0)).wrapping_add(h)
        })
    }

    /// `state` described for the report.
    pub fn describe(&self, id: usize, state: &State) -> StateInfo {
        let epoch = self.epochs.get(state.epoch);
        StateInfo {
            id,
            origin: state.origin,
            epoch: state.epoch,
            after_log_entry: epoch.map_or(0, |e| e.opened_by),
            writes: state
                .writes
                .iter()
                .filter_map(|&i| {
                    epoch.and_then(|e| e.writes.get(i)).map(|w| [w.index, w.sector, w.sectors()])
                })
                .collect(),
            of: epoch.map_or(0, |e| e.writes.len()),
            after_returned: self.after_returned(state),
        }
    }

    /// Chooses up to `budget` states of distinct content, in the order of the module comment.
    pub fn select(&self, budget: usize, seed: u64) -> Selection {
        let mut rng = Rng(seed);
        let mut seen: HashSet<u128> = HashSet::new();
        let mut sel = Selection::default();
        let n = self.epochs.len();
        if n == 0 || budget == 0 {
            return sel;
        }
        // Returns true once the budget is spent.
        let mut take = |state: State, sel: &mut Selection| {
            sel.candidates += 1;
            if seen.insert(self.hash_of(&state)) {
                sel.states.push(state);
            } else {
                sel.duplicates += 1;
            }
            sel.states.len() >= budget
        };
        let after = self.returned_epoch.unwrap_or(n).min(n);
        for k in after..n {
            if take(self.prefix(k), &mut sel) {
                return sel;
            }
        }
        let last = n - 1;
        let end = State {
            epoch: last,
            writes: (0..self.epochs[last].writes.len()).collect(),
            origin: Origin::End,
        };
        if take(end, &mut sel) {
            return sel;
        }
        let mut earlier: Vec<usize> = (0..after).collect();
        rng.shuffle(&mut earlier);
        let mut earlier = earlier.into_iter();
        let mut inside = RoundRobin {
            gens: self
                .epochs
                .iter()
                .enumerate()
                .filter(|(_, e)| e.writes.len() > 1)
                .map(|(k, e)| EpochStates::new(k, e.writes.len(), budget, &mut rng))
                .collect(),
            next: 0,
        };
        loop {
            let a = earlier.next().map(|k| self.prefix(k));
            let b = inside.next(&mut rng);
            if a.is_none() && b.is_none() {
                return sel;
            }
            for state in a.into_iter().chain(b) {
                if take(state, &mut sel) {
                    return sel;
                }
            }
        }
    }

    fn prefix(&self, k: usize) -> State {
        State {
            epoch: k,
            writes: Vec::new(),
            origin: if k == 0 { Origin::Start } else { Origin::Flush },
        }
    }
}

/// `e` cut into units at every [`UNIT_SECTORS`] boundary of the disk; a discard stays whole
/// (it is one command, not data on its way to the medium).
fn units(e: &LogEntry, hashes: Vec<u128>) -> Vec<Write> {
    if e.is_discard() {
        return vec![Write { index: e.index, sector: e.sector, hashes }];
    }
    let mut out = Vec::new();
    let mut rest = &hashes[..];
    let mut sector = e.sector;
    while !rest.is_empty() {
        let room = (UNIT_SECTORS - sector % UNIT_SECTORS) as usize;
        let (unit, tail) = rest.split_at(room.min(rest.len()));
        out.push(Write { index: e.index, sector, hashes: unit.to_vec() });
        sector += unit.len() as u64;
        rest = tail;
    }
    out
}

/// Each sector's hash of what `e` leaves behind (zeros for a discard).
fn sector_hashes(e: &LogEntry) -> Vec<u128> {
    if e.is_discard() {
        return vec![0; e.nr_sectors as usize];
    }
    e.data
        .chunks(SECTOR_SIZE as usize)
        .enumerate()
        .map(|(i, d)| sector_hash(e.sector + i as u64, d))
        .collect()
}

/// A sector's content hash: zero for zeros, so an untouched (sparse) sector needs no hash.
fn sector_hash(sector: u64, data: &[u8]) -> u128 {
    if data.iter().all(|&b| b == 0) {
        return 0;
    }
    let lane = |salt: u8| {
        let mut h = DefaultHasher::new();
        h.write_u8(salt);
        h.write_u64(sector);
        h.write(data);
        h.finish()
    };
    (u128::from(lane(0)) << 64) | u128::from(lane(1))
}

/// Checks that a write or discard lies on a disk of `sectors` sectors.
fn within(e: &LogEntry, sectors: usize) -> Result<u64, String> {
    e.sector.checked_add(e.nr_sectors).filter(|&end| end <= sectors as u64).ok_or_else(|| {
        format!(
            "entry {} covers sectors {}+{} beyond the disk's {sectors}",
            e.index, e.sector, e.nr_sectors
        )
    })
}

/// Applies a write or discard to the per-sector hashes and their sum.
fn apply(disk: &mut [u128], total: &mut u128, e: &LogEntry) -> Result<(), String> {
    if !(e.is_write() || e.is_discard()) {
        return Ok(());
    }
    let end = within(e, disk.len())?;
    let hashes = sector_hashes(e);
    for (slot, h) in disk[e.sector as usize..end as usize].iter_mut().zip(hashes) {
        *total = total.wrapping_sub(*slot).wrapping_add(h);
        *slot = h;
    }
    Ok(())
}

/// The states inside one epoch, in the order they are tried.
#[derive(Debug)]
enum EpochStates {
    /// Every proper, non-empty subset as a bit mask: in-order prefixes first, then shuffled.
    All { epoch: usize, masks: Vec<u32>, next: usize },
    /// In-order prefixes (shuffled lengths) alternating with random subsets.
    Sampled {
        epoch: usize,
        m: usize,
        prefixes: Vec<usize>,
        next: usize,
        random_left: usize,
        turn: bool,
    },
}

impl EpochStates {
    fn new(epoch: usize, m: usize, budget: usize, rng: &mut Rng) -> EpochStates {
        if m <= EXHAUSTIVE {
            let full = (1u32 << m) - 1;
            let mut masks: Vec<u32> = (1..m).map(|j| (1u32 << j) - 1).collect();
            let mut others: Vec<u32> = (1..full).filter(|x| (x + 1) & x != 0).collect();
            rng.shuffle(&mut others);
            masks.extend(others);
            EpochStates::All { epoch, masks, next: 0 }
        } else {
            let mut prefixes: Vec<usize> = (1..m).collect();
            rng.shuffle(&mut prefixes);
            EpochStates::Sampled { epoch, m, prefixes, next: 0, random_left: budget, turn: false }
        }
    }

    fn next(&mut self, rng: &mut Rng) -> Option<State> {
        match self {
            EpochStates::All { epoch, masks, next } => {
                let mask = *masks.get(*next)?;
                *next += 1;
                let writes: Vec<usize> = (0..32).filter(|i| mask & (1 << i) != 0).collect();
                let in_order = (mask + 1) & mask == 0;
                Some(State {
                    epoch: *epoch,
                    writes,
                    origin: if in_order { Origin::InOrder } else { Origin::Subset },
                })
            }
            EpochStates::Sampled { epoch, m, prefixes, next, random_left, turn } => {
                *turn = !*turn;
                let prefix_left = *next < prefixes.len();
                if (*turn || *random_left == 0) && prefix_left {
                    let j = prefixes[*next];
                    *next += 1;
                    return Some(State {
                        epoch: *epoch,
                        writes: (0..j).collect(),
                        origin: Origin::InOrder,
                    });
                }
                while *random_left > 0 {
                    *random_left -= 1;
                    let p = 0.1 + 0.8 * rng.unit();
                    let writes: Vec<usize> = (0..*m).filter(|_| rng.unit() < p).collect();
                    if !writes.is_empty() && writes.len() < *m {
                        return Some(State { epoch: *epoch, writes, origin: Origin::Subset });
                    }
                }
                None
            }
        }
    }
}

/// One state from each epoch in turn.
#[derive(Debug)]
struct RoundRobin {
    gens: Vec<EpochStates>,
    next: usize,
}

impl RoundRobin {
    fn next(&mut self, rng: &mut Rng) -> Option<State> {
        while !self.gens.is_empty() {
            let i = self.next % self.gens.len();
            match self.gens[i].next(rng) {
                Some(state) => {
                    self.next = i + 1;
                    return Some(state);
                }
                None => {
                    self.gens.remove(i);
                    self.next = i;
                }
            }
        }
        None
    }
}

/// SplitMix64: a seeded, portable generator, so a seed means the same states everywhere.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vdisk::log::LogWriter;

    const DISK: u64 = 64 * 512;

    fn block(byte: u8) -> Vec<u8> {
        vec![byte; 512]
    }

    /// mkfs-like writes, start, then: w(1) w(2) FLUSH w(3) returned w(4) w(3 again, other data)
    /// FLUSH, settled, and an unmount write that no state may contain.
    fn sample_log(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("log");
        let mut w = LogWriter::create(&path).unwrap();
        w.write(0, &block(9)).unwrap();
        w.flush().unwrap();
        w.mark(MARK_START).unwrap(); // 2
        w.write(1, &block(1)).unwrap(); // 3
        w.write(2, &block(2)).unwrap(); // 4
        w.flush().unwrap(); // 5
        w.write(3, &block(3)).unwrap(); // 6
        w.mark(MARK_RETURNED).unwrap(); // 7
        w.write(4, &block(4)).unwrap(); // 8
        w.write(3, &block(5)).unwrap(); // 9
        w.flush().unwrap(); // 10
        w.mark(MARK_SETTLED).unwrap(); // 11
        w.write(5, &block(6)).unwrap();
        w.finish().unwrap();
        path
    }

    #[test]
    fn epochs_open_at_start_and_at_each_flush_and_stop_at_settled() {
        let dir = tempfile::tempdir().unwrap();
        let t = Timeline::read(&sample_log(dir.path()), DISK).unwrap();
        let opened: Vec<u64> = t.epochs.iter().map(|e| e.opened_by).collect();
        assert_eq!(opened, [2, 5, 10]);
        let writes: Vec<Vec<u64>> =
            t.epochs.iter().map(|e| e.writes.iter().map(|w| w.index).collect()).collect();
        assert_eq!(writes, [vec![3, 4], vec![6, 8, 9], vec![]]);
        assert_eq!(t.returned_epoch, Some(1));
        assert_eq!(t.flushes, 2);
        assert_eq!(t.idle_flushes_after_returned, 0);
    }

    #[test]
    fn flushes_after_the_exit_with_no_write_before_them_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = LogWriter::create(&path).unwrap();
        w.mark(MARK_START).unwrap();
        w.flush().unwrap(); // before the exit: not counted
        w.mark(MARK_RETURNED).unwrap();
        w.flush().unwrap(); // idle
        w.write(1, &block(1)).unwrap();
        w.flush().unwrap(); // after a write
        w.flush().unwrap(); // idle
        w.mark(MARK_SETTLED).unwrap();
        w.flush().unwrap(); // after settled: not counted
        w.finish().unwrap();
        assert_eq!(Timeline::read(&path, DISK).unwrap().idle_flushes_after_returned, 2);
    }

    #[test]
    fn every_distinct_state_is_chosen_once_and_nothing_after_settled() {
        let dir = tempfile::tempdir().unwrap();
        let t = Timeline::read(&sample_log(dir.path()), DISK).unwrap();
        let sel = t.select(1000, 7);
        // Epoch 0: {}, {w1}, {w2}, {w1,w2}=flush 1. Epoch 1 (writes a=3@3, b=4@4, c=5@3):
        // {} {a} {b} {c} {a,b} {b,c}={a,b,c} {a,c}={c}: 6 distinct, the full set equal to the
        // flush-2 state. So 3 + 6 = 9 distinct disks, the last one also the `end` state.
        assert_eq!(sel.states.len(), 9, "{:?}", sel.states);
        let hashes: HashSet<u128> = sel.states.iter().map(|s| t.hash_of(s)).collect();
        assert_eq!(hashes.len(), 9);
        assert_eq!(sel.candidates, sel.states.len() + sel.duplicates);
        // The states a crash after exit can leave come first: epoch 1's and 2's prefixes, end.
        assert_eq!(sel.states[0], State { epoch: 1, writes: vec![], origin: Origin::Flush });
        assert_eq!(sel.states[1], State { epoch: 2, writes: vec![], origin: Origin::Flush });
        assert!(t.after_returned(&sel.states[0]));
        assert!(!sel.states.iter().any(|s| s.epoch == 0 && t.after_returned(s)));
    }

    #[test]
    fn the_same_seed_chooses_the_same_states_and_the_budget_holds() {
        let dir = tempfile::tempdir().unwrap();
        let t = Timeline::read(&sample_log(dir.path()), DISK).unwrap();
        assert_eq!(t.select(5, 42).states, t.select(5, 42).states);
        assert_eq!(t.select(5, 42).states.len(), 5);
    }

    #[test]
    fn large_epochs_are_sampled_within_the_budget_without_repeats() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = LogWriter::create(&path).unwrap();
        w.mark(MARK_START).unwrap();
        for i in 0..40u8 {
            w.write(u64::from(i), &block(i + 1)).unwrap();
        }
        w.mark(MARK_RETURNED).unwrap();
        w.finish().unwrap();
        let t = Timeline::read(&path, DISK).unwrap();
        let sel = t.select(60, 1);
        assert_eq!(sel.states.len(), 60);
        let hashes: HashSet<u128> = sel.states.iter().map(|s| t.hash_of(s)).collect();
        assert_eq!(hashes.len(), 60);
        assert!(sel.states.iter().any(|s| s.origin == Origin::InOrder));
        assert!(sel.states.iter().any(|s| s.origin == Origin::Subset));
    }

    #[test]
    fn a_log_without_start_or_with_writes_beyond_the_disk_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = LogWriter::create(&path).unwrap();
        w.write(0, &block(1)).unwrap();
        w.finish().unwrap();
        assert!(matches!(Timeline::read(&path, DISK), Err(CrashError::BadLog { .. })));
        let mut w = LogWriter::create(&path).unwrap();
        w.mark(MARK_START).unwrap();
        w.write(DISK / 512, &block(1)).unwrap();
        w.finish().unwrap();
        assert!(matches!(Timeline::read(&path, DISK), Err(CrashError::BadLog { .. })));
        let mut w = LogWriter::create(&path).unwrap();
        w.mark(MARK_START).unwrap();
        w.discard(1, u64::MAX / 2).unwrap();
        w.finish().unwrap();
        assert!(matches!(Timeline::read(&path, DISK), Err(CrashError::BadLog { .. })));
    }

    #[test]
    fn writes_are_cut_at_4k_boundaries_of_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = LogWriter::create(&path).unwrap();
        w.mark(MARK_START).unwrap();
        w.write(5, &vec![1u8; 20 * 512]).unwrap();
        w.write(40, &block(2)).unwrap();
        w.finish().unwrap();
        let t = Timeline::read(&path, DISK).unwrap();
        let units: Vec<(u64, u64, u64)> =
            t.epochs[0].writes.iter().map(|w| (w.index, w.sector, w.sectors())).collect();
        assert_eq!(units, [(1, 5, 3), (1, 8, 8), (1, 16, 8), (1, 24, 1), (2, 40, 1)]);
    }

    #[test]
    fn hashes_see_content_not_history() {
        let e = |index, sector, byte| LogEntry {
            index,
            sector,
            nr_sectors: 1,
            flags: 0,
            data: block(byte),
            mark: None,
        };
        let mut disk = vec![0u128; 8];
        let mut total = 0;
        apply(&mut disk, &mut total, &e(0, 1, 7)).unwrap();
        apply(&mut disk, &mut total, &e(1, 1, 0)).unwrap();
        assert_eq!(total, 0, "writing zeros back gives the empty disk's hash");
        apply(&mut disk, &mut total, &e(2, 1, 7)).unwrap();
        let one = total;
        apply(&mut disk, &mut total, &e(3, 2, 7)).unwrap();
        assert_ne!(one, total, "the same bytes at another sector are another disk");
    }
}
