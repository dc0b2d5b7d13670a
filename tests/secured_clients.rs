//! Issue 16 item 3: the README's worked examples for secured clusters (TLS with a client
//! certificate, SASL/PLAIN, SASL/SCRAM and SASL/OAUTHBEARER with OIDC over TLS) start the real
//! binary: librdkafka is built with OpenSSL and libcurl, loads the certificates, the encrypted
//! key and the secrets from files and the environment, and the service runs (not ready: no
//! broker listens) instead of stopping with "OpenSSL not available at build time". A wrong key
//! password stops it with librdkafka's error, which shows the certificate really is loaded.
//!
//! The embedded broker (librdkafka's mock cluster) speaks neither TLS nor SASL, so the
//! handshake itself is not exercised here; the examples are read from README.md, so the
//! documentation and this test cannot drift apart.

mod common;

use common::{Proc, client, make_ca, openssl, readme_examples, serve_with, sign_with_ca};
use std::path::Path;
use std::time::{Duration, Instant};

const KEY_PASSWORD: &str = "key-pass-4f1d";
const SASL_PASSWORD: &str = "sasl-pass-9c2e";
const OIDC_SECRET: &str = "oidc-secret-77ab";

/// A CA, and a client certificate signed by it whose key is encrypted with `KEY_PASSWORD`;
/// the secrets the examples read from files.
fn credentials(dir: &Path) {
    make_ca(dir, "ca");
    let pass = format!("pass:{KEY_PASSWORD}");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-keyout",
            "client.key",
            "-passout",
            &pass,
            "-out",
            "client.csr",
            "-subj",
            "/CN=ravel",
        ],
    );
    sign_with_ca(dir, "client", "ca", &[]);
    std::fs::write(dir.join("kafka-key-password"), format!("{KEY_PASSWORD}\n")).unwrap();
    std::fs::write(dir.join("kafka-password"), format!("{SASL_PASSWORD}\n")).unwrap();
}

/// `dir/ravel.toml`: the example's `[kafka.options]` with its paths moved into `creds`, and
/// one stream (`start` gives the brokers: a port where nothing listens).
fn write_config(dir: &Path, creds: &Path, example: &str) {
    let d = dir.display().to_string();
    let c = creds.display().to_string();
    let options = example
        .replace("/etc/kafka/", &format!("{c}/"))
        .replace("/run/secrets/", &format!("{c}/"));
    let config = format!(
        r#"
[http]
addr = "127.0.0.1:0"
[kafka]
{options}
[state]
dir = "{d}/state"
[demo]
enabled = false
[[streams]]
name = "s"
topic = "secured"
features = 3
"#
    );
    std::fs::write(dir.join("ravel.toml"), config).unwrap();
}

/// `ravel serve` on `dir/ravel.toml` with the secrets the examples read from the environment;
/// its log in `dir/serve<run>.log`.
fn start(dir: &Path, run: usize) -> (Proc, String) {
    serve_with(
        dir,
        "127.0.0.1:1",
        run,
        &[
            ("KAFKA_PASSWORD", SASL_PASSWORD),
            ("OIDC_CLIENT_SECRET", OIDC_SECRET),
        ],
    )
}

#[test]
fn readme_tls_and_sasl_examples_start_the_service_with_their_secrets_hidden() {
    let examples = readme_examples();
    let mechanisms: Vec<&str> = ["\"SSL\"", "PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"].to_vec();
    for m in &mechanisms {
        assert!(
            examples.iter().any(|e| e.contains(m)),
            "README has no example with {m}: {examples:#?}"
        );
    }
    let creds = tempfile::tempdir().unwrap();
    credentials(creds.path());
    for (i, example) in examples.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        write_config(dir.path(), creds.path(), example);
        let log = format!("serve{i}.log");
        let (mut p, base) = start(dir.path(), i);
        // Clients are created right after the listener: give them time to fail if they would.
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(3) {
            let exited = p.child.try_wait().unwrap();
            assert!(
                exited.is_none(),
                "example {i} stopped the service ({exited:?}):\n{example}\nlog:\n{}",
                std::fs::read_to_string(dir.path().join(&log)).unwrap()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let health = client().get(format!("{base}/healthz")).send().unwrap();
        assert_eq!(health.status(), 200);
        // Not ready: no broker answers at 127.0.0.1:1.
        let ready = client().get(format!("{base}/readyz")).send().unwrap();
        assert_eq!(ready.status(), 503, "example {i}");
        let readyz = ready.text().unwrap();
        // The start-up requests to the unreachable cluster do not hold the SIGTERM (each used
        // to wait out a 10 s timeout: 27 s in all).
        let stop = Instant::now();
        p.signal("-TERM");
        assert!(p.wait(), "example {i}: SIGTERM did not exit cleanly");
        assert!(
            stop.elapsed() < Duration::from_secs(15),
            "example {i}: SIGTERM took {:?}",
            stop.elapsed()
        );
        let text = std::fs::read_to_string(dir.path().join(&log)).unwrap();
        for bad in [
            "not available at build time",
            "No provider for SASL",
            "Client config error",
        ] {
            assert!(!text.contains(bad), "example {i}: {bad}\n{text}");
        }
        assert!(
            text.contains("effective Kafka client config"),
            "example {i}: no effective-config line\n{text}"
        );
        for secret in [KEY_PASSWORD, SASL_PASSWORD, OIDC_SECRET] {
            assert!(
                !text.contains(secret),
                "example {i} logged a secret:\n{text}"
            );
            assert!(
                !readyz.contains(secret),
                "example {i}: /readyz shows a secret"
            );
        }
    }
}

#[test]
fn a_wrong_key_password_stops_the_service_with_the_tls_error() {
    let tls = readme_examples()
        .into_iter()
        .find(|e| e.contains("ssl.key.password"))
        .expect("README has the TLS example with an encrypted key");
    let dir = tempfile::tempdir().unwrap();
    credentials(dir.path());
    write_config(dir.path(), dir.path(), &tls);
    std::fs::write(
        dir.path().join("kafka-key-password"),
        "not-the-key-pass-31\n",
    )
    .unwrap();
    let (mut p, _) = start(dir.path(), 0);
    assert!(!p.wait(), "the service ran with a wrong key password");
    let text = std::fs::read_to_string(dir.path().join("serve0.log")).unwrap();
    assert!(text.contains("ssl.key"), "{text}");
    assert!(
        !text.contains(KEY_PASSWORD) && !text.contains("not-the-key-pass-31"),
        "{text}"
    );
}
