//! `none`: no flush at all.
//!
//! Guarantees nothing at a crash: a power cut may leave files empty, short, or missing (ext4's
//! `auto_da_alloc` covers some renames over existing files, nothing else). Exit 0 means only that
//! the page cache holds the new tree. It is the speed of `dpkg --force-unsafe-io`, eatmydata and
//! tar, and the baseline every other strategy's tax is measured against. It must never flush.

use super::strategy::{Info, Strategy};

pub const INFO: Info = Info {
    name: "none",
    aliases: &[],
    idea: "no flushing at all",
    guarantee: "none: a crash may leave empty, short or missing files; exit 0 means only cached",
    anchor: "dpkg --force-unsafe-io, eatmydata, tar",
    build: |_| Ok(std::sync::Arc::new(NoFlush)),
};

/// The strategy that never flushes.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFlush;

impl Strategy for NoFlush {
    fn name(&self) -> &str {
        INFO.name
    }

    fn is_durable(&self) -> bool {
        false
    }
}
