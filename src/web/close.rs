//! Closing a month (finance) behind a confirmation that shows exactly what will be frozen: the draft under the
//! chosen policy (bill mode and unallocated policy, `?mode=&unallocated=` or the form's preview), each cluster's
//! data coverage, what stands in the way in the page's language, the form. The form carries a fingerprint of the
//! figures shown; a close whose figures under the chosen policy are not those (another policy chosen after the
//! preview, data metered meanwhile) shows the page again under that policy instead of closing, so the frozen
//! totals are the preview's, field by field.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::bills::{ClusterTotals, CoverageRow, TeamRow, coverage_rows, team_rows};
use super::capability::PageWriter;
use super::i18n::{PageLang, t};
use super::layout::{Chrome, PageError};
use super::page_path::PagePath;
use super::policy::{self, PolicyQuery};
use crate::billing::{Month, PolicyChoice};
use crate::export::Lang;
use crate::glossary;
use crate::ledger::MonthStatus;
use crate::ledger::readiness::Blocker;
use crate::usecase::state::AppState;
use crate::usecase::{self, closing, statements};
use crate::validate::{FieldError, Problem};
use crate::web::extract::CsrfForm;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/bills/{month}/close", get(close_page).post(close_submit))
        .route("/bills/{month}/close/preview", post(preview_submit))
}

#[derive(Template, WebTemplate)]
#[template(path = "bill_close.html")]
pub struct ClosePage {
    pub c: Chrome,
    pub month: String,
    /// The policy the figures shown are under, in words.
    pub policy_words: String,
    pub teams: Vec<TeamRow>,
    /// The draft has approved adjustments: the teams table has their column.
    pub adjusted: bool,
    pub cluster: ClusterTotals,
    pub coverage: Vec<CoverageRow>,
    pub blockers: Vec<String>,
    /// Whether a blocker is a node or a GPU model the nodes page settles.
    pub nodes_link: bool,
    pub form: CloseForm,
    /// The fingerprint of the figures shown, sent back with the close.
    pub fingerprint: String,
    /// Why the page is shown again instead of closing (the figures under the chosen policy differ), in words.
    pub notice: Option<&'static str>,
    /// The message of each bad field: (field, message).
    pub errors: Vec<FieldError>,
}

impl ClosePage {
    pub fn error(&self, field: &str) -> Option<&str> {
        self.errors.iter().find(|e| e.field == field).map(|e| e.message.as_str())
    }

