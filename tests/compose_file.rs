//! docker-compose.yml checked without a Docker engine (this machine has none): its structure as a trial needs it —
//! every service it starts is health-checked or a one-shot, dependencies name services that exist and wait on what
//! those services can report, ports are published on loopback only, the worker and the API run under tini, the demo
//! profile simulates, backfills and ingests a cluster, and the image carries the CJK font the PDF statements need.
//! (`docker compose config` checks the same file against the Compose schema where Docker is installed.)

use std::collections::BTreeMap;
use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn key(k: &str) -> Yaml {
    Yaml::String(k.to_string())
}

/// A mapping with its `<<` merge keys applied (Compose resolves them; YAML 1.2 parsers keep them as plain keys).
fn merged(y: &Yaml) -> BTreeMap<String, Yaml> {
    let mut out = BTreeMap::new();
    let Yaml::Hash(h) = y else { return out };
    if let Some(base) = h.get(&key("<<")) {
        let bases = match base {
            Yaml::Array(a) => a.clone(),
            other => vec![other.clone()],
        };
        for b in &bases {
            out.extend(merged(b));
        }
    }
    for (k, v) in h {
        if let Some(k) = k.as_str()
            && k != "<<"
        {
            out.insert(k.to_string(), v.clone());
        }
    }
    out
}

struct Compose {
    services: BTreeMap<String, BTreeMap<String, Yaml>>,
    volumes: Vec<String>,
}

