//! Sources behind authentication (issue 32). A small reverse proxy on loopback stands in front of the real
//! Prometheus and the real VictoriaMetrics and requires, in turn, a bearer token, basic auth, a client certificate
//! (TLS with a private CA; the certificates are made here with rcgen) or a Mimir tenant header. With the
//! credentials, `cardhour ingest` stores exactly the rows of a direct read — checked against the simulator's truth —
//! by remote read, VictoriaMetrics' export and the query API; without them it exits non-zero with an error that names
//! the cluster and the refusal (HTTP 401, or the TLS handshake) and writes nothing. A worker reading a clusters file
//! with one cluster of each kind stores the same rows for each.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use common::truth::{assert_same_rows, check_standard_truth, ingest};
use common::{Simulation, TestDb, TestPrometheus, TestVictoria, promtool_backfill, run_cardhour, simulate_run};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

const GPUS: u32 = 32;
const HOURS: u32 = 4;
const INTERVAL: u32 = 60;

const TOKEN: &str = "s3cr3t-bearer-token";
const USER: &str = "reader";
// a colon in the password: basic auth splits at the first one
const PASSWORD: &str = "pa55:w0rd";
const TENANT: &str = "gpu-train";

/// What the proxy requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bearer,
    Basic,
    ClientCert,
    Tenant,
}

const KINDS: [Kind; 4] = [Kind::Bearer, Kind::Basic, Kind::ClientCert, Kind::Tenant];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Bearer => "bearer",
            Kind::Basic => "basic",
            Kind::ClientCert => "mtls",
            Kind::Tenant => "tenant",
        }
    }
}

/// The proxy's state: what it requires, where it forwards, how many requests it let through.
struct Gate {
    kind: Kind,
    upstream: String,
    http: reqwest::Client,
    passed: AtomicU64,
    refused: AtomicU64,
}

impl Gate {
    /// The refusal of a request without the credentials, as the real thing answers (Mimir: 401 `no org id`).
    fn refusal(&self, headers: &HeaderMap) -> Option<Response> {
        let auth = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}")));
        let ok = match self.kind {
            Kind::Bearer => auth == Some(&format!("Bearer {TOKEN}")),
            Kind::Basic => auth == Some(&basic),
            Kind::Tenant => headers.get("x-scope-orgid").is_some_and(|v| v == TENANT),
            // the TLS handshake checked the certificate
            Kind::ClientCert => true,
        };
        if ok {
            return None;
        }
        let mut resp = match self.kind {
            Kind::Tenant => (StatusCode::UNAUTHORIZED, "no org id\n").into_response(),
            _ => (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response(),
        };
        if self.kind == Kind::Basic {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"prometheus\""));
        }
        Some(resp)
    }
}