    pub fn selected(&self, value: &str) -> &'static str {
        if self.form.mode == value || self.form.unallocated == value { "selected" } else { "" }
    }

    /// The bill modes to choose from: (value, words), the glossary's (no English on a zh page).
    pub fn modes(&self) -> [(&'static str, String); 3] {
        use crate::billing::BillMode;
        BillMode::ALL.map(|m| (m.as_str(), glossary::mode(self.c.lang, m)))
    }

    /// The unallocated-cost policies to choose from: (value, words).
    pub fn unallocated_policies(&self) -> [(&'static str, String); 2] {
        use crate::billing::UnallocatedPolicy as U;
        [U::KeptByPlatform, U::SpreadProportionally]
            .map(|u| (u.as_str(), glossary::unallocated_sentence(self.c.lang, u)))
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
    /// The fingerprint of the figures the page showed.
    #[serde(default)]
    pub shown: String,
}

impl CloseForm {
    /// The policy the form names, as far as it names one (a part it leaves blank or misnames: the default).
    fn choice(&self) -> PolicyChoice {
        let q = PolicyQuery { mode: Some(self.mode.clone()), unallocated: Some(self.unallocated.clone()) };
        q.choice().unwrap_or(PolicyChoice::NONE)
    }
}

/// The longest override reason (as the API's).
const REASON_MAX: usize = 2000;

/// What the confirmation prints of a draft, as one text: the cluster totals and every row, as shown.
fn fingerprint(cluster: &ClusterTotals, teams: &[TeamRow]) -> String {
    let mut text =
        format!("{}|{}|{}|{}", cluster.capacity_cost, cluster.allocated, cluster.unallocated, cluster.platform_kept);
    for r in teams {
        let row = [&r.team, &r.card_hours, &r.allocated, &r.unallocated_share, &r.restated, &r.total];
        text.push('\n');
        text.push_str(&row.map(String::as_str).join("|"));
        if let Some(a) = &r.adjusted {
            text.push_str(&format!("|{a}"));
        }
    }
    crate::digest::sha256_hex(text.as_bytes())
}

/// The figures of `month`'s draft under `choice` as the confirmation prints them, and their fingerprint.
async fn draft(
    s: &AppState,
    user: &PageWriter,
    lang: Lang,
    month: Month,
    choice: PolicyChoice,
) -> Result<(std::sync::Arc<crate::ledger::Statement>, Vec<TeamRow>, ClusterTotals, String), PageError> {
    let st = statements::statement(&s.cases, month, choice).await?;
    if st.status == MonthStatus::Closed {
        return Err(PageError::Conflict(format!("{month} is closed already")));
    }
    let teams = team_rows(&st, &user.user.principal.scope(), lang);
    let cluster = ClusterTotals::of(&st.bills);
    let print = fingerprint(&cluster, &teams);
    Ok((st, teams, cluster, print))
}

/// The close confirmation of `month`: the draft under the policy `form` names (the default where it names none),
/// what stands in the way, the form. Writers only (for anyone else the page does not exist).
async fn confirmation(
    s: &AppState,
    writer: &PageWriter,
    lang: Lang,
    month: Month,
    form: CloseForm,
    notice: Option<&'static str>,
    errors: Vec<FieldError>,
) -> Result<ClosePage, PageError> {
    let user = &writer.user;
    let (st, teams, cluster, fingerprint) = draft(s, writer, lang, month, form.choice()).await?;
    let readiness = closing::readiness(&s.cases, &user.principal.scope(), month).await?;
    let tz = s.billing_tz;
    let when = |t: &chrono::DateTime<chrono::Utc>| super::fmt::when(t, tz);
    Ok(ClosePage {
        c: Chrome::new(user, lang, "/bills", format!("{} {month}", t(lang, "close.title"))),
        month: month.to_string(),
        policy_words: policy::words(st.bills.policy, lang),
        adjusted: super::bills::adjusted_column(&st, &user.principal.scope()),
        teams,
        cluster,
        coverage: coverage_rows(&readiness, tz),
        nodes_link: readiness
            .blockers
            .iter()
            .any(|b| matches!(b, Blocker::UnknownGpuModel { .. } | Blocker::UnverifiedNode { .. })),
        blockers: readiness.blockers.iter().map(|b| crate::export::blocker::words(b, lang, &when)).collect(),
        form,
        fingerprint,
        notice: notice.map(|key| t(lang, key)),
        errors,
    })
}

async fn close_page(
    State(s): State<AppState>,
    user: PageWriter,
    PageLang(lang): PageLang,
    PagePath(month): PagePath<Month>,
    Query(q): Query<PolicyQuery>,
) -> Result<ClosePage, PageError> {
    // a policy that names none is no page, as on the month page
    q.choice()?;
    let form = CloseForm {
        mode: q.mode.unwrap_or_default().trim().to_string(),
        unallocated: q.unallocated.unwrap_or_default().trim().to_string(),
        ..CloseForm::default()
    };
    confirmation(&s, &user, lang, month, form, None, Vec::new()).await
}

/// The confirmation again under the policy the form chose, its reason kept: nothing is closed.
async fn preview_submit(
    State(s): State<AppState>,
    user: PageWriter,
    PageLang(lang): PageLang,
    PagePath(month): PagePath<Month>,
    CsrfForm(form): CsrfForm<CloseForm>,
) -> Result<ClosePage, PageError> {
    confirmation(&s, &user, lang, month, form, None, Vec::new()).await
}

/// Each bad field of a form with its message in the page's language.
type FieldErrors = Vec<FieldError>;

/// The policy and reason of a close form, or each bad field's message in `lang`.
fn check_close(form: &CloseForm, lang: Lang) -> Result<(crate::billing::BillPolicy, Option<String>), FieldErrors> {
    let mut errors = Vec::new();
    let (mode, unallocated) = (form.mode.trim(), form.unallocated.trim());
    if mode.is_empty() {
        errors.push(FieldError::of("mode", Problem::Required, t(lang, "close.choose")));
    }
    if unallocated.is_empty() {
        errors.push(FieldError::of("unallocated", Problem::Required, t(lang, "close.choose")));
    }
    let reason = form.reason.trim();
    if reason.contains('\0') {
        errors.push(FieldError::of("reason", Problem::Characters, t(lang, "form.nul")));
    } else if reason.chars().count() > REASON_MAX {
        errors.push(FieldError::of(
            "reason",
            Problem::TooLong,
            t(lang, "form.too_long").replace("{max}", &REASON_MAX.to_string()),
        ));
    }
    let choice = crate::validate::policy_choice(
        Some(mode).filter(|m| !m.is_empty()),
        Some(unallocated).filter(|u| !u.is_empty()),
        None,
    );
    match choice {
        Err(e) => {
            errors.push(FieldError::of(e.field.clone(), e.problem, super::field_errors::localize(lang, &e.message)))
        }
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
    let again = |form, notice, errors| shown_again(&s, &user, lang, month, form, notice, errors);
    let (policy, reason) = match check_close(&form, lang) {
        Ok(v) => v,
        Err(errors) => return again(form, None, errors).await,
    };
    // what gets frozen is what was shown: the figures under the chosen policy are the ones the page printed
    let (.., now) = draft(&s, &user, lang, month, PolicyChoice::exactly(policy)).await?;
    if now != form.shown {
        return again(form, Some("close.figures_changed"), Vec::new()).await;
    }
    // the audit names the caller as its credential says (`user:…`, or `sso:…` behind the SSO proxy)
    match closing::close(&s.cases, month, policy, reason, &user.writer).await {
        Ok(_) => {
            // the close event: delivered now in the background, retried by the worker, `serve` or the CLI
            crate::usecase::close_events::deliver_soon(s.cases.pool.clone());
            Ok(Redirect::to(&format!("/bills/{month}?{}", policy::query(policy))).into_response())
        }
        // refused (not ready without a reason, not ended, closed meanwhile): the form back with why
        Err(e) => match close_refusal(&e, lang) {
            Some(error) => again(form, None, vec![error]).await,
            None => Err(e.into()),
        },
    }
}

/// The confirmation once more, as a refused form's answer: nothing was closed.
async fn shown_again(
    s: &AppState,
    user: &PageWriter,
    lang: Lang,
    month: Month,
    form: CloseForm,
    notice: Option<&'static str>,
    errors: Vec<FieldError>,
) -> Result<Response, PageError> {
    let page = confirmation(s, user, lang, month, form, notice, errors).await?;
    Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
}

/// A close the use case refused for a reason the form can show: the field and its message.
fn close_refusal(e: &usecase::Error, lang: Lang) -> Option<FieldError> {
    match e {
        usecase::Error::NotReady(_) => Some(FieldError::of("reason", Problem::Required, t(lang, "close.give_reason"))),
        usecase::Error::NotEnded(m) => {
            Some(FieldError::new("month", t(lang, "close.not_ended").replace("{month}", &m.to_string())))
        }
        // an override reason the rules refuse is shown beside the reason field, whatever the rule names it
        usecase::Error::Invalid(list) => list.first().map(|i| {
            let field =
                if i.field == "override.reason" || i.field == "override_reason" { "reason" } else { i.field.as_str() };
            FieldError::of(field, i.problem, super::field_errors::localize(lang, &i.message))
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(mode: &str, unallocated: &str, reason: &str) -> CloseForm {
        CloseForm { mode: mode.into(), unallocated: unallocated.into(), reason: reason.into(), shown: String::new() }
    }

    #[test]
    fn a_close_form_names_both_policy_parts() {
        let (p, r) = check_close(&form("chargeback", "kept_by_platform", " "), Lang::En).unwrap();
        assert_eq!(p.mode, crate::billing::BillMode::Chargeback);
        assert_eq!(r, None);
        let fields = |e: Vec<FieldError>| e.into_iter().map(|e| e.field).collect::<Vec<_>>();
        assert_eq!(fields(check_close(&form("", "", ""), Lang::En).unwrap_err()), ["mode", "unallocated"]);
        assert_eq!(fields(check_close(&form("bogus", "kept_by_platform", ""), Lang::En).unwrap_err()), ["mode"]);
        assert_eq!(
            fields(check_close(&form("showback", "kept_by_platform", "a\0b"), Lang::En).unwrap_err()),
            ["reason"]
        );
        let long = "x".repeat(REASON_MAX + 1);
        assert_eq!(
            fields(check_close(&form("showback", "kept_by_platform", &long), Lang::En).unwrap_err()),
            ["reason"]
        );
        // the preview of a half-chosen form: the default where it names nothing
        assert_eq!(form("chargeback", "", "").choice().mode, Some(crate::billing::BillMode::Chargeback));
        assert_eq!(form("bogus", "", "").choice(), PolicyChoice::NONE);
    }

    fn totals() -> ClusterTotals {
        ClusterTotals {
            capacity_cost: "¥1,000.00".into(),
            allocated: "¥800.00".into(),
            unallocated: "¥200.00".into(),
            platform_kept: "¥200.00".into(),
        }
    }

    fn row(team: &str, total: &str) -> TeamRow {
        TeamRow {
            team: team.into(),
            name: team.into(),
            id_note: None,
            card_hours: "10.000".into(),
            allocated: "¥100.00".into(),
            unallocated_share: "¥0.00".into(),
            restated: "¥0.00".into(),
            adjusted: None,
            total: total.into(),
        }
    }

    #[test]
    fn the_fingerprint_moves_with_any_figure_shown() {
        let a = fingerprint(&totals(), &[row("nlp", "¥100.00")]);
        assert_eq!(a, fingerprint(&totals(), &[row("nlp", "¥100.00")]));
        assert_ne!(a, fingerprint(&totals(), &[row("nlp", "¥100.01")]));
        assert_ne!(
            a,
            fingerprint(&ClusterTotals { platform_kept: "¥0.00".into(), ..totals() }, &[row("nlp", "¥100.00")])
        );
    }

    #[test]
    fn the_close_form_comes_back_with_the_fields_message() {
        let user = crate::web::layout::tests::user(crate::access::Role::Finance, &[]);
        let page = ClosePage {
            c: Chrome::new(&user, Lang::Zh, "/bills", "结账"),
            month: "2026-10".into(),
            policy_words: "分摊计费 · 未分配成本由平台承担".into(),
            teams: vec![TeamRow {
                id_note: Some("vision".into()), name: "视觉组".into(), ..row("vision", "¥5.00")
            }],
            adjusted: false,
            cluster: totals(),
            coverage: vec![CoverageRow {
                cluster: "sim".into(),
                covered: "4 / 720".into(),
                share: "0.6 %".into(),
                span: "–".into(),
            }],
            blockers: vec!["集群 a：3 小时未采集".into()],
            nodes_link: true,
            form: form("chargeback", "", "late data"),
            fingerprint: "f00".into(),
            notice: Some(t(Lang::Zh, "close.figures_changed")),
            errors: check_close(&form("chargeback", "", "late data"), Lang::Zh).unwrap_err(),
        };
        let html = page.render().unwrap();
        assert!(html.contains(r#"<span class="field-error">结账前请选择</span>"#), "{html}");
        assert!(html.contains(r#"<option value="chargeback" selected>分摊计费</option>"#), "{html}");
        assert!(html.contains(r#"<option value="kept_by_platform" >未分配成本由平台承担</option>"#), "{html}");
        assert!(html.contains(">late data</textarea>"), "{html}");
        assert!(html.contains("¥1,000.00") && html.contains("3 小时未采集") && html.contains("4 / 720"), "{html}");
        assert!(html.contains(r#"<input type="hidden" name="csrf" value="tok-123">"#), "{html}");
        assert!(html.contains(r#"<input type="hidden" name="shown" value="f00">"#), "{html}");
        assert!(html.contains(r#"href="/nodes?month=2026-10""#), "{html}");
        assert!(html.contains("视觉组 <span class=\"note\">vision</span>"), "{html}");
    }
}
