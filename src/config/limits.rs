//! The memory limit (issue 21): `--max-memory` of `ravel fit`, `select` and `produce`, and
//! `limits.max_memory` of the service, resolved here to a number of bytes and a description of
//! where it came from. What the limit is compared with is `ravel_core::memory`'s estimate,
//! computed by the file readers (`ravel_core::data`) and by `Config::check` for configured
//! streams, so a file or a stream too large for the machine is refused with a message at
//! start instead of aborting on a failed allocation.
//!
//! The default is half of the memory this process can have: the smallest of the machine's
//! (`MemTotal` in /proc/meminfo), its cgroup's limit (`memory.max`) and its address-space
//! limit (`ulimit -v`). Half, because the estimates count only the arrays that grow with the
//! dimensions, and the machine runs other things.

use ravel_core::data::{Budget, Plan};
use ravel_core::memory::ByteSize;
use serde::{Deserialize, Serialize};

/// A resolved limit: bytes, and where they came from (for error messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    pub source: String,
}

/// Used when the machine's memory cannot be read (not Linux): 4 GiB.
const FALLBACK: u64 = 4 << 30;

impl MemoryLimit {
    /// `given` when set (named `name`, e.g. "--max-memory"), else half of this process's
    /// memory.
    pub fn resolve(given: Option<ByteSize>, name: &str) -> MemoryLimit {
        match given {
            Some(b) => MemoryLimit {
                bytes: b.0,
                source: format!("set by {name}"),
            },
            None => match available_memory() {
                Some((total, what)) => MemoryLimit {
                    bytes: total / 2,
                    source: format!(
                        "the default, half of {what} {}; set {name} to change it",
                        ByteSize(total)
                    ),
                },
                None => MemoryLimit {
                    bytes: FALLBACK,
                    source: format!(
                        "the default when the machine's memory is unknown; set {name} to change it"
                    ),
                },
            },
        }
    }

    /// The budget of a file reader that builds `plan`.
    pub fn budget(&self, plan: Plan) -> Budget {
        Budget {
            plan,
            max_bytes: self.bytes,
            limit: self.source.clone(),
        }
    }
}

/// The `--max-memory` flag of the commands that read files.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MemoryArgs {
    /// Refuse a file whose statistics (or selection) would need more memory than this,
    /// estimated from its dimensions before reading its rows: bytes or a unit, e.g. 4GiB,
    /// 512MB (default: half of this machine's memory, cgroup or ulimit -v limit).
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Option<ByteSize>,
}

impl MemoryArgs {
    pub fn limit(&self) -> MemoryLimit {
        MemoryLimit::resolve(self.max_memory, "--max-memory")
    }
}

/// The memory this process can use and what bounds it: the smallest of the machine's memory,
/// the cgroup's limit and the address-space limit. None when none can be read.
pub fn available_memory() -> Option<(u64, &'static str)> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let mut found: Vec<(u64, &'static str)> = Vec::new();
    if let Some(b) = read("/proc/meminfo").and_then(|s| meminfo_total(&s)) {
        found.push((b, "this machine's memory"));
    }
    for path in [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ] {
        if let Some(b) = read(path).and_then(|s| s.trim().parse::<u64>().ok()) {
            found.push((b, "the cgroup's memory limit"));
        }
    }
    if let Some(b) = read("/proc/self/limits").and_then(|s| address_space_limit(&s)) {
        found.push((b, "the address-space limit (ulimit -v)"));
    }
    found.into_iter().min_by_key(|(b, _)| *b)
}

/// `MemTotal:  16318480 kB` -> bytes.
fn meminfo_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// `Max address space  4294967296  4294967296  bytes` -> the soft limit (None: unlimited).
fn address_space_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Bounds checked at start, before anything of their size is allocated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Memory the streams' state may take, estimated from their dimensions
    /// (`ravel_core::memory`): bytes or a unit (`"8GiB"`). Default: half of the machine's
    /// memory (or of the cgroup's or address-space limit, when lower).
    pub max_memory: Option<ByteSize>,
}

impl LimitsConfig {
    pub fn max_memory(&self) -> MemoryLimit {
        MemoryLimit::resolve(self.max_memory, "limits.max_memory")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        mem: MemoryArgs,
    }

    #[test]
    fn max_memory_takes_units() {
        let w = Wrapper::try_parse_from(["x", "--max-memory", "4GiB"]).unwrap();
        assert_eq!(w.mem.max_memory, Some(ByteSize(4 << 30)));
        assert_eq!(w.mem.limit().bytes, 4 << 30);
        assert_eq!(w.mem.limit().source, "set by --max-memory");
        let w = Wrapper::try_parse_from(["x", "--max-memory", "1500MB"]).unwrap();
        assert_eq!(w.mem.max_memory, Some(ByteSize(1_500_000_000)));
        let e = Wrapper::try_parse_from(["x", "--max-memory", "4 furlongs"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unknown unit 'furlongs'"), "{e}");
        assert!(Wrapper::try_parse_from(["x", "--max-memory", "0"]).is_err());
    }

    #[test]
    fn the_default_is_half_of_what_the_process_can_have() {
        let w = Wrapper::try_parse_from(["x"]).unwrap();
        let limit = w.mem.limit();
        match available_memory() {
            Some((total, what)) => {
                assert_eq!(limit.bytes, total / 2);
                assert!(limit.source.contains(what), "{}", limit.source);
            }
            None => assert_eq!(limit.bytes, FALLBACK),
        }
        assert!(
            limit.source.contains("set --max-memory"),
            "{}",
            limit.source
        );
    }

    #[test]
    fn proc_files_are_read() {
        let meminfo = "MemTotal:       16318480 kB\nMemFree:          123 kB\n";
        assert_eq!(meminfo_total(meminfo), Some(16318480 * 1024));
        assert_eq!(meminfo_total("nothing"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max address space         4294967296           unlimited            bytes     \n";
        assert_eq!(address_space_limit(limits), Some(4 << 30));
        let unlimited = limits.replace("4294967296", "unlimited");
        assert_eq!(address_space_limit(&unlimited), None);
    }
}
