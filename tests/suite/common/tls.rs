//! A private certificate authority for the TLS tests (wss:// and https:// upstreams, Redis
//! over TLS and its cluster bus), made with the `openssl` CLI.

use std::process::Command;

use super::Scratch;

fn openssl(args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run openssl (scripts/install-test-deps.sh installs it): {e}"));
    assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// A private CA and a server certificate for 127.0.0.1 / localhost signed by it (also usable
/// as a client certificate: TLS cluster-bus links present it): `ca.pem`/`ca.key`,
/// `server.pem`/`server.key`.
pub fn private_ca(dir: &Scratch) {
    let p = |n: &str| dir.path(n);
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=mcp-gateway test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout",
        &p("ca.key"),
        "-out",
        &p("ca.pem"),
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        &p("server.key"),
        "-out",
        &p("server.csr"),
    ]);
    std::fs::write(
        dir.path("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        &p("server.csr"),
        "-CA",
        &p("ca.pem"),
        "-CAkey",
        &p("ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        &p("server.ext"),
        "-out",
        &p("server.pem"),
    ]);
}
