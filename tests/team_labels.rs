//! A team label becomes a team id by one fixed rule (SPEC §4): `NLP` and `nlp` on two namespaces are one team
//! `nlp`, registered once with the label as written as its name, and reported once in ingest health. The SQL
//! rule the ingest applies and the Rust rule the application applies agree on every label tried.
//!
//! Ground truth, by hand: two namespaces, `a` labelled `NLP` and `b` labelled `nlp`, one pod each holding one
//! card, Running for the whole 2 hours ingested (samples every 60 s): 2 × 2 = 4 GPU-hours, all of team `nlp`.

use crate::common;

use std::fmt::Write;

use cardhour::validate::TeamId;
use chrono::{Duration, Utc};
use common::{TestDb, TestPrometheus, rfc3339, run_cardhour_ok, sim_end};

fn openmetrics(start: chrono::DateTime<Utc>, minutes: i64) -> String {
    let mut om = String::new();
    let mut family = |name: &str, series: &[String], value: i64| {
        writeln!(om, "# TYPE {name} gauge").unwrap();
        for labels in series {
            for k in 0..minutes {
                let t = (start + Duration::minutes(k)).timestamp();
                writeln!(om, "{name}{{{labels}}} {value} {t}").unwrap();
            }
        }
    };
    family(
        "kube_namespace_labels",
        &[r#"namespace="a",label_team="NLP""#.into(), r#"namespace="b",label_team="nlp""#.into()],
        1,
    );
    family("kube_node_status_capacity", &[r#"node="n1",resource="nvidia_com_gpu",unit="integer""#.into()], 2);
    let pods = [("a", "p1", "u1"), ("b", "p2", "u2")];
    let requests: Vec<String> = pods
        .iter()
        .map(|(ns, pod, uid)| {
            format!(
                r#"namespace="{ns}",pod="{pod}",uid="{uid}",container="c",node="n1",resource="nvidia_com_gpu",unit="integer""#
            )
        })
        .collect();
    family("kube_pod_container_resource_requests", &requests, 1);
    let running: Vec<String> = pods
        .iter()
        .map(|(ns, pod, uid)| format!(r#"namespace="{ns}",pod="{pod}",uid="{uid}",phase="Running""#))
        .collect();
    family("kube_pod_status_phase", &running, 1);
    om.push_str("# EOF\n");
    om
}

#[test]
fn labels_differing_in_case_make_one_team() {
    let end = sim_end();
    let start = end - Duration::hours(2);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("labels.om");
    std::fs::write(&path, openmetrics(start, 120)).unwrap();
    let prom = TestPrometheus::from_openmetrics(&path).unwrap();
    let db = TestDb::migrated().unwrap();
    run_cardhour_ok(
        ["ingest", "--cluster", "c", "--prometheus", &prom.url, "--from", &rfc3339(start), "--to", &rfc3339(end)],
        &db.env(),
    );

    // every row of both namespaces is team nlp: 4 GPU-hours (to the scrape interval, 60 s per pod)
    let by_team =
        db.psql("SELECT team, round(sum(gpu_seconds)::numeric / 3600, 2) FROM gpu_usage_hourly GROUP BY team").unwrap();
    assert_eq!(by_team, "nlp|4.00");
    let ns = db
        .psql("SELECT string_agg(DISTINCT namespace || ':' || team, ',' ORDER BY namespace || ':' || team) FROM usage_namespace_daily")
        .unwrap();
    assert_eq!(ns, "a:nlp,b:nlp");
    // registered once, named by the label as written (the first in byte order)
    assert_eq!(db.psql("SELECT id || '|' || name FROM teams WHERE id <> 'unassigned'").unwrap(), "nlp|NLP");
    // and reported once
    let health: serde_json::Value =
        serde_json::from_str(&run_cardhour_ok(["health", "--format", "json"], &db.env())).unwrap();
    assert_eq!(health["merged_team_labels"], serde_json::json!([{"team_id": "nlp", "labels": ["NLP", "nlp"]}]));
    let text = run_cardhour_ok(["health"], &db.env());
    assert_eq!(text.matches("make one team").count(), 1, "{text}");
    assert!(text.contains("team labels NLP, nlp make one team: nlp"), "{text}");

    // the SQL rule and the Rust rule agree
    let labels = [
        "NLP",
        "nlp",
        " Vision_Team.2 ",
        "视觉",
        "--a--",
        "a__b",
        "Ünïcode",
        "x".repeat(70).as_str(),
        &format!("{}-tail", "a".repeat(62)),
        "",
        "-",
        "A-B-C",
        "team.one",
        "9lives",
        "ＡＢＣ",
    ]
    .map(str::to_string);
    for label in &labels {
        let sql =
            db.psql(&format!("SELECT coalesce(team_id_of_label('{}'), '<none>')", label.replace('\'', "''"))).unwrap();
        let rust = TeamId::from_label(label).map_or_else(|| "<none>".to_string(), TeamId::into_string);
        assert_eq!(sql, rust, "label {label:?}");
    }
}
