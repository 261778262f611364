//! `/reports/unit-cost`: what a million tokens and a thousand requests cost (SPEC §9), per team, namespace, model,
//! engine, day or month over a range of billing days — the API's `GET /reports/unit-cost`, from the same use case
//! ([`unit_cost::report`]), with every figure, the total, the idle serving cost apart, and a daily trend of ¥ per
//! million tokens per model. Finance and the platform team see every team; a team lead its own teams (the use case
//! narrows to the caller's scope). The CSV and the workbook of the same report are linked at
//! `/reports/unit-cost.csv` and `/reports/unit-cost.xlsx` with the same query and the page's language.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{NaiveDate, Utc};
use rust_decimal::prelude::ToPrimitive;
use serde::Deserialize;

use super::{ReportLink, given, report_nav};
use crate::billing::unit_cost::{PodHour, UnitCostRow, UnitGroup, unit_costs};
use crate::usecase::state::AppState;
use crate::usecase::unit_cost;
use crate::validate::FieldError;
use crate::web::extract::PageUser;
use crate::web::field_errors::{self, Problem};
use crate::web::fmt::{card_hours, count, per_gpu_hour, unit_yuan, yuan};
use crate::web::i18n::{Lang, PageLang, heading, t};
use crate::web::layout::{Chrome, PageError};

/// The form as sent: every field text, so a bad one comes back with its message.
#[derive(Debug, Default, Deserialize)]
pub struct UnitCostForm {
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
    #[serde(default)]
    pub group_by: String,
}

/// One group's figures as the page prints them.
pub struct Row {
    /// The group's value as stored (a team id, a model…): the row's `data-key`.
    pub key: String,
    /// The group's value as read (the `unassigned` team in words, the total row's word).
    pub label: String,
    pub engine: String,
    pub serving_cost: String,
    pub input_tokens: String,
    pub output_tokens: String,
    pub total_tokens: String,
    pub requests: String,
    pub per_million_input: String,
    pub per_million_output: String,
    pub per_million: String,
    pub per_thousand_requests: String,
    pub tokens_per_gpu_hour: String,
    pub idle_cost: String,
    pub idle_gpu_hours: String,
    pub unpriced: bool,
}

/// `r` as printed in `lang`; `label` what its first cell reads. The engine by its name, as every face prints it
/// (`vLLM`, never the code `vllm`).
pub fn row(r: &UnitCostRow, label: String, lang: Lang) -> Row {
    Row {
        key: r.key.clone(),
        label,
        engine: r.engine.as_deref().map(|e| crate::export::present::engine(lang, e)).unwrap_or_default(),
        serving_cost: yuan(r.serving_cost),
        input_tokens: count(r.input_tokens),
        output_tokens: count(r.output_tokens),
        total_tokens: count(r.total_tokens),
        requests: count(r.requests),
        per_million_input: unit_yuan(r.cost_per_million_input_tokens),
        per_million_output: unit_yuan(r.cost_per_million_output_tokens),
        per_million: unit_yuan(r.cost_per_million_tokens),
        per_thousand_requests: unit_yuan(r.cost_per_thousand_requests),
        tokens_per_gpu_hour: per_gpu_hour(r.tokens_per_gpu_hour),
        idle_cost: yuan(r.idle_cost),
        idle_gpu_hours: card_hours(r.idle_gpu_hours),
        unpriced: r.unpriced,
    }
}

/// A group's value as a reader reads it: the `unassigned` team in words, any other as stored.
fn label(lang: Lang, group: UnitGroup, key: &str) -> String {
    match group {
        UnitGroup::Team => crate::glossary::team_name(lang, key, key),
        UnitGroup::Engine => crate::export::present::engine(lang, key),
        _ => key.to_string(),
    }
}

