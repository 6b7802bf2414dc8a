//! Device profiles: the two numbers that decide what a durability strategy costs on a device.
//!
//! A cache flush is the price a strategy pays per barrier, and write bandwidth is the price of
//! the bytes themselves. Everything else a real device does (seeks, queueing, garbage
//! collection) is deliberately left out: the profiles exist so that the bench can say "on a
//! disk whose flush costs 10 ms" and mean exactly that, reproducibly, on any machine.
//!
//! This module only parses and names profiles; it never touches a device.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What the scratch filesystem sits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Profile {
    /// A plain loop device over a sparse file: no emulation, no counters, no write log. The
    /// flushes cost whatever the machine's own storage charges for the backing file.
    Native,
    /// A loop device over a file served by the in-process FUSE server, which sleeps
    /// `flush_latency` on every cache flush and holds writes to `bandwidth` bytes per second
    /// (`None`: as fast as memory allows).
    Emulated { name: String, flush_latency: Duration, bandwidth: Option<u64> },
}

/// The named profiles: name, flush latency, write bandwidth in bytes per second, and what the
/// pair stands for. The profile table of docs/devices.md states the same numbers and their
/// sources; keep the two in step.
pub const NAMED: &[(&str, Duration, u64, &str)] = &[
    (
        "nvme",
        Duration::from_micros(50),
        2_000_000_000,
        "server NVMe drive with power-loss protection",
    ),
    ("ssd", Duration::from_millis(4), 500_000_000, "consumer SATA SSD, volatile write cache"),
    ("hdd", Duration::from_millis(10), 150_000_000, "7200 rpm spinning disk"),
    ("sdcard", Duration::from_millis(100), 10_000_000, "SD card, speed class 10"),
];

impl Profile {
    /// The name a report shows: `native`, `hdd`, or the custom spec as written
    /// (`flush=8ms,bw=150MB/s`).
    pub fn name(&self) -> &str {
        match self {
            Profile::Native => "native",
            Profile::Emulated { name, .. } => name,
        }
    }

    /// The flush latency the server sleeps per flush (zero for `native`, which does not emulate).
    pub fn flush_latency(&self) -> Duration {
        match self {
            Profile::Native => Duration::ZERO,
            Profile::Emulated { flush_latency, .. } => *flush_latency,
        }
    }

    /// The write bandwidth the server paces to, in bytes per second (`None`: unpaced).
    pub fn bandwidth(&self) -> Option<u64> {
        match self {
            Profile::Native => None,
            Profile::Emulated { bandwidth, .. } => *bandwidth,
        }
    }

    /// True when a FUSE server stands between the loop device and the bytes.
    pub fn is_emulated(&self) -> bool {
        matches!(self, Profile::Emulated { .. })
    }

    fn named(name: &str) -> Option<Profile> {
        NAMED.iter().find(|(n, ..)| *n == name).map(|(n, latency, bw, _)| Profile::Emulated {
            name: (*n).to_string(),
            flush_latency: *latency,
            bandwidth: Some(*bw),
        })
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Profile::Native => f.write_str("native"),
            Profile::Emulated { name, flush_latency, bandwidth } => {
                write!(f, "{name} (flush {}", format_duration(*flush_latency))?;
                match bandwidth {
                    Some(bw) => write!(f, ", {})", format_bandwidth(*bw)),
                    None => f.write_str(", unlimited bandwidth)"),
                }
            }
        }
    }
}

/// Why a `--device` value was refused; names the part that was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad device profile '{spec}': {reason}")]
pub struct ProfileError {
    /// The whole value as given.
    pub spec: String,
    /// What was wrong, naming the offending part.
    pub reason: String,
}

impl FromStr for Profile {
    type Err = ProfileError;

