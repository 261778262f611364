//! Cards not offered are not billed to teams (SPEC §3 "Capacity", §6 "Bills"): a hand-written cluster with a node
//! cordoned half-way through its second hour, a node offering 6 of its 8 cards and a node from an old
//! kube-state-metrics without allocatable, read from a real Prometheus into a real PostgreSQL. Every figure below is
//! computed by hand from the samples written here.

use crate::common;

use std::fmt::Write as _;

use common::api::TestApi;
use common::{TestDb, TestPrometheus, run_cardhour_ok};
use reqwest::Method;
use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use serde_json::{Value, json};

/// 2026-11-10T00:00:00Z (08:00 in Shanghai): two hours of one billing day of November 2026.
const H0: i64 = 1_794_268_800;
const STEP: i64 = 60;
/// KSM grid points: [H0, H0 + 2 h).
const POINTS: i64 = 120;
/// From this grid point (01:30) node `n3` is cordoned.
const CORDON_AT: i64 = 90;
const H100: &str = "NVIDIA H100 80GB HBM3";

/// One family of OpenMetrics: `# TYPE` then each series' samples at `STEP`-second grid points `from..to`, offset by
/// `offset` seconds.
struct Om(String);

impl Om {
    fn family(&mut self, name: &str) {
        writeln!(self.0, "# TYPE {name} gauge").unwrap();
    }

    fn series(&mut self, name: &str, labels: &str, points: std::ops::Range<i64>, offset: i64, v: impl Fn(i64) -> f64) {
        for k in points {
            writeln!(self.0, "{name}{{{labels}}} {} {}", v(k), H0 + k * STEP + offset).unwrap();
        }
    }
}

