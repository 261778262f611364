//! Issue 33, part A, on a simulated cluster ingested from a real Prometheus: one node's capacity series is missing
//! (its pods hold H100 cards nothing counts), one node has no dcgm-exporter (its model unknown), L40S has no rate.
//!
//! - Item 16: the node-hours without capacity get the cards their pods held (flagged, a named blocker); under each
//!   policy (showback/chargeback × kept/spread) unallocated ≥ 0, no team pays less than its usage, and the totals
//!   match the figures computed here from truth.json; the unpriced model with capacity is a named blocker.
//! - Item 3: November's hours before the first ingest are uncovered: not ready, 58 hours named; coverage 4 of 720.
//! - Item 5: the nodes the month marks; assigning the unknown node's model and cards previews the ¥ per team
//!   before saving; saved (audited) and the hours re-ingested, the statement equals the preview, team by team.
//! - Item 6: the forecast extrapolates the covered hours (×180) and does not move with the clock.
//!
//! Ground truth: the simulator's truth.json (seed 3, 56 GPUs, 2026-11-03 02:00–06:00 UTC, 60 s scrapes), rates
//! A100 12.5 and H100 20 per card-hour.

use crate::common;

use std::collections::BTreeMap;

use cardhour::access::Scope;
use cardhour::billing::{Month, PolicyChoice};
use cardhour::usecase::{Services, months};
use chrono::{Duration, Utc};
use common::api::TestApi;
use common::{TestDb, TestPrometheus, run_cardhour_ok};
use reqwest::Method;
use rust_decimal::{Decimal, RoundingStrategy};
use rust_decimal_macros::dec;
use serde_json::{Value, json};

const START: &str = "2026-11-03T02:00:00Z";
const END: &str = "2026-11-03T06:00:00Z";
/// The node whose capacity series is left out of the metrics.
const UNCOUNTED: &str = "gpu-h100-01";
/// The node without dcgm-exporter: its model is unknown, its cards taken at face value.
const NODCGM: &str = "gpu-h100-nodcgm-06";
const POLICIES: [(&str, &str); 4] = [
    ("showback", "kept_by_platform"),
    ("showback", "spread_proportionally"),
    ("chargeback", "kept_by_platform"),
    ("chargeback", "spread_proportionally"),
];

fn d(v: &Value) -> Decimal {
    v.as_str().unwrap_or_else(|| panic!("{v}")).parse().unwrap()
}

fn fen(x: Decimal) -> Decimal {
    x.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero)
}

fn rate(model: Option<&str>) -> Option<(&'static str, Decimal)> {
    match model {
        Some("NVIDIA A100-SXM4-80GB") => Some(("A100-80GB", dec!(12.5))),
        Some("NVIDIA H100 80GB HBM3") => Some(("H100-80GB", dec!(20))),
        _ => None,
    }
}

/// Each team's allocated amount from truth.json: hours per (team, namespace, model, kind) line to 6 decimals,
/// priced, rounded to the fen per line (the unknown model and L40S unpriced); `model_of_nodcgm` prices the node
/// without DCGM's hours as that model.
fn allocated_by_hand(truth: &Value, model_of_nodcgm: Option<&str>) -> BTreeMap<String, Decimal> {
    let mut hours: BTreeMap<(String, String, String, String), f64> = BTreeMap::new();
    for p in truth["by_pod"].as_array().unwrap() {
        let model = if p["node"] == NODCGM { model_of_nodcgm } else { p["gpu_model"].as_str() };
        let Some((key, _)) = rate(model) else { continue };
        let k = (
            p["team"].as_str().unwrap().into(),
            p["namespace"].as_str().unwrap().into(),
            key.into(),
            p["kind"].as_str().unwrap().into(),
        );
        *hours.entry(k).or_default() += p["gpu_hours"].as_f64().unwrap();
    }
    let mut out: BTreeMap<String, Decimal> = BTreeMap::new();
    for ((team, _, key, _), h) in hours {
        let r = if key == "A100-80GB" { dec!(12.5) } else { dec!(20) };
        let h = Decimal::from_f64_retain(h).unwrap().round_dp_with_strategy(6, RoundingStrategy::MidpointAwayFromZero);
        *out.entry(team).or_default() += fen(h * r);
    }
    out
}

