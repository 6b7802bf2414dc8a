//! Holding writes to a bandwidth.
//!
//! The device is modelled as a pipe that drains at `bandwidth` bytes per second: each write
//! occupies it for `bytes / bandwidth`, starting when the previous write has drained or now,
//! whichever is later. The server sleeps until its write has drained, so callers see the
//! device's throughput but an idle device owes nothing. Sleeps shorter than [`MIN_SLEEP`] are
//! carried forward instead of taken, because sleeping for microseconds costs more than it
//! waits; the average rate stays exact.
//!
//! The pacer is a pure function of its state and the `now` it is given, so it can be tested
//! without a clock. It never sleeps itself.

use std::time::{Duration, Instant};

/// Debt below this is carried to the next write instead of slept.
pub(crate) const MIN_SLEEP: Duration = Duration::from_millis(1);

#[derive(Debug)]
pub(crate) struct Pacer {
    bandwidth: Option<u64>,
    drained_at: Option<Instant>,
}

impl Pacer {
    pub(crate) fn new(bandwidth: Option<u64>) -> Pacer {
        Pacer { bandwidth, drained_at: None }
    }

    /// Accounts a write of `bytes` issued at `now`; returns how long to sleep before answering.
    pub(crate) fn write(&mut self, bytes: u64, now: Instant) -> Duration {
        let Some(bw) = self.bandwidth.filter(|bw| *bw > 0) else {
            return Duration::ZERO;
        };
        let cost_ns = u128::from(bytes) * 1_000_000_000 / u128::from(bw);
        let cost = Duration::from_nanos(u64::try_from(cost_ns).unwrap_or(u64::MAX));
        let start = self.drained_at.map_or(now, |d| d.max(now));
        let drained = start.checked_add(cost).unwrap_or(start);
        self.drained_at = Some(drained);
        let ahead = drained.saturating_duration_since(now);
        if ahead >= MIN_SLEEP {
            ahead
        } else {
            Duration::ZERO
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpaced_never_sleeps() {
        let mut p = Pacer::new(None);
        assert_eq!(p.write(1 << 30, Instant::now()), Duration::ZERO);
    }

    #[test]
    fn back_to_back_writes_sleep_until_drained() {
        let t0 = Instant::now();
        let mut p = Pacer::new(Some(1_000_000)); // 1 MB/s: 1 byte per microsecond
        assert_eq!(p.write(10_000, t0), Duration::from_millis(10));
        // Issued the moment the first one was answered: queues behind nothing, 10 ms more.
        assert_eq!(p.write(10_000, t0 + Duration::from_millis(10)), Duration::from_millis(10));
        // Issued early (before the pipe drained): waits for the backlog too.
        assert_eq!(p.write(10_000, t0 + Duration::from_millis(15)), Duration::from_millis(15));
    }

    #[test]
    fn small_debts_are_carried_not_slept_and_the_rate_stays_exact() {
        let t0 = Instant::now();
        let mut p = Pacer::new(Some(1_000_000));
        // 400 bytes = 400 us each: the first two carry, the third crosses 1 ms.
        assert_eq!(p.write(400, t0), Duration::ZERO);
        assert_eq!(p.write(400, t0), Duration::ZERO);
        assert_eq!(p.write(400, t0), Duration::from_micros(1200));
    }

    #[test]
    fn an_idle_device_owes_nothing() {
        let t0 = Instant::now();
        let mut p = Pacer::new(Some(1_000_000));
        assert_eq!(p.write(5_000, t0), Duration::from_millis(5));
        assert_eq!(p.write(5_000, t0 + Duration::from_secs(1)), Duration::from_millis(5));
    }
}