/// The cluster: four 8-card H100 nodes.
/// - `n1`: all offered; `alpha/a1` holds 4 cards for 2 h.
/// - `n2`: allocatable 6 of capacity 8 (2 unhealthy cards); `beta/b1` holds 2 cards for the last 1.5 h.
/// - `n3`: cordoned from 01:30; `gamma/c1` holds 2 cards until then (1.5 h) and is drained.
/// - `n4`: no allocatable series (an old kube-state-metrics): its capacity is taken as offered.
fn cluster() -> String {
    let mut om = Om(String::new());
    om.family("kube_namespace_labels");
    for team in ["alpha", "beta", "gamma"] {
        om.series("kube_namespace_labels", &format!(r#"namespace="{team}",label_team="{team}""#), 0..POINTS, 0, |_| {
            1.0
        });
    }
    let gpu = |node: &str| format!(r#"node="{node}",resource="nvidia_com_gpu",unit="integer""#);
    om.family("kube_node_status_capacity");
    for node in ["n1", "n2", "n3", "n4"] {
        om.series("kube_node_status_capacity", &gpu(node), 0..POINTS, 0, |_| 8.0);
    }
    om.family("kube_node_status_allocatable");
    for (node, cards) in [("n1", 8.0), ("n2", 6.0), ("n3", 8.0)] {
        om.series("kube_node_status_allocatable", &gpu(node), 0..POINTS, 0, |_| cards);
    }
    om.family("kube_node_spec_unschedulable");
    for node in ["n1", "n2", "n3", "n4"] {
        let cordon = node == "n3";
        om.series("kube_node_spec_unschedulable", &format!(r#"node="{node}""#), 0..POINTS, 0, |k| {
            if cordon && k >= CORDON_AT { 1.0 } else { 0.0 }
        });
    }
    // (namespace, pod, node, cards, grid points)
    let pods = [
        ("alpha", "a1", "n1", 4.0, 0..POINTS),
        ("beta", "b1", "n2", 2.0, 30..POINTS),
        ("gamma", "c1", "n3", 2.0, 0..CORDON_AT),
    ];
    om.family("kube_pod_container_resource_requests");
    for (ns, pod, node, cards, points) in pods.clone() {
        let labels = format!(
            r#"namespace="{ns}",pod="{pod}",uid="uid-{pod}",container="main",node="{node}",resource="nvidia_com_gpu",unit="integer""#
        );
        om.series("kube_pod_container_resource_requests", &labels, points, 0, |_| cards);
    }
    om.family("kube_pod_status_phase");
    for (ns, pod, _, _, points) in pods {
        let labels = format!(r#"namespace="{ns}",pod="{pod}",uid="uid-{pod}",phase="Running""#);
        om.series("kube_pod_status_phase", &labels, points, 0, |_| 1.0);
    }
    // every card of every node reports (idle), so the nodes' physical cards and model are known
    om.family("DCGM_FI_DEV_GPU_UTIL");
    for node in ["n1", "n2", "n3", "n4"] {
        for g in 0..8 {
            let labels = format!(r#"gpu="{g}",UUID="GPU-{node}-{g}",modelName="{H100}",Hostname="{node}""#);
            om.series("DCGM_FI_DEV_GPU_UTIL", &labels, 0..POINTS, 10, |_| 0.0);
        }
    }
    om.0.push_str("# EOF\n");
    om.0
}

fn dec(v: &Value) -> Decimal {
    v.as_str().unwrap_or_else(|| panic!("not a decimal string: {v}")).parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cards_not_offered_are_kept_by_the_platform_and_not_spread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.om");
    std::fs::write(&path, cluster()).unwrap();
    let prom = TestPrometheus::from_openmetrics(&path).unwrap();
    let db = TestDb::migrated().unwrap();
    let (from, to) = ("2026-11-10T00:00:00Z", "2026-11-10T02:00:00Z");
    let ingest = ["ingest", "--cluster", "lab", "--prometheus", &prom.url, "--from", from, "--to", to];
    run_cardhour_ok(ingest, &db.env());

    // Per node and hour (seconds): capacity 8 cards × 3600 s = 28800; n2 offers 6 × 3600 = 21600; n3 offers its
    // 8 cards for the 30 minutes before the cordon in its second hour: 8 × 1800 = 14400.
    let rows = db
        .psql(
            "SELECT node, to_char(hour AT TIME ZONE 'UTC', 'HH24'), card_seconds, offered_card_seconds, offered_source
             FROM node_capacity_hourly ORDER BY node, hour",
        )
        .unwrap();
    let want = [
        "n1|00|28800|28800|allocatable",
        "n1|01|28800|28800|allocatable",
        "n2|00|28800|21600|allocatable",
        "n2|01|28800|21600|allocatable",
        "n3|00|28800|28800|allocatable",
        "n3|01|28800|14400|allocatable",
        "n4|00|28800|28800|capacity",
        "n4|01|28800|28800|capacity",
    ];
    assert_eq!(rows.lines().collect::<Vec<_>>(), want);
    // the daily rollup bills read: 64 card-hours, 56 offered
    assert_eq!(
        db.psql(
            "SELECT day, sum(card_seconds) / 3600, sum(offered_card_seconds) / 3600 FROM capacity_daily GROUP BY day"
        )
        .unwrap(),
        "2026-11-10|64|56"
    );
    // the same samples again change nothing, so no history is kept (offered seconds compare equal)
    run_cardhour_ok(ingest, &db.env());
    assert_eq!(db.psql("SELECT count(*) FROM replaced_node_capacity_hourly").unwrap(), "0");

    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool).await;
    let fin = Some(api.finance.as_str());
    let (status, out) = api
        .call(
            Method::POST,
            "/api/v1/rates",
            fin,
            Some(json!({"gpu_model": "H100-80GB", "effective_from": "2026-11-01", "rate": "12.3457"})),
        )
        .await;
    assert_eq!(status, 201, "{out}");

    // Card-hours: capacity 4 nodes × 8 × 2 h = 64; not offered 2 cards × 2 h on n2 + 8 cards × 0.5 h on n3 = 8;
    // offered 56. Allocated: a1 4 × 2 = 8, b1 2 × 1.5 = 3, c1 2 × 1.5 = 3.
    // At 12.3457 yuan: capacity 790.1248 → 790.12; not offered 98.7656 → 98.77; alpha 98.77, beta 37.0371 → 37.04,
    // gamma 37.04; allocated 172.85. Unallocated = 790.12 − 98.77 − 172.85 = 518.50 (spreading the whole
    // capacity would have spread 617.27).
    // Spread 51850 fen over 9877 : 3704 : 3704 (of 17285): 29628.14, 11110.93, 11110.93 → floors 29628, 11110,
    // 11110, two fen missing → the two largest remainders (beta, gamma): 296.28, 111.11, 111.11.
    let (status, month) =
        api.call(Method::GET, "/api/v1/bills/2026-11?unallocated=spread_proportionally", fin, None).await;
    assert_eq!(status, 200, "{month}");
    assert_eq!(dec(&month["capacity_cost"]), dec!(790.12), "{month}");
    assert_eq!(dec(&month["not_offered"]), dec!(98.77), "{month}");
    assert_eq!(dec(&month["allocated"]), dec!(172.85), "{month}");
    assert_eq!(dec(&month["unallocated"]), dec!(518.50), "{month}");
    assert_eq!(dec(&month["platform_kept"]), dec!(98.77), "only the not-offered cost stays with the platform");
    let cap = month["capacity"].as_array().unwrap();
    assert_eq!(cap.len(), 1, "{month}");
    assert_eq!(
        [&cap[0]["card_hours"], &cap[0]["offered_card_hours"], &cap[0]["not_offered_card_hours"]].map(dec),
        [dec!(64), dec!(56), dec!(8)]
    );
    assert_eq!((dec(&cap[0]["amount"]), dec(&cap[0]["not_offered_amount"])), (dec!(790.12), dec!(98.77)));
    let teams: Vec<(String, Decimal, Decimal, Decimal)> = month["teams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["team"].as_str().unwrap().to_string(),
                dec(&t["allocated"]),
                dec(&t["unallocated_share"]),
                dec(&t["total"]),
            )
        })
        .collect();
    let want = [
        ("alpha", dec!(98.77), dec!(296.28), dec!(395.05)),
        ("beta", dec!(37.04), dec!(111.11), dec!(148.15)),
        ("gamma", dec!(37.04), dec!(111.11), dec!(148.15)),
    ]
    .map(|(t, a, s, total)| (t.to_string(), a, s, total));
    assert_eq!(teams, want);
    // allocated + unallocated + not offered = capacity cost; teams + what the platform keeps = capacity cost
    let (allocated, unallocated, not_offered) =
        (dec(&month["allocated"]), dec(&month["unallocated"]), dec(&month["not_offered"]));
    assert_eq!(allocated + unallocated + not_offered, dec(&month["capacity_cost"]));
    let totals: Decimal = teams.iter().map(|t| t.3).sum();
    assert_eq!(totals + dec(&month["platform_kept"]), dec(&month["capacity_cost"]));

    // kept by the platform (the default): the same split, the platform keeps both parts
    let (_, kept) = api.call(Method::GET, "/api/v1/bills/2026-11", fin, None).await;
    assert_eq!((dec(&kept["unallocated"]), dec(&kept["not_offered"])), (dec!(518.50), dec!(98.77)));
    assert_eq!(dec(&kept["platform_kept"]), dec!(617.27), "{kept}");
    // a team lead sees no cluster-wide figure, the not-offered cost included
    let (_, lead) = api.call(Method::GET, "/api/v1/bills/2026-11", Some(&api.lead), None).await;
    assert!(lead["capacity_cost"].is_null() && lead.get("not_offered").is_none(), "{lead}");

    // the utilization report: allocation rate = allocated ÷ offered card-hours = 14 / 56
    let (status, report) = api.call(Method::GET, "/api/v1/reports/utilization/2026-11", fin, None).await;
    assert_eq!(status, 200, "{report}");
    let t = &report["totals"];
    let f = |k: &str| t[k].as_f64().unwrap_or_else(|| panic!("{k}: {report}"));
    assert_eq!(
        [f("capacity_card_hours"), f("offered_card_hours"), f("not_offered_card_hours"), f("gpu_hours")],
        [64.0, 56.0, 8.0, 14.0]
    );
    assert_eq!(f("allocation_rate"), 0.25, "{report}");
    let days = report["days"].as_array().unwrap();
    assert_eq!(days.len(), 1, "{report}");
    assert_eq!((days[0]["day"].as_str(), days[0]["allocation_rate"].as_f64()), (Some("2026-11-10"), Some(0.25)));
}

