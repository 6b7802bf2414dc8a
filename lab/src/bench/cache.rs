//! The page-cache state a run starts from.
//!
//! Why: a warm cache measures the unpacker and the filesystem; a cold cache adds reading the
//! package and the unpacker's own binary from disk, which is what a machine does after a reboot.
//! Either way every run starts with no dirty data anywhere (a `sync` first), so that writeback
//! left over from making the filesystem or preparing the scenario is never billed to the run.
//! It never runs during a measured interval.

use super::{Error, Result};
use serde::Serialize;
use std::path::Path;

/// Warm: whatever the previous runs left in the page cache. Cold: sync and drop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    Warm,
    Cold,
}

const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

impl Cache {
    /// Every cache state, in the order the table shows them.
    pub const ALL: [Cache; 2] = [Cache::Warm, Cache::Cold];

    /// The name users type.
    pub fn name(self) -> &'static str {
        match self {
            Cache::Warm => "warm",
            Cache::Cold => "cold",
        }
    }

    /// Brings the machine to this state; called right before a measured run starts.
    pub fn settle(self) -> Result<()> {
        rustix::fs::sync();
        if self == Cache::Cold {
            // 3 = page cache, dentries and inodes.
            std::fs::write(DROP_CACHES, b"3").map_err(Error::io(Path::new(DROP_CACHES)))?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Cache {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Cache, String> {
        Cache::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown cache state '{s}' (known: warm, cold)"))
    }
}
