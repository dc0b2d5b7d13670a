//! Issue 16 item 3: the README's worked examples for secured clusters (TLS with a client
//! certificate, SASL/PLAIN, SASL/SCRAM and SASL/OAUTHBEARER with OIDC over TLS) start the real
//! binary: librdkafka is built with OpenSSL and libcurl, loads the certificates, the encrypted
//! key and the secrets from files and the environment, and the service runs (not ready: no
//! broker listens) instead of stopping with "OpenSSL not available at build time". A wrong key
//! password stops it with librdkafka's error, which shows the certificate really is loaded.
//!
//! The embedded broker (librdkafka's mock cluster) speaks neither TLS nor SASL, so the Kafka
//! handshake itself is not exercised here (tests/interop_nisshi.rs does, against Nisshi); the
//! examples are read from README.md, so the documentation and this test cannot drift apart.
//! A TLS handshake that fails is: OpenSSL's own test server (`openssl s_server`) presents a
//! certificate from another CA, and `ravel check`, `/readyz` and the log name it.

use crate::common::{
    Proc, broker_request, client, finding, free_port, make_ca, openssl, ravel_check,
    readme_examples, serve_with, sign_with_ca, wait_for,
};
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

/// `dir/ravel.toml` for a TLS listener whose certificates `ca` signed (a file in `dir`).
fn write_tls_config(dir: &Path, ca: &str) {
    let d = dir.display();
    std::fs::write(
        dir.join("ravel.toml"),
        format!(
            "[http]\naddr = \"127.0.0.1:0\"\n[kafka]\ngroup_id = \"tls\"\n[kafka.options]\n\
             \"security.protocol\" = \"SSL\"\n\"ssl.ca.location\" = \"{d}/{ca}\"\n[state]\n\
             dir = \"\"\n[demo]\nenabled = false\n[[streams]]\nname = \"s\"\ntopic = \"secured\"\n\
             features = 3\n"
        ),
    )
    .unwrap();
}

/// OpenSSL's own TLS server on a free port, presenting `dir/CERT.pem` (key `dir/broker.key`);
/// returns it with its address. It speaks no Kafka, so only the handshake can succeed or fail.
fn tls_listener(d: &Path, cert: &str) -> (Proc, String) {
    let accept = format!("127.0.0.1:{}", free_port());
    // -www: it answers each connection on its own and keeps listening (librdkafka reconnects).
    let (server, _) = Proc::start_program(
        "openssl s_server",
        Path::new("openssl"),
        &[
            "s_server",
            "-accept",
            &accept,
            "-cert",
            &format!("{}/{cert}.pem", d.display()),
            "-key",
            &format!("{}/broker.key", d.display()),
            "-www",
        ],
        &[],
        &d.join(format!("s_server-{cert}.log")),
    );
    (server, accept)
}

/// `ravel check`'s finding on the brokers at `accept`, with `dir/ravel.toml`.
fn brokers_finding(d: &Path, accept: &str) -> serde_json::Value {
    let (ok, list, _) = ravel_check(d, &[("RAVEL_KAFKA__BROKERS", accept)]);
    assert!(!ok, "{list:#?}");
    let b = finding(&list, "kafka.brokers").clone();
    assert_eq!(b["status"], "problem", "{b}");
    b
}

/// `b` (a brokers finding) names a failed TLS handshake with `accept`, in librdkafka's words
/// ("certificate verify failed"), and its fix the CA setting.
fn assert_tls_refused(b: &serde_json::Value, accept: &str) {
    let detail = b["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(&format!("the TLS handshake with Kafka at {accept} fails"))
            && detail.contains("certificate verify failed"),
        "{b}"
    );
    assert!(
        b["fix"].as_str().unwrap().contains("ssl.ca.location"),
        "{b}"
    );
}

#[test]
fn a_broker_certificate_from_another_ca_is_named_by_check_readyz_and_the_log() {
    // The broker's certificate is signed by `ca`; a client that trusts `other-ca` fails the
    // handshake with "certificate verify failed".
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    broker_request(d);
    sign_with_ca(d, "broker", "ca", &["-extfile", "san.ext"]);
    let (_server, accept) = tls_listener(d, "broker");

    // The control: with the right CA the handshake succeeds, and nothing blames TLS.
    write_tls_config(d, "ca.pem");
    let b = brokers_finding(d, &accept);
    let detail = b["detail"].as_str().unwrap();
    assert!(detail.starts_with("cannot reach Kafka"), "{b}");
    assert!(!detail.contains("certificate verify failed"), "{b}");

    write_tls_config(d, "other-ca.pem");
    assert_tls_refused(&brokers_finding(d, &accept), &accept);

    let (mut svc, base) = serve_with(d, &accept, 0, &[]);
    let log = d.join("serve0.log");
    let readyz = wait_for("/readyz naming the TLS handshake", &log, || {
        let r = client().get(format!("{base}/readyz")).send().ok()?;
        let status = r.status().as_u16();
        let text = r.text().ok()?;
        (status == 503 && text.contains("the TLS handshake with Kafka")).then_some(text)
    });
    assert!(readyz.contains("ssl.ca.location"), "{readyz}");
    svc.signal("-TERM");
    assert!(svc.wait(), "{}", std::fs::read_to_string(&log).unwrap());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("the TLS handshake with Kafka"), "{text}");
}

#[test]
fn an_expired_broker_certificate_is_named_as_a_failed_tls_handshake() {
    // Signed by the CA ravel trusts, but valid for 0 days: expired by the time it is used.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    broker_request(d);
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "broker.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "expired.pem",
            "-days",
            "0",
            "-extfile",
            "san.ext",
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (_server, accept) = tls_listener(d, "expired");
    write_tls_config(d, "ca.pem");
    // librdkafka words an expired certificate as it words a wrong CA ("certificate verify
    // failed"), so the fix names both, and the command that tells them apart.
    let b = brokers_finding(d, &accept);
    assert_tls_refused(&b, &accept);
    let fix = b["fix"].as_str().unwrap();
    assert!(
        fix.contains("have not expired")
            && fix.contains(&format!("openssl s_client -connect {accept}")),
        "{b}"
    );
    let out = std::process::Command::new("openssl")
        .args(["s_client", "-connect", &accept, "-CAfile"])
        .arg(d.join("ca.pem"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("certificate has expired"),
        "the fix's command says: {said}"
    );
}
