//! The command-line flags of `ravel serve`; each overrides the config field it names.

use super::LogFormat;
use std::path::PathBuf;

/// Command-line flags of `ravel serve`; each overrides the field it names.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// Config file (default: config/ravel.toml when it exists).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// HTTP listen address (http.addr); port 0 picks a free port.
    #[arg(long)]
    pub http_addr: Option<String>,
    /// Kafka bootstrap servers (kafka.brokers); omit for the embedded broker.
    #[arg(long)]
    pub brokers: Option<String>,
    /// Consumer group (kafka.group_id).
    #[arg(long)]
    pub group_id: Option<String>,
    /// Checkpoint directory (state.dir); "" disables checkpoints.
    #[arg(long)]
    pub state_dir: Option<String>,
    /// Do not run the demo producer (demo.enabled = false).
    #[arg(long)]
    pub no_demo: bool,
    /// Log format (log.format).
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
    /// Log filter (log.level), e.g. debug or ravel=debug,librdkafka=warn.
    #[arg(long)]
    pub log_level: Option<String>,
}
