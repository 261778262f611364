//! Issue 29's hand-made month on a real Prometheus: one node of 3 A100 cards; A holds 2 cards for hours 0–3,
//! B asks for 1 card at hour 1 and runs at once until hour 3, C asks for 1 card at hour 2 — unbound (`node=""`),
//! Pending — and runs from hour 3 to 4, when A's cards are free. The answer is known: C waited 1 hour, 1 card-hour
//! Pending; 9 GPU-hours of 15 capacity card-hours (60 %); replayed on the 3 cards C waits the same hour, on one card
//! more nobody waits — what `GET /reports/capacity-plan` and `GET /reports/queue/{month}` must say.

use crate::common;

use chrono::{DateTime, TimeDelta, Utc};
use common::api::TestApi;
use common::om::Om;
use common::{TestDb, TestPrometheus, rfc3339, run_cardhour_ok, sim_end};
use reqwest::Method;

const H: i64 = 3_600_000;
const MODEL: &str = "NVIDIA-A100-SXM4-80GB";

/// A window of 5 hours inside one billing month (Asia/Shanghai), ending at least 4 hours ago.
fn window() -> (DateTime<Utc>, String) {
    let tz = chrono_tz::Asia::Shanghai;
    let mut end = sim_end();
    loop {
        let start = end - TimeDelta::hours(5);
        let month = |t: DateTime<Utc>| t.with_timezone(&tz).format("%Y-%m").to_string();
        if month(start) == month(end - TimeDelta::milliseconds(1)) {
            return (start, month(start));
        }
        end -= TimeDelta::hours(6);
    }
}

