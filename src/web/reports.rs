//! The management reports: utilization per day with its team × day heatmap, efficiency tiers and the team ranking
//! for a month (`?month=YYYY-MM`, default the current), the low-utilization top N ([`waste_top`]), fragmentation
//! and oversubscription ([`capacity`]), the unit cost of inference ([`unit_cost`]). All but the top N and the unit
//! cost are cluster-wide (a team lead gets the not-found page, as from the API); those two show a team lead its own
//! teams'.

mod capacity;
mod quotas;
mod unit_cost;
mod waste_top;

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::routing::get;

use super::capability::PageGlobalReader;
use super::fmt::{card_hours_f64, percent, yuan};
use super::i18n::{Lang, PageLang, t};
use super::layout::{Chrome, MonthQuery, PageError};
use crate::usecase::state::AppState;
use crate::usecase::{reports, tiers};
use crate::web::extract::PageUser;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/reports/utilization", get(utilization))
        .route("/reports/tiers", get(tiers_page))
        // the ranking is the tiers page: teams by efficiency, each with its tier
        .route("/reports/ranking", get(tiers_page))
        .route("/reports/low-utilization", get(waste_top::low_utilization))
        .route("/reports/fragmentation", get(capacity::fragmentation))
        .route("/reports/oversubscription", get(capacity::oversubscription))
        .route("/reports/unit-cost", get(unit_cost::unit_cost_page))
        .route("/reports/unit-cost.csv", get(unit_cost::unit_cost_csv))
        .route("/reports/unit-cost.xlsx", get(unit_cost::unit_cost_xlsx))
        .route("/reports/quotas", get(quotas::quotas_page))
        .route("/reports/quotas.csv", get(quotas::quotas_csv))
        .route("/reports/queue.csv", get(quotas::queue_csv))
        .route("/reports/quotas.xlsx", get(quotas::quotas_xlsx))
        .route("/reports/capacity-plan", get(quotas::capacity_plan_page))
}

/// One link of the reports' own navigation.
pub struct ReportLink {
    pub href: String,
    pub label: &'static str,
    pub active: bool,
}

/// The reports a caller may open, linked from every report page (`templates/report_nav.html`): a team lead
/// only those of its teams (the top N and the unit cost).
fn report_nav(lang: Lang, user: &PageUser, active: &str, month: Option<&str>) -> Vec<ReportLink> {
    let month_q = month.map(|m| format!("?month={m}")).unwrap_or_default();
    let all: [(&str, &'static str, bool); 8] = [
        ("/reports/utilization", "utilization", true),
        ("/reports/tiers", "tiers.title", true),
        ("/reports/low-utilization", "low_util.title", false),
        ("/reports/fragmentation", "frag.title", false),
        ("/reports/oversubscription", "oversub.title", false),
        ("/reports/unit-cost", "report.unit_cost", false),
        ("/reports/quotas", "report.quotas", true),
        ("/reports/capacity-plan", "report.capacity_plan", true),
    ];
    /// The reports scoped to teams (a team lead's own); the others are cluster-wide.
    const SCOPED: [&str; 3] = ["/reports/low-utilization", "/reports/unit-cost", "/reports/quotas"];
    let global = user.principal.scope().is_global();
    all.iter()
        .filter(|(href, ..)| global || SCOPED.contains(href))
        .map(|(href, key, monthly)| ReportLink {
            href: if *monthly { format!("{href}{month_q}") } else { (*href).to_string() },
            label: t(lang, key),
            active: *href == active,
        })
        .collect()
}

/// A report file (CSV, workbook) as a download: its type, its name, never cached by a proxy.
fn file_response(f: crate::usecase::report_exports::ReportFile) -> axum::response::Response {
    use axum::http::{HeaderMap, HeaderValue, header};
    use axum::response::IntoResponse;
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(f.format.content_type()));
    if let Ok(v) = HeaderValue::from_str(&crate::usecase::exports::content_disposition(&f.name)) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    (headers, f.bytes).into_response()
}

/// A query field as typed: empty is "not given".
fn given(s: &str) -> Option<&str> {
    Some(s.trim()).filter(|s| !s.is_empty())
}

/// A time field of a report's form (`from`, `to`, `hour`): empty is not given; otherwise the API's formats.
fn time_field(field: &str, s: &str) -> Result<Option<crate::validate::TimeInput>, crate::validate::Invalid> {
    given(s).map(|v| crate::validate::TimeInput::parse(field, v)).transpose()
}

/// A report form's messages, field by field (what the page prints beside each field; 422 when any).
#[derive(Debug, Default)]
pub struct FieldErrors(Vec<crate::validate::FieldError>);

impl FieldErrors {
    fn push(&mut self, e: crate::validate::FieldError) {
        self.0.push(e);
    }

    /// Keeps `r`'s value, or its message.
    fn take<T>(&mut self, r: Result<T, crate::validate::Invalid>) -> Option<T> {
        r.map_err(|e| self.push(e)).ok()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The message of `field`, empty when it has none.
    pub fn of(&self, field: &str) -> &str {
        self.0.iter().find(|e| e.field == field).map_or("", |e| e.message.as_str())
    }
}

pub struct DayRow {
    pub day: String,
    pub gpu_hours: String,
    pub allocation_rate: String,
    pub utilization: String,
    pub effective_rate: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "report_utilization.html")]
