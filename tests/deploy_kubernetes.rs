//! deploy/kubernetes checked without a cluster (issue 32). Every overlay is rendered with `kubectl kustomize`;
//! each object is validated strictly (an unknown field is an error) against the schemas of Kubernetes 1.35, 1.36
//! and 1.37 that the PyPI package kubernetes-validate ships, and each custom resource against its CRD
//! (scripts/kube-crds: npm packages generated from the CRDs of the Prometheus Operator v0.90.1 and CloudNativePG
//! v1.29.0); the validators are shown to refuse broken objects. The PrometheusRule is deploy/prometheus-alerts.yml
//! and passes `promtool check rules` and the alerts' unit tests; the dashboard ConfigMap is
//! deploy/grafana-dashboard.json and asks only for metrics cardhour exports. The workloads run commands, flags and
//! environment variables the real binary accepts, as non-root on a read-only root file system, with probes,
//! resources and a termination grace that covers CARDHOUR_SHUTDOWN_GRACE; secrets are referenced, never inlined.
//!
//! The tools come from scripts/kube-tools.sh (a venv and `npm ci`, from the registries only). After editing
//! deploy/prometheus-alerts.yml or deploy/grafana-dashboard.json, `UPDATE_KUBERNETES=1 cargo test --test
//! suite deploy_kubernetes::` writes their copies in deploy/kubernetes/components/monitoring again.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const OVERLAYS: [&str; 3] = ["base", "overlays/external-postgres", "overlays/cloudnative-pg"];
/// The current Kubernetes release and the two before it: the newest three kubernetes-validate ships.
const KUBERNETES: [&str; 3] = ["1.35", "1.36", "1.37"];
/// The custom resources and the overlays that have them.
const CUSTOM: [(&str, &[&str]); 3] = [
    ("monitoring.coreos.com/v1 ServiceMonitor", &["overlays/external-postgres", "overlays/cloudnative-pg"]),
    ("monitoring.coreos.com/v1 PrometheusRule", &["overlays/external-postgres", "overlays/cloudnative-pg"]),
    ("postgresql.cnpg.io/v1 Cluster", &["overlays/cloudnative-pg"]),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn kube(rel: &str) -> PathBuf {
    root().join("deploy/kubernetes").join(rel)
}

/// The validators of scripts/kube-tools.sh, installed once per test run.
struct Tools {
    python: PathBuf,
    crds: PathBuf,
}

fn tools() -> &'static Tools {
    static TOOLS: OnceLock<Tools> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let out = Command::new("bash").arg(root().join("scripts/kube-tools.sh")).stdin(Stdio::null()).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "scripts/kube-tools.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let line = |key: &str| -> PathBuf {
            let prefix = format!("{key}=");
            stdout.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("{key} in {stdout}")).into()
        };
        Tools { python: line("KUBE_PYTHON"), crds: line("KUBE_CRDS") }
    })
}

fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// An overlay as `kubectl kustomize` renders it: its YAML, and its objects (as JSON values).
struct Rendered {
    yaml: PathBuf,
    objects: Vec<Value>,
    _dir: tempfile::TempDir,
}

fn render(overlay: &str) -> Rendered {
    let dir = tempfile::tempdir().unwrap();
    let (ok, yaml, err) = run(Command::new("kubectl").arg("kustomize").arg(kube(overlay)));
    assert!(ok, "kubectl kustomize {overlay}: {err}");
    let path = dir.path().join("rendered.yaml");
    std::fs::write(&path, &yaml).unwrap();
    let docs = yaml_rust2::YamlLoader::load_from_str(&yaml).unwrap();
    Rendered { yaml: path, objects: docs.iter().map(to_json).collect(), _dir: dir }
}

/// A YAML value as JSON (the rendered manifests use no anchors or tags).
fn to_json(y: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Hash(h) => {
            Value::Object(h.iter().map(|(k, v)| (k.as_str().expect("a string key").to_string(), to_json(v))).collect())
        }
        Yaml::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        Yaml::String(s) => json!(s),
        Yaml::Integer(i) => json!(i),
        Yaml::Real(r) => json!(r.parse::<f64>().unwrap()),
        Yaml::Boolean(b) => json!(b),
        Yaml::Null => Value::Null,
        other => panic!("unexpected YAML {other:?}"),
    }
}

