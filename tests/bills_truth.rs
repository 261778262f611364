//! Bills end to end: a simulated cluster across a month boundary, ingested from a real Prometheus, priced with a
//! TCO-derived rate and rate changes (one mid-month), billed through the API, and compared line by line with
//! amounts computed independently from truth.json. Then a month is closed, its hours re-ingested with changed
//! data: the closed statement stays byte-identical and the difference appears on the next month.

use crate::common;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use chrono_tz::Asia::Shanghai;
use common::api::TestApi;
use common::{TestDb, TestPrometheus, run_cardhour_ok};
use reqwest::Method;
use rust_decimal::{Decimal, RoundingStrategy};
use rust_decimal_macros::dec;
use serde_json::{Value, json};
use std::sync::atomic::Ordering;

const START: &str = "2026-09-30T04:00:00Z"; // 12:00 in Shanghai
const END: &str = "2026-10-02T04:00:00Z";
const SEPT_END: &str = "2026-09-30T16:00:00Z"; // 2026-10-01 00:00 in Shanghai

/// (pricing model, effective from, rate)
const RATES: [(&str, &str, Decimal); 4] = [
    ("H100-80GB", "2026-09-01", dec!(18.5)),
    ("H100-80GB", "2026-10-01", dec!(21.0)),
    ("L40S", "2026-09-01", dec!(6.0)),
    ("L40S", "2026-10-02", dec!(7.25)),
];

fn pricing_key(model: Option<&str>) -> &'static str {
    match model {
        Some("NVIDIA A100-SXM4-80GB") => "A100-80GB",
        Some("NVIDIA H100 80GB HBM3") => "H100-80GB",
        Some("NVIDIA L40S") => "L40S",
        _ => "unknown",
    }
}

type Line = (String, String, String, String, Option<Decimal>); // team, namespace, model, kind, rate

/// The expected lines of a month from truth.json: seconds summed per line and rate period, hours to 6
/// decimals, amounts rounded half up to the fen. `scale` multiplies the seconds of hours before `scaled_until`.
fn expected(
    truth: &Value,
    month: &str,
    a100: Decimal,
    scale: f64,
    scaled_until: DateTime<Utc>,
) -> BTreeMap<Line, (Decimal, Decimal)> {
    let rate_at = |model: &str, day: chrono::NaiveDate| -> Option<Decimal> {
        if model == "A100-80GB" {
            return Some(a100);
        }
        RATES.iter().rfind(|(m, from, _)| *m == model && from.parse::<chrono::NaiveDate>().unwrap() <= day).map(|r| r.2)
    };
    let mut seconds: BTreeMap<Line, f64> = BTreeMap::new();
    for r in truth["by_hour_line"].as_array().unwrap() {
        let hour: DateTime<Utc> = r["hour"].as_str().unwrap().parse().unwrap();
        let local = hour.with_timezone(&Shanghai);
        if local.format("%Y-%m").to_string() != month {
            continue;
        }
        let ns = r["namespace"].as_str().unwrap();
        // the mapping made in the test: speech belongs to team `speech` from 2026-10-01
        let team = if ns == "speech" && local.date_naive() >= "2026-10-01".parse().unwrap() {
            "speech"
        } else {
            r["team"].as_str().unwrap()
        };
        let model = pricing_key(r["gpu_model"].as_str());
        let factor = if hour < scaled_until { scale } else { 1.0 };
        let key = (
            team.into(),
            ns.into(),
            model.into(),
            r["kind"].as_str().unwrap().into(),
            rate_at(model, local.date_naive()),
        );
        *seconds.entry(key).or_default() += r["gpu_hours"].as_f64().unwrap() * 3600.0 * factor;
    }
    seconds
        .into_iter()
        .map(|(k, s)| {
            let hours = cardhour::money::card_hours_from_seconds(s);
            let amount = k.4.map_or(Decimal::ZERO, |r| {
                (r * hours).round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero)
            });
            (k, (hours, amount))
        })
        .collect()
}

type PodSums = (String, String, f64, f64, f64, f64, Option<f64>, bool);
/// namespace, pod, then what `PodSums` holds
type PodRow = (String, String, String, String, f64, f64, f64, f64, Option<f64>, bool);