fn pod(om: &mut Om, name: &str, cards: f64, (asked, running, ended): (i64, i64, i64), bound: bool) {
    let uid = format!("uid-{name}");
    // unbound while Pending: kube-state-metrics writes `node=""` until the pod is scheduled
    let node = if bound { "n1" } else { "" };
    if asked < running {
        let labels = [
            ("namespace", "train"),
            ("pod", name),
            ("uid", uid.as_str()),
            ("container", "main"),
            ("node", node),
            ("resource", "nvidia_com_gpu"),
            ("unit", "integer"),
        ];
        om.every_minute("kube_pod_container_resource_requests", &labels, (asked, running), cards);
    }
    let labels = [
        ("namespace", "train"),
        ("pod", name),
        ("uid", uid.as_str()),
        ("container", "main"),
        ("node", "n1"),
        ("resource", "nvidia_com_gpu"),
        ("unit", "integer"),
    ];
    om.every_minute("kube_pod_container_resource_requests", &labels, (running, ended), cards);
    for (phase, span) in [("Pending", (asked, running)), ("Running", (running, ended))] {
        let labels = [("namespace", "train"), ("pod", name), ("uid", uid.as_str()), ("phase", phase)];
        om.every_minute("kube_pod_status_phase", &labels, span, 1.0);
        // the other phase's series reads 0 meanwhile
        let other = if phase == "Pending" { (running, ended) } else { (asked, running) };
        om.every_minute("kube_pod_status_phase", &labels, other, 0.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_pods_one_card_short() {
    let (start, month) = window();
    let s = start.timestamp_millis();
    let e = s + 5 * H;
    let mut om = Om::default();
    let gfd = [("node", "n1"), ("label_nvidia_com_gpu_product", MODEL), ("label_nvidia_com_gpu_count", "3")];
    om.every_minute("kube_node_labels", &gfd, (s, e), 1.0);
    for name in ["kube_node_status_capacity", "kube_node_status_allocatable"] {
        om.every_minute(name, &[("node", "n1"), ("resource", "nvidia_com_gpu"), ("unit", "integer")], (s, e), 3.0);
    }
    om.every_minute("kube_namespace_labels", &[("namespace", "train"), ("label_team", "vision")], (s, e), 1.0);
    pod(&mut om, "a", 2.0, (s, s, s + 3 * H), true);
    pod(&mut om, "b", 1.0, (s + H, s + H, s + 3 * H), true);
    pod(&mut om, "c", 1.0, (s + 2 * H, s + 3 * H, s + 4 * H), false);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metrics.om");
    om.write(&path);
    let prom = TestPrometheus::from_openmetrics(&path).unwrap();
    let db = TestDb::migrated().unwrap();
    let (from, to) = (rfc3339(start), rfc3339(start + TimeDelta::hours(5)));
    run_cardhour_ok(["ingest", "--cluster", "c", "--prometheus", &prom.url, "--from", &from, "--to", &to], &db.env());

    let api = TestApi::start(sqlx::PgPool::connect(&db.url).await.unwrap()).await;
    let path = format!("/api/v1/reports/capacity-plan?month={month}&extra_cards=1");
    let (status, plan) = api.call(Method::GET, &path, Some(&api.finance), None).await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(plan["estimate"], true);
    let models = plan["models"].as_array().unwrap();
    assert_eq!(models.len(), 1, "{plan}");
    let m = &models[0];
    // GFD's product label names the model as DCGM does
    assert_eq!(m["gpu_model"], "NVIDIA A100-SXM4-80GB");
    let f = |v: &serde_json::Value| v.as_f64().unwrap();
    let close = |what: &str, a: f64, b: f64| assert!((a - b).abs() < 1e-9, "{what}: {a} ≠ {b} in {m}");
    close("capacity cards", f(&m["capacity_cards"]), 3.0);
    close("GPU-hours", f(&m["gpu_hours"]), 9.0);
    close("allocation", f(&m["allocation_rate"]), 0.6);
    // C waited unbound (no node, no model yet): its Pending hour counts under the model it started on
    close("pending card-hours of the model", f(&m["pending_card_hours"]), 1.0);
    assert_eq!((m["pods_started"].as_u64(), m["pods_waited"].as_u64()), (Some(3), Some(1)), "{m}");
    close("median wait", f(&m["median_wait_seconds"]), 3600.0);
    let w = &m["what_if"];
    close("today's capacity", f(&w["today"]["capacity_cards"]), 3.0);
    close("replayed Pending", f(&w["today"]["pending_card_hours"]), 1.0);
    assert_eq!(w["today"]["pods_waited"], 1, "{w}");
    close("replayed median wait", f(&w["today"]["median_wait_seconds"]), 3600.0);
    close("with one more card", f(&w["with_extra"]["pending_card_hours"]), 0.0);
    assert_eq!(w["with_extra"]["pods_waited"], 0, "{w}");
    close("saved", f(&w["saved_pending_card_hours"]), 1.0);

    // the queue report: C's hour Pending is its team's
    let (status, q) = api.call(Method::GET, &format!("/api/v1/reports/queue/{month}"), Some(&api.finance), None).await;
    assert_eq!(status, 200, "{q}");
    let teams = q["teams"].as_array().unwrap();
    assert_eq!(teams.len(), 1, "{q}");
    assert_eq!(teams[0]["team"], "vision");
    close("team Pending card-hours", f(&teams[0]["pending_card_hours"]), 1.0);
    assert_eq!((teams[0]["pods_started"].as_u64(), teams[0]["pods_waited"].as_u64()), (Some(3), Some(1)));
    close("team p90", f(&teams[0]["p90_wait_seconds"]), 3600.0);

    // cluster-wide: a team lead is refused; a bad figure names its field
    let (status, _) = api.call(Method::GET, &path, Some(&api.lead), None).await;
    assert_eq!(status, 403);
    let bad = format!("/api/v1/reports/capacity-plan?month={month}&extra_cards=20000");
    let (status, e) = api.call(Method::GET, &bad, Some(&api.finance), None).await;
    assert_eq!(status, 422, "{e}");
    assert!(e.to_string().contains("extra_cards"), "{e}");
}