/// kubernetes-validate's verdicts on `yaml`, one per object and Kubernetes version, and whether all were valid.
fn validate_kubernetes(yaml: &Path) -> (bool, Vec<Value>) {
    let (ok, stdout, err) = run(Command::new(&tools().python)
        .arg(root().join("scripts/kube-validate.py"))
        .arg("--versions")
        .arg(KUBERNETES.join(","))
        .arg(yaml));
    let verdicts =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{err}"))).collect();
    (ok, verdicts)
}

/// Every overlay, rendered once per test run.
fn rendered() -> &'static BTreeMap<&'static str, Rendered> {
    static RENDERED: OnceLock<BTreeMap<&'static str, Rendered>> = OnceLock::new();
    RENDERED.get_or_init(|| OVERLAYS.iter().map(|o| (*o, render(o))).collect())
}

fn kind_of(o: &Value) -> String {
    format!("{} {}", o["apiVersion"].as_str().unwrap_or("?"), o["kind"].as_str().unwrap_or("?"))
}

fn name_of(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or("?")
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && name_of(o) == name)
        .unwrap_or_else(|| panic!("no {kind} {name} among {:?}", objects.iter().map(name_of).collect::<Vec<_>>()))
}

/// `node validate.mjs` on `objects`: one verdict per object, and whether all passed.
fn validate_custom(objects: &[Value]) -> (bool, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("custom.json");
    std::fs::write(&path, serde_json::to_string(objects).unwrap()).unwrap();
    let (ok, stdout, err) = run(Command::new("node").arg(tools().crds.join("validate.mjs")).arg(&path));
    let verdicts: Vec<Value> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{err}"))).collect();
    assert_eq!(verdicts.len(), objects.len(), "one verdict per object: {stdout}\n{err}");
    (ok, verdicts)
}

/// The PrometheusRule as generated from deploy/prometheus-alerts.yml: its groups (comments and all) under `spec:`.
fn prometheus_rule_from_alerts() -> String {
    let alerts = std::fs::read_to_string(root().join("deploy/prometheus-alerts.yml")).unwrap();
    let groups = alerts.find("\ngroups:").expect("a `groups:` line") + 1;
    let mut out = String::from(
        "# Generated from deploy/prometheus-alerts.yml by tests/deploy_kubernetes.rs: edit that file, then\n\
         # `UPDATE_KUBERNETES=1 cargo test --test suite deploy_kubernetes::` writes this one again (the test fails\n\
         # while they differ).\n\
         apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: cardhour\nspec:\n",
    );
    for line in alerts[groups..].split('\n') {
        if !line.is_empty() {
            out.push_str("  ");
        }
        out.push_str(line);
        out.push('\n');
    }
    out.pop();
    out
}

#[test]
fn the_monitoring_component_carries_the_alert_rules_and_the_dashboard_of_deploy() {
    let copies = [
        (kube("components/monitoring/prometheusrule.yaml"), prometheus_rule_from_alerts()),
        (
            kube("components/monitoring/grafana-dashboard.json"),
            std::fs::read_to_string(root().join("deploy/grafana-dashboard.json")).unwrap(),
        ),
    ];
    for (path, want) in copies {
        if std::env::var_os("UPDATE_KUBERNETES").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap();
        assert!(
            have == want,
            "{} differs from its source: run `UPDATE_KUBERNETES=1 cargo test --test suite deploy_kubernetes::`",
            path.display()
        );
    }
    // and what the cluster receives is the same rules as the file promtool tests (parsed, not only as text)
    let parse = |text: &str| yaml_rust2::YamlLoader::load_from_str(text).unwrap().remove(0);
    let rule = parse(&prometheus_rule_from_alerts());
    let alerts = parse(&std::fs::read_to_string(root().join("deploy/prometheus-alerts.yml")).unwrap());
    assert_eq!(rule["spec"]["groups"], alerts["groups"]);
    assert!(!alerts["groups"][0]["rules"].as_vec().unwrap().is_empty());
}

