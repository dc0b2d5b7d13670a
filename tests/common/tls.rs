//! Certificates for the TLS tests, made with the openssl command: a CA, a broker request,
//! certificates signed by a CA.

use std::path::Path;

/// Runs `openssl ARGS` in `dir` (certificates for the secured tests).
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command (scripts/test installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA in `dir/NAME.pem` (its key in `dir/NAME.key`), for 2 days.
pub fn make_ca(dir: &Path, name: &str) {
    let (key, pem, subject) = (
        format!("{name}.key"),
        format!("{name}.pem"),
        format!("/CN=ravel-{name}"),
    );
    openssl(
        dir,
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &pem,
            "-days", "2", "-subj", &subject,
        ],
    );
}

/// The CAs `ca` and `other-ca` (the wrong one) in `dir`, and the key and signing request of
/// a broker certificate for 127.0.0.1 and localhost (`broker.key`, `broker.csr`, and
/// `san.ext` for `sign_with_ca`'s `-extfile`).
pub fn broker_request(dir: &Path) {
    make_ca(dir, "ca");
    make_ca(dir, "other-ca");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "broker.key",
            "-out",
            "broker.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n",
    )
    .unwrap();
}

/// Signs `dir/NAME.csr` with the CA `dir/CA.pem` into `dir/NAME.pem` (2 days), with more
/// `openssl x509` arguments `extra` (`-extfile` for names).
pub fn sign_with_ca(dir: &Path, name: &str, ca: &str, extra: &[&str]) {
    let (csr, pem, ca_pem, ca_key) = (
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{ca}.pem"),
        format!("{ca}.key"),
    );
    let mut args = vec![
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca_pem,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-out",
        &pem,
        "-days",
        "2",
    ];
    args.extend(extra);
    openssl(dir, &args);
}