/// A month closed before offered capacity was recorded: its snapshot has none of the new fields, and is served
/// exactly as closed (no `not_offered`, its unallocated as stored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_closed_before_offered_capacity_is_served_as_closed() {
    let db = TestDb::migrated().unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    // as a close stored it before this change (layout version 1)
    let snapshot = json!({
        "version": 1,
        "bills": {
            "teams": [{"team": "vision", "lines": [{"namespace": "cv", "gpu_model": "H100-80GB", "kind": "whole",
                "card_hours": "10", "effective_card_hours": "4", "unmetered_card_hours": "0", "rate": "10.0000",
                "amount": "100.00", "unpriced": false}],
                "allocated": "100.00", "unallocated_share": "0.00", "total": "100.00", "card_hours": "10",
                "effective_card_hours": "4", "unmetered_card_hours": "0"}],
            "capacity": [{"gpu_model": "H100-80GB", "card_hours": "64", "rate": "10.0000", "amount": "640.00",
                "unpriced": false}],
            "capacity_cost": "640.00", "allocated": "100.00", "unallocated": "540.00", "platform_kept": "540.00",
            "policy": {"mode": "showback", "unallocated": "kept_by_platform"}
        },
        "restatements": [],
        "teams": {"vision": {"name": "视觉组", "owner": "owner"}}
    });
    sqlx::query("INSERT INTO closed_months (month, closed_by, snapshot) VALUES ('2026-10', 'finance', $1)")
        .bind(&snapshot)
        .execute(&pool)
        .await
        .unwrap();
    let (status, month) = api.call(Method::GET, "/api/v1/bills/2026-10", Some(&api.finance), None).await;
    assert_eq!(status, 200, "{month}");
    assert_eq!(month["status"], "closed");
    assert!(month.get("not_offered").is_none(), "{month}");
    let cap = month["capacity"][0].as_object().unwrap();
    assert!(!cap.contains_key("offered_card_hours") && !cap.contains_key("not_offered_amount"), "{month}");
    assert_eq!(
        ["capacity_cost", "allocated", "unallocated", "platform_kept"].map(|k| dec(&month[k])),
        [dec!(640.00), dec!(100.00), dec!(540.00), dec!(540.00)]
    );
    let (status, statement) =
        api.call(Method::GET, "/api/v1/bills/2026-10/teams/vision", Some(&api.finance), None).await;
    assert_eq!((status, dec(&statement["total"])), (200, dec!(100.00)), "{statement}");
}
