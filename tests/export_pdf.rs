//! The PDF statement: rendered from a hand-made statement (no database), read back with `pdftotext` (Debian
//! package `poppler-utils`), set in Noto Sans CJK (Debian package `fonts-noto-cjk`). Neither is optional: without
//! them these tests fail, saying what to install.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

use cardhour::billing::{
    BillMode, BillPolicy, CapacityLine, Month, RestatementLine, UnallocatedPolicy, UsageLine, compute_month,
};
use cardhour::export::{FontChain, Lang, Layout, StatementExtras, statement_pdf};
use cardhour::ledger::{MonthStatus, Statement, TeamInfo};
use cardhour::money::{Money, RatePerCardHour};
use rust_decimal::Decimal;
use rust_decimal_macros::dec;

fn font() -> std::sync::Arc<FontChain> {
    FontChain::installed().unwrap_or_else(|e| {
        panic!("{e} (e.g. /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc: apt-get install -y fonts-noto-cjk)")
    })
}

fn pdftotext(pdf: &[u8]) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("statement.pdf");
    std::fs::write(&path, pdf).expect("write the PDF");
    let out = Command::new("pdftotext").arg("-layout").arg(&path).arg("-").output().unwrap_or_else(|e| {
        panic!(
            "cannot run pdftotext ({e}): install the Debian package poppler-utils (apt-get install -y poppler-utils)"
        )
    });
    assert!(out.status.success(), "pdftotext failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("pdftotext writes UTF-8")
}

fn rate(d: Decimal) -> Option<RatePerCardHour> {
    RatePerCardHour::new(d)
}

fn usage(team: &str, ns: &str, model: &str, kind: &str, hours: Decimal, r: Option<RatePerCardHour>) -> UsageLine {
    UsageLine {
        team: team.into(),
        namespace: ns.into(),
        gpu_model: model.into(),
        kind: kind.into(),
        card_hours: hours,
        effective_card_hours: (hours * dec!(0.613)).round_dp(6),
        unmetered_card_hours: Decimal::ZERO,
        rate: r,
        whole_card_hours: None,
        unverified_node: false,
        finance: None,
    }
}

fn statement(usage: Vec<UsageLine>, capacity: Vec<CapacityLine>, teams: &[(&str, &str, Option<&str>)]) -> Statement {
    let policy = BillPolicy { mode: BillMode::Chargeback, unallocated: UnallocatedPolicy::SpreadProportionally };
    let bills = compute_month(&usage, &capacity, policy);
    Statement {
        month: Month::new(2026, 10).unwrap(),
        status: MonthStatus::Open,
        closed_at: None,
        closed_by: None,
        bills,
        restatements: Vec::new(),
        teams: teams
            .iter()
            .map(|(id, name, owner)| {
                (id.to_string(), TeamInfo { name: name.to_string(), owner: owner.map(str::to_string) })
            })
            .collect::<BTreeMap<_, _>>(),
        content_hash: None,
        close_override: None,
        // this file checks the renderer of layouts 1 and 2 (tests/statement_layout3.rs: layout 3's)
        layout: Layout::V2,
        frozen: None,
        unit_cost: None,
        adjustments: Vec::new(),
        pending_adjustments: Vec::new(),
        finance_codes: Vec::new(),
    }
}

/// What finance's PDF shows besides the bills: the summary page.
fn finance() -> StatementExtras {
    StatementExtras { finance_summary: true, ..StatementExtras::default() }
}

fn three_teams() -> Statement {
    let h100 = rate(dec!(12.3457));
    let a100 = rate(dec!(8.5));
    let usage = vec![
        usage("rec", "rec-train", "H100", "whole", dec!(96), h100),
        usage("rec", "rec-infer", "A100", "mig", dec!(14.285714), a100),
        usage("rec", "rec-infer", "A100", "mig", dec!(3.5), rate(dec!(9.25))),
        usage("vision", "vision-train", "H100", "whole", dec!(1234.5), h100),
        usage("vision", "vision-dev", "L40S", "timeslice", dec!(7.25), None),
        usage("nlp", "nlp-llm", "H100", "whole", dec!(2880), h100),
        usage("nlp", "nlp-eval", "A100", "hami", dec!(41.333333), a100),
    ];
    // one H100 node cordoned for 12 h: 96 of its card-hours not offered
    let capacity = vec![
        CapacityLine { gpu_model: "H100".into(), card_hours: dec!(5760), offered_card_hours: dec!(5664), rate: h100 },
        CapacityLine::fully_offered("A100", dec!(720), a100),
    ];
    let mut st = statement(
        usage,
        capacity,
        &[("rec", "推荐算法组", Some("张三")), ("vision", "Vision Lab", Some("alice")), ("nlp", "NLP 平台", None)],
    );
    st.restatements.push(RestatementLine {
        team: "vision".into(),
        namespace: "vision-train".into(),
        gpu_model: "H100".into(),
        kind: "whole".into(),
        rate: h100,
        card_hours_delta: dec!(-10.5),
        effective_card_hours_delta: dec!(-6.2),
        unmetered_card_hours_delta: Decimal::ZERO,
        amount_delta: Money::round_fen(dec!(-10.5) * dec!(12.3457)),
        original_month: Some(Month::new(2026, 9).unwrap()),
    });
    st
}