/// Checks the credentials, then forwards the request to the upstream and its answer back.
async fn forward(State(gate): State<Arc<Gate>>, req: Request) -> Response {
    if let Some(refusal) = gate.refusal(req.headers()) {
        gate.refused.fetch_add(1, Ordering::Relaxed);
        return refusal;
    }
    gate.passed.fetch_add(1, Ordering::Relaxed);
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 64 << 20).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut out = gate.http.request(parts.method, format!("{}{path}", gate.upstream)).body(body);
    for name in [
        header::CONTENT_TYPE,
        header::CONTENT_ENCODING,
        header::HeaderName::from_static("x-prometheus-remote-read-version"),
    ] {
        if let Some(v) = parts.headers.get(&name) {
            out = out.header(name, v);
        }
    }
    let resp = match out.send().await {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = resp.status();
    let mut headers = HeaderMap::new();
    for name in [header::CONTENT_TYPE, header::CONTENT_ENCODING] {
        if let Some(v) = resp.headers().get(&name) {
            headers.insert(name, v.clone());
        }
    }
    match resp.bytes().await {
        Ok(bytes) => (status, headers, Body::from(bytes)).into_response(),
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

/// A proxy on a free loopback port in front of `upstream`; HTTPS requiring a client certificate for
/// [`Kind::ClientCert`], plain HTTP otherwise.
struct Proxy {
    url: String,
    gate: Arc<Gate>,
}

async fn start_proxy(kind: Kind, upstream: &str, certs: &Certs) -> Proxy {
    let gate = Arc::new(Gate {
        kind,
        upstream: upstream.to_string(),
        http: reqwest::Client::new(),
        passed: AtomicU64::new(0),
        refused: AtomicU64::new(0),
    });
    let app = axum::Router::new().fallback(forward).with_state(gate.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    if kind != Kind::ClientCert {
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        return Proxy { url: format!("http://127.0.0.1:{port}"), gate };
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(certs.server_config());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                // a client without a certificate fails here: the handshake is the refusal
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let service = hyper_util::service::TowerToHyperService::new(app);
                let io = hyper_util::rt::TokioIo::new(tls);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    });
    Proxy { url: format!("https://127.0.0.1:{port}"), gate }
}

/// A private CA, the proxy's server certificate for 127.0.0.1 and a client certificate, all made here; the PEM
/// files cardhour is given live in `dir`.
struct Certs {
    dir: tempfile::TempDir,
    ca_der: rustls::pki_types::CertificateDer<'static>,
    server_der: rustls::pki_types::CertificateDer<'static>,
    server_key: rustls::pki_types::PrivateKeyDer<'static>,
}

impl Certs {
    fn new() -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "cardhour test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);

        let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose, cn: &str| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(names).unwrap();
            params.distinguished_name.push(DnType::CommonName, cn);
            params.extended_key_usages = vec![usage];
            (params.signed_by(&key, &issuer).unwrap(), key)
        };
        let (server, server_key) = leaf(vec!["127.0.0.1".into()], ExtendedKeyUsagePurpose::ServerAuth, "prometheus");
        let (client, client_key) = leaf(Vec::new(), ExtendedKeyUsagePurpose::ClientAuth, "cardhour");

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("client.pem"), client.pem()).unwrap();
        std::fs::write(dir.path().join("client.key"), client_key.serialize_pem()).unwrap();
        // a certificate of the wrong CA: the proxy's handshake refuses it
        let (rogue, rogue_key) = {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name.push(DnType::CommonName, "rogue");
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            (params.self_signed(&key).unwrap(), key)
        };
        std::fs::write(dir.path().join("rogue.pem"), rogue.pem()).unwrap();
        std::fs::write(dir.path().join("rogue.key"), rogue_key.serialize_pem()).unwrap();
        Self {
            dir,
            ca_der: ca.der().clone(),
            server_der: server.der().clone(),
            server_key: rustls::pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
        }
    }

    fn path(&self, file: &str) -> String {
        self.dir.path().join(file).display().to_string()
    }

    /// TLS for the proxy: its certificate, and client certificates required and verified against the CA.
    fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![self.server_der.clone()], self.server_key.clone_key())
            .unwrap();
        Arc::new(config)
    }

    /// The flags that give `kind`'s credentials.
    fn flags(&self, kind: Kind) -> Vec<String> {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect();
        match kind {
            Kind::Bearer => v(&["--prometheus-bearer-token", TOKEN]),
            Kind::Basic => v(&["--prometheus-username", USER, "--prometheus-password", PASSWORD]),
            Kind::Tenant => v(&["--prometheus-header", &format!("X-Scope-OrgID: {TENANT}")]),
            Kind::ClientCert => v(&[
                "--prometheus-ca-file",
                &self.path("ca.pem"),
                "--prometheus-cert-file",
                &self.path("client.pem"),
                "--prometheus-key-file",
                &self.path("client.key"),
            ]),
        }
    }
}

/// The simulation, served by a Prometheus and a VictoriaMetrics (one promtool backfill), read directly once into
/// a database checked against the simulator's truth: the rows every authenticated read must store.
struct Backends {
    sim: Simulation,
    prom: TestPrometheus,
    vm: TestVictoria,
    reference: TestDb,
    _dir: tempfile::TempDir,
}

