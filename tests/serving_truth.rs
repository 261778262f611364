//! Issue 36 on a real Prometheus against a truth written by hand: serving engines' counters (vLLM, SGLang under
//! both name variants, TGI with its model from a pod label, Triton) integrated into tokens and requests per pod,
//! model and hour by SPEC §9's counter rule — a counter reset inside an hour, a pod restarting under the same
//! name, a pod starting mid-window (its first sample counted), a series starting late (a baseline, not counted),
//! two models on one pod (cost split by tokens), hours with no traffic (idle serving cost), an `exported_*` scrape,
//! an unknown drifted name — read in 1-hour and 6-hour batches to the same rows; then the unit cost of the API, its
//! CSV and workbook and the command line equal to each other and to a computation from the truth, to 4 decimals.

use crate::common;

use std::collections::BTreeMap;
use std::io::Cursor;

use calamine::{Data, Reader, Xlsx};
use chrono::{DateTime, TimeDelta, Utc};
use common::api::TestApi;
use common::om::Om;
use common::{TestDb, TestPrometheus, rfc3339, run_cardhour_ok, sim_end};
use reqwest::Method;
use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use serde_json::{Value, json};

const STEP: i64 = 60_000;
const H: i64 = 3_600_000;
const HOURS: i64 = 6;
const RATE: Decimal = dec!(12.34);
const MODEL: &str = "NVIDIA-A100-SXM4-80GB";

/// What one pod-model served in one hour, by the rule, from the increments written (never from the series read).
type Truth = BTreeMap<(i64, String, String), (Option<i64>, Option<i64>, i64)>;

/// The cluster: one A100 node, teams `nlp` and `vision`, six serving pods. Returns the truth of tokens and
/// requests per (hour index, pod, model) and the Running minutes per (hour index, pod).
struct Cluster {
    om: Om,
    truth: Truth,
    minutes: BTreeMap<(i64, String), i64>,
    s: i64,
}

impl Cluster {
    fn pod(&mut self, ns: &str, pod: &str, uid: &str, (from, to): (i64, i64)) {
        let requests = [
            ("namespace", ns),
            ("pod", pod),
            ("uid", uid),
            ("container", "server"),
            ("node", "n1"),
            ("resource", "nvidia_com_gpu"),
            ("unit", "integer"),
        ];
        self.om.every_minute("kube_pod_container_resource_requests", &requests, (from, to), 1.0);
        let phase = [("namespace", ns), ("pod", pod), ("uid", uid), ("phase", "Running")];
        self.om.every_minute("kube_pod_status_phase", &phase, (from, to), 1.0);
        let mut t = from;
        while t < to {
            *self.minutes.entry(((t - self.s) / H, pod.to_string())).or_default() += 1;
            t += STEP;
        }
    }

    /// A counter series: at each `t` of `points` the increment since the sample before (or, `reset`, the value
    /// starting again at it); `counted` says whether the increment is in the truth.
    fn counter(&mut self, name: &str, labels: &[(&str, &str)], points: &[(i64, f64, bool, bool)]) {
        let mut v = 0.0;
        let s = self.om.series(name, labels);
        for &(t, inc, reset, _) in points {
            v = if reset { inc } else { v + inc };
            s.push((t, v));
        }
    }

    fn count(&mut self, hour: i64, pod: &str, model: &str, slot: usize, n: i64, tokens: bool) {
        let e = self.truth.entry((hour, pod.to_string(), model.to_string())).or_insert(if tokens {
            (Some(0), Some(0), 0)
        } else {
            (None, None, 0)
        });
        match slot {
            0 => *e.0.as_mut().unwrap() += n,
            1 => *e.1.as_mut().unwrap() += n,
            _ => e.2 += n,
        }
    }
}

/// The steps `[from, to)` with an increment each: (t, increment, reset here, counted).
fn steps(from: i64, to: i64, inc: impl Fn(i64) -> f64) -> Vec<(i64, f64, bool, bool)> {
    (0..).map(|k| from + k * STEP).take_while(|t| *t < to).map(|t| (t, inc(t), false, true)).collect()
}

