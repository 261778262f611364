//! The report pages over HTTP, signed in through the login form: the low-utilization top N, fragmentation and
//! oversubscription show the API's JSON numbers for the same question; a team lead sees its own pods in the top N
//! and the not-found page for the cluster-wide reports (as the API refuses them); bad form input comes back with
//! its message (422); the heatmap has its legend; the language switch keeps the page's query.

use crate::common;

use common::api::{SEED_FROM, SEED_MODEL, SEED_TO, TestApi, row, seed};
use common::portal::{PASSWORD, TestPortal, visitor};
use common::yuan;
use reqwest::Method;
use serde_json::Value;
use sqlx::PgPool;

async fn get(portal: &TestPortal, c: &reqwest::Client, path: &str) -> (u16, String) {
    let r = c.get(portal.url(path)).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn signed_in(portal: &TestPortal, user: &str) -> reqwest::Client {
    let c = visitor();
    let answer = portal.login(&c, user, PASSWORD).await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    c
}

/// A JSON number as the pages print measured quantities: three decimals, thousands grouped (`1,234.500`).
fn hours(v: &Value) -> String {
    let x = v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
    let plain = format!("{x:.3}");
    let (int, frac) = plain.split_once('.').unwrap();
    format!("{}.{frac}", yuan(&format!("{int}.00")).trim_start_matches('¥').trim_end_matches(".00"))
}

/// A JSON share as the pages print it: a percentage with one decimal.
fn pct(v: &Value) -> String {
    format!("{:.1} %", v.as_f64().unwrap() * 100.0)
}

/// One cell of a table row, as the templates write it.
fn cell(s: &str) -> String {
    format!(r#"<td class="num">{s}</td>"#)
}

/// A time-sliced card of cluster `c2` in the seed's 4th hour: 1 physical card, 3 pods holding a replica each (a
/// quarter of the card, promising a whole one), 20 % busy in their share.
async fn seed_time_slicing(pool: &PgPool) {
    let rows = (0..3)
        .map(|i| {
            let mut r = row("vision-train", &format!("ts-pod-{i}"), "vision", 1.0);
            r.kind = "timeslice";
            r.resource = "nvidia_com_gpu".into();
            r.node = "node-ts".into();
            r.fraction = 0.25;
            r.gpu_seconds = 900.0;
            r.effective_gpu_seconds = 180.0;
            r
        })
        .collect();
    let out = cardhour::metering::HourOutput {
        interval_ms: Some(60_000),
        rows,
        capacity: vec![cardhour::metering::CapacityRow {
            node: "node-ts".into(),
            gpu_model: SEED_MODEL.into(),
            cards: 1.0,
            card_seconds: 3600.0,
            offered_card_seconds: 3600.0,
            offered_source: cardhour::metering::OfferedSource::Allocatable,
        }],
        ..Default::default()
    };
    let hour = SEED_FROM.parse::<chrono::DateTime<chrono::Utc>>().unwrap() + chrono::Duration::hours(3);
    let mut tx = pool.begin().await.unwrap();
    cardhour::db::clusters::upsert(&mut tx, "c2", "http://127.0.0.1:9").await.unwrap();
    cardhour::db::usage::replace_hour(&mut tx, "c2", hour, &out).await.unwrap();
    tx.commit().await.unwrap();
}

#[sqlx::test]
async fn report_pages_show_the_api_numbers(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    seed_time_slicing(&pool).await;
    // c2's replicas billed as whole cards: the month's statement has an over-recovery
    let whole = cardhour::billing::ReplicaPolicyVersion {
        cluster: "c2".into(),
        pool: None,
        from: "2026-09-01".parse().unwrap(),
        policy: cardhour::billing::ReplicaBilling::WholeCard,
    };
    cardhour::db::replica_policy::set(&mut pool.acquire().await.unwrap(), &whole, "test").await.unwrap();
    let portal = TestPortal::start(pool.clone()).await;
    let viewer = signed_in(&portal, "viewer").await;

    // the low-utilization top N: every pod of the API's answer, with its hours, utilization and money
    let range = format!("from={SEED_FROM}&to={SEED_TO}");
    let (status, top) = api
        .call(Method::GET, &format!("/api/v1/reports/low-utilization?{range}&top=10"), Some(&api.viewer), None)
        .await;
    assert_eq!(status, 200, "{top}");
    let pods = top.as_array().unwrap();
    assert_eq!(pods.len(), 5, "vision, nlp and the three time-sliced pods: {top}");
    assert_eq!(pods[0]["pod"], "nlp-idle-pod", "most wasted hours first: {top}");
    let (status, page) = get(&portal, &viewer, &format!("/reports/low-utilization?{range}&top=10&lang=en")).await;
    assert_eq!(status, 200, "{page}");
    let mut at = 0;
    for p in pods {
        let name = format!("{}/{}", p["namespace"].as_str().unwrap(), p["pod"].as_str().unwrap());
        let found = page[at..].find(&name).unwrap_or_else(|| panic!("{name} missing or out of order"));
        at += found;
        // the whole row the pod is in
        let start = page[..at].rfind("<tr>").unwrap();
        let line = &page[start..at + page[at..].find("</tr>").unwrap()];
        for (field, shown) in [
            ("gpu_hours", hours(&p["gpu_hours"])),
            ("effective_gpu_hours", hours(&p["effective_gpu_hours"])),
            ("wasted_gpu_hours", hours(&p["wasted_gpu_hours"])),
            ("utilization", pct(&p["utilization"])),
            ("wasted_amount", yuan(p["wasted_amount"].as_str().unwrap())),
            ("wasted_per_month", yuan(p["wasted_per_month"].as_str().unwrap())),
        ] {
            assert!(line.contains(&cell(&shown)), "{name}: {field} {shown} not in {line}");
        }
        assert!(line.contains(p["gpu_model"].as_str().unwrap()) && line.contains("<td>owner</td>"), "{line}");
    }
    // nlp: 3 cards × 7 h at 1 %: 20.79 wasted card-hours × 12.5 = 259.875 → ¥259.88, at a month's pace ×730/7
    assert_eq!(pods[0]["wasted_gpu_hours"], serde_json::json!(20.79));
    assert_eq!(pods[0]["wasted_amount"], "259.88");
    assert_eq!(pods[0]["wasted_per_month"], "27101.25");
    // by team, over the pods listed: nlp's one pod, and the total of all
    assert!(page.contains(&format!("<td>nlp</td><td class=\"num\">1</td>{}", cell("20.790"))), "{page}");
    let total: rust_decimal::Decimal =
        pods.iter().map(|p| p["wasted_amount"].as_str().unwrap().parse::<rust_decimal::Decimal>().unwrap()).sum();
    assert!(page.contains(&cell(&yuan(&total.to_string()))), "the total {total}");
    // no float noise anywhere: every figure printed rounded
    assert!(!page.contains("00000000"), "{page}");

    // fragmentation in the seed's last hour: the API's free cards, largest block and share, and every node
    let hour = "2026-10-05T06:00:00Z";
    let (status, frag) =
        api.call(Method::GET, &format!("/api/v1/reports/fragmentation?hour={hour}"), Some(&api.viewer), None).await;
    assert_eq!(status, 200, "{frag}");
    assert_eq!(frag["largest_free_block"], 7, "node-a: 8 cards, 1 held: {frag}");
    let (status, page) = get(&portal, &viewer, &format!("/reports/fragmentation?hour={hour}&lang=en")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("2026-10-05 14:00 (Asia/Shanghai)"), "the hour in the billing time zone");
    assert!(page.contains(&format!(r#"id="free-cards">{}<"#, hours(&frag["free_cards"]))), "{page}");
    assert!(page.contains(r#"id="largest-free-block">7<"#), "{page}");
    // 1 − 7 / 12
    assert!(page.contains(&format!(r#"id="fragmentation">{}<"#, pct(&frag["fragmentation"]))), "{page}");
    assert!(page.contains(r#"id="fragmentation">41.7 %<"#), "{page}");
    let nodes = frag["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{frag}");
    for n in nodes {
        let node = n["node"].as_str().unwrap();
        let expect = format!(
            "<td>{node}</td><td>{}</td>{}{}{}",
            n["gpu_model"].as_str().unwrap(),
            cell(&hours(&n["cards"])),
            cell(&hours(&n["allocated_cards"])),
            cell(&hours(&n["free_cards"]))
        );
        assert!(page.contains(&expect), "{expect} not in the page");
    }
    // without an hour: the newest stored one, the same page
    let (status, newest) = get(&portal, &viewer, "/reports/fragmentation?lang=en").await;
    assert_eq!(status, 200);
    assert!(newest.contains("2026-10-05 14:00 (Asia/Shanghai)"), "{newest}");

    // oversubscription over the seed's day: the API's rows at all three levels, the time-sliced card at 3.00×
    let q = "from=2026-10-05&to=2026-10-06";
    let (status, over) =
        api.call(Method::GET, &format!("/api/v1/reports/oversubscription?{q}"), Some(&api.viewer), None).await;
    assert_eq!(status, 200, "{over}");
    let (status, page) = get(&portal, &viewer, &format!("/reports/oversubscription?{q}&lang=en")).await;
    assert_eq!(status, 200, "{page}");
    let mut seen = 0;
    for level in ["clusters", "gpu_models", "nodes"] {
        let table = &page[page.find(&format!(r#"id="oversub-{level}""#)).unwrap()..];
        let table = &table[..table.find("</table>").unwrap()];
        let rows = over[level].as_array().unwrap();
        assert!(!rows.is_empty(), "{level}: {over}");
        for r in rows {
            let ratio = r["compute_ratio"].as_f64().map_or("–".into(), |x| format!("{x:.2}×"));
            let expect = format!(
                "{}{}{}<td class=\"num\">{}",
                cell(&hours(&r["card_hours"])),
                cell(&hours(&r["held_card_hours"])),
                cell(&hours(&r["promised_card_hours"])),
                // shaded and bold from what prints above 1.00×
                if r["compute_ratio"].as_f64().is_some_and(|x| x >= 1.005) {
                    format!(r#"<strong title="oversubscribed">{ratio}</strong>"#)
                } else {
                    ratio
                }
            );
            assert!(table.contains(&expect), "{level}: {expect} not in {table}");
            seen += 1;
        }
    }
    assert!(seen >= 6, "{over}");
    let ts = over["nodes"].as_array().unwrap().iter().find(|n| n["node"] == "node-ts").expect("the time-sliced node");
    assert_eq!(ts["compute_ratio"].as_f64(), Some(3.0), "3 replicas each promising a whole card: {ts}");
    let ts_row = &page[page.find("<td>node-ts</td>").unwrap()..];
    let ts_row = &ts_row[..ts_row.find("</tr>").unwrap()];
    assert!(ts_row.contains(r#"<strong title="oversubscribed">3.00×</strong>"#), "{ts_row}");
    // memory likewise: each replica promises a card's memory
    let memory = ts["memory_ratio"].as_f64().map_or("–".into(), |x| format!("{x:.2}×"));
    assert_eq!(memory, "3.00×", "{ts}");
    assert!(ts_row.contains(&format!("</td><td class=\"num\">{memory}</td>")), "{ts_row}");
    // 540 effective card-seconds of 3600 physical: 15 % busy; 20 % of what was held
    assert!(ts_row.contains(&cell("15.0 %")) && ts_row.contains(&cell("20.0 %")), "{ts_row}");

    // beside it, how the month's replicas were billed: the statement's settings and over-recovery
    let (_, bill) = api.call(Method::GET, "/api/v1/bills/2026-10", Some(&api.viewer), None).await;
    let over_recovery = bill["over_recovery"].as_str().unwrap_or_else(|| panic!("no over-recovery: {bill}"));
    assert_ne!(over_recovery, "0.00", "{bill}");
    let billing = &page[page.find(r#"id="oversub-billing""#).expect("the replica billing table")..];
    let billing = &billing[..billing.find("</table>").unwrap()];
    assert!(billing.contains(r#"<a href="/bills/2026-10">2026-10</a>"#), "{billing}");
    let setting = &bill["policy"]["replicas"][0];
    assert_eq!((setting["cluster"].as_str(), setting["policy"].as_str()), (Some("c2"), Some("whole_card")), "{bill}");
    let from = setting["from"].as_str().unwrap();
    assert!(billing.contains(&format!("c2: whole card from {from}")), "{billing}");
    assert!(billing.contains(&cell(&yuan(over_recovery))), "{billing} lacks {over_recovery}");

    // each report links the others
    for path in ["/reports/low-utilization", "/reports/fragmentation", "/reports/oversubscription"] {
        let (_, utilization) = get(&portal, &viewer, "/reports/utilization?month=2026-10").await;
        assert!(utilization.contains(&format!(r#"href="{path}""#)), "the report nav lacks {path}");
    }
}

#[sqlx::test]
async fn a_team_lead_sees_its_own_pods_and_no_cluster_wide_report(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool.clone()).await;
    let lead = signed_in(&portal, "lead").await;
    let range = format!("from={SEED_FROM}&to={SEED_TO}");

    let (status, top) =
        api.call(Method::GET, &format!("/api/v1/reports/low-utilization?{range}"), Some(&api.lead), None).await;
    assert_eq!(status, 200, "{top}");
    let pods = top.as_array().unwrap();
    assert_eq!(pods.len(), 1, "only vision's pod for its lead: {top}");
    let (status, page) = get(&portal, &lead, &format!("/reports/low-utilization?{range}&lang=en")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("vision-train/vision-idle-pod"), "{page}");
    assert!(page.contains(&cell(&yuan(pods[0]["wasted_amount"].as_str().unwrap()))), "{page}");
    assert!(!page.contains("nlp-idle-pod") && !page.contains("nlp-prod"), "another team's pod for a lead");
    // its report nav offers only what it may open
    assert!(!page.contains(r#"href="/reports/fragmentation""#) && !page.contains(r#"href="/reports/utilization"#));

    // the cluster-wide reports: the API refuses them, the pages are the one not-found page
    let (_, missing) = get(&portal, &lead, "/teams/no-such-team").await;
    for (api_path, page_path) in [
        ("/api/v1/reports/fragmentation", "/reports/fragmentation"),
        ("/api/v1/reports/oversubscription", "/reports/oversubscription"),
        ("/api/v1/reports/oversubscription?from=2026-10-05", "/reports/oversubscription?from=nonsense"),
        ("/api/v1/reports/fragmentation?hour=2026-10-05T06:00:00Z", "/reports/fragmentation?hour=2026-10-05T06:00:00Z"),
    ] {
        let (status, _) = api.call(Method::GET, api_path, Some(&api.lead), None).await;
        assert_eq!(status, 403, "{api_path} for a lead");
        let (status, body) = get(&portal, &lead, page_path).await;
        assert_eq!((status, body == missing), (404, true), "{page_path} for a team lead");
    }
}

#[sqlx::test]
async fn bad_input_comes_back_with_its_message(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool.clone()).await;
    let viewer = signed_in(&portal, "viewer").await;
    for (path, field, text) in [
        ("/reports/low-utilization?top=abc", "top", "is not a whole number"),
        ("/reports/low-utilization?top=0", "top", "between"),
        ("/reports/low-utilization?from=2026-13-01", "from", "is not a time"),
        ("/reports/low-utilization?from=2026-01-01&to=2026-06-01", "to", "92 days"),
        ("/reports/low-utilization?from=x%00y", "from", "is not a time"),
        ("/reports/fragmentation?hour=2026-10-05T06:30:00Z", "hour", "whole hour"),
        ("/reports/oversubscription?from=2026-10-06&to=2026-10-05", "from", "before"),
        ("/reports/oversubscription?cluster=%2Fbad", "cluster", ""),
    ] {
        let (status, page) = get(&portal, &viewer, &format!("{path}&lang=en")).await;
        assert_eq!(status, 422, "{path}: {page}");
        let form = &page[page.find("<form method=\"get\"").unwrap()..];
        let label = &form[form.find(&format!("name=\"{field}\"")).unwrap()..];
        let label = &label[..label.find("</label>").unwrap()];
        assert!(label.contains("field-error") && label.contains(text), "{path}: {field}'s message: {label}");
        assert!(!page.contains("<tbody>"), "{path}: a refused form shows no figures");
    }
}

#[sqlx::test]
async fn the_heatmap_has_a_legend_and_the_language_switch_keeps_the_query(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool.clone()).await;
    let viewer = signed_in(&portal, "viewer").await;

    let (status, page) = get(&portal, &viewer, "/reports/utilization?month=2026-10").await;
    assert_eq!(status, 200, "{page}");
    let svg = &page[page.find("<svg").unwrap()..page.find("</svg>").unwrap()];
    for pct in ["0 %", "50 %", "100 %"] {
        assert!(svg.contains(&format!("\n{pct}\n</text>")), "the legend lacks {pct}");
    }
    // zh by default: the switch offers English on this very month
    assert!(page.contains(r#"<a class="lang" href="?lang=en&#38;month=2026-10">English</a>"#), "{page}");

    let (_, en) = get(&portal, &viewer, "/reports/utilization?lang=en&month=2026-10").await;
    assert!(en.contains(r#"<a class="lang" href="?lang=zh-CN&#38;month=2026-10">中文</a>"#), "{en}");
    assert!(en.contains("Utilization") && en.contains("<html lang=\"en\">"));
    let (_, low) = get(&portal, &viewer, &format!("/reports/low-utilization?from={SEED_FROM}&top=3")).await;
    let from = SEED_FROM.replace(':', "%3A");
    // English since the last switch (the cookie): the link offers Chinese, on the same question
    assert!(low.contains(&format!(r#"href="?lang=zh-CN&#38;from={from}&#38;top=3""#)), "{low}");
    // the link's target is the same page in the other language
    let (status, switched) =
        get(&portal, &viewer, &format!("/reports/low-utilization?from={from}&top=3&lang=en")).await;
    assert_eq!(status, 200);
    assert!(switched.contains("Low-utilization top N") && switched.contains(r#"value="3""#), "{switched}");
}