    /// `native`, `nvme`, `ssd`, `hdd`, `sdcard`, or `flush=LATENCY[,bw=BANDWIDTH]` with
    /// latencies in `ns`, `us`, `ms`, `s` and bandwidths in `B/s`, `kB/s`, `MB/s`, `GB/s`
    /// (powers of 1000) or `KiB/s`, `MiB/s`, `GiB/s`; `bw=unlimited` or no `bw` means unpaced.
    fn from_str(spec: &str) -> Result<Profile, ProfileError> {
        let err = |reason: String| ProfileError { spec: spec.to_string(), reason };
        let trimmed = spec.trim();
        if trimmed == "native" {
            return Ok(Profile::Native);
        }
        if let Some(p) = Profile::named(trimmed) {
            return Ok(p);
        }
        if !trimmed.contains('=') {
            let known: Vec<&str> =
                std::iter::once("native").chain(NAMED.iter().map(|(n, ..)| *n)).collect();
            return Err(err(format!(
                "unknown device '{trimmed}' (known: {}, or flush=8ms,bw=150MB/s)",
                known.join(", ")
            )));
        }
        let mut flush = None;
        let mut bw = None;
        for part in trimmed.split(',') {
            let Some((key, value)) = part.split_once('=') else {
                return Err(err(format!("'{part}' is not KEY=VALUE (keys: flush, bw)")));
            };
            match key.trim() {
                "flush" if flush.is_none() => {
                    flush = Some(parse_latency(value.trim()).map_err(&err)?)
                }
                "bw" if bw.is_none() => bw = Some(parse_bandwidth(value.trim()).map_err(&err)?),
                "flush" | "bw" => return Err(err(format!("'{}' given twice", key.trim()))),
                other => {
                    return Err(err(format!("unknown key '{other}' in '{part}' (keys: flush, bw)")))
                }
            }
        }
        let Some(flush_latency) = flush else {
            return Err(err("missing flush=LATENCY (e.g. flush=8ms)".to_string()));
        };
        Ok(Profile::Emulated { name: trimmed.to_string(), flush_latency, bandwidth: bw.flatten() })
    }
}

/// Splits `12.5ms` into `(12.5, "ms")`.
fn split_number(value: &str) -> Option<(f64, &str)> {
    let end = value.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(value.len());
    let number: f64 = value[..end].parse().ok()?;
    number.is_finite().then_some((number, value[end..].trim()))
}

