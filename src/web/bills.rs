//! The bills pages: the months with their status, a month's teams with its data coverage and its month-wide
//! downloads (CSV, PDF, xlsx), a team's statement (the same document the PDF prints,
//! [`crate::export::statement_view`]) with its CSV and PDF downloads. Each takes `?mode=&unallocated=` as the API
//! does ([`super::policy`]): an open month's draft under another policy, and passes the policy on to its links.
//! Closing a month is [`super::close`].

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::Utc;

use super::fmt::{card_hours, percent, yuan};
use super::i18n::{PageLang, t};
use super::layout::{Chrome, PageError};
use super::page_path::PagePath;
use super::policy::{self, PolicyQuery};
use crate::billing::Month;
use crate::export::Lang;
use crate::export::view::{Block, Section};
use crate::ledger::MonthStatus;
use crate::usecase::state::AppState;
use crate::usecase::{self, closing, exports, months, statements};
use crate::validate::TeamId;
use crate::web::extract::PageUser;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/bills", get(list))
        .route("/bills/{month}", get(month_page))
        .route("/bills/{month}/bills.csv", get(month_csv))
        .route("/bills/{month}/statements.pdf", get(month_pdf))
        .route("/bills/{month}/bills.xlsx", get(month_xlsx))
        .route("/bills/{month}/teams/{team}", get(team_page))
        .route("/bills/{month}/teams/{team}/bills.csv", get(team_csv))
        .route("/bills/{month}/teams/{team}/statement.pdf", get(team_pdf))
}

pub fn status_word(lang: crate::export::Lang, s: MonthStatus) -> &'static str {
    t(lang, if s == MonthStatus::Closed { "status.closed" } else { "status.open" })
}

pub struct MonthRow {
    pub month: String,
    pub closed: bool,
    pub status: &'static str,
}

#[derive(Template, WebTemplate)]
#[template(path = "bills.html")]
pub struct BillsPage {
    pub c: Chrome,
    pub months: Vec<MonthRow>,
}

async fn list(State(s): State<AppState>, user: PageUser, PageLang(lang): PageLang) -> Result<BillsPage, PageError> {
    let months = months::months(&s.cases, Utc::now()).await?;
    Ok(BillsPage {
        c: Chrome::new(&user, lang, "/bills", t(lang, "bills.title")),
        months: months
            .into_iter()
            .map(|m| MonthRow {
                month: m.month.to_string(),
                closed: m.status == MonthStatus::Closed,
                status: status_word(lang, m.status),
            })
            .collect(),
    })
}

pub struct TeamRow {
    pub team: String,
    /// The team's display name; its id beside it only when the two differ.
    pub name: String,
    pub id_note: Option<String>,
    pub card_hours: String,
    pub allocated: String,
    pub unallocated_share: String,
    pub restated: String,
    /// Σ the team's approved adjustments; `None` on a statement without any (no column then).
    pub adjusted: Option<String>,
    pub total: String,
}

/// The cluster-wide totals of a month (global readers only).
pub struct ClusterTotals {
    pub capacity_cost: String,
    pub allocated: String,
    pub unallocated: String,
    pub platform_kept: String,
}

impl ClusterTotals {
    pub fn of(b: &crate::billing::MonthBills) -> Self {
        ClusterTotals {
            capacity_cost: yuan(b.capacity_cost),
            allocated: yuan(b.allocated),
            unallocated: yuan(b.unallocated),
            platform_kept: yuan(b.platform_kept),
        }
    }
}

/// One cluster's data coverage of a month: hours with data of the month's hours.
pub struct CoverageRow {
    pub cluster: String,
    pub covered: String,
    pub share: String,
    pub span: String,
}

pub fn coverage_rows(r: &crate::ledger::readiness::Readiness, tz: chrono_tz::Tz) -> Vec<CoverageRow> {
    r.coverage
        .iter()
        .map(|c| CoverageRow {
            cluster: c.cluster.clone(),
            covered: format!("{} / {}", c.hours_covered, c.hours_of_month),
            share: percent(Some(c.share)),
            span: match (c.first_hour, c.last_hour) {
                (Some(a), Some(b)) => format!("{} – {}", super::fmt::when(&a, tz), super::fmt::when(&b, tz)),
                _ => "–".into(),
            },
        })
        .collect()
}