fn build() -> (Cluster, DateTime<Utc>) {
    let end = sim_end();
    let start = end - TimeDelta::hours(HOURS);
    let s = start.timestamp_millis();
    let e = end.timestamp_millis();
    let mut c = Cluster { om: Om::default(), truth: Truth::new(), minutes: BTreeMap::new(), s };
    let gfd = [("node", "n1"), ("label_nvidia_com_gpu_product", MODEL), ("label_nvidia_com_gpu_count", "8")];
    c.om.every_minute("kube_node_labels", &gfd, (s, e), 1.0);
    for name in ["kube_node_status_capacity", "kube_node_status_allocatable"] {
        c.om.every_minute(name, &[("node", "n1"), ("resource", "nvidia_com_gpu"), ("unit", "integer")], (s, e), 8.0);
    }
    for ns in ["nlp", "vision"] {
        c.om.every_minute("kube_namespace_labels", &[("namespace", ns), ("label_team", ns)], (s, e), 1.0);
    }
    let hour = |t: i64| (t - s) / H;

    // vllm-a (nlp): from the window's start; a container restart at 2 h 30 min (the value starts again); an
    // unknown drifted name beside the real ones
    c.pod("nlp", "vllm-a", "uid-a", (s, e));
    let restart = s + 2 * H + 30 * STEP;
    for (name, inc, slot, extra) in [
        ("vllm:prompt_tokens_total", 100.0, 0, None),
        ("vllm:generation_tokens_total", 40.0, 1, None),
        ("vllm:request_success_total", 2.0, 2, Some("stop")),
        ("vllm:request_success_total", 1.0, 2, Some("length")),
    ] {
        let mut labels = vec![("namespace", "nlp"), ("pod", "vllm-a"), ("model_name", "qwen"), ("engine", "0")];
        if let Some(reason) = extra {
            labels.push(("finished_reason", reason));
        }
        let mut pts = steps(s, e, |_| inc);
        for p in &mut pts {
            p.2 = p.0 == restart;
            c.count(hour(p.0), "vllm-a", "qwen", slot, inc as i64, true);
        }
        c.counter(name, &labels, &pts);
    }
    c.om.every_minute(
        "vllm:prompt_tokens",
        &[("namespace", "nlp"), ("pod", "vllm-a"), ("model_name", "qwen")],
        (s, e),
        5.0,
    );

    // vllm-b (vision), scraped without honor_labels: its own labels are exported_*; two models, traffic in hours
    // 0–3, none at all in hour 4 (idle), only m1 in hour 5
    c.pod("vision", "vllm-b", "uid-b", (s, e));
    for (model, p_inc, g_inc, r_inc) in [("m1", 30.0, 10.0, 1.0), ("m2", 5.0, 5.0, 1.0)] {
        for (name, inc, slot) in [
            ("vllm:prompt_tokens_total", p_inc, 0),
            ("vllm:generation_tokens_total", g_inc, 1),
            ("vllm:request_success_total", r_inc, 2),
        ] {
            let labels = [
                ("namespace", "monitoring"),
                ("pod", "prometheus-adapter-x"),
                ("exported_namespace", "vision"),
                ("exported_pod", "vllm-b"),
                ("model_name", model),
            ];
            let served = |t: i64| hour(t) <= 3 || (hour(t) == 5 && model == "m1");
            let pts = steps(s, e, |t| if served(t) { inc } else { 0.0 });
            for p in &pts {
                c.count(hour(p.0), "vllm-b", model, slot, p.1 as i64, true);
            }
            c.counter(name, &labels, &pts);
        }
    }

    // tgi-c (nlp) starts Running at 1 h 10 min: its counters' first sample counts whole; its model from a pod label
    let c_from = s + H + 10 * STEP;
    c.pod("nlp", "tgi-c", "uid-c", (c_from, e));
    c.om.every_minute(
        "kube_pod_labels",
        &[("namespace", "nlp"), ("pod", "tgi-c"), ("uid", "uid-c"), ("label_model", "llama-3.1-8b")],
        (c_from, e),
        1.0,
    );
    for (name, inc, slot) in [
        ("tgi_request_input_length_sum", 50.0, 0),
        ("tgi_request_generated_tokens_sum", 20.0, 1),
        ("tgi_request_success", 1.0, 2),
    ] {
        let pts = steps(c_from, e, |_| inc);
        for p in &pts {
            c.count(hour(p.0), "tgi-c", "llama-3.1-8b", slot, inc as i64, true);
        }
        c.counter(name, &[("namespace", "nlp"), ("pod", "tgi-c"), ("instance", "10.0.0.3:80")], &pts);
    }

    // triton-d (vision): requests only
    c.pod("vision", "triton-d", "uid-d", (s, e));
    let pts = steps(s, e, |_| 7.0);
    for p in &pts {
        c.count(hour(p.0), "triton-d", "resnet50", 2, 7, false);
    }
    c.counter(
        "nv_inference_request_success",
        &[("namespace", "vision"), ("pod", "triton-d"), ("model", "resnet50"), ("version", "1")],
        &pts,
    );

    // late-e (nlp): Running from the start, its counters (SGLang's underscore names) scraped from 2 h on only: the
    // first sample carries what it served before, a baseline that counts nothing
    c.pod("nlp", "late-e", "uid-e", (s, e));
    for (name, inc, slot) in [
        ("sglang_prompt_tokens_total", 10.0, 0),
        ("sglang_generation_tokens_total", 4.0, 1),
        ("sglang_num_requests_total", 1.0, 2),
    ] {
        let mut pts = steps(s + 2 * H, e, |_| inc);
        pts[0].1 = 1_000_000.0;
        pts[0].3 = false;
        for p in pts.iter().filter(|p| p.3) {
            c.count(hour(p.0), "late-e", "qwen-14b", slot, inc as i64, true);
        }
        // the hour of the baseline has its row even if nothing else were counted
        c.count(2, "late-e", "qwen-14b", slot, 0, true);
        c.counter(name, &[("namespace", "nlp"), ("pod", "late-e"), ("model_name", "qwen-14b")], &pts);
    }

    // sglang-f (vision): a pod recreated under the same name (a new uid) at 2 h 22 min, its series continuing
    // with the same labels from 0
    let (gone, back) = (s + 2 * H + 20 * STEP, s + 2 * H + 22 * STEP);
    c.pod("vision", "sglang-f", "uid-f1", (s, gone));
    c.pod("vision", "sglang-f", "uid-f2", (back, e));
    for (name, inc, slot) in [
        ("sglang:prompt_tokens_total", 20.0, 0),
        ("sglang:generation_tokens_total", 8.0, 1),
        ("sglang:num_requests_total", 1.0, 2),
    ] {
        let mut pts = steps(s, gone, |_| inc);
        let mut second = steps(back, e, |_| inc);
        second[0].2 = true;
        pts.extend(second);
        for p in &pts {
            c.count(hour(p.0), "sglang-f", "qwen-7b", slot, inc as i64, true);
        }
        c.counter(name, &[("namespace", "vision"), ("pod", "sglang-f"), ("model_name", "qwen-7b")], &pts);
    }
    (c, start)
}