#[test]
fn every_overlay_is_valid_for_three_kubernetes_releases_and_its_custom_resources_for_their_crds() {
    // the three releases are the newest the package ships (a newer package moves them on)
    let (ok, shipped, err) =
        run(Command::new(&tools().python).arg(root().join("scripts/kube-validate.py")).arg("--shipped"));
    assert!(ok, "{err}");
    let shipped: Vec<String> = serde_json::from_str(&shipped).unwrap();
    let newest: Vec<String> =
        shipped[shipped.len() - 3..].iter().map(|v| v.trim_end_matches(".0").to_string()).collect();
    assert_eq!(newest, KUBERNETES, "kubernetes-validate ships {shipped:?}");

    for (overlay, r) in rendered() {
        assert!(r.objects.len() >= 12, "{overlay}: {} objects", r.objects.len());
        let (_, all_verdicts) = validate_kubernetes(&r.yaml);
        let mut custom = Vec::new();
        for o in &r.objects {
            let verdicts: Vec<&Value> = all_verdicts
                .iter()
                .filter(|v| v["object"] == format!("{}/{}", o["kind"].as_str().unwrap(), name_of(o)))
                .collect();
            assert_eq!(verdicts.len(), KUBERNETES.len(), "{overlay}: {} {}", kind_of(o), name_of(o));
            let results: BTreeSet<&str> = verdicts.iter().map(|v| v["result"].as_str().unwrap()).collect();
            if CUSTOM.iter().any(|(k, _)| *k == kind_of(o)) {
                // Kubernetes itself does not define it: its CRD's schema does
                assert_eq!(results, BTreeSet::from(["no-schema"]), "{overlay}: {verdicts:?}");
                custom.push(o.clone());
            } else {
                for v in &verdicts {
                    assert_eq!(v["result"], "ok", "{overlay}: {v}");
                    // validated against that release's own schema, not an older one
                    assert_eq!(v["validated_against"], v["version"], "{overlay}: {v}");
                }
            }
        }
        // each custom resource where it belongs, and nowhere else
        for (kind, overlays) in CUSTOM {
            let n = custom.iter().filter(|o| kind_of(o) == kind).count();
            assert_eq!(n, usize::from(overlays.contains(overlay)), "{overlay}: {kind}");
        }
        if custom.is_empty() {
            continue;
        }
        let (ok, verdicts) = validate_custom(&custom);
        assert!(ok, "{overlay}: {verdicts:#?}");
        assert!(verdicts.iter().all(|v| v["ok"] == true && v["crd"].as_str().is_some_and(|c| c.contains("v"))));
    }
}

#[test]
fn the_validators_refuse_what_kubernetes_and_the_crds_would_refuse() {
    // a check that cannot fail proves nothing: each validator is shown a broken copy of a rendered object
    let r = &rendered()["overlays/cloudnative-pg"];
    let mut deployment = find(&r.objects, "Deployment", "cardhour-worker").clone();
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = json!({"path": "/readyz"});
    let mut replicas = find(&r.objects, "Deployment", "cardhour-serve").clone();
    replicas["spec"]["replicas"] = json!("two");
    let dir = tempfile::tempdir().unwrap();
    for (what, object, needle) in
        [("an unknown field", deployment, "httpGett"), ("a string for a number", replicas, "replicas")]
    {
        let path = dir.path().join("broken.yaml");
        std::fs::write(&path, serde_json::to_string(&object).unwrap()).unwrap();
        let (ok, verdicts) = validate_kubernetes(&path);
        assert!(!ok, "{what} passed: {verdicts:?}");
        let refused = verdicts.iter().filter(|v| v["result"] == "invalid" && v["message"].to_string().contains(needle));
        assert_eq!(refused.count(), KUBERNETES.len(), "{what}: {verdicts:?}");
    }

    let monitor = find(&r.objects, "ServiceMonitor", "cardhour");
    let cluster = find(&r.objects, "Cluster", "cardhour-db");
    let rule = find(&r.objects, "PrometheusRule", "cardhour");
    let mut typo = monitor.clone();
    typo["spec"]["endpoints"][0]["intervall"] = json!("15s");
    let mut interval = monitor.clone();
    interval["spec"]["endpoints"][0]["interval"] = json!("15 seconds");
    let mut instances = cluster.clone();
    instances["spec"]["instances"] = json!("2");
    let mut storage = cluster.clone();
    storage["spec"]["storage"]["sise"] = json!("1Gi");
    let mut duration = rule.clone();
    duration["spec"]["groups"][0]["rules"][0]["for"] = json!("a while");
    let broken = [typo, interval, instances, storage, duration];
    let mut unknown = monitor.clone();
    unknown["apiVersion"] = json!("monitoring.coreos.com/v2");
    let (ok, verdicts) = validate_custom(&[broken.to_vec(), vec![unknown]].concat());
    assert!(!ok);
    let needles = ["intervall", "must match pattern", "must be integer", "sise", "must match pattern", "no schema"];
    for (v, needle) in verdicts.iter().zip(needles) {
        assert_eq!(v["ok"], false, "{v}");
        assert!(v["errors"].to_string().contains(needle), "expected {needle:?} in {v}");
    }
    // and the unbroken ones pass
    let (ok, verdicts) = validate_custom(&[monitor.clone(), cluster.clone(), rule.clone()]);
    assert!(ok, "{verdicts:?}");
}

