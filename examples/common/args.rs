//! The benchmark peers' command lines (`--name value` pairs): shared by the examples that
//! `scripts/bench_decode.py` runs, which take a few flags each and no more.

/// The value after `--name` on the command line, if given.
pub fn optional(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The value after `--name`, which must be given.
pub fn required(name: &str) -> anyhow::Result<String> {
    optional(name).ok_or_else(|| anyhow::anyhow!("{name} is required"))
}