fn ingest(prom: &TestPrometheus, db: &TestDb, start: DateTime<Utc>, extra: &[&str]) {
    let (from, to) = (rfc3339(start), rfc3339(start + TimeDelta::hours(HOURS)));
    let mut args = vec!["ingest", "--cluster", "c", "--prometheus", &prom.url, "--from", &from, "--to", &to];
    args.extend(extra);
    run_cardhour_ok(args, &db.env());
}

/// The stored serving rows as the truth's keys (hour index from the window's start).
fn stored(db: &TestDb, start: DateTime<Utc>) -> Truth {
    let sql = format!(
        "SELECT (extract(epoch FROM hour - '{}'::timestamptz) / 3600)::int, pod, model, input_tokens, output_tokens,
                requests FROM serving_hourly ORDER BY 1, 2, 3",
        rfc3339(start)
    );
    db.psql(&sql)
        .unwrap()
        .lines()
        .map(|l| {
            let c: Vec<&str> = l.split('|').collect();
            let n = |s: &str| (!s.is_empty()).then(|| s.parse::<i64>().unwrap());
            ((c[0].parse().unwrap(), c[1].to_string(), c[2].to_string()), (n(c[3]), n(c[4]), c[5].parse().unwrap()))
        })
        .collect()
}

/// ¥ per million tokens (and per thousand requests) per model from the truth, by SPEC §9: each pod-hour's cost
/// (Running minutes / 60 × rate) split over its models by tokens, hours without traffic apart.
fn expected(c: &Cluster, teams: Option<&[&str]>) -> BTreeMap<String, (Decimal, i64, i64, Decimal, Decimal)> {
    let team_of = |pod: &str| if ["vllm-b", "triton-d", "sglang-f"].contains(&pod) { "vision" } else { "nlp" };
    // (cost, tokens, requests, request cost, idle cost) per model
    let mut out: BTreeMap<String, (Decimal, i64, i64, Decimal, Decimal)> = BTreeMap::new();
    type Served = (Option<i64>, Option<i64>, i64);
    let mut pod_hours: BTreeMap<(i64, String), Vec<(&String, &Served)>> = BTreeMap::new();
    for ((h, pod, model), v) in &c.truth {
        if teams.is_some_and(|t| !t.contains(&team_of(pod))) {
            continue;
        }
        pod_hours.entry((*h, pod.clone())).or_default().push((model, v));
    }
    for ((h, pod), models) in pod_hours {
        let cost = Decimal::from(c.minutes[&(h, pod.clone())]) / dec!(60) * RATE;
        let weight = |v: &(Option<i64>, Option<i64>, i64)| match v.0 {
            Some(i) => i + v.1.unwrap_or(0),
            None => v.2,
        };
        let total: i64 = models.iter().map(|(_, v)| weight(v)).sum();
        for (model, v) in &models {
            let e = out.entry((*model).clone()).or_default();
            if total == 0 {
                e.4 += cost / Decimal::from(models.len());
                continue;
            }
            let share = cost * Decimal::from(weight(v)) / Decimal::from(total);
            if let Some(i) = v.0 {
                e.1 += i + v.1.unwrap_or(0);
                if i + v.1.unwrap_or(0) > 0 {
                    e.0 += share;
                }
            }
            e.2 += v.2;
            if v.2 > 0 {
                e.3 += share;
            }
        }
    }
    out
}