#[derive(Template, WebTemplate)]
#[template(path = "bill_month.html")]
pub struct MonthPage {
    pub c: Chrome,
    pub month: String,
    pub closed: bool,
    pub status: &'static str,
    pub closed_line: Option<String>,
    /// The policy the figures are under, in words, and as the query its links carry.
    pub policy_words: String,
    pub policy: String,
    pub mode: &'static str,
    pub unallocated: &'static str,
    pub teams: Vec<TeamRow>,
    pub total: Option<TeamRow>,
    pub cluster: Option<ClusterTotals>,
    pub coverage: Vec<CoverageRow>,
    pub may_close: bool,
    /// The statement has approved adjustments: the teams table has their column.
    pub adjusted: bool,
    /// Adjustments awaiting approval that would be booked to this open month (in no total).
    pub pending_adjustments: usize,
}

impl MonthPage {
    pub fn selected(&self, value: &str) -> &'static str {
        if self.mode == value || self.unallocated == value { "selected" } else { "" }
    }

    /// The bill modes to choose from: (value, words).
    pub fn modes(&self) -> [(&'static str, String); 3] {
        use crate::billing::BillMode;
        BillMode::ALL.map(|m| (m.as_str(), crate::glossary::mode(self.c.lang, m)))
    }

    /// The unallocated-cost policies to choose from: (value, words).
    pub fn unallocated_policies(&self) -> [(&'static str, String); 2] {
        use crate::billing::UnallocatedPolicy as U;
        [U::KeptByPlatform, U::SpreadProportionally]
            .map(|u| (u.as_str(), crate::glossary::unallocated_sentence(self.c.lang, u)))
    }
}

/// The rows of the teams of `st` that `scope` sees: each team's figures as printed.
pub fn team_rows(st: &crate::ledger::Statement, scope: &crate::access::Scope, lang: Lang) -> Vec<TeamRow> {
    let adjusted = adjusted_column(st, scope);
    st.team_ids()
        .into_iter()
        .filter(|t| scope.allows(t))
        .map(|team| {
            let bill = st.bills.teams.iter().find(|b| b.team == team);
            let stored = st.teams.get(team).map_or(team, |i| i.name.as_str());
            let (name, id_note) = policy::team_id_note(lang, team, stored);
            TeamRow {
                team: team.to_string(),
                name,
                id_note,
                card_hours: card_hours(bill.map(|b| b.card_hours).unwrap_or_default()),
                allocated: yuan(bill.map(|b| b.allocated).unwrap_or_default()),
                unallocated_share: yuan(bill.map(|b| b.unallocated_share).unwrap_or_default()),
                restated: yuan(st.team_restated(team)),
                adjusted: adjusted.then(|| yuan(st.team_adjusted(team))),
                total: yuan(st.team_total(team)),
            }
        })
        .collect()
}

/// Whether the teams table `scope` sees has the adjustments column: one of its teams has an approved adjustment.
pub fn adjusted_column(st: &crate::ledger::Statement, scope: &crate::access::Scope) -> bool {
    st.adjusted_among(st.team_ids().into_iter().filter(|t| scope.allows(t)))
}

/// The total row of the teams `scope` sees.
fn total_row(st: &crate::ledger::Statement, scope: &crate::access::Scope, lang: Lang) -> TeamRow {
    let teams: Vec<&str> = st.team_ids().into_iter().filter(|t| scope.allows(t)).collect();
    let bills = || st.bills.teams.iter().filter(|b| teams.contains(&b.team.as_str()));
    TeamRow {
        team: String::new(),
        name: t(lang, "total").to_string(),
        id_note: None,
        card_hours: card_hours(bills().map(|b| b.card_hours).sum()),
        allocated: yuan(bills().map(|b| b.allocated).sum()),
        unallocated_share: yuan(bills().map(|b| b.unallocated_share).sum()),
        restated: yuan(teams.iter().map(|t| st.team_restated(t)).sum()),
        adjusted: adjusted_column(st, scope).then(|| yuan(teams.iter().map(|t| st.team_adjusted(t)).sum())),
        total: yuan(teams.iter().map(|t| st.team_total(t)).sum()),
    }
}

async fn month_page(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    PagePath(month): PagePath<Month>,
    Query(q): Query<PolicyQuery>,
) -> Result<MonthPage, PageError> {
    let choice = q.choice()?;
    let scope = user.principal.scope();
    let st = statements::statement(&s.cases, month, choice).await?;
    let coverage = match scope.is_global() {
        true => coverage_rows(&closing::readiness(&s.cases, &scope, month).await?, s.billing_tz),
        false => Vec::new(),
    };
    let p = st.bills.policy;
    Ok(MonthPage {
        month: month.to_string(),
        closed: st.status == MonthStatus::Closed,
        status: status_word(lang, st.status),
        closed_line: st.closed_at.map(|at| {
            let by = st.closed_by.as_deref().map(crate::export::present::actor_name).unwrap_or_default();
            let label = t(lang, "bills.closed_at");
            format!("{label}{}{} · {by}", lang.pick("：", ": "), super::fmt::when(&at, s.billing_tz))
        }),
        policy_words: policy::words(p, lang),
        policy: policy::query(p),
        mode: p.mode.as_str(),
        unallocated: p.unallocated.as_str(),
        teams: team_rows(&st, &scope, lang),
        total: Some(total_row(&st, &scope, lang)),
        cluster: scope.is_global().then(|| ClusterTotals::of(&st.bills)),
        coverage,
        may_close: super::capability::may_write(&user) && st.status == MonthStatus::Open,
        adjusted: adjusted_column(&st, &scope),
        pending_adjustments: st.pending_adjustments.iter().filter(|a| scope.allows(&a.team)).count(),
        c: Chrome::new(&user, lang, "/bills", format!("{} {month}", t(lang, "bills.month"))),
    })
}

#[derive(Template, WebTemplate)]
#[template(path = "bill_team.html")]
pub struct TeamPage {
    pub c: Chrome,
    pub month: String,
    pub team: String,
    /// The policy its downloads carry (`mode=…&unallocated=…`).
    pub policy: String,
    pub watermark: Option<String>,
    pub sections: Vec<Section>,
}

impl TeamPage {
    /// Whether a table column is a figure (printed right-aligned).
    pub fn right(&self, right: &bool) -> &'static str {
        if *right { "num" } else { "" }
    }
}