/// The glossary's word for what a report groups by.
pub fn group_key(group: UnitGroup) -> &'static str {
    match group {
        UnitGroup::Team => "term.team",
        UnitGroup::Namespace => "term.namespace",
        UnitGroup::Model => "term.model",
        UnitGroup::Engine => "term.engine",
        UnitGroup::Day => "term.day",
        UnitGroup::Month => "term.month",
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "report_unit_cost.html")]
pub struct UnitCostPage {
    pub c: Chrome,
    pub links: Vec<ReportLink>,
    pub q: UnitCostForm,
    /// Each refused field's message in the page's language.
    pub errors: Vec<(&'static str, String)>,
    /// The groupings to choose from: (value, words), and the one shown.
    pub groups: Vec<(&'static str, String)>,
    pub group: &'static str,
    /// The column the groups are named in (团队, 模型…).
    pub group_word: String,
    /// Grouped by model: an engine column beside it.
    pub by_model: bool,
    /// The billing days shown, first and last (empty when the form was refused).
    pub range: String,
    /// The query of the downloads of this very report (`from=…&to=…&group_by=…&lang=…`).
    pub download_query: String,
    pub rows: Vec<Row>,
    pub total: Option<Row>,
    /// The daily trend of ¥ per million tokens per model (empty: no model served tokens).
    pub trend_svg: String,
}

impl UnitCostPage {
    /// The message beside `field`, empty when it has none.
    pub fn error(&self, field: &str) -> &str {
        self.errors.iter().find(|(f, _)| *f == field).map_or("", |(_, m)| m.as_str())
    }

    /// Whether some shown group has a GPU model without a rate.
    pub fn any_unpriced(&self) -> bool {
        self.rows.iter().any(|r| r.unpriced)
    }
}

/// A date field of the form: empty is "not given" (the use case's default), else exactly `YYYY-MM-DD`.
fn optional_date(errors: &mut field_errors::FieldErrors, field: &str, s: &str) -> Option<Option<NaiveDate>> {
    match given(s) {
        None if !s.contains(|c: char| c.is_control()) => Some(None),
        _ => field_errors::date(errors, field, s).map(Some),
    }
}

/// The grouping field: empty is by model (the API's default).
fn group_field(errors: &mut field_errors::FieldErrors, s: &str) -> Option<UnitGroup> {
    match given(s) {
        None => Some(UnitGroup::default()),
        Some(v) => UnitGroup::parse(v).or_else(|| {
            let message = format!("`{}`: use team, namespace, model, engine, day or month", v.escape_debug());
            errors.add("group_by", Problem::OutOfRange, message);
            None
        }),
    }
}

/// The report's days read from the form, or every refused field.
fn read_form(
    q: &UnitCostForm,
    tz: chrono_tz::Tz,
    now: chrono::DateTime<Utc>,
) -> Result<(NaiveDate, NaiveDate, UnitGroup), field_errors::FieldErrors> {
    let mut errors = field_errors::FieldErrors::default();
    let from = optional_date(&mut errors, "from", &q.from);
    let to = optional_date(&mut errors, "to", &q.to);
    let group = group_field(&mut errors, &q.group_by);
    let (Some(from), Some(to), Some(group)) = (from, to, group) else { return Err(errors) };
    match unit_cost::range(from, to, tz, now) {
        Ok((from, to)) => Ok((from, to, group)),
        Err(FieldError { field, message, problem }) => {
            errors.add(&field, problem, message);
            Err(errors)
        }
    }
}

/// A serving model as its line is named: the model, with its engine only where one model runs on several — by the
/// engine's name (`vLLM`: the glossary names an engine alike in every language), as the table beside it does.
fn line_names(keys: &[(String, String)]) -> Vec<String> {
    keys.iter()
        .map(|(model, engine)| {
            if keys.iter().filter(|(m, _)| m == model).count() > 1 {
                format!("{model} ({})", crate::export::present::engine(Lang::En, engine))
            } else {
                model.clone()
            }
        })
        .collect()
}

/// A line of the trend: its name and a value per day (`None`: no tokens that day).
pub type Series = (String, Vec<Option<f64>>);

/// ¥ per million tokens per model and billing day of `[from, to)`: each day's pod-hours grouped by model, by the
/// same rule as the report ([`unit_costs`]: a ratio of sums, a pod-hour split over its models by tokens, idle hours
/// apart). Days as `MM-DD`; a series per model that served tokens on some day.
pub fn daily_by_model(hours: &[PodHour], from: NaiveDate, to: NaiveDate) -> (Vec<String>, Vec<Series>) {
    let days: Vec<NaiveDate> = from.iter_days().take_while(|d| *d < to).collect();
    let mut by_day: std::collections::BTreeMap<&str, Vec<PodHour>> = std::collections::BTreeMap::new();
    for h in hours {
        by_day.entry(h.day.as_str()).or_default().push(h.clone());
    }
    let mut series: std::collections::BTreeMap<(String, String), Vec<Option<f64>>> = std::collections::BTreeMap::new();
    for (i, day) in days.iter().enumerate() {
        let Some(day_hours) = by_day.get(day.to_string().as_str()) else { continue };
        let (rows, _) = unit_costs(day_hours, UnitGroup::Model);
        for r in rows {
            let Some(v) = r.cost_per_million_tokens.and_then(|d| d.to_f64()) else { continue };
            let key = (r.key.clone(), r.engine.clone().unwrap_or_default());
            series.entry(key).or_insert_with(|| vec![None; days.len()])[i] = Some(v);
        }
    }
    let keys: Vec<(String, String)> = series.keys().cloned().collect();
    let names = line_names(&keys);
    (
        days.iter().map(|d| d.format("%m-%d").to_string()).collect(),
        names.into_iter().zip(series.into_values()).collect(),
    )
}

/// The query of this report's downloads: its days, its grouping and the page's language.
fn download_query(from: NaiveDate, to: NaiveDate, group: UnitGroup, lang: Lang) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("from", &from.to_string())
        .append_pair("to", &to.to_string())
        .append_pair("group_by", group.as_str())
        .append_pair("lang", lang.code())
        .finish()
}

pub async fn unit_cost_page(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<UnitCostForm>,
) -> Result<Response, PageError> {
    let c = Chrome::new(&user, lang, "/reports/utilization", t(lang, "report.unit_cost"));
    let links = report_nav(lang, &user, "/reports/unit-cost", None);
    let groups = UnitGroup::ALL.iter().map(|g| (g.as_str(), heading(lang, group_key(*g)))).collect();
    let read = read_form(&q, s.billing_tz, Utc::now());
    let shown = read.as_ref().map_or_else(|_| UnitGroup::parse(q.group_by.trim()).unwrap_or_default(), |r| r.2);
    let mut page = UnitCostPage {
        c,
        links,
        q,
        errors: Vec::new(),
        groups,
        group: shown.as_str(),
        group_word: heading(lang, group_key(shown)),
        by_model: shown == UnitGroup::Model,
        range: String::new(),
        download_query: String::new(),
        rows: Vec::new(),
        total: None,
        trend_svg: String::new(),
    };
    let (from, to, group) = match read {
        Ok(r) => r,
        Err(errors) => {
            page.errors = ["from", "to", "group_by"]
                .into_iter()
                .filter_map(|f| errors.message(lang, f).map(|m| (f, m)))
                .collect();
            return Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response());
        }
    };
    let scope = user.principal.scope();
    let report = unit_cost::report(&s.cases, &scope, from, to, group).await?;
    let hours = unit_cost::pod_hours(&s.cases, &scope, from, to).await?;
    let (days, series) = daily_by_model(&hours, from, to);
    let last = to.pred_opt().unwrap_or(to);
    page.range = format!("{from} – {last}");
    page.download_query = download_query(from, to, group, lang);
    page.rows = report.rows.iter().map(|r| row(r, label(lang, group, &r.key), lang)).collect();
    if !report.rows.is_empty() {
        page.total = Some(row(&report.total, t(lang, "total").to_string(), lang));
    }
    if !series.is_empty() {
        page.trend_svg = crate::web::chart::lines(&days, &series, 860, 280);
    }
    Ok(page.into_response())
}