#[test]
fn the_prometheus_rule_passes_promtool_and_the_alerts_unit_tests() {
    for overlay in ["overlays/external-postgres", "overlays/cloudnative-pg"] {
        let rule = find(&rendered()[overlay].objects, "PrometheusRule", "cardhour");
        let dir = tempfile::tempdir().unwrap();
        // JSON is YAML: the rules as the operator hands them to Prometheus
        std::fs::write(dir.path().join("prometheus-alerts.yml"), serde_json::to_string(&rule["spec"]).unwrap())
            .unwrap();
        std::fs::copy(root().join("deploy/prometheus-alerts.test.yml"), dir.path().join("tests.yml")).unwrap();
        let promtool = common::tool("PROMTOOL", "promtool");
        let rules = rule["spec"]["groups"].as_array().unwrap().iter().map(|g| g["rules"].as_array().unwrap().len());
        let (ok, out, err) =
            run(Command::new(&promtool).args(["check", "rules", "prometheus-alerts.yml"]).current_dir(dir.path()));
        assert!(ok && out.contains(&format!("SUCCESS: {} rules found", rules.sum::<usize>())), "{out}{err}");
        let (ok, out, err) = run(Command::new(&promtool).args(["test", "rules", "tests.yml"]).current_dir(dir.path()));
        assert!(ok && out.contains("SUCCESS"), "{overlay}: promtool test rules:\n{out}{err}");
    }
}

/// The `cardhour_*` metric names in a PromQL expression.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\bcardhour_[a-z0-9_]+").unwrap();
    re.find_iter(expr).map(|m| m.as_str().to_string()).collect()
}

#[test]
fn the_dashboard_and_the_rules_ask_only_for_metrics_cardhour_exports() {
    let objects = &rendered()["overlays/external-postgres"].objects;
    let dashboard = find(objects, "ConfigMap", "cardhour-grafana-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1", "the sidecar's label");
    let json_text = dashboard["data"]["cardhour.json"].as_str().expect("the dashboard's JSON");
    assert_eq!(json_text, std::fs::read_to_string(root().join("deploy/grafana-dashboard.json")).unwrap());
    let dash: Value = serde_json::from_str(json_text).unwrap();
    let mut exprs: Vec<String> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    assert!(exprs.len() >= 20, "{} panel queries", exprs.len());
    let rule = find(objects, "PrometheusRule", "cardhour");
    for g in rule["spec"]["groups"].as_array().unwrap() {
        exprs.extend(g["rules"].as_array().unwrap().iter().map(|r| r["expr"].as_str().unwrap().to_string()));
    }
    let names: BTreeSet<String> = exprs.iter().flat_map(|e| metric_names(e)).collect();
    assert!(names.len() >= 10, "{names:?}");
    for name in &names {
        assert!(cardhour::telemetry::exports(name), "{name} is not exported by cardhour");
    }
}

/// Every environment variable the `cardhour` command line reads (clap's `env` of every argument of every
/// subcommand).
fn cli_env_names() -> BTreeSet<String> {
    use clap::CommandFactory;
    fn walk(cmd: &clap::Command, out: &mut BTreeSet<String>) {
        for a in cmd.get_arguments() {
            if let Some(e) = a.get_env() {
                out.insert(e.to_string_lossy().into_owned());
            }
        }
        for s in cmd.get_subcommands() {
            walk(s, out);
        }
    }
    let mut out = BTreeSet::new();
    walk(&cardhour::cli::Cli::command(), &mut out);
    out
}

/// The workloads' pod specs in `objects`: (component, pod spec).
fn pods(objects: &[Value]) -> Vec<(String, &Value)> {
    objects
        .iter()
        .filter(|o| o["kind"] == "Deployment" || o["kind"] == "Job")
        .map(|o| {
            (
                o["metadata"]["labels"]["app.kubernetes.io/component"].as_str().unwrap().to_string(),
                &o["spec"]["template"]["spec"],
            )
        })
        .collect()
}