/// The statement of `month` under the asked policy as the caller may see it, of `team` when one is named: not
/// found when the team is unknown or outside the caller's scope.
async fn selection(
    s: &AppState,
    user: &PageUser,
    month: Month,
    team: Option<&TeamId>,
    q: &PolicyQuery,
) -> Result<statements::Selection, PageError> {
    let choice = q.choice()?;
    Ok(statements::select(&s.cases, &user.principal.scope(), month, choice, team).await?)
}

async fn team_page(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    PagePath((month, team)): PagePath<(Month, TeamId)>,
    Query(q): Query<PolicyQuery>,
) -> Result<TeamPage, PageError> {
    let sel = selection(&s, &user, month, Some(&team), &q).await?;
    let mut extras = usecase::extras::extras_for(&s.cases, &sel.statement, &sel.scope).await?;
    // one team's page: its own statement, not the finance summary of the month
    extras.finance_summary = false;
    // the page names its reader as the draft's preparer, as the PDF it downloads does
    extras.prepared = Some(usecase::exports::prepared_now(user.username.clone()));
    let view = crate::export::statement_view(&sel.statement, sel.include(), &extras, lang);
    let team = sel.team.clone().unwrap_or_default();
    let stored = sel.statement.teams.get(&team).map_or(team.as_str(), |i| i.name.as_str());
    let label = crate::glossary::team_label(lang, &team, stored);
    Ok(TeamPage {
        c: Chrome::new(&user, lang, "/bills", format!("{} {label} {month}", t(lang, "bills.statement"))),
        month: sel.statement.month.to_string(),
        team,
        policy: policy::query(sel.statement.bills.policy),
        watermark: view.watermark,
        sections: view.sections,
    })
}

/// A download: the same bytes and file name as the API's export of the same selection.
fn download(sel: &statements::Selection, content_type: &'static str, ext: &str, body: Vec<u8>) -> Response {
    let name = exports::file_name(&sel.statement, sel.team.as_deref(), ext);
    let disposition = exports::content_disposition(&name);
    ([(header::CONTENT_TYPE, content_type.to_string()), (header::CONTENT_DISPOSITION, disposition)], body)
        .into_response()
}

/// The xlsx content type.
const XLSX: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";

async fn team_csv(
    State(s): State<AppState>,
    user: PageUser,
    PagePath((month, team)): PagePath<(Month, TeamId)>,
    Query(q): Query<PolicyQuery>,
) -> Result<Response, PageError> {
    let sel = selection(&s, &user, month, Some(&team), &q).await?;
    let body = exports::csv(&sel, None)?;
    Ok(download(&sel, "text/csv; charset=utf-8", "csv", body))
}

async fn team_pdf(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    PagePath((month, team)): PagePath<(Month, TeamId)>,
    Query(q): Query<PolicyQuery>,
) -> Result<Response, PageError> {
    let sel = selection(&s, &user, month, Some(&team), &q).await?;
    let body = exports::pdf(&s.cases, &sel, user.username.clone(), lang).await?;
    Ok(download(&sel, "application/pdf", "pdf", body))
}