/// `db::waste::pods` (the idle list's input) against the same figures computed from `gpu_usage_hourly` alone.
async fn pods_match_the_hourly_rows(pool: &sqlx::PgPool) {
    let end: DateTime<Utc> = END.parse().unwrap();
    let windows =
        [(end, 48), (end, 30), (end, 3), (end - chrono::Duration::hours(4), 44), (end - chrono::Duration::hours(7), 1)];
    for (to, hours) in windows {
        let from = to - chrono::Duration::hours(hours);
        let got: BTreeMap<(String, String), PodSums> =
            cardhour::db::waste::pods(pool, from, to, &cardhour::access::Scope::all())
                .await
                .unwrap()
                .into_iter()
                .map(|p| {
                    let sums = (
                        p.team,
                        p.gpu_model,
                        p.cards,
                        p.gpu_seconds,
                        p.effective_gpu_seconds,
                        p.unmetered_gpu_seconds,
                        p.peak_fb_used_mib,
                        p.still_running,
                    );
                    ((p.namespace, p.pod), sums)
                })
                .collect();
        let rows: Vec<PodRow> = sqlx::query_as(
            "WITH h AS (SELECT namespace, pod, hour, max(team) AS team, sum(units * fraction) AS cards,
                               max(gpu_model) AS model,
                               sum(gpu_seconds) AS g, sum(effective_gpu_seconds) AS e,
                               sum(unmetered_gpu_seconds) AS m, max(peak_fb_used_mib) AS fb
                        FROM gpu_usage_hourly WHERE hour >= $1 AND hour < $2 GROUP BY namespace, pod, hour)
             SELECT namespace, pod, (array_agg(team ORDER BY hour DESC))[1], (array_agg(model ORDER BY hour DESC))[1],
                    max(cards), sum(g), sum(e), sum(m), max(fb),
                    max(hour) = (SELECT max(hour) FROM ingested_hours WHERE hour >= $1 AND hour < $2)
             FROM h GROUP BY namespace, pod",
        )
        .bind(from)
        .bind(to)
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(got.len(), rows.len(), "{from} .. {to}: pods");
        assert!(!rows.is_empty());
        for (ns, pod, team, model, cards, g, e, m, fb, running) in rows {
            let p = &got[&(ns.clone(), pod.clone())];
            let what = format!("{from} .. {to}: {ns}/{pod}");
            assert_eq!((&p.0, &p.1, p.7), (&team, &model, running), "{what}");
            for (a, b) in [(p.2, cards), (p.3, g), (p.4, e), (p.5, m), (p.6.unwrap_or(-1.0), fb.unwrap_or(-1.0))] {
                assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{what}: {a} vs {b}");
            }
        }
    }
}

fn dec(v: &Value) -> Decimal {
    v.as_str().unwrap_or_else(|| panic!("not a decimal string: {v}")).parse().unwrap()
}

async fn statement_lines(api: &TestApi, month: &str) -> BTreeMap<Line, (Decimal, Decimal)> {
    let (status, summary) = api.call(Method::GET, &format!("/api/v1/bills/{month}"), Some(&api.finance), None).await;
    assert_eq!(status, 200, "{summary}");
    let mut out = BTreeMap::new();
    for t in summary["teams"].as_array().unwrap() {
        let team = t["team"].as_str().unwrap();
        let (status, st) =
            api.call(Method::GET, &format!("/api/v1/bills/{month}/teams/{team}"), Some(&api.finance), None).await;
        assert_eq!(status, 200, "{st}");
        let mut sum = Decimal::ZERO;
        for l in st["lines"].as_array().unwrap() {
            let key = (
                team.into(),
                l["namespace"].as_str().unwrap().into(),
                l["gpu_model"].as_str().unwrap().into(),
                l["kind"].as_str().unwrap().into(),
                l["rate"].as_str().map(|r| r.parse().unwrap()),
            );
            sum += dec(&l["amount"]);
            out.insert(key, (dec(&l["card_hours"]), dec(&l["amount"])));
        }
        // totals are sums of lines
        assert_eq!(dec(&st["allocated"]), sum, "{team}");
        let restated: Decimal = st["restatements"].as_array().unwrap().iter().map(|r| dec(&r["amount_delta"])).sum();
        assert_eq!(dec(&st["total"]), sum + dec(&st["unallocated_share"]) + restated, "{team}");
    }
    // every team plus what the platform keeps is the cluster's capacity cost
    let teams: Decimal =
        summary["teams"].as_array().unwrap().iter().map(|t| dec(&t["total"]) - dec(&t["restated"])).sum();
    assert_eq!(teams + dec(&summary["platform_kept"]), dec(&summary["capacity_cost"]), "{summary}");
    out
}