/// The value of a container's literal environment variable.
fn env_value<'a>(container: &'a Value, name: &str) -> Option<&'a str> {
    container["env"].as_array()?.iter().find(|e| e["name"] == name)?["value"].as_str()
}

#[test]
fn the_workloads_are_locked_down_probed_and_stop_within_their_grace() {
    for (overlay, r) in rendered() {
        let pods = pods(&r.objects);
        let components: BTreeSet<&str> = pods.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(components, BTreeSet::from(["migrate", "serve", "worker"]), "{overlay}");
        for (component, pod) in &pods {
            let what = format!("{overlay} {component}");
            assert_eq!(pod["automountServiceAccountToken"], false, "{what}: no API token");
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{what}");
            assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault", "{what}");
            let c = &pod["containers"][0];
            assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true, "{what}");
            assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false, "{what}");
            assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]), "{what}");
            for key in ["requests", "limits"] {
                assert!(c["resources"][key]["memory"].is_string(), "{what}: {key}.memory");
            }
            if component == "migrate" {
                continue;
            }
            // probes: ready on /readyz (the database and this version's schema), alive on /healthz
            let port = c["ports"][0]["name"].as_str().unwrap();
            assert_eq!(c["readinessProbe"]["httpGet"], json!({"path": "/readyz", "port": port}), "{what}");
            assert_eq!(c["livenessProbe"]["httpGet"], json!({"path": "/healthz", "port": port}), "{what}");
            // SIGTERM, then CARDHOUR_SHUTDOWN_GRACE for the work in flight, within the pod's grace
            let grace = cardhour::validate::duration::parse_duration(
                env_value(c, "CARDHOUR_SHUTDOWN_GRACE").expect("the grace"),
            )
            .unwrap();
            let pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
                .as_array()
                .map_or(0, |cmd| cmd[1].as_str().unwrap().parse::<u64>().unwrap());
            let period = pod["terminationGracePeriodSeconds"].as_u64().expect("terminationGracePeriodSeconds");
            assert!(period >= pre_stop + grace.as_secs() + 5, "{what}: {period} s < {pre_stop} + {grace:?} + 5 s");
            assert!(period <= pre_stop + grace.as_secs() + 15, "{what}: {period} s leaves a hung pod waiting");
            // the port the process listens on is the port probed and exposed
            let listen = env_value(c, "CARDHOUR_LISTEN").or(env_value(c, "CARDHOUR_METRICS_LISTEN")).unwrap();
            let port_number = c["ports"][0]["containerPort"].as_u64().unwrap();
            assert!(listen.ends_with(&format!(":{port_number}")), "{what}: {listen} vs {port_number}");
        }
        // several workers are safe (leases) and a drain keeps one API replica
        let worker = find(&r.objects, "Deployment", "cardhour-worker");
        assert!(worker["spec"]["replicas"].as_u64().unwrap() >= 2, "{overlay}");
        let pdb = find(&r.objects, "PodDisruptionBudget", "cardhour-serve");
        assert_eq!(pdb["spec"]["minAvailable"], 1, "{overlay}");
    }
}