/// Σ card-hours its pods held on `node` in truth.json.
fn held_on(truth: &Value, node: &str) -> f64 {
    truth["by_pod"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["node"] == node)
        .map(|p| p["gpu_hours"].as_f64().unwrap())
        .sum()
}

fn team_totals(month: &Value) -> BTreeMap<String, (Decimal, Decimal)> {
    month["teams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["team"].as_str().unwrap().to_string(), (d(&t["allocated"]), d(&t["total"]))))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_never_below_what_pods_held_unallocated_never_negative_and_a_node_fixed_as_previewed() {
    let dir = tempfile::tempdir().unwrap();
    run_cardhour_ok(
        ["simulate", "--gpus", "56", "--hours", "4", "--scrape-interval", "60", "--seed", "3", "--end", END, "--out"]
            .into_iter()
            .chain([dir.path().to_str().unwrap()]),
        &[],
    );
    let truth: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("truth.json")).unwrap()).unwrap();
    // the uncounted node: its capacity and allocatable series left out of what Prometheus holds
    let metrics = std::fs::read_to_string(dir.path().join("metrics.om")).unwrap();
    let stripped: String = metrics
        .lines()
        .filter(|l| !(l.starts_with("kube_node_status_") && l.contains(&format!("node=\"{UNCOUNTED}\""))))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(stripped.len() < metrics.len(), "the capacity series were there to leave out");
    let om = dir.path().join("stripped.om");
    std::fs::write(&om, stripped).unwrap();
    let prom = TestPrometheus::from_openmetrics(&om).unwrap();
    let db = TestDb::migrated().unwrap();
    let ingest = || {
        run_cardhour_ok(
            ["ingest", "--cluster", "sim", "--prometheus", &prom.url, "--from", START, "--to", END],
            &db.env(),
        )
    };
    ingest();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    for (model, r) in [("NVIDIA A100-SXM4-80GB", "12.5"), ("NVIDIA H100 80GB HBM3", "20")] {
        let body = json!({"gpu_model": model, "effective_from": "2026-10-01", "rate": r});
        assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(body)).await.0, 201);
    }

    // item 16: the uncounted node's capacity is what its pods held, hour by hour, flagged
    let stored: f64 = sqlx::query_scalar("SELECT sum(card_seconds) / 3600 FROM node_capacity_hourly WHERE node = $1")
        .bind(UNCOUNTED)
        .fetch_one(&pool)
        .await
        .unwrap();
    let held = held_on(&truth, UNCOUNTED);
    assert!(held > 20.0 && (stored - held).abs() < 1e-6, "capacity {stored} card-hours, held {held}");
    let flagged: i64 =
        sqlx::query_scalar("SELECT count(*) FROM ingest_anomalies WHERE kind = 'unverified_node' AND subject = $1")
            .bind(UNCOUNTED)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(flagged, 4, "every hour of it flagged");

    // by hand: A100 3 nodes × 8 cards × 4 h = 96 card-hours × 12.5 = 1,200.00; H100: what the uncounted node's
    // pods held × 20; L40S (no rate) and the unknown model 0.00
    let h100_hours =
        Decimal::from_f64_retain(held).unwrap().round_dp_with_strategy(6, RoundingStrategy::MidpointAwayFromZero);
    let capacity_cost = dec!(1200.00) + fen(h100_hours * dec!(20));
    let allocated = allocated_by_hand(&truth, None);
    let allocated_sum: Decimal = allocated.values().copied().sum();
    let signed = capacity_cost - allocated_sum;
    assert!(signed > Decimal::ZERO, "the A100s' idle capacity leaves something unallocated: {signed}");
    for (mode, unallocated) in POLICIES {
        let (status, month) = api
            .call(Method::GET, &format!("/api/v1/bills/2026-11?mode={mode}&unallocated={unallocated}"), fin, None)
            .await;
        assert_eq!(status, 200, "{month}");
        let un = d(&month["unallocated"]);
        assert!(un >= Decimal::ZERO, "{mode}/{unallocated}: unallocated {un}");
        assert_eq!(
            (d(&month["capacity_cost"]), d(&month["allocated"]), un),
            (capacity_cost, allocated_sum, signed),
            "{mode}/{unallocated}"
        );
        assert!(month["capacity_shortfall"].is_null(), "{month}");
        let teams = team_totals(&month);
        for (team, want) in &allocated {
            let (alloc, total) = teams[team];
            assert_eq!(alloc, *want, "{mode}/{unallocated}: {team}");
            assert!(total >= alloc, "{mode}/{unallocated}: {team} pays {total} < its usage {alloc}");
        }
        let carried: Decimal = teams.values().map(|t| t.1).sum();
        assert_eq!(carried + d(&month["platform_kept"]), capacity_cost, "{mode}/{unallocated}");
        if unallocated == "spread_proportionally" {
            assert_eq!(carried, capacity_cost, "spread: the teams carry the whole capacity");
        } else {
            assert_eq!((carried, d(&month["platform_kept"])), (allocated_sum, signed));
        }
    }

    // item 3: November is not ready — its hours before the first ingest have no data — and the unpriced model
    // with capacity is named, as are the nodes whose cards were not counted
    let (status, r) = api.call(Method::GET, "/api/v1/bills/2026-11/readiness", fin, None).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["ready"], false);
    let blockers = r["blockers"].as_array().unwrap();
    let of = |kind: &str| blockers.iter().filter(|b| b["kind"] == kind).cloned().collect::<Vec<_>>();
    // 2026-10-31 16:00 (November's first hour in Shanghai) to 2026-11-03 02:00: 58 hours
    let uncovered = of("uncovered_hours");
    assert_eq!(uncovered.len(), 1, "{r}");
    assert_eq!((uncovered[0]["cluster"].as_str(), uncovered[0]["hours"].as_i64()), (Some("sim"), Some(58)));
    assert_eq!(uncovered[0]["spans"], json!([{"from": "2026-10-31T16:00:00Z", "to": START}]));
    let models: Vec<String> =
        of("unknown_gpu_model").iter().map(|b| b["gpu_model"].as_str().unwrap().to_string()).collect();
    assert_eq!(models, ["L40S", "unknown"], "{r}");
    let nodes: Vec<String> = of("unverified_node").iter().map(|b| b["node"].as_str().unwrap().to_string()).collect();
    assert!(nodes.contains(&UNCOUNTED.to_string()) && nodes.contains(&NODCGM.to_string()), "{nodes:?}");
    let cov = &r["coverage"][0];
    assert_eq!(
        (cov["cluster"].as_str(), cov["hours_covered"].as_i64(), cov["hours_of_month"].as_i64()),
        (Some("sim"), Some(4), Some(720))
    );
    // October, with no data at all, is not ready either: all of its 744 hours uncovered
    let (_, oct) = api.call(Method::GET, "/api/v1/bills/2026-10/readiness", fin, None).await;
    assert_eq!(oct["ready"], false, "{oct}");
    assert_eq!(
        oct["blockers"].as_array().unwrap().iter().find(|b| b["kind"] == "uncovered_hours").unwrap()["hours"],
        744
    );

    // item 6: the forecast extrapolates the 4 covered hours to the month's 720 (×180), per cluster, and does not
    // move with the clock
    let services = Services::new(pool.clone(), chrono_tz::Asia::Shanghai);
    let nov = Month::new(2026, 11).unwrap();
    let now = Utc::now();
    let f = months::forecast(&services, &Scope::all(), nov, PolicyChoice::NONE, now).await.unwrap();
    let later =
        months::forecast(&services, &Scope::all(), nov, PolicyChoice::NONE, now + Duration::minutes(7)).await.unwrap();
    assert_eq!(f, later, "seven minutes later, no new data: the same forecast");
    assert_eq!((f.hours_covered, f.hours_of_month), (4, 720));
    assert_eq!(f.total.as_decimal(), allocated_sum, "the draft's total (showback, kept by the platform)");
    let by_hand: Decimal = allocated.values().map(|a| fen(*a * dec!(180))).sum();
    assert_eq!(f.forecast.as_decimal(), by_hand, "each team × 720 / 4");

    // item 5: the month's marked nodes, then the unknown node's model and cards, previewed before saving
    let (status, marked) = api.call(Method::GET, "/api/v1/nodes/marked/2026-11", fin, None).await;
    assert_eq!(status, 200, "{marked}");
    let unknown: Vec<&Value> = marked.as_array().unwrap().iter().filter(|n| n["node"] == NODCGM).collect();
    assert!(unknown.iter().any(|n| n["kind"] == "unknown_gpu_model"), "{marked}");
    assert_eq!(unknown[0]["capacity_card_hours"], "32", "8 cards × 4 h");
    let fix = json!({"gpu_model": "NVIDIA H100 80GB HBM3", "cards": 8});
    let path = format!("/api/v1/nodes/sim/{NODCGM}/preview?month=2026-11&mode=showback&unallocated=kept_by_platform");
    let (status, preview) = api.call(Method::POST, &path, fin, Some(fix.clone())).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["closed"], false);
    // the node's 32 card-hours priced at 20: capacity + 640.00
    assert_eq!(d(&preview["capacity_cost_after"]) - d(&preview["capacity_cost_before"]), dec!(640.00));
    // each team's move is its hours on that node × 20 (merged into its H100 lines: within a fen per line)
    let after_by_hand = allocated_by_hand(&truth, Some("NVIDIA H100 80GB HBM3"));
    let moves: BTreeMap<String, &Value> =
        preview["teams"].as_array().unwrap().iter().map(|t| (t["team"].as_str().unwrap().to_string(), t)).collect();
    assert_eq!(moves.keys().collect::<Vec<_>>(), ["nlp", "platform", "recsys", "unassigned", "vision"]);
    for (team, m) in &moves {
        assert_eq!(d(&m["total_after"]), after_by_hand[team], "{team}: {m}");
        assert_eq!(d(&m["delta"]), after_by_hand[team] - allocated.get(team).copied().unwrap_or_default(), "{team}");
    }
    assert_eq!(d(&moves["vision"]["delta"]), dec!(208.00), "vision: 10.4 card-hours × 20");
    // refused without a change: a bad model, a team lead
    let (status, err) = api.call(Method::POST, &path, fin, Some(json!({"gpu_model": "unknown", "cards": 0}))).await;
    assert_eq!(status, 422, "{err}");
    assert_eq!(api.call(Method::POST, &path, Some(&api.lead), Some(fix.clone())).await.0, 403);
    assert_eq!(
        api.call(Method::PUT, &format!("/api/v1/nodes/sim/{NODCGM}"), Some(&api.viewer), Some(fix.clone())).await.0,
        403
    );
    // saved by finance, audited; the hours metered again: the statement is the preview, team by team
    let (status, saved) = api.call(Method::PUT, &format!("/api/v1/nodes/sim/{NODCGM}"), fin, Some(fix.clone())).await;
    assert_eq!(status, 200, "{saved}");
    let audit: String =
        sqlx::query_scalar("SELECT actor || '|' || entity FROM audit_log WHERE action = 'node.settings'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(audit, format!("token:2:finance|node:sim/{NODCGM}"));
    ingest();
    let (_, month) =
        api.call(Method::GET, "/api/v1/bills/2026-11?mode=showback&unallocated=kept_by_platform", fin, None).await;
    let now_totals = team_totals(&month);
    for (team, m) in &moves {
        assert_eq!(now_totals[team].1, d(&m["total_after"]), "{team}: re-metered = previewed");
    }
    assert_eq!(d(&month["capacity_cost"]), d(&preview["capacity_cost_after"]));
    let (_, r) = api.call(Method::GET, "/api/v1/bills/2026-11/readiness", fin, None).await;
    assert!(
        !r["blockers"].as_array().unwrap().iter().any(|b| b["gpu_model"] == "unknown"),
        "the model is known now: {r}"
    );
}