fn compare(month: &str, got: &BTreeMap<Line, (Decimal, Decimal)>, want: &BTreeMap<Line, (Decimal, Decimal)>) {
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{month}: bill lines");
    for (k, (hours, amount)) in want {
        let (h, a) = got[k];
        assert!((h - hours).abs() <= dec!(0.000002), "{month} {k:?}: {h} card-hours vs truth {hours}");
        assert_eq!(a, *amount, "{month} {k:?}: amount");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn month_bills_match_the_truth_and_closed_months_are_immutable() {
    let dir = tempfile::tempdir().unwrap();
    run_cardhour_ok(
        [
            "simulate",
            "--gpus",
            "56",
            "--hours",
            "48",
            "--scrape-interval",
            "60",
            "--seed",
            "3",
            "--end",
            END,
            "--out",
            dir.path().to_str().unwrap(),
        ],
        &[],
    );
    let truth: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("truth.json")).unwrap()).unwrap();
    let prom = TestPrometheus::from_openmetrics(&dir.path().join("metrics.om")).unwrap();
    let db = TestDb::migrated().unwrap();
    let ingest = |from: &str, to: &str, extra: &[&str]| {
        let mut args = vec!["ingest", "--cluster", "sim", "--prometheus", &prom.url, "--from", from, "--to", to];
        args.extend(extra);
        run_cardhour_ok(args, &db.env());
    };
    ingest(START, END, &[]);

    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool).await;
    let fin = Some(api.finance.as_str());
    // an A100 rate from its TCO, the others by hand (H100 changes at the month boundary, L40S mid-month)
    let tco = json!({"card_price": "80000", "server_share_per_card": "40000", "depreciation_years": "5",
        "avg_power_kw": "0.5", "pue": "1.4", "electricity_price": "0.8", "system_factor": "1.2",
        "datacenter_per_card_year": "3000", "staff_per_card_year": "2000", "recovery_utilization": "0.7"});
    let (status, a100) = api
        .call(
            Method::POST,
            "/api/v1/rates",
            fin,
            Some(json!({"gpu_model": "NVIDIA A100-SXM4-80GB", "effective_from": "2026-09-01", "tco": tco})),
        )
        .await;
    assert_eq!(status, 201, "{a100}");
    assert_eq!(a100["gpu_model"], "A100-80GB");
    let a100_rate = dec(&a100["rate"]);
    for (model, from, rate) in RATES {
        let (status, out) = api
            .call(
                Method::POST,
                "/api/v1/rates",
                fin,
                Some(json!({"gpu_model": model, "effective_from": from, "rate": rate.to_string()})),
            )
            .await;
        assert_eq!(status, 201, "{out}");
    }
    let (status, _) =
        api.call(Method::PUT, "/api/v1/teams/speech", fin, Some(json!({"name": "语音组", "owner": "李四"}))).await;
    assert_eq!(status, 200);
    let (status, _) = api
        .call(
            Method::POST,
            "/api/v1/mappings",
            fin,
            Some(json!({"namespace": "speech", "team_id": "speech", "valid_from": "2026-10-01"})),
        )
        .await;
    assert_eq!(status, 201);

    // self-build vs rent for the A100s at their measured allocation (truth: A100 card-hours held ÷ A100 capacity)
    let (status, _) = api
        .call(Method::PUT, "/api/v1/cloud-rates/A100-80GB", fin, Some(json!({"on_demand": "12", "spot": "3.5"})))
        .await;
    assert_eq!(status, 200);
    let (status, rv) = api
        .call(
            Method::GET,
            &format!("/api/v1/rent-vs-build?model=NVIDIA%20A100-SXM4-80GB&from={START}&to={END}"),
            fin,
            None,
        )
        .await;
    assert_eq!(status, 200, "{rv}");
    let a100 = Some("NVIDIA A100-SXM4-80GB");
    let held: f64 = truth["by_hour_line"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["gpu_model"].as_str() == a100)
        .map(|r| r["gpu_hours"].as_f64().unwrap())
        .sum();
    let capacity: f64 = truth["capacity"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["gpu_model"].as_str() == a100)
        .map(|c| c["card_hours"].as_f64().unwrap())
        .sum();
    let allocation = dec(&rv["allocation_rate"]);
    assert!(
        (allocation - Decimal::from_f64_retain(held / capacity).unwrap()).abs() <= dec!(0.0001),
        "{allocation} vs {}",
        held / capacity
    );
    // break-even allocation = annual TCO / (8760 × cloud rate) = 34,886.72 / (8760 × 12) = 0.33187…
    assert_eq!(rv["comparison"]["on_demand"]["break_even_allocation"], "0.3319");
    let own = dec(&rv["comparison"]["own_cost_per_allocated_card_hour"]);
    assert_eq!(rv["comparison"]["on_demand"]["build_wins"], own < dec!(12), "{rv}");
    assert!(
        rv["comparison"]["spot"]["break_even_allocation"].is_null(),
        "below the own cost at full allocation (3.98) renting always wins: {rv}"
    );

    // the per-pod sums behind the idle list (a rollup per pod and UTC day plus the hours of partial days) equal
    // the same sums taken straight from the hourly rows, for windows with and without whole days
    pods_match_the_hourly_rows(&api.pool).await;

    // the idle-waste list over the whole window equals the pods truth.json calls idle (average utilization over
    // metered time < 10 %, more than 1 GiB held), each priced at cards × the rate at the window's end × 730 h
    let (status, idle) =
        api.call(Method::GET, &format!("/api/v1/idle?to={END}&hours=48&include_ended=true"), fin, None).await;
    assert_eq!(status, 200, "{idle}");
    let end_rate = |model: &str| -> Option<Decimal> {
        match model {
            "A100-80GB" => Some(a100_rate),
            "H100-80GB" => Some(dec!(21.0)),
            "L40S" => Some(dec!(7.25)),
            _ => None,
        }
    };
    let mut want_idle: BTreeMap<(String, String), (String, Decimal)> = BTreeMap::new();
    let mut want_spend: BTreeMap<(String, String), Decimal> = BTreeMap::new();
    let mut squatters = Vec::new();
    for p in truth["by_pod"].as_array().unwrap() {
        let metered = p["gpu_hours"].as_f64().unwrap() - p["unmetered_gpu_hours"].as_f64().unwrap();
        let fb = p["peak_fb_used_mib"].as_f64().unwrap_or(0.0);
        let key = (p["namespace"].as_str().unwrap().to_string(), p["pod"].as_str().unwrap().to_string());
        if p["squatter"].as_bool().unwrap() {
            squatters.push(key.clone());
        }
        if metered > 0.0 && p["effective_gpu_hours"].as_f64().unwrap() / metered < 0.10 && fb > 1024.0 {
            let ns = key.0.as_str();
            let team = if ns == "speech" { "speech" } else { p["team"].as_str().unwrap() };
            let cards = Decimal::from_f64_retain(p["units"].as_f64().unwrap() * p["fraction"].as_f64().unwrap())
                .unwrap()
                .round_dp(6);
            let rate = end_rate(pricing_key(p["gpu_model"].as_str()));
            let waste = rate.map_or(Decimal::ZERO, |r| {
                (cards * r * Decimal::from(730)).round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero)
            });
            // the money actually spent idle: the metered card-hours × rate × (1 − utilization over them); time no
            // utilization sample covers (the intersection rule leaves some at a pod's edges) is neither idle nor busy
            let idle_hours = metered - p["effective_gpu_hours"].as_f64().unwrap();
            let spent = rate.map_or(Decimal::ZERO, |r| Decimal::from_f64_retain(idle_hours).unwrap() * r);
            want_spend.insert(key.clone(), spent);
            want_idle.insert(key, (team.to_string(), waste));
        }
    }
    let got_idle: BTreeMap<(String, String), (String, Decimal)> = idle
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let key = (p["namespace"].as_str().unwrap().to_string(), p["pod"].as_str().unwrap().to_string());
            // every pod of this list has ended or runs on: a projection only for the latter
            let projected = if p["still_running"] == true { dec(&p["monthly_projection"]) } else { Decimal::ZERO };
            assert_eq!(dec(&p["monthly_waste"]), projected, "the deprecated field follows the projection");
            (key, (p["team"].as_str().unwrap().to_string(), projected))
        })
        .collect();
    let want_idle: BTreeMap<(String, String), (String, Decimal)> = want_idle
        .into_iter()
        .map(|(k, (team, waste))| {
            let running = idle
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["namespace"] == k.0.as_str() && p["pod"] == k.1.as_str() && p["still_running"] == true);
            (k, (team, if running { waste } else { Decimal::ZERO }))
        })
        .collect();
    assert_eq!(got_idle, want_idle, "the idle list");
    // the money spent idle, to the fen of an independent computation from the simulation's truth
    for p in idle.as_array().unwrap() {
        let key = (p["namespace"].as_str().unwrap().to_string(), p["pod"].as_str().unwrap().to_string());
        let want = want_spend[&key];
        let got = dec(&p["idle_spend"]);
        assert!((got - want).abs() <= dec!(0.01), "{key:?} spent idle: {got} vs truth {want}");
    }
    // … which are exactly the simulated squatters: no busy pod, none missing
    squatters.sort();
    assert!(!squatters.is_empty());
    assert_eq!(got_idle.keys().cloned().collect::<Vec<_>>(), squatters, "the idle list is the squatters");
    let spent: Vec<Decimal> = idle.as_array().unwrap().iter().map(|p| dec(&p["idle_spend"])).collect();
    assert!(!spent.is_empty() && spent.windows(2).all(|w| w[0] >= w[1]), "ranked by the money spent idle: {spent:?}");
    // … and totalled by it: the list's total is the sum of the money actually spent idle, not of projections
    let text = run_cardhour_ok(["idle", "--to", END, "--hours", "48", "--include-ended"], &db.env());
    let total: Decimal = text
        .lines()
        .find_map(|l| l.strip_prefix("spent idle in the window: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("a total: {text}"))
        .parse()
        .unwrap();
    assert_eq!(total, spent.iter().copied().sum::<Decimal>(), "{text}");
    // the default list (7 days, pods still holding cards): the squatters hold theirs to the end
    let (_, running) = api.call(Method::GET, &format!("/api/v1/idle?to={END}"), fin, None).await;
    let mut running: Vec<(String, String)> = running
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["still_running"], true);
            (p["namespace"].as_str().unwrap().to_string(), p["pod"].as_str().unwrap().to_string())
        })
        .collect();
    running.sort();
    assert_eq!(running, squatters);
    let (_, mine) = api
        .call(Method::GET, &format!("/api/v1/idle?to={END}&hours=48&include_ended=true"), Some(&api.lead), None)
        .await;
    // exactly the vision pods of finance's list (a non-empty set: an empty answer must not pass)
    let vision_idle: Vec<&Value> = idle.as_array().unwrap().iter().filter(|p| p["team"] == "vision").collect();
    assert!(!vision_idle.is_empty(), "the simulation has idle vision pods: {idle}");
    assert_eq!(
        mine.as_array().unwrap().iter().collect::<Vec<_>>(),
        vision_idle,
        "a team lead sees its own idle pods only"
    );
    let (status, err) = api.call(Method::GET, "/api/v1/idle?max_utilization=2", fin, None).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("max_utilization")));

    // the low-utilization top N over the whole window: by wasted (metered − effective) GPU-hours, from truth
    let (status, top) =
        api.call(Method::GET, &format!("/api/v1/reports/low-utilization?from={START}&to={END}&top=5"), fin, None).await;
    assert_eq!(status, 200, "{top}");
    let mut wasted: Vec<(f64, String)> = truth["by_pod"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let w = p["gpu_hours"].as_f64().unwrap()
                - p["unmetered_gpu_hours"].as_f64().unwrap()
                - p["effective_gpu_hours"].as_f64().unwrap();
            (w, p["pod"].as_str().unwrap().to_string())
        })
        .collect();
    wasted.sort_by(|a, b| b.0.total_cmp(&a.0));
    let got_top: Vec<(f64, String)> = top
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["wasted_gpu_hours"].as_f64().unwrap(), p["pod"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(got_top.len(), 5);
    for ((gw, gp), (ww, wp)) in got_top.iter().zip(&wasted) {
        assert_eq!(gp, wp);
        // the report rounds its hours to 3 decimals for display: within half of the last digit
        assert!((gw - ww).abs() <= 0.0005 + 1e-9, "{gp}: {gw} vs {ww}");
    }

    // October's utilization report per billing day, from truth's hourly lines and the 56 cards' capacity
    let (status, report) = api.call(Method::GET, "/api/v1/reports/utilization/2026-10", fin, None).await;
    assert_eq!(status, 200, "{report}");
    let mut per_day: BTreeMap<String, [f64; 3]> = BTreeMap::new();
    let mut team_day: BTreeMap<(String, String), f64> = BTreeMap::new();
    for r in truth["by_hour_line"].as_array().unwrap() {
        let local = r["hour"].as_str().unwrap().parse::<DateTime<Utc>>().unwrap().with_timezone(&Shanghai);
        if local.format("%Y-%m").to_string() != "2026-10" {
            continue;
        }
        let day = local.format("%Y-%m-%d").to_string();
        let d = per_day.entry(day.clone()).or_default();
        d[0] += r["gpu_hours"].as_f64().unwrap();
        d[1] += r["effective_gpu_hours"].as_f64().unwrap();
        d[2] += r["unmetered_gpu_hours"].as_f64().unwrap();
        let team = if r["namespace"] == "speech" { "speech" } else { r["team"].as_str().unwrap() };
        *team_day.entry((day, team.to_string())).or_default() += r["gpu_hours"].as_f64().unwrap();
    }
    let capacity_hours =
        BTreeMap::from([("2026-10-01".to_string(), 56.0 * 24.0), ("2026-10-02".to_string(), 56.0 * 12.0)]);
    let days = report["days"].as_array().unwrap();
    assert_eq!(days.len(), 2);
    for d in days {
        let day = d["day"].as_str().unwrap().to_string();
        let [g, e, u] = per_day[&day];
        let close = |field: &str, want: f64| {
            let got = d[field].as_f64().unwrap();
            assert!((got - want).abs() < 1e-9, "{day} {field}: {got} vs {want}");
        };
        close("capacity_card_hours", capacity_hours[&day]);
        close("allocation_rate", g / capacity_hours[&day]);
        close("utilization", e / (g - u));
        close("effective_rate", e / capacity_hours[&day]);
        for (team, hours) in d["teams"].as_object().unwrap() {
            assert!((hours.as_f64().unwrap() - team_day[&(day.clone(), team.clone())]).abs() < 1e-9, "{day} {team}");
        }
    }
    // team ranking: most efficient first, each with its October statement total
    let (_, ranking) = api.call(Method::GET, "/api/v1/reports/teams/2026-10", fin, None).await;
    let (_, month_view) = api.call(Method::GET, "/api/v1/bills/2026-10", fin, None).await;
    let ranking = ranking.as_array().unwrap();
    assert_eq!(ranking.len(), month_view["teams"].as_array().unwrap().len(), "every team is ranked");
    assert!(ranking.len() >= 3, "{ranking:?}");
    assert!(
        ranking
            .windows(2)
            .all(|w| w[0]["utilization"].as_f64().unwrap_or(-1.0) >= w[1]["utilization"].as_f64().unwrap_or(-1.0))
    );
    for r in ranking {
        let bill = month_view["teams"].as_array().unwrap().iter().find(|t| t["team"] == r["team"]).unwrap();
        assert_eq!(r["cost"], bill["total"]);
    }
    assert_eq!(api.call(Method::GET, "/api/v1/reports/utilization/2026-10", Some(&api.lead), None).await.0, 403);

    // fragmentation of one hour: 7 nodes of 8 cards; the cards allocated over all nodes are truth's GPU-hours of
    // that hour; the largest free block fits on one node
    let hour = "2026-10-01T04:00:00Z";
    let (status, frag) = api.call(Method::GET, &format!("/api/v1/reports/fragmentation?hour={hour}"), fin, None).await;
    assert_eq!(status, 200, "{frag}");
    let nodes = frag["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 7);
    assert!(nodes.iter().all(|n| n["cards"] == 8.0));
    let allocated: f64 = nodes.iter().map(|n| n["allocated_cards"].as_f64().unwrap()).sum();
    let truth_hour: f64 = truth["by_hour_namespace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["hour"] == hour)
        .map(|r| r["gpu_hours"].as_f64().unwrap())
        .sum();
    assert!((allocated - truth_hour).abs() < 1e-9, "{allocated} vs {truth_hour}");
    let largest = frag["largest_free_block"].as_u64().unwrap();
    assert!(nodes.iter().any(|n| n["free_whole_cards"].as_u64() == Some(largest)));
    assert!(largest as f64 <= frag["free_cards"].as_f64().unwrap() + 1e-9);

    // budgets: nlp gets twice its October spend so far; at the window's end (36 of 744 hours gone) the run rate
    // forecasts ~20× that, so the 80 % and 100 % forecast thresholds are crossed, the actual ones are not
    let nlp_total = dec(&month_view["teams"].as_array().unwrap().iter().find(|t| t["team"] == "nlp").unwrap()["total"]);
    let (status, b) = api
        .call(
            Method::PUT,
            "/api/v1/budgets/2026-10/nlp",
            fin,
            Some(json!({"amount": (nlp_total * dec!(2)).to_string()})),
        )
        .await;
    assert_eq!(status, 200, "{b}");
    let (status, err) = api.call(Method::PUT, "/api/v1/budgets/2026-10/nlp", fin, Some(json!({"amount": "-5"}))).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("amount")));
    let (receiver, posts, addr) = common::webhook::receiver().await;
    receiver.store(503, Ordering::SeqCst); // the receiver is down
    let hook = format!("http://{addr}/hook");
    let budgets = |expect_ok: bool| {
        let (env, hook) = (db.env().map(|(k, v)| (k.to_string(), v.to_string())), hook.clone());
        tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let out = common::run_cardhour(["budgets", "--month", "2026-10", "--at", END, "--webhook", &hook], &env);
            assert_eq!(out.status.success(), expect_ok, "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
    };
    let first = budgets(false).await.unwrap();
    assert!(first.contains("2 new alerts, 0 delivered, 2 not delivered"), "{first}");
    assert_eq!(posts.lock().unwrap().len(), 0);
    receiver.store(200, Ordering::SeqCst); // back up: the recorded alerts go out, once each
    let second = budgets(true).await.unwrap();
    assert!(second.contains("0 new alerts, 2 delivered"), "{second}");
    let third = budgets(true).await.unwrap();
    assert!(third.contains("0 new alerts, 0 delivered"), "{third}");
    let delivered = posts.lock().unwrap().clone();
    assert_eq!(delivered.len(), 2, "{delivered:?}");
    let mut seen: Vec<(String, String)> = delivered
        .iter()
        .map(|p| (p["basis"].as_str().unwrap().to_string(), p["threshold"].as_str().unwrap().to_string()))
        .collect();
    seen.sort();
    assert_eq!(seen, [("forecast".to_string(), "0.8000".to_string()), ("forecast".to_string(), "1.0000".to_string())]);
    assert!(delivered.iter().all(|p| p["team"] == "nlp" && p["month"] == "2026-10"));
    let (_, status_list) = api.call(Method::GET, "/api/v1/budgets/2026-10", fin, None).await;
    assert_eq!(status_list[0]["alerts"].as_array().unwrap().len(), 2);
    assert!(
        status_list[0]["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["delivered_at"].is_string() && a["attempts"] == 2)
    );
    let (_, lead_budgets) = api.call(Method::GET, "/api/v1/budgets/2026-10", Some(&api.lead), None).await;
    assert_eq!(lead_budgets, json!([]), "a team lead sees only its teams' budgets");

    let never = "2000-01-01T00:00:00Z".parse().unwrap();
    let sept = expected(&truth, "2026-09", a100_rate, 1.0, never);
    let oct = expected(&truth, "2026-10", a100_rate, 1.0, never);
    assert!(
        oct.keys().any(|k| k.2 == "L40S" && k.4 == Some(dec!(6.0)))
            && oct.keys().any(|k| k.2 == "L40S" && k.4 == Some(dec!(7.25))),
        "October is split at the L40S rate change"
    );
    assert!(oct.keys().any(|k| k.0 == "speech") && sept.keys().any(|k| k.0 == "unassigned" && k.1 == "speech"));
    compare("2026-09", &statement_lines(&api, "2026-09").await, &sept);
    compare("2026-10", &statement_lines(&api, "2026-10").await, &oct);

    // close September: refused while the node without dcgm-exporter leaves cards of an unknown model (the
    // simulator's truth has no model for them), then closed by override; its statements are frozen byte for byte
    let policy = json!({"mode": "showback", "unallocated": "kept_by_platform"});
    let (status, refused) = api.call(Method::POST, "/api/v1/bills/2026-09/close", fin, Some(policy.clone())).await;
    assert_eq!((status, refused["code"].as_str()), (409, Some("not_ready")), "{refused}");
    let blockers = refused["blockers"].as_array().unwrap();
    assert_eq!(blockers.len(), 3, "{refused}");
    // the simulation starts inside September: its hours before the first ingest have no data (issue 33)
    assert_eq!((blockers[0]["kind"].as_str(), blockers[0]["cluster"].as_str()), (Some("uncovered_hours"), Some("sim")));
    let blockers = &blockers[1..];
    assert_eq!(
        (blockers[0]["kind"].as_str(), blockers[0]["gpu_model"].as_str()),
        (Some("unknown_gpu_model"), Some("unknown"))
    );
    // nothing counts that node's cards either (no DCGM, no GFD label): its units are taken at face value
    assert_eq!(
        (blockers[1]["kind"].as_str(), blockers[1]["anomaly"].as_str()),
        (Some("unverified_node"), Some("unverified_node")),
        "{refused}"
    );
    assert!(blockers[1]["node"].as_str().unwrap().contains("h100-nodcgm"), "{refused}");
    let reason = json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": "the cards of the node without dcgm-exporter are billed at 0"}});
    let (status, closed) = api.call(Method::POST, "/api/v1/bills/2026-09/close", fin, Some(reason)).await;
    assert_eq!(status, 201, "{closed}");
    assert_eq!(closed["status"], "closed");
    let raw = |path: String| {
        let (client, base, token) = (api.client.clone(), api.base.clone(), api.finance.clone());
        async move { client.get(format!("{base}{path}")).bearer_auth(token).send().await.unwrap().text().await.unwrap() }
    };
    let frozen_team = raw("/api/v1/bills/2026-09/teams/vision".into()).await;
    let frozen_month = raw("/api/v1/bills/2026-09".into()).await;
    let (status, again) = api.call(Method::POST, "/api/v1/bills/2026-09/close", fin, Some(policy.clone())).await;
    assert_eq!((status, again["field"].as_str()), (409, Some("month")));

    // re-ingest September's hours with changed data (a 30 s interval: every sample counts half)
    ingest(START, SEPT_END, &["--scrape-interval", "30s"]);
    assert_eq!(raw("/api/v1/bills/2026-09/teams/vision".into()).await, frozen_team);
    assert_eq!(raw("/api/v1/bills/2026-09".into()).await, frozen_month);
    pods_match_the_hourly_rows(&api.pool).await;
    // the idle list served before (and cached) follows the new data: September's 12 hours of each squatter count half
    let (_, idle_after) =
        api.call(Method::GET, &format!("/api/v1/idle?to={END}&hours=48&include_ended=true"), fin, None).await;
    let hours_held = |list: &Value, pod: &str| {
        list.as_array().unwrap().iter().find(|p| p["pod"] == pod).map(|p| p["hours_held"].as_f64().unwrap())
    };
    for (_, pod) in &squatters {
        let (before, after) = (hours_held(&idle, pod).unwrap(), hours_held(&idle_after, pod).unwrap());
        assert!((before - after - 6.0).abs() < 1e-9, "{pod}: {before} h held, then {after} h");
    }

    // … and October carries the difference as restatement lines, line by line
    let halved = expected(&truth, "2026-09", a100_rate, 0.5, SEPT_END.parse().unwrap());
    let mut want: BTreeMap<Line, Decimal> = BTreeMap::new();
    for (k, (_, amount)) in &halved {
        *want.entry(k.clone()).or_default() += *amount;
    }
    for (k, (_, amount)) in &sept {
        *want.entry(k.clone()).or_default() -= *amount;
    }
    want.retain(|_, v| !v.is_zero());
    let (_, oct_summary) = api.call(Method::GET, "/api/v1/bills/2026-10", fin, None).await;
    let mut got: BTreeMap<Line, Decimal> = BTreeMap::new();
    for t in oct_summary["teams"].as_array().unwrap() {
        let team = t["team"].as_str().unwrap();
        let (_, st) = api.call(Method::GET, &format!("/api/v1/bills/2026-10/teams/{team}"), fin, None).await;
        for r in st["restatements"].as_array().unwrap() {
            assert_eq!(r["original_month"], "2026-09");
            let key = (
                team.into(),
                r["namespace"].as_str().unwrap().into(),
                r["gpu_model"].as_str().unwrap().into(),
                r["kind"].as_str().unwrap().into(),
                r["rate"].as_str().map(|x| x.parse().unwrap()),
            );
            got.insert(key, dec(&r["amount_delta"]));
        }
    }
    assert!(!want.is_empty());
    // unpriced lines (the node without DCGM has no model, so no rate) restate hours at 0 yuan
    got.retain(|k, v| !(v.is_zero() && k.4.is_none()));
    assert_eq!(got, want, "October's restatement lines");
    // October's own lines did not change
    compare("2026-10", &statement_lines(&api, "2026-10").await, &oct);

    // the CSV export parses back to exactly the statement's numbers; Chinese names survive, formulas do not
    let (status, _) = api
        .call(
            Method::PUT,
            "/api/v1/teams/vision",
            fin,
            Some(json!({"name": "=HYPERLINK(\"http://x\")", "owner": "王五"})),
        )
        .await;
    assert_eq!(status, 200);
    let resp = api
        .client
        .get(format!("{}/api/v1/exports/2026-10/bills.csv", api.base))
        .bearer_auth(&api.finance)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/csv; charset=utf-8");
    let csv_bytes = resp.bytes().await.unwrap().to_vec();
    assert!(csv_bytes.starts_with("\u{feff}".as_bytes()), "UTF-8 with BOM");
    assert!(String::from_utf8_lossy(&csv_bytes).contains("\r\n"), "RFC 4180 line ends");
    let mut reader = csv::Reader::from_reader(&csv_bytes[3..]);
    let mut csv_lines: BTreeMap<Line, (Decimal, Decimal)> = BTreeMap::new();
    let mut restated: BTreeMap<Line, Decimal> = BTreeMap::new();
    // layout 4: the total row is Σ the team rows (usage, unallocated shares, restatements), and it comes last
    let (mut carried, mut total_row, mut unit_cost_rows) = (Decimal::ZERO, None, 0);
    for rec in reader.deserialize::<BTreeMap<String, String>>() {
        let r = rec.unwrap();
        assert!(total_row.is_none(), "the total row is the last: {r:?}");
        // layout 5: a team's unit cost of inference per model has no amount (its cost is in the usage lines)
        if r["line_type"] == "unit_cost" {
            assert!(!r["team"].is_empty() && r["amount"].is_empty() && !r["model"].is_empty(), "{r:?}");
            assert!(
                r["total_tokens"].parse::<Decimal>().unwrap() > Decimal::ZERO || !r["requests"].is_empty(),
                "{r:?}"
            );
            unit_cost_rows += 1;
            continue;
        }
        if !r["team"].is_empty() {
            carried += r["amount"].parse::<Decimal>().unwrap();
        }
        let rate = Some(r["rate"].as_str()).filter(|x| !x.is_empty()).map(|x| x.parse().unwrap());
        let key = (r["team"].clone(), r["namespace"].clone(), r["gpu_model"].clone(), r["kind"].clone(), rate);
        match r["line_type"].as_str() {
            "usage" => {
                csv_lines.insert(key, (r["card_hours"].parse().unwrap(), r["amount"].parse().unwrap()));
            }
            "restatement" => {
                // layout 2: a month as a formula a spreadsheet shows as text
                assert_eq!(r["original_month"], "=\"2026-09\"");
                restated.insert(key, r["amount"].parse().unwrap());
            }
            // layout 2: the cluster's rows close an export of every team
            "capacity" | "unallocated" | "not_offered" | "platform_kept" => assert_eq!(r["team"], ""),
            "total" => total_row = Some(r["amount"].parse::<Decimal>().unwrap()),
            other => assert_eq!(other, "unallocated_share"),
        }
        if r["team"] == "speech" {
            assert_eq!(r["team_name"], "语音组");
        }
        if r["team"] == "vision" {
            assert_eq!(r["team_name"], "'=HYPERLINK(\"http://x\")", "formula neutralised");
            assert_eq!(r["owner"], "王五");
        }
    }
    assert_eq!(total_row, Some(carried), "the total row sums what the teams carry");
    assert!(unit_cost_rows > 0, "the simulated serving pods give teams a unit cost of inference");
    assert_eq!(csv_lines, statement_lines(&api, "2026-10").await, "CSV usage lines = the statement's lines");
    restated.retain(|k, v| !(v.is_zero() && k.4.is_none()));
    assert_eq!(restated, want, "CSV restatement lines");
    // the CLI writes the same bytes; a team lead's export holds its own team only
    let out = dir.path().join("oct.csv");
    run_cardhour_ok(["export", "--month", "2026-10", "--out", out.to_str().unwrap()], &db.env());
    assert_eq!(std::fs::read(&out).unwrap(), csv_bytes);
    let lead_csv = api
        .client
        .get(format!("{}/api/v1/exports/2026-10/bills.csv", api.base))
        .bearer_auth(&api.lead)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // layout 5's unit-cost columns are in an export only where one of its teams served: compared without them
    // where they are empty
    const UNIT_COLUMNS: [&str; 7] = [
        "model",
        "engine",
        "total_tokens",
        "requests",
        "cost_per_million_tokens",
        "cost_per_thousand_requests",
        "idle_serving_cost",
    ];
    let csv_records = |bytes: &[u8]| -> Vec<BTreeMap<String, String>> {
        csv::Reader::from_reader(bytes.strip_prefix("\u{feff}".as_bytes()).unwrap())
            .deserialize()
            .map(Result::unwrap)
            .map(|mut r: BTreeMap<String, String>| {
                r.retain(|k, v| !(UNIT_COLUMNS.contains(&k.as_str()) && v.is_empty()));
                r
            })
            .collect()
    };
    let vision_rows: Vec<_> = csv_records(&csv_bytes).into_iter().filter(|r| r["team"] == "vision").collect();
    assert!(!vision_rows.is_empty());
    let mut lead_rows = csv_records(lead_csv.as_bytes());
    // then its total row (layout 4): what its own team carries
    let total = lead_rows.pop().unwrap();
    let vision_total: Decimal = vision_rows
        .iter()
        .filter(|r| r["line_type"] != "unit_cost")
        .map(|r| r["amount"].parse::<Decimal>().unwrap())
        .sum();
    assert_eq!((total["line_type"].as_str(), total["amount"].parse::<Decimal>().unwrap()), ("total", vision_total));
    assert_eq!(lead_rows, vision_rows, "a team lead's CSV holds exactly its own team's rows");
    let (status, _) = api.call(Method::GET, "/api/v1/exports/2026-10/bills.csv?team=nlp", Some(&api.lead), None).await;
    assert_eq!(status, 404);
    // the PDF statements give back, through pdftotext, the Chinese team name and every team's total
    let pdf = api
        .client
        .get(format!("{}/api/v1/exports/2026-10/statements.pdf?lang=en", api.base))
        .bearer_auth(&api.finance)
        .send()
        .await
        .unwrap();
    assert_eq!(pdf.headers()["content-type"], "application/pdf");
    let pdf_path = dir.path().join("oct.pdf");
    std::fs::write(&pdf_path, pdf.bytes().await.unwrap()).unwrap();
    let text = std::process::Command::new("pdftotext")
        .args(["-layout", pdf_path.to_str().unwrap(), "-"])
        .output()
        .expect("pdftotext (poppler-utils)");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("语音组"), "the Chinese team name is in the PDF");
    // with the month's utilization and each team's idle pods (the idle list up to the newest stored hour)
    assert!(text.contains("Allocation rate") && text.contains("Effective rate"));
    // (its week ends at the newest stored hour: the idle list of that week, as the API gives it now)
    let (_, idle_now) =
        api.call(Method::GET, &format!("/api/v1/idle?to={END}&hours=168&include_ended=true"), fin, None).await;
    assert!(!idle_now.as_array().unwrap().is_empty());
    for p in idle_now.as_array().unwrap() {
        let pod = p["pod"].as_str().unwrap();
        assert!(text.contains(pod), "idle pod {pod} in its team's statement");
        assert!(text.contains(&common::yuan(p["idle_spend"].as_str().unwrap())), "{pod}'s money spent idle");
    }
    for t in month_view["teams"].as_array().unwrap() {
        assert!(
            text.contains(&common::yuan(t["total"].as_str().unwrap())),
            "{} total {} in the PDF",
            t["team"],
            t["total"]
        );
    }

    // a month that has not ended cannot be closed; a team lead sees only its own statements
    let (status, err) = api
        .call(
            Method::POST,
            "/api/v1/bills/2099-01/close",
            fin,
            Some(json!({"mode": "showback", "unallocated": "kept_by_platform"})),
        )
        .await;
    assert_eq!((status, err["field"].as_str()), (409, Some("month")));
    let (status, _) = api.call(Method::GET, "/api/v1/bills/2026-10/teams/nlp", Some(&api.lead), None).await;
    assert_eq!(status, 404);
    let (status, mine) = api.call(Method::GET, "/api/v1/bills/2026-10", Some(&api.lead), None).await;
    assert_eq!(status, 200);
    let teams: Vec<&str> = mine["teams"].as_array().unwrap().iter().map(|t| t["team"].as_str().unwrap()).collect();
    assert_eq!(teams, ["vision"], "{mine}");
    assert!(mine["capacity_cost"].is_null());
    let (status, _) = api.call(Method::POST, "/api/v1/bills/2026-10/close", Some(&api.viewer), None).await;
    assert_eq!(status, 403);
    let (status, err) = api.call(Method::GET, "/api/v1/bills/2026-13", fin, None).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("month")));
}