#[test]
fn selectors_ports_and_secrets_fit_together() {
    let inline_password = regex::Regex::new(r"://[^/\s:@]+:[^/\s@]+@").unwrap();
    for (overlay, r) in rendered() {
        let labels_of = |component: &str| -> Value {
            r.objects
                .iter()
                .find(|o| o["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == component)
                .map(|o| o["spec"]["template"]["metadata"]["labels"].clone())
                .unwrap_or_else(|| panic!("{overlay}: no {component} pods"))
        };
        let selects = |selector: &Value, component: &str| {
            let labels = labels_of(component);
            selector.as_object().unwrap().iter().all(|(k, v)| labels[k] == *v)
        };
        // each PDB, NetworkPolicy and Service selects the pods it is about, and their ports exist
        for o in &r.objects {
            let component = o["metadata"]["name"].as_str().unwrap().trim_start_matches("cardhour-");
            match o["kind"].as_str().unwrap() {
                "PodDisruptionBudget" => assert!(selects(&o["spec"]["selector"]["matchLabels"], component)),
                "NetworkPolicy" => assert!(selects(&o["spec"]["podSelector"]["matchLabels"], component)),
                "Service" => {
                    assert!(selects(&o["spec"]["selector"], component), "{overlay}: {o}");
                    let pod = pods(&r.objects).into_iter().find(|(c, _)| c == component).unwrap().1;
                    let names: Vec<&Value> =
                        pod["containers"][0]["ports"].as_array().unwrap().iter().map(|p| &p["name"]).collect();
                    for p in o["spec"]["ports"].as_array().unwrap() {
                        assert!(names.contains(&&p["targetPort"]), "{overlay}: {p} targets no container port");
                    }
                }
                _ => {}
            }
        }
        // the ServiceMonitor scrapes ports the Services have; the Services' names are the alerts' jobs
        if let Some(monitor) = r.objects.iter().find(|o| o["kind"] == "ServiceMonitor") {
            let service_ports: BTreeSet<&str> = r
                .objects
                .iter()
                .filter(|o| o["kind"] == "Service")
                .inspect(|s| assert!(s["metadata"]["name"].as_str().unwrap().starts_with("cardhour-")))
                .flat_map(|s| s["spec"]["ports"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()))
                .collect();
            for e in monitor["spec"]["endpoints"].as_array().unwrap() {
                assert!(service_ports.contains(e["port"].as_str().unwrap()), "{e}");
                assert_eq!(e["path"], "/metrics");
            }
        }

        // secrets are referenced, never shipped; only those the README names; the optional ones marked so
        assert!(r.objects.iter().all(|o| o["kind"] != "Secret"), "{overlay} ships a Secret");
        let text = std::fs::read_to_string(&r.yaml).unwrap();
        assert!(!inline_password.is_match(&text), "{overlay}: a URL with a password");
        let required = ["cardhour-database", "cardhour-db-app", "cardhour-db-service"];
        let optional = ["cardhour-webhook", "cardhour-sso", "cardhour-prometheus-auth"];
        let mut referenced = BTreeSet::new();
        for (component, pod) in pods(&r.objects) {
            let c = &pod["containers"][0];
            let refs = c["env"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["valueFrom"].get("secretKeyRef"))
                .chain(c["envFrom"].as_array().into_iter().flatten().filter_map(|e| e.get("secretRef")))
                .chain(pod["volumes"].as_array().into_iter().flatten().filter_map(|v| v.get("secret")))
                .map(|s| (s["name"].as_str().or(s["secretName"].as_str()).unwrap(), s["optional"] == true));
            for (name, is_optional) in refs {
                let known = if is_optional { &optional[..] } else { &required[..] };
                assert!(known.contains(&name), "{overlay} {component}: secret {name} (optional: {is_optional})");
                referenced.insert(name);
            }
        }
        let database = if overlay.ends_with("cloudnative-pg") {
            ["cardhour-db-app", "cardhour-db-service"].to_vec()
        } else {
            vec!["cardhour-database"]
        };
        for name in database.into_iter().chain(optional) {
            assert!(referenced.contains(name), "{overlay}: {name} is not referenced");
        }
    }

    // CloudNativePG: serve and the workers reach the cluster's primary as the role migrate grants
    let objects = &rendered()["overlays/cloudnative-pg"].objects;
    let cluster = find(objects, "Cluster", "cardhour-db");
    let role = cluster["spec"]["managed"]["roles"][0]["name"].as_str().unwrap();
    let migrate = &find(objects, "Job", "cardhour-migrate")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(migrate["args"], json!(["migrate", "--grant-app-role", role]));
    for name in ["cardhour-serve", "cardhour-worker"] {
        let c = &find(objects, "Deployment", name)["spec"]["template"]["spec"]["containers"][0];
        let url = url::Url::parse(env_value(c, "DATABASE_URL").unwrap()).unwrap();
        assert_eq!(url.username(), role, "{name}");
        assert_eq!(url.host_str(), Some("cardhour-db-rw"), "{name}: the primary's Service");
        let db = cluster["spec"]["bootstrap"]["initdb"]["database"].as_str().unwrap();
        assert_eq!(url.path(), format!("/{db}"));
        let names: Vec<&str> = c["env"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names.iter().filter(|n| **n == "DATABASE_URL").count(), 1, "{name}: {names:?}");
    }
}

/// `cardhour ARGS` with `env`, killed after `limit`: its exit status (None if killed) and stderr.
fn run_limited(args: &[String], env: &[(String, String)], limit: Duration) -> (Option<bool>, String) {
    let mut cmd = Command::new(common::cardhour_bin());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CARDHOUR_") || key == "DATABASE_URL" {
            cmd.env_remove(&key);
        }
    }
    let mut child = cmd
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s.success());
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    (status, err)
}