fn dec(v: &Value) -> Option<Decimal> {
    v.as_str().map(|s| s.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_counters_give_exact_tokens_and_unit_costs() {
    let (c, start) = build();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metrics.om");
    c.om.write(&path);
    let prom = TestPrometheus::from_openmetrics(&path).unwrap();

    // the same hours in 1-hour and in one 6-hour batch: the same rows, equal to the truth
    let db = TestDb::migrated().unwrap();
    ingest(&prom, &db, start, &["--chunk-hours", "1"]);
    let one_by_one = stored(&db, start);
    let batch_db = TestDb::migrated().unwrap();
    ingest(&prom, &batch_db, start, &[]);
    assert_eq!(stored(&batch_db, start), one_by_one, "1-hour and 6-hour batches");
    assert!(!c.truth.is_empty());
    assert_eq!(one_by_one, c.truth, "stored serving rows against the truth");
    // the cases are there: a reset inside hour 2, two models, an idle hour, the late series' baseline left out
    assert_eq!(c.truth[&(2, "vllm-a".into(), "qwen".into())], (Some(6000), Some(2400), 180));
    assert_eq!(c.truth[&(4, "vllm-b".into(), "m1".into())], (Some(0), Some(0), 0));
    assert_eq!(c.truth[&(2, "late-e".into(), "qwen-14b".into())], (Some(590), Some(236), 59));
    assert_eq!(c.truth[&(1, "tgi-c".into(), "llama-3.1-8b".into())], (Some(2500), Some(1000), 50));
    assert_eq!(c.truth[&(2, "sglang-f".into(), "qwen-7b".into())], (Some(1160), Some(464), 58));
    assert_eq!(c.truth[&(3, "triton-d".into(), "resnet50".into())], (None, None, 420));
    // a re-read of the same samples changes nothing and leaves no history
    ingest(&prom, &db, start, &["--chunk-hours", "2"]);
    assert_eq!(stored(&db, start), one_by_one);
    assert_eq!(db.psql("SELECT count(*) FROM replaced_serving_hourly").unwrap().trim(), "0");
    // ingest health: the unknown drifted name and the reset inside vllm-a (sglang-f's came with a new pod object
    // under its name: expected, not reported), nothing else about serving
    let anomalies = db
        .psql("SELECT kind, subject, sum(count) FROM ingest_anomalies WHERE kind LIKE '%serving%' GROUP BY 1, 2 ORDER BY 1, 2")
        .unwrap();
    assert_eq!(
        anomalies.lines().collect::<Vec<_>>(),
        ["serving_counter_reset|nlp/vllm-a|4", "unknown_serving_series|vllm:prompt_tokens|360"],
    );

    // the unit cost: API, CSV, workbook and command line against the truth
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool).await;
    let fin = Some(api.finance.as_str());
    let (status, out) = api
        .call(
            Method::POST,
            "/api/v1/rates",
            fin,
            Some(json!({"gpu_model": MODEL, "effective_from": "2020-01-01", "rate": RATE.to_string()})),
        )
        .await;
    assert_eq!(status, 201, "{out}");
    let (from, to) = ((start - TimeDelta::days(1)).date_naive(), (start + TimeDelta::days(2)).date_naive());
    let q = format!("from={from}&to={to}&group_by=model");
    let (status, report) = api.call(Method::GET, &format!("/api/v1/reports/unit-cost?{q}"), fin, None).await;
    assert_eq!(status, 200, "{report}");
    let want = expected(&c, None);
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), want.len(), "{report}");
    for r in rows {
        let model = r["key"].as_str().unwrap();
        let (cost, tokens, requests, request_cost, idle) = want[model];
        assert_eq!(r["total_tokens"].as_i64(), Some(tokens), "{model}");
        assert_eq!(r["requests"].as_i64(), Some(requests), "{model}");
        let per_million = (tokens > 0).then(|| (cost * dec!(1000000) / Decimal::from(tokens)).round_dp(4));
        assert_eq!(dec(&r["cost_per_million_tokens"]), per_million, "{model}: {r}");
        let per_thousand = (requests > 0).then(|| (request_cost * dec!(1000) / Decimal::from(requests)).round_dp(4));
        assert_eq!(dec(&r["cost_per_thousand_requests"]), per_thousand, "{model}: {r}");
        assert_eq!(dec(&r["idle_cost"]), Some(idle.round_dp(2)), "{model}: {r}");
    }
    // vllm-b's idle hour: a whole card-hour split over its two models, apart from their unit costs
    assert_eq!(want["m1"].4, RATE / dec!(2));
    assert!(dec(&rows.iter().find(|r| r["key"] == "resnet50").unwrap()["cost_per_million_tokens"]).is_none());

    // CSV (codes) and workbook: the API's figures
    let csv =
        String::from_utf8(api.download(&format!("/api/v1/exports/unit-cost/unit-cost.csv?{q}"), &api.finance).await)
            .unwrap();
    let mut lines = csv.trim_start_matches('\u{feff}').lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let csv_rows: BTreeMap<String, Vec<String>> =
        lines.map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>()).map(|r| (r[0].clone(), r)).collect();
    for r in rows {
        let line = &csv_rows[r["key"].as_str().unwrap()];
        assert_eq!(
            line[col("cost_per_million_tokens")],
            r["cost_per_million_tokens"].as_str().unwrap_or(""),
            "{line:?}"
        );
        assert_eq!(line[col("total_tokens")], r["total_tokens"].to_string());
        assert_eq!(line[col("idle_serving_cost")], r["idle_cost"].as_str().unwrap());
    }
    assert_eq!(csv_rows["total"][col("total_tokens")], report["total"]["total_tokens"].to_string());
    let xlsx = api.download(&format!("/api/v1/exports/unit-cost/unit-cost.xlsx?{q}&lang=en"), &api.finance).await;
    let mut wb: Xlsx<_> = calamine::open_workbook_from_rs(Cursor::new(xlsx)).unwrap();
    let sheet = wb.worksheet_range(&wb.sheet_names()[0].clone()).unwrap();
    let cells: Vec<Vec<Data>> = sheet.rows().map(|r| r.to_vec()).collect();
    let fields =
        cells.iter().position(|r| r.iter().any(|d| *d == Data::String("cost_per_million_tokens".into()))).unwrap();
    let at = |name: &str| cells[fields].iter().position(|d| *d == Data::String(name.into())).unwrap();
    let mut checked = 0;
    for row in &cells[fields + 1..] {
        let Data::String(key) = &row[0] else { continue };
        let Some(r) = rows.iter().find(|r| r["key"] == key.as_str()) else { continue };
        if let Some(want) = dec(&r["cost_per_million_tokens"]) {
            let Data::Float(got) = row[at("cost_per_million_tokens")] else { panic!("{row:?}") };
            assert!((Decimal::try_from(got).unwrap() - want).abs() < dec!(0.00005), "{key}: {got} vs {want}");
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked} workbook rows checked");

    // the command line prints the same figures
    let cli: Value = serde_json::from_str(&run_cardhour_ok(
        ["unit-cost", "--from", &from.to_string(), "--to", &to.to_string(), "--format", "json"],
        &db.env(),
    ))
    .unwrap();
    assert_eq!(cli["rows"], report["rows"]);

    // a team lead of `vision` sees its own models only
    let (status, lead) = api.call(Method::GET, &format!("/api/v1/reports/unit-cost?{q}"), Some(&api.lead), None).await;
    assert_eq!(status, 200, "{lead}");
    let mine: Vec<&str> = lead["rows"].as_array().unwrap().iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(mine, ["m1", "m2", "qwen-7b", "resnet50"]);
    let want_lead = expected(&c, Some(&["vision"]));
    assert_eq!(lead["total"]["total_tokens"].as_i64(), Some(want_lead.values().map(|v| v.1).sum::<i64>()));

    // bad input: a field named, nothing computed
    let (status, err) = api.call(Method::GET, "/api/v1/reports/unit-cost?from=2026-13-01", fin, None).await;
    assert!((400..500).contains(&status) && err.to_string().contains("from"), "{status} {err}");
    let (status, err) =
        api.call(Method::GET, "/api/v1/reports/unit-cost?from=2026-11-05&to=2026-11-01", fin, None).await;
    assert!((400..500).contains(&status) && err.to_string().contains("from"), "{status} {err}");
}
