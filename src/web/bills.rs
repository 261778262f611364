//! The bills pages: the months with their status, a month's teams, a team's statement (the same document the PDF
//! prints, [`crate::export::statement_view`]) with its CSV and PDF downloads, and closing a month (finance) behind
//! a confirmation page that shows what will be frozen.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use chrono::Utc;
use serde::Deserialize;

use super::capability::PageWriter;
use super::extract::PagePath;
use super::fmt::{card_hours, yuan};
use super::i18n::{PageLang, t};
use super::layout::{Chrome, PageError};
use crate::auth::{CsrfForm, PageUser};
use crate::billing::{Month, PolicyChoice};
use crate::export::view::{Block, Section, mode_words, unallocated_words};
use crate::ledger::MonthStatus;
use crate::state::AppState;
use crate::usecase::{self, closing, exports, months, statements};
use crate::validate::TeamId;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/bills", get(list))
        .route("/bills/{month}", get(month_page))
        .route("/bills/{month}/teams/{team}", get(team_page))
        .route("/bills/{month}/teams/{team}/bills.csv", get(team_csv))
        .route("/bills/{month}/teams/{team}/statement.pdf", get(team_pdf))
        .route("/bills/{month}/close", get(close_page).post(close_submit))
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
    pub name: String,
    pub card_hours: String,
    pub allocated: String,
    pub unallocated_share: String,
    pub restated: String,
    pub total: String,
}

/// The cluster-wide totals of a month (global readers only).
pub struct ClusterTotals {
    pub capacity_cost: String,
    pub allocated: String,
    pub unallocated: String,
    pub platform_kept: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "bill_month.html")]
pub struct MonthPage {
    pub c: Chrome,
    pub month: String,
    pub closed: bool,
    pub status: &'static str,
    pub closed_line: Option<String>,
    pub teams: Vec<TeamRow>,
    pub cluster: Option<ClusterTotals>,
    pub may_close: bool,
}

fn team_rows(st: &crate::ledger::Statement, scope: &crate::access::Scope) -> Vec<TeamRow> {
    st.team_ids()
        .into_iter()
        .filter(|t| scope.allows(t))
        .map(|team| {
            let bill = st.bills.teams.iter().find(|b| b.team == team);
            TeamRow {
                team: team.to_string(),
                name: st.teams.get(team).map_or_else(|| team.to_string(), |i| i.name.clone()),
                card_hours: card_hours(bill.map(|b| b.card_hours).unwrap_or_default()),
                allocated: yuan(bill.map(|b| b.allocated).unwrap_or_default()),
                unallocated_share: yuan(bill.map(|b| b.unallocated_share).unwrap_or_default()),
                restated: yuan(st.team_restated(team)),
                total: yuan(st.team_total(team)),
            }
        })
        .collect()
}

async fn month_page(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    PagePath(month): PagePath<Month>,
) -> Result<MonthPage, PageError> {
    let scope = user.principal.scope();
    let st = statements::statement(&s.cases, month, PolicyChoice::NONE).await?;
    let b = &st.bills;
    Ok(MonthPage {
        month: month.to_string(),
        closed: st.status == MonthStatus::Closed,
        status: status_word(lang, st.status),
        closed_line: st.closed_at.map(|at| {
            format!("{} · {}", super::fmt::when(&at, s.billing_tz), st.closed_by.clone().unwrap_or_default())
        }),
        teams: team_rows(&st, &scope),
        cluster: scope.is_global().then(|| ClusterTotals {
            capacity_cost: yuan(b.capacity_cost),
            allocated: yuan(b.allocated),
            unallocated: yuan(b.unallocated),
            platform_kept: yuan(b.platform_kept),
        }),
        may_close: super::capability::may_write(&user) && st.status == MonthStatus::Open,
        c: Chrome::new(&user, lang, "/bills", format!("{} {month}", t(lang, "bills.month"))),
    })
}

#[derive(Template, WebTemplate)]
#[template(path = "bill_team.html")]
pub struct TeamPage {
    pub c: Chrome,
    pub month: String,
    pub team: String,
    pub watermark: Option<String>,
    pub sections: Vec<Section>,
}

