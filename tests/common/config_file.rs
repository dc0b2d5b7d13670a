//! The `ravel.toml` of a child `ravel serve`, built key by key: what every such test starts
//! from (any HTTP port, its own group, no demo) and what it sets on top, so that a test's
//! config names only what the test is about.

use std::path::Path;
use toml::{Table, Value};

/// A config file under construction (`ConfigFile::new(group).set(..).stream(..).write(dir)`).
#[derive(Clone, Debug)]
pub struct ConfigFile(Table);

impl ConfigFile {
    /// `http.addr = "127.0.0.1:0"`, `kafka.group_id = group`, `demo.enabled = false`.
    pub fn new(group: &str) -> ConfigFile {
        ConfigFile(Table::new())
            .set("http.addr", "127.0.0.1:0")
            .set("kafka.group_id", group)
            .set("demo.enabled", false)
    }

    /// Sets a key by its dotted path (`"state.dir"`, `"dlq.on_failure"`), making the tables
    /// on the way.
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> ConfigFile {
        let mut parts: Vec<&str> = key.split('.').collect();
        let last = parts.pop().expect("a key");
        self.table(&parts).insert(last.into(), value.into());
        self
    }

    /// A librdkafka property for every client (`[kafka.options]`, whose names have dots).
    pub fn option(mut self, name: &str, value: &str) -> ConfigFile {
        self.table(&["kafka", "options"])
            .insert(name.into(), value.into());
        self
    }

    /// The table at `path`, made (empty) where it is missing.
    fn table(&mut self, path: &[&str]) -> &mut Table {
        let mut table = &mut self.0;
        for part in path {
            table = table
                .entry(*part)
                .or_insert_with(|| Value::Table(Table::new()))
                .as_table_mut()
                .unwrap_or_else(|| panic!("{}: {part} is not a table", path.join(".")));
        }
        table
    }

    /// A 6 s session and 0.5 s heartbeats: a member that left is replaced at once.
    pub fn quick_rejoin(self) -> ConfigFile {
        self.option("session.timeout.ms", "6000")
            .option("heartbeat.interval.ms", "500")
    }

    /// The checkpoints in `dir/state`, every `interval_ms`.
    pub fn state_in(self, dir: &Path, interval_ms: i64) -> ConfigFile {
        self.set("state.dir", dir.join("state").display().to_string())
            .set("state.checkpoint_interval_ms", interval_ms)
    }

    /// A `[[streams]]` entry: its name, topic and features (a count, or the names).
    pub fn stream(mut self, name: &str, topic: &str, features: impl Into<Value>) -> ConfigFile {
        let mut s = Table::new();
        s.insert("name".into(), name.into());
        s.insert("topic".into(), topic.into());
        s.insert("features".into(), features.into());
        match self
            .0
            .entry("streams")
            .or_insert_with(|| Value::Array(Vec::new()))
        {
            Value::Array(a) => a.push(Value::Table(s)),
            other => panic!("streams is {other}, not an array"),
        }
        self
    }

    /// Sets `key` on the last `[[streams]]` entry (`windows`, `alpha`, ...).
    pub fn stream_key(mut self, key: &str, value: impl Into<Value>) -> ConfigFile {
        match self.0.get_mut("streams") {
            Some(Value::Array(a)) => match a.last_mut() {
                Some(Value::Table(t)) => {
                    t.insert(key.into(), value.into());
                }
                _ => panic!("no stream to set {key} on"),
            },
            _ => panic!("no stream to set {key} on"),
        }
        self
    }

    /// The file's text.
    pub fn text(&self) -> String {
        toml::to_string(&self.0).expect("a TOML table serializes")
    }

    /// Writes `dir/ravel.toml`.
    pub fn write(&self, dir: &Path) {
        std::fs::write(dir.join("ravel.toml"), self.text()).unwrap();
    }
}
