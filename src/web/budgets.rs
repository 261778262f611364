//! The budgets page: per team the month's budget against the spend so far and the forecast, the share used and
//! the alerts raised ([`usecase::budgets`], the API's `/budgets/{month}`); finance and admin set a team's budget
//! for a month with a form. A team lead sees its own teams only; a POST from anyone but a writer gets the not-found
//! page before its form is read ([`PageWriter`]), as every page a role may not open.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use chrono::Utc;
use rust_decimal::Decimal;
use serde::Deserialize;

use super::capability::PageWriter;
use super::field_errors::{self as fields, FieldErrors};
use super::fmt::{percent, yuan};
use super::i18n::{Lang, PageLang, t};
use super::layout::{Chrome, PageError};
use crate::billing::Month;
use crate::money::Money;
use crate::usecase::state::AppState;
use crate::usecase::{self, budgets, months};
use crate::validate::TeamId;
use crate::web::extract::{CsrfForm, PageUser};

pub fn routes() -> Router<AppState> {
    Router::new().route("/budgets", get(page).post(submit))
}

/// One team's budget of the month as the page shows it.
pub struct BudgetRow {
    pub team: String,
    pub name: String,
    pub amount: String,
    pub spent: String,
    pub forecast: String,
    pub used: String,
    pub thresholds: String,
    /// The alerts raised, in words (`80 % (actual)`); empty: none.
    pub alerts: Vec<String>,
}

/// The form as typed: every field text.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct BudgetForm {
    #[serde(default)]
    pub month: String,
    #[serde(default)]
    pub team: String,
    #[serde(default)]
    pub amount: String,
    #[serde(default)]
    pub thresholds: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "budgets.html")]
pub struct BudgetsPage {
    pub c: Chrome,
    pub month: String,
    pub prev: String,
    pub next: String,
    pub rows: Vec<BudgetRow>,
    /// The teams the form offers (writers only: `None` is no form).
    pub teams: Option<Vec<(String, String)>>,
    pub form: BudgetForm,
    pub errors: FieldErrors,
    pub saved: bool,
}

impl BudgetsPage {
    pub fn error(&self, field: &str) -> Option<String> {
        self.errors.message(self.c.lang, field)
    }