/// The month's bill lines as CSV, every team the caller sees (a global reader's ends with the cluster rows and
/// the total): the API's `/exports/{month}/bills.csv` of the same policy, its header and words in the page's
/// language.
async fn month_csv(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    PagePath(month): PagePath<Month>,
    Query(q): Query<PolicyQuery>,
) -> Result<Response, PageError> {
    let sel = selection(&s, &user, month, None, &q).await?;
    let body = exports::csv(&sel, Some(lang))?;
    Ok(download(&sel, "text/csv; charset=utf-8", "csv", body))
}

/// The month's statements as PDF (a global reader's begins with the finance summary), in the page's language.
async fn month_pdf(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    PagePath(month): PagePath<Month>,
    Query(q): Query<PolicyQuery>,
) -> Result<Response, PageError> {
    let sel = selection(&s, &user, month, None, &q).await?;
    let body = exports::pdf(&s.cases, &sel, user.username.clone(), lang).await?;
    Ok(download(&sel, "application/pdf", "pdf", body))
}

/// The month's workbook: a summary sheet and a sheet per team, in the page's language.
async fn month_xlsx(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    PagePath(month): PagePath<Month>,
    Query(q): Query<PolicyQuery>,
) -> Result<Response, PageError> {
    let sel = selection(&s, &user, month, None, &q).await?;
    let body = exports::xlsx(&s.cases, &sel, lang)?;
    Ok(download(&sel, XLSX, "xlsx", body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bills_list_links_every_month_with_its_status() {
        let user = crate::web::layout::tests::user(crate::access::Role::Finance, &[]);
        let page = BillsPage {
            c: Chrome::new(&user, crate::export::Lang::En, "/bills", "Monthly bills"),
            months: vec![
                MonthRow { month: "2026-11".into(), closed: false, status: "open" },
                MonthRow { month: "2026-10".into(), closed: true, status: "closed" },
            ],
        };
        let html = page.render().unwrap();
        assert!(html.contains(r#"<a href="/bills/2026-10">2026-10</a>"#), "{html}");
        assert!(html.contains(r#"<span class="badge closed">closed</span>"#), "{html}");
        assert!(html.contains(r#"<span class="badge open">open</span>"#), "{html}");
        // finance's navigation, the logout form with the session's token
        assert!(html.contains(r#"href="/health""#) && html.contains(r#"value="tok-123""#), "{html}");
    }

    #[test]
    fn the_month_page_names_its_policy_and_links_its_files_under_it() {
        let user = crate::web::layout::tests::user(crate::access::Role::Finance, &[]);
        let row = |team: &str, name: &str, id_note: Option<&str>| TeamRow {
            team: team.into(),
            name: name.into(),
            id_note: id_note.map(str::to_string),
            card_hours: "1.000".into(),
            allocated: "¥1.00".into(),
            unallocated_share: "¥0.00".into(),
            restated: "¥0.00".into(),
            adjusted: None,
            total: "¥1.00".into(),
        };
        let page = MonthPage {
            c: Chrome::new(&user, Lang::Zh, "/bills", "月账单 2026-11"),
            month: "2026-11".into(),
            closed: false,
            status: "未结账",
            closed_line: None,
            policy_words: "分摊计费 · 未分配成本按用量比例分摊".into(),
            policy: "mode=chargeback&unallocated=spread_proportionally".into(),
            mode: "chargeback",
            unallocated: "spread_proportionally",
            teams: vec![row("nlp", "nlp", None), row("vision", "视觉组", Some("vision"))],
            total: Some(row("", "合计", None)),
            cluster: None,
            coverage: vec![],
            may_close: true,
            adjusted: false,
            pending_adjustments: 0,
        };
        let html = page.render().unwrap();
        let q = "mode=chargeback&#38;unallocated=spread_proportionally";
        for link in ["bills.csv", "statements.pdf", "bills.xlsx"] {
            assert!(html.contains(&format!(r#"href="/bills/2026-11/{link}?{q}&amp;lang=zh-CN""#)), "{link}: {html}");
        }
        assert!(html.contains(&format!(r#"href="/bills/2026-11/close?{q}""#)), "{html}");
        assert!(html.contains(r#"<option value="spread_proportionally" selected>"#), "{html}");
        // "nlp", not "nlp nlp"; a name beside its id only when they differ
        assert!(
            html.contains(">nlp</a></td>") && html.contains(r#">视觉组</a> <span class="note">vision</span>"#),
            "{html}"
        );
    }
}