#[test]
fn statement_pdf_has_every_team_line_and_total() {
    let st = three_teams();
    let font = font();
    let start = Instant::now();
    let pdf = statement_pdf(&st, |_| true, &font, &finance(), Lang::En).expect("render");
    println!("3-team statement rendered in {:.3} s", start.elapsed().as_secs_f64());
    let kb = pdf.len() / 1024;
    println!("3-team statement: {} bytes ({kb} KiB)", pdf.len());
    if let Ok(out) = std::env::var("CARDHOUR_PDF_OUT") {
        std::fs::write(out, &pdf).expect("write CARDHOUR_PDF_OUT");
    }
    assert!(pdf.starts_with(b"%PDF-"));
    assert!(pdf.len() < 500 * 1024, "the PDF is {kb} KiB; the font must be subset");

    let text = pdftotext(&pdf);
    let has = |s: &str| assert!(text.contains(s), "{s:?} is missing from the PDF text:\n{text}");
    for name in ["推荐算法组", "Vision Lab", "NLP 平台", "张三", "alice"] {
        has(name);
    }
    for bill in &st.bills.teams {
        for l in &bill.lines {
            has(&l.amount.to_string());
            has(&l.card_hours.to_string());
            has(&l.effective_card_hours.to_string());
            if let Some(r) = l.rate {
                has(&r.to_string());
            }
        }
        has(&bill.unallocated_share.to_string());
        has(&st.team_total(&bill.team).to_string());
    }
    for r in &st.restatements {
        has(&r.amount_delta.to_string());
        has(&r.card_hours_delta.to_string());
    }
    has(&st.bills.capacity_cost.to_string());
    has(&st.bills.allocated.to_string());
    has(&st.bills.unallocated.to_string());
    // 96 card-hours × 12.3457 = 1185.1872 → 1185.19, kept by the platform, on its own line
    assert_eq!(st.bills.not_offered.map(|m| m.to_string()), Some("1185.19".into()));
    let on_one_line = |label: &str, amount: &str| text.lines().any(|l| l.contains(label) && l.contains(amount));
    assert!(on_one_line("Not offered (kept by the platform)", "1185.19"), "{text}");
    assert!(on_one_line("Platform kept", &st.bills.platform_kept.to_string()), "{text}");
    has("2026-10");
    has("chargeback / spread_proportionally");
    has("unpriced");
    // The restated team's total differs from its bill.
    let vision = st.bills.teams.iter().find(|t| t.team == "vision").unwrap();
    assert_ne!(st.team_total("vision"), vision.total);
}

#[test]
fn a_month_closed_before_offered_capacity_prints_without_it() {
    // a snapshot closed before not-offered capacity was recorded reads with `None`: no line for it
    let mut st = three_teams();
    st.bills.not_offered = None;
    for c in &mut st.bills.capacity {
        (c.not_offered_card_hours, c.not_offered_amount) = (None, None);
    }
    let text = pdftotext(&statement_pdf(&st, |_| true, &font(), &finance(), Lang::En).expect("render"));
    assert!(text.contains("finance summary") && text.contains(&st.bills.capacity_cost.to_string()), "{text}");
    assert!(!text.contains("Not offered"), "{text}");
}