impl TeamPage {
    /// Whether a table column is a figure (printed right-aligned).
    pub fn right(&self, right: &bool) -> &'static str {
        if *right { "num" } else { "" }
    }
}

/// The statement of `team` in `month` as the caller may see it: not found when the team is unknown or outside
/// the caller's scope.
async fn selection(
    s: &AppState,
    user: &PageUser,
    month: Month,
    team: &TeamId,
) -> Result<statements::Selection, PageError> {
    Ok(statements::select(&s.cases, &user.principal.scope(), month, PolicyChoice::NONE, Some(team)).await?)
}

async fn team_page(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    PagePath((month, team)): PagePath<(Month, TeamId)>,
) -> Result<TeamPage, PageError> {
    let sel = selection(&s, &user, month, &team).await?;
    let mut extras = usecase::extras::extras_for(&s.cases, &sel.statement, &sel.scope).await?;
    // one team's page: its own statement, not the finance summary of the month
    extras.finance_summary = false;
    // the page names its reader as the draft's preparer, as the PDF it downloads does
    extras.prepared = Some(usecase::exports::prepared_now(user.username.clone()));
    let view = crate::export::statement_view(&sel.statement, sel.include(), &extras, lang);
    let team = sel.team.clone().unwrap_or_default();
    Ok(TeamPage {
        c: Chrome::new(&user, lang, "/bills", format!("{} {team} {month}", t(lang, "bills.statement"))),
        month: sel.statement.month.to_string(),
        team,
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

async fn team_csv(
    State(s): State<AppState>,
    user: PageUser,
    PagePath((month, team)): PagePath<(Month, TeamId)>,
) -> Result<Response, PageError> {
    let sel = selection(&s, &user, month, &team).await?;
    let body = exports::csv(&sel, None)?;
    Ok(download(&sel, "text/csv; charset=utf-8", "csv", body))
}

async fn team_pdf(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    PagePath((month, team)): PagePath<(Month, TeamId)>,
) -> Result<Response, PageError> {
    let sel = selection(&s, &user, month, &team).await?;
    let body = exports::pdf(&s.cases, &sel, user.username.clone(), lang).await?;
    Ok(download(&sel, "application/pdf", "pdf", body))
}

#[derive(Template, WebTemplate)]
#[template(path = "bill_close.html")]
pub struct ClosePage {
    pub c: Chrome,
    pub month: String,
    pub teams: Vec<TeamRow>,
    pub cluster: ClusterTotals,
    pub blockers: Vec<String>,
    pub form: CloseForm,
    /// The message of each bad field: (field, message).
    pub errors: Vec<(String, String)>,
}

impl ClosePage {
    pub fn error(&self, field: &str) -> Option<&str> {
        self.errors.iter().find(|(f, _)| f == field).map(|(_, m)| m.as_str())
    }

    pub fn selected(&self, value: &str) -> &'static str {
        if self.form.mode == value || self.form.unallocated == value { "selected" } else { "" }
    }

    /// The bill modes to choose from: (value, words).
    pub fn modes(&self) -> [(&'static str, &'static str); 2] {
        use crate::billing::BillMode;
        [
            ("showback", mode_words(BillMode::Showback, self.c.lang)),
            ("chargeback", mode_words(BillMode::Chargeback, self.c.lang)),
        ]
    }

    /// The unallocated-cost policies to choose from: (value, words).
    pub fn unallocated_policies(&self) -> [(&'static str, &'static str); 2] {
        use crate::billing::UnallocatedPolicy;
        [
            ("kept_by_platform", unallocated_words(UnallocatedPolicy::KeptByPlatform, self.c.lang)),
            ("spread_proportionally", unallocated_words(UnallocatedPolicy::SpreadProportionally, self.c.lang)),
        ]
    }
}

/// The close form as sent: every field text, checked by the same rules as the API's close.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct CloseForm {
    #[serde(default)]
    pub mode: String,
    #[serde(default)]
    pub unallocated: String,
    #[serde(default)]
    pub reason: String,
}

/// The longest override reason (as the API's).
const REASON_MAX: usize = 2000;

/// The close confirmation of `month`: what will be frozen (the draft under the default policy), what stands in
/// the way, the form. Writers only (for anyone else the page does not exist): it takes the writer's page.
async fn confirmation(
    s: &AppState,
    PageWriter { user, .. }: &PageWriter,
    lang: crate::export::Lang,
    month: Month,
    form: CloseForm,
    errors: Vec<(String, String)>,
) -> Result<ClosePage, PageError> {
    let scope = user.principal.scope();
    let st = statements::statement(&s.cases, month, PolicyChoice::NONE).await?;
    if st.status == MonthStatus::Closed {
        return Err(PageError::Conflict(format!("{month} is closed already")));
    }
    let readiness = closing::readiness(&s.cases, &scope, month).await?;
    let tz = s.billing_tz;
    let b = &st.bills;
    Ok(ClosePage {
        c: Chrome::new(user, lang, "/bills", format!("{} {month}", t(lang, "close.title"))),
        month: month.to_string(),
        teams: team_rows(&st, &scope),
        cluster: ClusterTotals {
            capacity_cost: yuan(b.capacity_cost),
            allocated: yuan(b.allocated),
            unallocated: yuan(b.unallocated),
            platform_kept: yuan(b.platform_kept),
        },
        blockers: readiness.blockers.iter().map(|b| b.describe(&|t| super::fmt::when(t, tz))).collect(),
        form,
        errors,
    })
}

async fn close_page(
    State(s): State<AppState>,
    user: PageWriter,
    PageLang(lang): PageLang,
    PagePath(month): PagePath<Month>,
) -> Result<ClosePage, PageError> {
    confirmation(&s, &user, lang, month, CloseForm::default(), Vec::new()).await
}

/// Each bad field of a form with its message: (field, message).
type FieldErrors = Vec<(String, String)>;

/// The policy and reason of a close form, or each bad field's message in `lang`.
fn check_close(
    form: &CloseForm,
    lang: crate::export::Lang,
) -> Result<(crate::billing::BillPolicy, Option<String>), FieldErrors> {
    let mut errors = Vec::new();
    let (mode, unallocated) = (form.mode.trim(), form.unallocated.trim());
    if mode.is_empty() {
        errors.push(("mode".into(), t(lang, "close.choose").into()));
    }
    if unallocated.is_empty() {
        errors.push(("unallocated".into(), t(lang, "close.choose").into()));
    }
    let reason = form.reason.trim();
    if reason.contains('\0') {
        errors.push(("reason".into(), t(lang, "form.nul").into()));
    } else if reason.chars().count() > REASON_MAX {
        errors.push(("reason".into(), t(lang, "form.too_long").replace("{max}", &REASON_MAX.to_string())));
    }
    let choice = crate::validate::policy_choice(
        Some(mode).filter(|m| !m.is_empty()),
        Some(unallocated).filter(|u| !u.is_empty()),
        None,
    );
    match choice {
        Err(e) => errors.push((e.field.clone(), e.message.clone())),
        Ok(c) if errors.is_empty() => {
            if let Some(policy) = c.complete() {
                return Ok((policy, Some(reason.to_string()).filter(|r| !r.is_empty())));
            }
        }
        Ok(_) => {}
    }
    Err(errors)
}

async fn close_submit(
    State(s): State<AppState>,
    user: PageWriter,
    PageLang(lang): PageLang,
    PagePath(month): PagePath<Month>,
    CsrfForm(form): CsrfForm<CloseForm>,
) -> Result<Response, PageError> {
    let (policy, reason) = match check_close(&form, lang) {
        Ok(v) => v,
        Err(errors) => {
            let page = confirmation(&s, &user, lang, month, form, errors).await?;
            return Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response());
        }
    };
    // the audit names the caller as its credential says (`user:…`, or `sso:…` behind the SSO proxy)
    match closing::close(&s.cases, month, policy, reason, &user.writer).await {
        Ok(_) => Ok(Redirect::to(&format!("/bills/{month}")).into_response()),
        // refused (not ready without a reason, not ended, closed meanwhile): the form back with why
        Err(e) => match close_refusal(&e, lang) {
            Some(error) => {
                let page = confirmation(&s, &user, lang, month, form, vec![error]).await?;
                Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
            }
            None => Err(e.into()),
        },
    }
}