pub struct UtilizationPage {
    pub c: Chrome,
    pub links: Vec<ReportLink>,
    pub month: String,
    pub totals: DayRow,
    pub days: Vec<DayRow>,
    pub heatmap_svg: String,
}

fn day_row(day: String, f: &crate::waste::Figures) -> DayRow {
    DayRow {
        day,
        gpu_hours: card_hours_f64(f.gpu_hours),
        allocation_rate: percent(f.allocation_rate),
        utilization: percent(f.utilization),
        effective_rate: percent(f.effective_rate),
    }
}

async fn utilization(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<MonthQuery>,
) -> Result<UtilizationPage, PageError> {
    let month = q.month(&s)?;
    let scope = user.principal.scope();
    let report = reports::month_utilization(&s.cases, &scope, month).await?;
    let map = tiers::heatmap(&s.cases, &scope, month).await?;
    let cols: Vec<String> = map.days.iter().map(|d| d.format("%d").to_string()).collect();
    let rows: Vec<String> = map.teams.iter().map(|(t, _)| t.clone()).collect();
    let cells: Vec<Vec<Option<f64>>> = map.teams.iter().map(|(_, v)| v.clone()).collect();
    Ok(UtilizationPage {
        c: Chrome::new(&user, lang, "/reports/utilization", format!("{} {month}", t(lang, "utilization"))),
        links: report_nav(lang, &user, "/reports/utilization", Some(&month.to_string())),
        month: month.to_string(),
        totals: day_row(t(lang, "total").into(), &report.totals),
        days: report.days.iter().map(|d| day_row(d.day.to_string(), &d.figures)).collect(),
        heatmap_svg: super::chart::heatmap(&rows, &cols, &cells),
    })
}

pub struct TierRow {
    pub rank: usize,
    pub team: String,
    pub gpu_hours: String,
    pub effective_gpu_hours: String,
    pub utilization: String,
    pub cost: String,
    pub tier: &'static str,
    pub tier_word: &'static str,
}

#[derive(Template, WebTemplate)]
#[template(path = "report_tiers.html")]
pub struct TiersPage {
    pub c: Chrome,
    pub links: Vec<ReportLink>,
    pub month: String,
    pub rows: Vec<TierRow>,
}

/// The tiers page is also the ranking: teams by efficiency, each with its tier.
async fn tiers_page(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<MonthQuery>,
) -> Result<TiersPage, PageError> {
    let month = q.month(&s)?;
    let ranking = reports::team_ranking(&s.cases, &user.principal.scope(), month).await?;
    Ok(TiersPage {
        c: Chrome::new(&user, lang, "/reports/utilization", format!("{} {month}", t(lang, "tiers.title"))),
        links: report_nav(lang, &user, "/reports/tiers", Some(&month.to_string())),
        month: month.to_string(),
        rows: ranking
            .iter()
            .map(|r| {
                let tier = tiers::Tier::of(r.utilization);
                TierRow {
                    rank: r.rank,
                    team: r.team.clone(),
                    gpu_hours: card_hours_f64(r.gpu_hours),
                    effective_gpu_hours: card_hours_f64(r.effective_gpu_hours),
                    utilization: percent(r.utilization),
                    cost: yuan(r.cost),
                    tier: tier.map_or("none", tiers::Tier::as_str),
                    tier_word: t(
                        lang,
                        tier.map_or("none", |t| match t {
                            tiers::Tier::Golden => "tier.golden",
                            tiers::Tier::Silver => "tier.silver",
                            tiers::Tier::Bronze => "tier.bronze",
                        }),
                    ),
                }
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Role;
    use crate::web::layout::tests::user;

    #[test]
    fn the_report_nav_offers_what_the_role_may_open() {
        let links = report_nav(Lang::En, &user(Role::Viewer, &[]), "/reports/tiers", Some("2026-10"));
        let hrefs: Vec<&str> = links.iter().map(|l| l.href.as_str()).collect();
        assert_eq!(
            hrefs,
            [
                "/reports/utilization?month=2026-10",
                "/reports/tiers?month=2026-10",
                "/reports/low-utilization",
                "/reports/fragmentation",
                "/reports/oversubscription",
                "/reports/unit-cost",
                "/reports/quotas?month=2026-10",
                "/reports/capacity-plan?month=2026-10"
            ]
        );
        assert_eq!(
            links.iter().filter(|l| l.active).map(|l| l.label).collect::<Vec<_>>(),
            ["Efficiency tiers and ranking"]
        );
        // a team lead: only the reports of its own teams, the top N, the unit cost and the quotas
        let lead = report_nav(Lang::Zh, &user(Role::TeamLead, &["vision"]), "/reports/low-utilization", None);
        assert_eq!(
            lead.iter().map(|l| (l.href.as_str(), l.label, l.active)).collect::<Vec<_>>(),
            [
                ("/reports/low-utilization", "低利用率排行", true),
                ("/reports/unit-cost", "推理单位成本", false),
                ("/reports/quotas", "配额与预留", false)
            ]
        );
    }

    #[test]
    fn form_fields_keep_their_messages() {
        let mut errors = FieldErrors::default();
        assert_eq!(errors.take(time_field("from", "  ")), Some(None), "empty is not given");
        assert!(errors.take(time_field("to", "2026-11-01")).flatten().is_some());
        assert!(errors.is_empty());
        assert_eq!(errors.take(time_field("from", "soon")), None);
        assert!(errors.of("from").contains("is not a time"), "{}", errors.of("from"));
        assert_eq!(errors.of("to"), "");
    }
}