#[test]
fn the_clusters_files_credentials_are_where_the_worker_mounts_them() {
    use cardhour::prom::auth::{Authorization, Credential};
    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        source: cardhour::ingest::flags::SourceArgs,
    }
    let flags = <Flags as clap::Parser>::try_parse_from(["x"]).unwrap().source;
    let worker = find(&rendered()["base"].objects, "Deployment", "cardhour-worker");
    let pod = &worker["spec"]["template"]["spec"];
    let volume =
        pod["volumes"].as_array().unwrap().iter().find(|v| v["secret"]["secretName"] == "cardhour-prometheus-auth");
    let volume = volume.expect("the credentials' Secret is a volume")["name"].clone();
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    let mount = mounts.iter().find(|m| m["name"] == volume).unwrap()["mountPath"].as_str().unwrap();
    let mut files = Vec::new();
    for path in [root().join("deploy/clusters.example.toml"), kube("overlays/external-postgres/clusters.toml")] {
        for c in cardhour::ingest::config::from_file(&path, &flags).unwrap() {
            match &c.auth.authorization {
                Some(Authorization::Bearer(Credential::File(f)))
                | Some(Authorization::Basic { password: Credential::File(f), .. }) => files.push(f.clone()),
                Some(other) => panic!("{}: an inline credential in an example: {other:?}", c.ingest.cluster),
                None => {}
            }
            files.extend(
                [&c.auth.tls.ca_file, &c.auth.tls.cert_file, &c.auth.tls.key_file].into_iter().flatten().cloned(),
            );
        }
    }
    assert!(files.len() >= 5, "{files:?}");
    for f in &files {
        assert!(f.starts_with(mount), "{} is not under the mounted Secret {mount}", f.display());
    }
}

#[test]
fn the_workloads_run_commands_and_settings_the_binary_accepts() {
    let known = cli_env_names();
    for name in ["DATABASE_URL", "CARDHOUR_CONFIG", "CARDHOUR_SHUTDOWN_GRACE", "CARDHOUR_PROMETHEUS_BEARER_TOKEN_FILE"]
    {
        assert!(known.contains(name), "{name} among {known:?}");
    }
    for (overlay, r) in rendered() {
        // its name carries the hash of its contents
        let clusters = r
            .objects
            .iter()
            .find(|o| o["kind"] == "ConfigMap" && name_of(o).starts_with("cardhour-clusters-"))
            .expect("the clusters ConfigMap");
        let dir = tempfile::tempdir().unwrap();
        // the overlay's clusters file, read by cardhour's own parser
        let clusters_path = dir.path().join("clusters.toml");
        std::fs::write(&clusters_path, clusters["data"]["clusters.toml"].as_str().unwrap()).unwrap();
        for (component, pod) in pods(&r.objects) {
            let c = &pod["containers"][0];
            let mut env = Vec::new();
            for e in c["env"].as_array().unwrap() {
                let name = e["name"].as_str().unwrap().to_string();
                // PGPASSWORD is libpq's (and sqlx's) fallback for a URL without a password
                assert!(
                    known.contains(&name) || name == "PGPASSWORD",
                    "{overlay} {component}: {name} is read by nothing"
                );
                let value = match (name.as_str(), e["value"].as_str()) {
                    // a database URL that fails at once, after the command line was accepted
                    ("DATABASE_URL", _) => "postgres://cardhour@127.0.0.1:1/cardhour?sslmode=bogus".to_string(),
                    ("CARDHOUR_CONFIG", Some(_)) => clusters_path.display().to_string(),
                    (_, Some(v)) => v.to_string(),
                    (_, None) if name == "CARDHOUR_WEBHOOK_URL" => "https://hooks.example/cardhour".into(),
                    (_, None) => "from-a-secret".into(),
                };
                env.push((name, value));
            }
            let args: Vec<String> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().into()).collect();
            let (status, err) = run_limited(&args, &env, Duration::from_secs(60));
            let what = format!("{overlay} {component}: cardhour {args:?}");
            assert_eq!(status, Some(false), "{what} did not stop on the bogus database URL: {err}");
            for clap_error in ["unexpected argument", "invalid value", "required arguments", "Usage:"] {
                assert!(!err.contains(clap_error), "{what}: {err}");
            }
            assert!(err.contains("database"), "{what}: failed at the database, after its configuration: {err}");
        }
    }
}