/// A close the ledger refused for a reason the form can show: (field, message).
fn close_refusal(e: &usecase::Error, lang: crate::export::Lang) -> Option<(String, String)> {
    use crate::ledger::LedgerError as L;
    match e {
        usecase::Error::Ledger(L::NotReady(_)) => Some(("reason".into(), t(lang, "close.give_reason").into())),
        usecase::Error::Ledger(L::OverrideReason(i)) => Some(("reason".into(), i.message.clone())),
        usecase::Error::Ledger(L::NotEnded(m)) => {
            Some(("month".into(), t(lang, "close.not_ended").replace("{month}", &m.to_string())))
        }
        usecase::Error::Invalid(list) => list.first().map(|i| (i.field.clone(), i.message.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(mode: &str, unallocated: &str, reason: &str) -> CloseForm {
        CloseForm { mode: mode.into(), unallocated: unallocated.into(), reason: reason.into() }
    }

    #[test]
    fn a_close_form_names_both_policy_parts() {
        let (p, r) = check_close(&form("chargeback", "kept_by_platform", " "), crate::export::Lang::En).unwrap();
        assert_eq!(p.mode, crate::billing::BillMode::Chargeback);
        assert_eq!(r, None);
        let fields = |e: Vec<(String, String)>| e.into_iter().map(|(f, _)| f).collect::<Vec<_>>();
        assert_eq!(
            fields(check_close(&form("", "", ""), crate::export::Lang::En).unwrap_err()),
            ["mode", "unallocated"]
        );
        assert_eq!(
            fields(check_close(&form("bogus", "kept_by_platform", ""), crate::export::Lang::En).unwrap_err()),
            ["mode"]
        );
        assert_eq!(
            fields(check_close(&form("showback", "kept_by_platform", "a\0b"), crate::export::Lang::En).unwrap_err()),
            ["reason"]
        );
        let long = "x".repeat(REASON_MAX + 1);
        assert_eq!(
            fields(check_close(&form("showback", "kept_by_platform", &long), crate::export::Lang::En).unwrap_err()),
            ["reason"]
        );
    }

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
    fn the_close_form_comes_back_with_the_fields_message() {
        let user = crate::web::layout::tests::user(crate::access::Role::Finance, &[]);
        let totals = || ClusterTotals {
            capacity_cost: "¥1,000.00".into(),
            allocated: "¥800.00".into(),
            unallocated: "¥200.00".into(),
            platform_kept: "¥200.00".into(),
        };
        let page = ClosePage {
            c: Chrome::new(&user, crate::export::Lang::Zh, "/bills", "结账"),
            month: "2026-10".into(),
            teams: vec![],
            cluster: totals(),
            blockers: vec!["cluster a: 3 hour(s) not ingested".into()],
            form: form("chargeback", "", "late data"),
            errors: check_close(&form("chargeback", "", "late data"), crate::export::Lang::Zh).unwrap_err(),
        };
        let html = page.render().unwrap();
        assert!(html.contains(r#"<span class="field-error">结账前请选择</span>"#), "{html}");
        assert!(html.contains(r#"<option value="chargeback" selected>分摊计费（chargeback）</option>"#), "{html}");
        assert!(html.contains(r#"<option value="kept_by_platform" >未分配成本由平台承担</option>"#), "{html}");
        assert!(html.contains(">late data</textarea>"), "{html}");
        assert!(html.contains("¥1,000.00") && html.contains("3 hour(s) not ingested"), "{html}");
        assert!(html.contains(r#"<input type="hidden" name="csrf" value="tok-123">"#), "{html}");
    }
}