#[test]
fn include_filters_teams() {
    let st = three_teams();
    let pdf = statement_pdf(&st, |t| t == "rec", &font(), &Default::default(), Lang::En).expect("render");
    let text = pdftotext(&pdf);
    assert!(text.contains("推荐算法组"));
    assert!(!text.contains("Vision Lab"), "an excluded team is shown:\n{text}");
    assert!(!text.contains("vision-train"));
    // without the finance summary (the default): no cluster-wide figure, no other team's total
    for s in [
        "finance summary".to_string(),
        st.bills.capacity_cost.to_string(),
        st.bills.allocated.to_string(),
        st.bills.unallocated.to_string(),
        st.team_total("nlp").to_string(),
        "NLP".to_string(),
    ] {
        assert!(!text.contains(&s), "{s:?} in a one-team PDF:\n{text}");
    }
    assert!(text.contains(&st.team_total("rec").to_string()));
    // with it, the same team filter still keeps the other teams out of the summary's table and chart
    let text = pdftotext(&statement_pdf(&st, |t| t == "rec", &font(), &finance(), Lang::En).expect("render"));
    assert!(text.contains("finance summary") && text.contains(&st.bills.capacity_cost.to_string()));
    assert!(!text.contains("Vision Lab") && !text.contains("NLP"), "{text}");
}

#[test]
fn hundred_teams_render_quickly() {
    let h100 = rate(dec!(12.3457));
    let mut usage_lines = Vec::new();
    let mut teams = Vec::new();
    for i in 0..100 {
        let team = format!("team{i:03}");
        for (j, ns) in ["train", "infer", "dev"].iter().enumerate() {
            let hours = Decimal::from(i * 7 + j as i64 * 3 + 1) + dec!(0.25);
            usage_lines.push(usage(&team, &format!("{team}-{ns}"), "H100", "whole", hours, h100));
        }
        teams.push(team);
    }
    let names: Vec<(String, String)> = teams.iter().map(|t| (t.clone(), format!("{t} 算法组"))).collect();
    let info: Vec<(&str, &str, Option<&str>)> =
        names.iter().map(|(t, n)| (t.as_str(), n.as_str(), Some("owner"))).collect();
    let capacity = vec![CapacityLine::fully_offered("H100", dec!(200000), h100)];
    let st = statement(usage_lines, capacity, &info);
    let font = font();
    let start = Instant::now();
    let pdf = statement_pdf(&st, |_| true, &font, &finance(), Lang::En).expect("render");
    let took = start.elapsed();
    if let Ok(out) = std::env::var("CARDHOUR_PDF_OUT_100") {
        std::fs::write(out, &pdf).expect("write CARDHOUR_PDF_OUT_100");
    }
    println!(
        "100-team statement: {} bytes, rendered in {:.3} s ({} profile; target < 1 s in release)",
        pdf.len(),
        took.as_secs_f64(),
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
    // the target is < 1 s in release; a debug build on a shared 2-core machine gets 5× that (0.9 s measured)
    let limit = if cfg!(debug_assertions) { 5.0 } else { 1.0 };
    assert!(took.as_secs_f64() < limit, "100 teams took {:.3} s (limit {limit} s)", took.as_secs_f64());
    let text = pdftotext(&pdf);
    for t in &teams {
        assert!(text.contains(&format!("{t} 算法组")), "{t} is missing");
        assert!(text.contains(&st.team_total(t).to_string()), "{t}'s total {} is missing", st.team_total(t));
    }
    // the summary's table and one statement per team
    assert!(text.matches("GPU cost statement 2026-10").count() >= 101);
}

#[test]
fn a_character_no_font_has_never_fails_the_export() {
    let mut st = three_teams();
    // an emoji: Noto Sans CJK has none; the fallback chain (Symbola) or the replacement glyph draws it
    st.teams.get_mut("rec").unwrap().name = "推荐 🚀".into();
    let pdf = statement_pdf(&st, |_| true, &font(), &Default::default(), Lang::En).expect("an emoji renders");
    if let Ok(out) = std::env::var("CARDHOUR_PDF_OUT_EMOJI") {
        std::fs::write(out, &pdf).expect("write CARDHOUR_PDF_OUT_EMOJI");
    }
    let text = pdftotext(&pdf);
    assert!(text.contains("推荐"), "{text}");
    assert!(text.contains(&st.team_total("rec").to_string()), "the team's statement is there: {text}");
    // a character no installed font has (private use) prints as the visible replacement, U+FFFD
    st.teams.get_mut("rec").unwrap().name = "推荐\u{10FFFD}组".into();
    let text = pdftotext(&statement_pdf(&st, |_| true, &font(), &Default::default(), Lang::En).expect("render"));
    assert!(text.contains("推荐�组"), "{text}");
    // A tab in a name is printed as a space, not an error.
    st.teams.get_mut("rec").unwrap().name = "推荐\t算法组".into();
    let text = pdftotext(&statement_pdf(&st, |_| true, &font(), &Default::default(), Lang::En).expect("render"));
    assert!(text.contains("推荐 算法组"), "{text}");
}