fn compose() -> Compose {
    let text = std::fs::read_to_string(root().join("docker-compose.yml")).expect("docker-compose.yml");
    let docs = YamlLoader::load_from_str(&text).expect("docker-compose.yml is YAML");
    assert_eq!(docs.len(), 1, "one YAML document");
    let top = merged(&docs[0]);
    let services: BTreeMap<_, _> = match top.get("services") {
        Some(Yaml::Hash(h)) => {
            h.iter().map(|(k, v)| (k.as_str().expect("service name").to_string(), merged(v))).collect()
        }
        _ => panic!("no services mapping"),
    };
    let volumes = match top.get("volumes") {
        Some(Yaml::Hash(h)) => h.keys().filter_map(|k| k.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    };
    Compose { services, volumes }
}

fn strings(y: Option<&Yaml>) -> Vec<String> {
    match y {
        Some(Yaml::Array(a)) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        Some(Yaml::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

fn is_one_shot(s: &BTreeMap<String, Yaml>) -> bool {
    s.get("restart").and_then(Yaml::as_str) == Some("no")
}

fn profiles(s: &BTreeMap<String, Yaml>) -> Vec<String> {
    strings(s.get("profiles"))
}

#[test]
fn the_trial_runs_postgres_prometheus_a_worker_and_the_api() {
    let c = compose();
    for name in ["postgres", "prometheus", "migrate", "worker", "serve"] {
        let s = c.services.get(name).unwrap_or_else(|| panic!("service {name} missing"));
        assert!(profiles(s).is_empty(), "{name} starts without a profile");
    }
    let entry = |name: &str| strings(c.services[name].get("entrypoint"));
    assert_eq!(entry("worker"), ["/usr/bin/tini", "--", "cardhour", "worker"]);
    assert_eq!(entry("serve"), ["/usr/bin/tini", "--", "cardhour", "serve"]);
    assert_eq!(entry("migrate"), ["/usr/bin/tini", "--", "cardhour", "migrate"]);
    for name in ["worker", "serve", "migrate"] {
        let env = merged(c.services[name].get("environment").expect("environment"));
        let url = env.get("DATABASE_URL").and_then(Yaml::as_str).expect("DATABASE_URL");
        assert!(url.contains("@postgres:5432/"), "{name} reaches the compose Postgres: {url}");
    }
}

#[test]
fn every_long_running_service_is_health_checked() {
    let c = compose();
    let long_running: Vec<_> = c.services.iter().filter(|(_, s)| !is_one_shot(s)).collect();
    assert!(long_running.len() >= 4, "postgres, prometheus, worker, serve: {}", long_running.len());
    for (name, s) in long_running {
        let hc = merged(s.get("healthcheck").unwrap_or_else(|| panic!("{name} has no healthcheck")));
        let test = strings(hc.get("test"));
        assert!(test.len() >= 2 && (test[0] == "CMD" || test[0] == "CMD-SHELL"), "{name}: healthcheck test {test:?}");
        assert_eq!(s.get("restart").and_then(Yaml::as_str), Some("unless-stopped"), "{name} restarts");
    }
    // the API is ready when its schema is (not merely when the port opens)
    let serve = strings(merged(c.services["serve"].get("healthcheck").unwrap()).get("test")).join(" ");
    assert!(serve.contains("/readyz"), "{serve}");
}

#[test]
fn dependencies_name_services_that_can_report_what_is_awaited() {
    let c = compose();
    let mut checked = 0;
    for (name, s) in &c.services {
        let Some(Yaml::Hash(deps)) = s.get("depends_on") else { continue };
        for (dep, how) in deps {
            let dep = dep.as_str().expect("dependency name");
            let target = c.services.get(dep).unwrap_or_else(|| panic!("{name} depends on unknown {dep}"));
            let how = merged(how);
            let condition = how.get("condition").and_then(Yaml::as_str).unwrap_or("service_started");
            match condition {
                "service_healthy" => assert!(target.contains_key("healthcheck"), "{name} waits on {dep}'s health"),
                "service_completed_successfully" => assert!(is_one_shot(target), "{dep} must be a one-shot"),
                "service_started" => {}
                other => panic!("{name} → {dep}: unknown condition {other}"),
            }
            // a service of the default set may wait on a profile's service only if that one is optional
            if profiles(s).is_empty() && !profiles(target).is_empty() {
                assert_eq!(how.get("required").and_then(Yaml::as_bool), Some(false), "{name} → {dep} optional");
            }
            checked += 1;
        }
    }
    assert!(checked >= 8, "dependencies checked: {checked}");
}

#[test]
fn ports_are_published_on_loopback_only() {
    let c = compose();
    let ports: Vec<String> = c.services.values().flat_map(|s| strings(s.get("ports"))).collect();
    assert!(ports.iter().any(|p| p.ends_with(":8080")), "the API is published: {ports:?}");
    for p in &ports {
        assert!(p.starts_with("127.0.0.1:"), "published beyond loopback: {p}");
    }
}

#[test]
fn the_demo_profile_simulates_backfills_and_ingests_a_cluster() {
    let c = compose();
    let demo: Vec<&String> =
        c.services.iter().filter(|(_, s)| profiles(s).contains(&"demo".into())).map(|(n, _)| n).collect();
    assert_eq!(demo, ["demo-backfill", "demo-ingest", "demo-simulate"]);
    let script = |name: &str| strings(c.services[name].get("entrypoint")).join(" ");
    assert!(script("demo-simulate").contains("cardhour simulate"), "{}", script("demo-simulate"));
    assert!(script("demo-backfill").contains("create-blocks-from openmetrics"), "{}", script("demo-backfill"));
    assert!(script("demo-ingest").contains("cardhour ingest"), "{}", script("demo-ingest"));
    // every named volume a service mounts is declared
    let mounts: Vec<String> = c.services.values().flat_map(|s| strings(s.get("volumes"))).collect();
    assert!(!mounts.is_empty());
    for m in &mounts {
        let source = m.split(':').next().unwrap();
        if !source.starts_with('.') && !source.starts_with('/') {
            assert!(c.volumes.iter().any(|v| v == source), "volume {source} not declared");
        }
    }
}

#[test]
fn the_image_has_an_init_and_the_fonts_of_the_pdf_statements() {
    let docker = std::fs::read_to_string(root().join("Dockerfile")).expect("Dockerfile");
    for pkg in ["tini", "fonts-noto-cjk", "fonts-dejavu-core", "curl"] {
        assert!(docker.split_whitespace().any(|w| w == pkg), "the image installs {pkg}");
    }
    assert!(docker.contains(r#"ENTRYPOINT ["/usr/bin/tini", "--", "cardhour"]"#));
    assert!(docker.contains("SQLX_OFFLINE=true"), "the image builds without a database");
}

#[test]
fn the_bundled_prometheus_scrapes_serve_and_the_worker_with_the_deploy_files() {
    let c = compose();
    let prom = &c.services["prometheus"];
    let config =
        strings(prom.get("command")).into_iter().find_map(|a| a.strip_prefix("--config.file=").map(str::to_string));
    let config = config.expect("the bundled Prometheus names its config file");
    let mount = strings(prom.get("volumes")).into_iter().find(|v| v.starts_with("./deploy:")).expect("deploy/ mounted");
    let target_dir = mount.split(':').nth(1).unwrap();
    assert_eq!(config, format!("{target_dir}/prometheus.yml"));

    // the scrape targets of deploy/prometheus.yml are where serve and the worker listen
    let text = std::fs::read_to_string(root().join("deploy/prometheus.yml")).unwrap();
    let scrape = YamlLoader::load_from_str(&text).unwrap().remove(0);
    let targets: BTreeMap<String, Vec<String>> = scrape["scrape_configs"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|j| {
            let t = j["static_configs"][0]["targets"].as_vec().unwrap();
            (j["job_name"].as_str().unwrap().to_string(), t.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        })
        .collect();
    let env = |name: &str, key: &str| {
        merged(c.services[name].get("environment").unwrap()).get(key).and_then(Yaml::as_str).map(str::to_string)
    };
    let port = |addr: String| addr.rsplit(':').next().unwrap().to_string();
    let serve_port = port(env("serve", "CARDHOUR_LISTEN").expect("serve listens"));
    let worker_port = port(env("worker", "CARDHOUR_METRICS_LISTEN").expect("the worker serves /metrics"));
    assert_eq!(targets["cardhour-serve"], [format!("serve:{serve_port}")]);
    assert_eq!(targets["cardhour-worker"], [format!("worker:{worker_port}")]);
    let worker_check = strings(merged(c.services["worker"].get("healthcheck").unwrap()).get("test")).join(" ");
    assert!(worker_check.contains(&format!(":{worker_port}/readyz")), "{worker_check}");
}