fn parse_latency(value: &str) -> Result<Duration, String> {
    let Some((number, unit)) = split_number(value) else {
        return Err(format!("flush latency '{value}' is not a number with a unit (e.g. 8ms)"));
    };
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "" => return Err(format!("flush latency '{value}' needs a unit (ns, us, ms, s)")),
        other => {
            return Err(format!(
                "unknown unit '{other}' in flush latency '{value}' (ns, us, ms, s)"
            ))
        }
    };
    let seconds = number * scale;
    if seconds > 3600.0 {
        return Err(format!("flush latency '{value}' is more than an hour"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `Ok(None)` for `unlimited`.
fn parse_bandwidth(value: &str) -> Result<Option<u64>, String> {
    if value == "unlimited" {
        return Ok(None);
    }
    let Some((number, unit)) = split_number(value) else {
        return Err(format!("bandwidth '{value}' is not a number with a unit (e.g. 150MB/s)"));
    };
    let unit = unit.strip_suffix("/s").unwrap_or(unit);
    let scale: f64 = match unit {
        "B" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "" => return Err(format!("bandwidth '{value}' needs a unit (B/s, kB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s)")),
        other => return Err(format!("unknown unit '{other}' in bandwidth '{value}' (B/s, kB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s)")),
    };
    let bytes = (number * scale).round();
    if bytes < 1.0 {
        return Err(format!("bandwidth '{value}' is less than one byte per second"));
    }
    if bytes > 1e15 {
        return Err(format!("bandwidth '{value}' is beyond any device (use bw=unlimited)"));
    }
    Ok(Some(bytes as u64))
}

/// Parses a disk size: `2G`, `512M`, `64K`, `1T` (powers of 1024; an optional `iB` or `B`
/// suffix is accepted) or a plain number of bytes.
pub fn parse_size(value: &str) -> Result<u64, String> {
    let v = value.trim();
    let end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let number: u64 = v[..end]
        .parse()
        .map_err(|_| format!("size '{value}' does not start with a whole number"))?;
    let unit = &v[end..];
    let unit = unit.strip_suffix("iB").or_else(|| unit.strip_suffix('B')).unwrap_or(unit);
    let shift = match unit {
        "" => 0,
        "K" | "k" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        other => return Err(format!("unknown unit '{other}' in size '{value}' (K, M, G, T)")),
    };
    number.checked_mul(1u64 << shift).ok_or_else(|| format!("size '{value}' is too large"))
}

/// `50us`, `4ms`, `1.5s`: the shortest exact-enough spelling for tables.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0ms".to_string()
    } else if ns < 1_000_000 {
        format!("{}us", trim_float(ns as f64 / 1e3))
    } else if ns < 1_000_000_000 {
        format!("{}ms", trim_float(ns as f64 / 1e6))
    } else {
        format!("{}s", trim_float(ns as f64 / 1e9))
    }
}

/// `150MB/s`, `2GB/s` (powers of 1000, as drive vendors write them).
pub fn format_bandwidth(bytes_per_second: u64) -> String {
    let b = bytes_per_second as f64;
    if b >= 1e9 {
        format!("{}GB/s", trim_float(b / 1e9))
    } else if b >= 1e6 {
        format!("{}MB/s", trim_float(b / 1e6))
    } else if b >= 1e3 {
        format!("{}kB/s", trim_float(b / 1e3))
    } else {
        format!("{bytes_per_second}B/s")
    }
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_profiles_parse_to_their_documented_numbers() {
        assert_eq!("native".parse::<Profile>().unwrap(), Profile::Native);
        let hdd: Profile = "hdd".parse().unwrap();
        assert_eq!(hdd.flush_latency(), Duration::from_millis(10));
        assert_eq!(hdd.bandwidth(), Some(150_000_000));
        assert_eq!(hdd.name(), "hdd");
        let nvme: Profile = "nvme".parse().unwrap();
        assert_eq!(nvme.flush_latency(), Duration::from_micros(50));
        for (name, ..) in NAMED {
            assert!(name.parse::<Profile>().unwrap().is_emulated());
        }
    }

    #[test]
    fn custom_profile_parses_units_and_keeps_its_spelling_as_name() {
        let p: Profile = "flush=8ms,bw=150MB/s".parse().unwrap();
        assert_eq!(p.flush_latency(), Duration::from_millis(8));
        assert_eq!(p.bandwidth(), Some(150_000_000));
        assert_eq!(p.name(), "flush=8ms,bw=150MB/s");
        let p: Profile = "bw=1.5GiB/s,flush=0.05ms".parse().unwrap();
        assert_eq!(p.flush_latency(), Duration::from_micros(50));
        assert_eq!(p.bandwidth(), Some(1_610_612_736));
        let p: Profile = "flush=250us".parse().unwrap();
        assert_eq!((p.flush_latency(), p.bandwidth()), (Duration::from_micros(250), None));
        let p: Profile = "flush=0s,bw=unlimited".parse().unwrap();
        assert_eq!((p.flush_latency(), p.bandwidth()), (Duration::ZERO, None));
    }

    #[test]
    fn bad_profiles_name_the_bad_part() {
        let cases = [
            ("floppy", "unknown device 'floppy'"),
            ("flush=8", "needs a unit"),
            ("flush=8mss", "unknown unit 'mss'"),
            ("flush=8ms,bw=150", "needs a unit"),
            ("flush=8ms,bw=150MB/h", "unknown unit 'MB/h'"),
            ("flush=8ms,bw=0MB/s", "less than one byte"),
            ("flush=8ms,speed=1MB/s", "unknown key 'speed'"),
            ("bw=1MB/s", "missing flush"),
            ("flush=1ms,flush=2ms", "given twice"),
            ("flush=abc", "not a number"),
            ("flush=8ms,", "is not KEY=VALUE"),
            ("flush=99999s", "more than an hour"),
            ("", "unknown device ''"),
        ];
        for (spec, want) in cases {
            let e = spec.parse::<Profile>().unwrap_err();
            assert!(e.to_string().contains(want), "{spec}: got '{e}', want '{want}'");
            assert!(e.to_string().contains(spec), "{spec}: error does not quote the spec: {e}");
        }
    }

    #[test]
    fn sizes_parse_in_powers_of_1024() {
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("2X").unwrap_err().contains("unknown unit 'X'"));
        assert!(parse_size("G").is_err());
        assert!(parse_size("99999999999T").unwrap_err().contains("too large"));
    }

    #[test]
    fn profiles_display_their_numbers() {
        assert_eq!("hdd".parse::<Profile>().unwrap().to_string(), "hdd (flush 10ms, 150MB/s)");
        assert_eq!("nvme".parse::<Profile>().unwrap().to_string(), "nvme (flush 50us, 2GB/s)");
        assert_eq!(
            "flush=1ms".parse::<Profile>().unwrap().to_string(),
            "flush=1ms (flush 1ms, unlimited bandwidth)"
        );
    }
}