fn backends() -> Backends {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(dir.path(), GPUS, HOURS, INTERVAL, 1);
    let blocks = dir.path().join("blocks");
    std::fs::create_dir_all(&blocks).unwrap();
    promtool_backfill(&sim.metrics, &blocks).unwrap();
    let prom = TestPrometheus::from_blocks(&blocks).unwrap();
    let vm = TestVictoria::from_blocks(&blocks).unwrap();
    let reference = TestDb::migrated().unwrap();
    let summary = ingest(&sim, &prom.url, "sim", &reference, &["--source", "remote-read"]);
    check_standard_truth(&sim, &reference, &summary, INTERVAL, summary["non_finite_samples"].as_u64().unwrap());
    Backends { sim, prom, vm, reference, _dir: dir }
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Rows stored for `cluster` in `db`, without the cluster's name: comparable across clusters and databases.
fn rows_of(db: &TestDb, cluster: &str) -> String {
    db.psql(&format!(
        "SELECT md5(coalesce(string_agg((to_jsonb(u) - 'cluster')::text, '|' ORDER BY (to_jsonb(u) - 'cluster')::text), ''))
         FROM gpu_usage_hourly u WHERE cluster = '{cluster}'"
    ))
    .unwrap()
}

#[test]
fn each_kind_of_authentication_is_required_and_enough_for_every_source() {
    let b = backends();
    let certs = Certs::new();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (from, to) = (b.sim.start_arg(), b.sim.end_arg());

    for kind in KINDS {
        let (prom, vm) = rt.block_on(async {
            (start_proxy(kind, &b.prom.url, &certs).await, start_proxy(kind, &b.vm.url, &certs).await)
        });
        let flags = certs.flags(kind);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();

        // with the credentials: every source stores the rows of the direct read
        for (source, proxy) in [("remote-read", &prom), ("query", &prom), ("vm-export", &vm)] {
            let db = TestDb::migrated().unwrap();
            let before = proxy.gate.passed.load(Ordering::Relaxed);
            let mut extra = vec!["--source", source];
            extra.extend(&flags);
            let summary = ingest(&b.sim, &proxy.url, "sim", &db, &extra);
            assert_eq!(summary["source"], source, "{kind:?}: {summary}");
            assert_eq!(summary["hours"], u64::from(HOURS), "{kind:?} {source}: {summary}");
            assert_same_rows(&db, &b.reference, &format!("{kind:?} through the proxy by {source}"));
            assert!(proxy.gate.passed.load(Ordering::Relaxed) > before, "{kind:?} {source}: the proxy was asked");
        }

        // without them: a clear error naming the cluster and the refusal, nothing stored
        let cluster = format!("no-{}", kind.name());
        let db = TestDb::migrated().unwrap();
        let refused = prom.gate.refused.load(Ordering::Relaxed);
        let args = ["ingest", "--cluster", &cluster, "--prometheus", &prom.url, "--from", &from, "--to", &to];
        let out = run_cardhour(args, &db.env());
        let err = stderr_of(&out);
        assert!(!out.status.success(), "{kind:?}: ingest without credentials succeeded: {err}");
        assert!(err.contains(&format!("ingest of {cluster}")), "{kind:?}: the cluster is named: {err}");
        assert!(!err.contains("panicked"), "{err}");
        let stored = db.psql(&format!("SELECT count(*) FROM gpu_usage_hourly WHERE cluster = '{cluster}'")).unwrap();
        assert_eq!(stored, "0", "{kind:?}");
        if kind == Kind::ClientCert {
            assert!(err.contains(&format!("TLS handshake with {} failed", prom.url)), "{err}");
        } else {
            let needle = format!("Prometheus at {} refused the request: HTTP 401 Unauthorized", prom.url);
            assert!(err.contains(&needle), "{kind:?}: expected {needle:?} in {err}");
            assert!(prom.gate.refused.load(Ordering::Relaxed) > refused, "{kind:?}: the proxy refused");
            // the secret never appears in what is printed
            for secret in [TOKEN, PASSWORD] {
                assert!(!err.contains(secret), "{err}");
            }
        }
    }

    // the wrong credentials are refused as clearly as none
    let rt_proxy = |kind| rt.block_on(start_proxy(kind, &b.prom.url, &certs));
    let wrong: [(Kind, Vec<String>, &str); 5] = [
        (Kind::Bearer, vec!["--prometheus-bearer-token".into(), "not-the-token".into()], "HTTP 401 Unauthorized"),
        (
            Kind::Basic,
            vec!["--prometheus-username".into(), USER.into(), "--prometheus-password".into(), "guess".into()],
            "HTTP 401 Unauthorized",
        ),
        (
            Kind::ClientCert,
            vec![
                "--prometheus-ca-file".into(),
                certs.path("ca.pem"),
                "--prometheus-cert-file".into(),
                certs.path("rogue.pem"),
                "--prometheus-key-file".into(),
                certs.path("rogue.key"),
            ],
            "TLS handshake with",
        ),
        // the CA, but no client certificate: the proxy ends the handshake
        (Kind::ClientCert, vec!["--prometheus-ca-file".into(), certs.path("ca.pem")], "TLS handshake with"),
        // the system's roots do not know the private CA: the server's certificate is refused
        (
            Kind::ClientCert,
            vec![
                "--prometheus-cert-file".into(),
                certs.path("client.pem"),
                "--prometheus-key-file".into(),
                certs.path("client.key"),
            ],
            "TLS handshake with",
        ),
    ];
    for (kind, flags, needle) in wrong {
        let proxy = rt_proxy(kind);
        let db = TestDb::migrated().unwrap();
        let mut args: Vec<String> = [
            "ingest",
            "--cluster",
            "wrong",
            "--prometheus",
            &proxy.url,
            "--from",
            &from,
            "--to",
            &to,
            "--source",
            "query",
        ]
        .map(String::from)
        .into();
        args.extend(flags);
        let out = run_cardhour(&args, &db.env());
        let err = stderr_of(&out);
        assert!(!out.status.success() && err.contains(needle) && err.contains("ingest of wrong"), "{kind:?}: {err}");
    }
}

#[test]
fn a_worker_reads_a_clusters_file_with_every_kind_of_credentials() {
    let b = backends();
    let certs = Certs::new();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    // a token and a password as Kubernetes mounts them: files, with a trailing newline
    std::fs::write(secrets.path().join("token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(secrets.path().join("password"), format!("{PASSWORD}\n")).unwrap();
    let file = |name: &str| secrets.path().join(name).display().to_string();

    let proxies: Vec<Proxy> = rt.block_on(async {
        vec![
            start_proxy(Kind::Bearer, &b.prom.url, &certs).await,
            start_proxy(Kind::Basic, &b.vm.url, &certs).await,
            start_proxy(Kind::ClientCert, &b.prom.url, &certs).await,
            start_proxy(Kind::Tenant, &b.prom.url, &certs).await,
        ]
    });
    let config = format!(
        r#"
[defaults]
batch_hours = 2

[clusters.bearer]
prometheus = "{bearer}"
source = "remote-read"
bearer_token_file = "{token}"

[clusters.basic]
prometheus = "{basic}"
source = "vm-export"
basic_auth = {{ username = "{USER}", password_file = "{password}" }}

[clusters.mtls]
prometheus = "{mtls}"
source = "query"
tls = {{ ca_file = "{ca}", cert_file = "{cert}", key_file = "{key}" }}

[clusters.tenant]
prometheus = "{tenant}"
source = "remote-read"
headers = {{ "X-Scope-OrgID" = "{TENANT}" }}
"#,
        bearer = proxies[0].url,
        basic = proxies[1].url,
        mtls = proxies[2].url,
        tenant = proxies[3].url,
        token = file("token"),
        password = file("password"),
        ca = certs.path("ca.pem"),
        cert = certs.path("client.pem"),
        key = certs.path("client.key"),
    );
    let path = secrets.path().join("clusters.toml");
    std::fs::write(&path, config).unwrap();
    let db = TestDb::migrated().unwrap();
    let (from, to) = (b.sim.start_arg(), b.sim.end_arg());
    let args = ["worker", "--config", path.to_str().unwrap(), "--once", "--from", &from, "--to", &to];
    let out = run_cardhour(args, &db.env());
    let err = stderr_of(&out);
    assert!(out.status.success(), "worker failed: {err}");
    // what each cluster is told is logged, its secrets are not
    assert!(err.contains(&format!("bearer token (file {})", file("token"))), "{err}");
    assert!(err.contains("headers x-scope-orgid"), "{err}");
    for secret in [TOKEN, PASSWORD, TENANT] {
        assert!(!err.contains(secret), "{secret} logged: {err}");
    }
    let want = rows_of(&b.reference, "sim");
    for (cluster, proxy) in ["bearer", "basic", "mtls", "tenant"].iter().zip(&proxies) {
        assert_eq!(rows_of(&db, cluster), want, "{cluster}: the rows of the direct read");
        assert!(proxy.gate.passed.load(Ordering::Relaxed) > 0, "{cluster}: read through its proxy");
        assert_eq!(proxy.gate.refused.load(Ordering::Relaxed), 0, "{cluster}: never refused");
    }
    let hours = db
        .psql("SELECT cluster || '=' || count(DISTINCT hour) FROM gpu_usage_hourly GROUP BY cluster ORDER BY 1")
        .unwrap();
    assert_eq!(hours, format!("basic={HOURS}\nbearer={HOURS}\nmtls={HOURS}\ntenant={HOURS}"));
    // a clusters file whose credential file is missing fails at the start, naming the cluster and the file
    let broken = secrets.path().join("broken.toml");
    let absent = file("absent-token");
    std::fs::write(
        &broken,
        format!("[clusters.gone]\nprometheus = \"{}\"\nbearer_token_file = \"{absent}\"\n", proxies[0].url),
    )
    .unwrap();
    let out = run_cardhour(["worker", "--config", broken.to_str().unwrap(), "--once"], &db.env());
    let err = stderr_of(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("cluster `gone`") && err.contains(&format!("cannot read {absent}")), "{err}");
}