/// The report as the API's files (`/reports/unit-cost.csv`, `.xlsx`): the same query as the page, words in the
/// page's language; a refused field shows the page with its message instead.
async fn unit_cost_file(
    s: AppState,
    user: PageUser,
    lang: Lang,
    q: UnitCostForm,
    format: crate::usecase::report_exports::Format,
) -> Result<Response, PageError> {
    let Ok((from, to, group)) = read_form(&q, s.billing_tz, Utc::now()) else {
        return unit_cost_page(State(s), user, PageLang(lang), Query(q)).await;
    };
    let scope = user.principal.scope();
    let words = Some(lang);
    let f = crate::usecase::report_exports::unit_cost_file(&s.cases, &scope, (from, to), group, format, words).await?;
    Ok(super::file_response(f))
}

/// `GET /reports/unit-cost.csv`.
pub async fn unit_cost_csv(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<UnitCostForm>,
) -> Result<Response, PageError> {
    unit_cost_file(s, user, lang, q, crate::usecase::report_exports::Format::Csv).await
}

/// `GET /reports/unit-cost.xlsx`.
pub async fn unit_cost_xlsx(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<UnitCostForm>,
) -> Result<Response, PageError> {
    unit_cost_file(s, user, lang, q, crate::usecase::report_exports::Format::Xlsx).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Role;
    use crate::billing::unit_cost::ModelHour;
    use crate::web::layout::tests::user;
    use rust_decimal::Decimal;
    use rust_decimal_macros::dec;

    fn hour(day: &str, cost: Decimal, models: Vec<(&str, &str, i64, i64, i64)>) -> PodHour {
        PodHour {
            team: "vision".into(),
            namespace: "serve".into(),
            pod: "p".into(),
            day: day.into(),
            month: day[..7].into(),
            cost,
            unpriced: false,
            gpu_hours: dec!(1),
            models: models
                .into_iter()
                .map(|(m, e, i, o, r)| ModelHour {
                    model: m.into(),
                    engine: e.into(),
                    input_tokens: Some(i),
                    output_tokens: Some(o),
                    requests: r,
                })
                .collect(),
        }
    }

    #[test]
    fn the_daily_trend_is_a_ratio_of_sums_per_model_and_day() {
        let from: NaiveDate = "2026-10-01".parse().unwrap();
        let to: NaiveDate = "2026-10-04".parse().unwrap();
        let hours = vec![
            // day 1: ¥10 for 1M and ¥30 for 1M tokens of m1: ¥20 per 1M (not the mean of 10 and 30 per hour… here
            // equal; the split below is where an average of ratios would differ)
            hour("2026-10-01", dec!(10), vec![("m1", "vllm", 600_000, 400_000, 10)]),
            hour("2026-10-01", dec!(30), vec![("m1", "vllm", 1_500_000, 1_500_000, 10)]),
            // day 2: one pod-hour of ¥12 split 1:2 between m1 and m2 by tokens
            hour("2026-10-02", dec!(12), vec![("m1", "vllm", 100_000, 0, 1), ("m2", "vllm", 200_000, 0, 1)]),
            // day 3: idle — no point that day
            hour("2026-10-03", dec!(7), vec![("m1", "vllm", 0, 0, 0)]),
        ];
        let (days, series) = daily_by_model(&hours, from, to);
        assert_eq!(days, ["10-01", "10-02", "10-03"]);
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].0, "m1");
        // (10 + 30) / 4M × 1M = 10; ¥4 / 100,000 × 1M = 40; none on the idle day
        assert_eq!(series[0].1, [Some(10.0), Some(40.0), None]);
        assert_eq!(series[1], ("m2".to_string(), vec![None, Some(40.0), None]));
    }

    #[test]
    fn one_model_on_two_engines_is_named_with_each() {
        let keys = [("m".to_string(), "vllm".to_string()), ("m".into(), "sglang".into()), ("x".into(), "tgi".into())];
        assert_eq!(line_names(&keys), ["m (vLLM)", "m (SGLang)", "x"]);
    }

    #[test]
    fn the_form_reads_as_the_api_reads_its_query() {
        let tz = chrono_tz::Asia::Shanghai;
        let now = "2026-11-15T02:00:00Z".parse().unwrap();
        let form =
            |from: &str, to: &str, g: &str| UnitCostForm { from: from.into(), to: to.into(), group_by: g.into() };
        // defaults: the month so far, by model
        let (from, to, g) = read_form(&form("", "", ""), tz, now).unwrap();
        assert_eq!((from.to_string(), to.to_string(), g), ("2026-11-01".into(), "2026-11-16".into(), UnitGroup::Model));
        let (_, _, g) = read_form(&form("2026-10-01", "2026-11-01", "day"), tz, now).unwrap();
        assert_eq!(g, UnitGroup::Day);
        // each bad field named, in the page's language
        let errors = read_form(&form("2026-13-01", "x", "colour"), tz, now).unwrap_err();
        assert!(errors.message(Lang::En, "from").unwrap().contains("is not a date"));
        assert!(errors.message(Lang::En, "to").is_some());
        assert_eq!(errors.message(Lang::Zh, "group_by").unwrap(), "超出允许范围：`colour` 不是可选的分组方式");
        let errors = read_form(&form("2026-11-02", "2026-11-01", ""), tz, now).unwrap_err();
        assert_eq!(errors.message(Lang::Zh, "from").unwrap(), "超出允许范围：必须早于截止日期");
        let errors = read_form(&form("2025-01-01", "2026-11-01", ""), tz, now).unwrap_err();
        assert_eq!(errors.message(Lang::Zh, "to").unwrap(), "超出允许范围：最多比起始日期晚 366 天");
    }

    fn page(lang: Lang, role: Role) -> UnitCostPage {
        let u = user(role, &["vision"]);
        let r = UnitCostRow {
            key: "qwen2-7b".into(),
            engine: Some("vllm".into()),
            serving_cost: crate::money::Money::round_fen(dec!(1234.5)),
            input_tokens: 1_000_000,
            output_tokens: 234_567,
            total_tokens: 1_234_567,
            requests: 4_321,
            cost_per_million_input_tokens: Some(dec!(1234.5)),
            cost_per_million_output_tokens: Some(dec!(5262.8716)),
            cost_per_million_tokens: Some(dec!(999.9457)),
            cost_per_thousand_requests: Some(dec!(285.6978)),
            tokens_per_gpu_hour: Some(dec!(12345.67)),
            idle_cost: crate::money::Money::round_fen(dec!(25)),
            idle_gpu_hours: dec!(2),
            unpriced: false,
        };
        let mut none = r.clone();
        none.key = "triton-model".into();
        none.cost_per_million_tokens = None;
        UnitCostPage {
            c: Chrome::new(&u, lang, "/reports/utilization", t(lang, "report.unit_cost")),
            links: report_nav(lang, &u, "/reports/unit-cost", None),
            q: UnitCostForm::default(),
            errors: vec![],
            groups: UnitGroup::ALL.iter().map(|g| (g.as_str(), heading(lang, group_key(*g)))).collect(),
            group: "model",
            group_word: heading(lang, "term.model"),
            by_model: true,
            range: "2026-10-01 – 2026-10-31".into(),
            download_query: download_query(
                "2026-10-01".parse().unwrap(),
                "2026-11-01".parse().unwrap(),
                UnitGroup::Model,
                lang,
            ),
            rows: vec![row(&r, r.key.clone(), lang), row(&none, none.key.clone(), lang)],
            total: Some(row(&r, t(lang, "total").into(), lang)),
            trend_svg: "<svg></svg>".into(),
        }
    }

    #[test]
    fn the_page_prints_every_figure_in_its_language() {
        let html = page(Lang::Zh, Role::Finance).render().unwrap();
        for shown in [
            "¥1,234.50",
            "1,234,567",
            "4,321",
            "¥999.9457",
            "¥285.6978",
            "12,345.67",
            "¥25.00",
            "2.000",
            "每百万词元成本（元）",
            "每千次请求成本（元）",
            "空闲推理成本",
            "输入词元",
            "输出词元",
            "推理引擎",
            "模型",
        ] {
            assert!(html.contains(shown), "{shown} not in {html}");
        }
        // a ratio without a divisor
        let none = &html[html.find(r#"data-key="triton-model""#).unwrap()..];
        assert!(none[..none.find("</tr>").unwrap()].contains(r#"<td class="num">—</td>"#), "{none}");
        // the downloads of this very report, in the page's language
        for file in ["unit-cost.csv", "unit-cost.xlsx"] {
            let href =
                format!(r#"href="/reports/{file}?from=2026-10-01&#38;to=2026-11-01&#38;group_by=model&#38;lang=zh""#);
            assert!(html.contains(&href), "{href} not in {html}");
        }
        // no key printed as itself, no English word but data (model, engine) and the allowed ones
        // the text a reader sees: the style sheet of the table left out
        let seen = match (html.find("<style>"), html.find("</style>")) {
            (Some(a), Some(b)) => format!("{}{}", &html[..a], &html[b..]),
            _ => html.clone(),
        };
        let text = seen.split('<').filter_map(|p| p.split_once('>').map(|(_, t)| t)).collect::<Vec<_>>().join(" ");
        assert!(!text.contains("term.") && !text.contains("unit_cost."), "{text}");
        let words = crate::glossary::english_words(
            &text,
            &["qwen2-7b", "vllm", "triton-model", "cardhour", "alice", "English", "YYYY-MM-DD"],
        );
        assert!(words.is_empty(), "English on a zh page: {words:?}");
        let en = page(Lang::En, Role::Finance).render().unwrap();
        for shown in ["Cost per million tokens (CNY)", "Idle serving cost", "Input tokens", "Serving engine", "Model"] {
            assert!(en.contains(shown), "{shown} not in {en}");
        }
        assert!(en.contains("lang=en"), "{en}");
    }

    #[test]
    fn a_team_lead_finds_the_page_in_the_reports_nav() {
        let lead = page(Lang::Zh, Role::TeamLead);
        let hrefs: Vec<&str> = lead.links.iter().map(|l| l.href.as_str()).collect();
        assert_eq!(hrefs, ["/reports/low-utilization", "/reports/unit-cost", "/reports/quotas"]);
        assert!(lead.links[1].active);
        let html = lead.render().unwrap();
        assert!(html.contains(r#"href="/reports/unit-cost" class="active""#), "{html}");
    }
}