    pub fn selected(&self, team: &str) -> &'static str {
        if self.form.team == team { "selected" } else { "" }
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct BudgetQuery {
    #[serde(default)]
    month: Option<String>,
    #[serde(default)]
    saved: Option<String>,
}

/// A share of the budget as a percentage (`0.8` → `80 %`).
fn share_words(d: Decimal) -> String {
    percent(rust_decimal::prelude::ToPrimitive::to_f64(&d))
}

fn rows(lang: Lang, list: &[budgets::BudgetStatus], names: &[(String, String)]) -> Vec<BudgetRow> {
    list.iter()
        .map(|b| {
            let amount = Money::from_decimal(b.budget.amount);
            let team = &b.budget.team_id;
            BudgetRow {
                team: team.clone(),
                name: names.iter().find(|(id, _)| id == team).map_or_else(|| team.clone(), |(_, n)| n.clone()),
                amount: yuan(amount),
                spent: yuan(b.spent),
                forecast: yuan(b.forecast),
                used: crate::export::present::share(b.spent, amount),
                thresholds: b.budget.thresholds.iter().map(|t| share_words(*t)).collect::<Vec<_>>().join(", "),
                alerts: b
                    .alerts
                    .iter()
                    .map(|a| {
                        let basis =
                            if a.basis == "forecast" { "budgets.basis.forecast" } else { "budgets.basis.actual" };
                        format!("{} ({})", share_words(a.threshold), t(lang, basis))
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The page of `month` for `user`, with `form` and `errors` in its form (a writer's only).
async fn render(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    month: Month,
    form: BudgetForm,
    errors: FieldErrors,
    saved: bool,
) -> Result<BudgetsPage, PageError> {
    let scope = user.principal.scope();
    let list = budgets::budgets(&s.cases, &scope, month).await?;
    let names: Vec<(String, String)> =
        usecase::teams::teams(&s.cases, &scope).await?.into_iter().map(|t| (t.id, t.name)).collect();
    let writes = super::capability::may_write(user);
    let form = BudgetForm { month: if form.month.is_empty() { month.to_string() } else { form.month }, ..form };
    Ok(BudgetsPage {
        c: Chrome::new(user, lang, "/budgets", format!("{} {month}", t(lang, "budgets.title"))),
        month: month.to_string(),
        prev: month.prev().to_string(),
        next: month.next().to_string(),
        rows: rows(lang, &list, &names),
        teams: writes.then_some(names),
        form,
        errors,
        saved,
    })
}

async fn page(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<BudgetQuery>,
) -> Result<Response, PageError> {
    let current = months::current(&s.cases, Utc::now());
    let mut errors = FieldErrors::default();
    let month = match q.month.as_deref() {
        None | Some("") => Some(current),
        Some(m) => fields::month(&mut errors, "month", m),
    };
    let form = BudgetForm { month: q.month.clone().unwrap_or_default(), ..Default::default() };
    match month {
        Some(month) => {
            Ok(render(&s, &user, lang, month, BudgetForm::default(), errors, q.saved.is_some()).await?.into_response())
        }
        // a month that is none: the current month's page, the month field saying why
        None => {
            let page = render(&s, &user, lang, current, form, errors, false).await?;
            Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
        }
    }
}

/// A budget as a form sets it: `amount` yuan for `team` in `month`, alerting at `thresholds` (default: the use
/// case's).
#[derive(Debug)]
struct BudgetChange {
    month: Month,
    team: TeamId,
    amount: Decimal,
    thresholds: Option<Vec<Decimal>>,
}

/// The budget a form sets, or every bad field; `known` are the teams the form offers (a team among them may
/// still be gone when the use case looks: it says so then).
fn check(form: &BudgetForm, known: &[&str]) -> Result<BudgetChange, FieldErrors> {
    let mut errors = FieldErrors::default();
    let month = fields::month(&mut errors, "month", &form.month);
    let team = fields::text(&mut errors, "team", &form.team, 63).and_then(|team| match TeamId::parse("team", &team) {
        Ok(id) if known.contains(&id.as_str()) => Some(id),
        Ok(id) => {
            errors.add("team", fields::Problem::UnknownTeam, format!("team {id} not found"));
            None
        }
        Err(e) => {
            errors.add("team", fields::Problem::UnknownTeam, e.message);
            None
        }
    });
    let amount = fields::figure(&mut errors, "amount", &form.amount);
    let thresholds = if form.thresholds.trim().is_empty() && !form.thresholds.contains('\0') {
        Some(None)
    } else {
        fields::text(&mut errors, "thresholds", &form.thresholds, 200).and_then(|text| {
            let parts: Vec<_> = text.split([',', '，', ' ']).filter(|p| !p.is_empty()).collect();
            let read: Vec<_> = parts.iter().map(|p| fields::figure(&mut errors, "thresholds", p)).collect();
            read.into_iter().collect::<Option<Vec<_>>>().map(Some)
        })
    };
    match (month, team, amount, thresholds) {
        (Some(month), Some(team), Some(amount), Some(thresholds)) if errors.is_empty() => {
            Ok(BudgetChange { month, team, amount, thresholds })
        }
        _ => Err(errors),
    }
}

/// The form back with its bad fields (422), on the page of the month it names (else the current month).
async fn form_back(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    form: BudgetForm,
    errors: FieldErrors,
) -> Result<Response, PageError> {
    let month = form.month.parse().unwrap_or_else(|_| months::current(&s.cases, Utc::now()));
    let page = render(s, user, lang, month, form, errors, false).await?;
    Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
}

async fn submit(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    CsrfForm(form): CsrfForm<BudgetForm>,
) -> Result<Response, PageError> {
    let teams = usecase::teams::teams(&s.cases, &user.principal.scope()).await?;
    let known: Vec<&str> = teams.iter().map(|t| t.id.as_str()).collect();
    let BudgetChange { month, team, amount, thresholds } = match check(&form, &known) {
        Ok(v) => v,
        Err(errors) => return form_back(&s, &user, lang, form, errors).await,
    };
    match budgets::set_budget(&s.cases, &writer, month, &team, amount, thresholds).await {
        Ok(_) => Ok(Redirect::to(&format!("/budgets?month={month}&saved=1")).into_response()),
        Err(e) => match FieldErrors::from_usecase(e, "") {
            Ok(errors) => form_back(&s, &user, lang, form, errors).await,
            Err(other) => Err(other.into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(month: &str, team: &str, amount: &str, thresholds: &str) -> BudgetForm {
        BudgetForm { month: month.into(), team: team.into(), amount: amount.into(), thresholds: thresholds.into() }
    }

    fn bad(f: BudgetForm) -> Vec<(String, fields::Problem)> {
        check(&f, &["vision"]).unwrap_err().0.into_iter().map(|e| (e.field, e.problem)).collect()
    }

    #[test]
    fn a_budget_form_is_read_field_by_field() {
        let c = check(&form("2026-11", "vision", "12345.67", ""), &["vision"]).unwrap();
        assert_eq!(
            (c.month.to_string(), c.team.as_str(), c.amount, c.thresholds),
            ("2026-11".into(), "vision", Decimal::new(1234567, 2), None)
        );
        let c = check(&form("2026-11", "vision", "1", "0.5, 0.9，1"), &["vision"]).unwrap();
        assert_eq!(c.thresholds.unwrap(), [Decimal::new(5, 1), Decimal::new(9, 1), Decimal::ONE]);
        use fields::Problem as P;
        assert_eq!(
            bad(form("", "", "", "")),
            [("month".into(), P::Required), ("team".into(), P::Required), ("amount".into(), P::Required)]
        );
        assert_eq!(bad(form("2026-11", "vision", "abc", "")), [("amount".into(), P::NotNumber)]);
        assert_eq!(bad(form("2026-11", "vision", "-1", "")), [("amount".into(), P::Negative)]);
        assert_eq!(
            bad(form("1999-01", "Vision!", "1", "x")),
            [("month".into(), P::DateRange), ("team".into(), P::UnknownTeam), ("thresholds".into(), P::NotNumber)]
        );
        assert_eq!(bad(form("2026-11", "vision", "1\0", "")), [("amount".into(), P::Characters)]);
        // a team the form does not offer (another's, or none) is named at once, beside the other fields
        assert_eq!(
            bad(form("2026-11", "nlp", "-1", "")),
            [("team".into(), P::UnknownTeam), ("amount".into(), P::Negative)]
        );
    }
}
