//! `/admin/teams`: every team (id, display name in any script, owner, finance codes of today) with the create form,
//! and `/admin/teams/{id}` to rename one or change its owner — the API's `PUT /teams/{id}` use case, audited alike —
//! and to set its finance codes from a day (`/admin/teams/{id}/finance-codes`, the API's
//! `PUT /teams/{id}/finance-codes`), with every version the team has had.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;
use std::collections::BTreeMap;

use crate::billing::FinanceCodes;

use super::{FieldErrors, Tab, blank_none, refused, tabs};
use crate::access::Scope;
use crate::db::teams::Team;
use crate::usecase::finance_codes::{self, FinanceCodesInput};
use crate::usecase::state::AppState;
use crate::usecase::teams::{self, TeamInput};
use crate::validate::TeamId;
use crate::web::capability::{PageGlobalReader, PageWriter};
use crate::web::extract::{CsrfForm, PageUser};
use crate::web::i18n::{Lang, PageLang, t};
use crate::web::layout::{Chrome, PageError};
use crate::web::page_path::PagePath;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/teams", get(list).post(create))
        .route("/admin/teams/{id}", get(edit_page).post(edit))
        .route("/admin/teams/{id}/finance-codes", axum::routing::post(put_codes))
}

/// The team form as sent: every field text.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct TeamForm {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub owner: String,
}

/// The finance codes form as sent (SPEC §11): every field text, blank codes none.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct CodesForm {
    #[serde(default)]
    pub valid_from: String,
    #[serde(default)]
    pub cost_centre: String,
    #[serde(default)]
    pub gl_account: String,
    #[serde(default)]
    pub legal_entity: String,
}

impl CodesForm {
    fn input(&self) -> FinanceCodesInput {
        FinanceCodesInput {
            valid_from: self.valid_from.clone(),
            cost_centre: blank_none(&self.cost_centre),
            gl_account: blank_none(&self.gl_account),
            legal_entity: blank_none(&self.legal_entity),
        }
    }
}

impl TeamForm {
    fn input(&self) -> TeamInput {
        TeamInput { name: self.name.clone(), owner: blank_none(&self.owner) }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "admin/teams.html")]
pub struct TeamsPage {
    pub c: Chrome,
    pub tabs: Vec<Tab>,
    pub teams: Vec<Team>,
    pub may_write: bool,
    /// The team the form edits (`None`: the create form).
    pub editing: Option<String>,
    pub form: TeamForm,
    pub errors: FieldErrors,
    pub saved: Option<String>,
    /// Each team's finance codes of today (billing time zone), by team id.
    pub codes_today: BTreeMap<String, FinanceCodes>,
    /// The edited team's versions of its codes, by first day.
    pub versions: Vec<CodesVersion>,
    pub codes_form: CodesForm,
}

/// A version of the edited team's codes as the page prints it.
pub struct CodesVersion {
    pub valid_from: String,
    pub codes: FinanceCodes,
    pub set_by: String,
    pub set_at: String,
}

impl TeamsPage {
    /// Team `id`'s code of today in column `i` (0 cost centre, 1 GL account, 2 legal entity), blank when none.
    pub fn code_today(&self, id: &str, i: usize) -> &str {
        self.codes_today.get(id).map_or("", |c| c.cells()[i])
    }
}

#[derive(Debug, Default, Deserialize)]
struct SavedQuery {
    saved: Option<String>,
}

async fn page(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    editing: Option<String>,
    form: TeamForm,
    errors: FieldErrors,
) -> Result<TeamsPage, PageError> {
    let title = t(lang, if editing.is_some() { "admin.team_edit" } else { "admin.teams" });
    let tz = s.cases.billing_tz;
    let today = chrono::Utc::now().with_timezone(&tz).date_naive();
    let all = finance_codes::versions(&s.cases, &Scope::all(), None).await?;
    let book = crate::billing::FinanceCodeBook::new(all.iter().map(|r| r.version()));
    let teams = teams::teams(&s.cases, &Scope::all()).await?;
    let codes_today = teams.iter().filter_map(|t| Some((t.id.clone(), book.at(&t.id, today)?.clone()))).collect();
    let versions = all
        .into_iter()
        .filter(|r| editing.as_deref() == Some(r.team_id.as_str()))
        .map(|r| CodesVersion {
            valid_from: r.valid_from.to_string(),
            codes: r.codes(),
            set_by: crate::access::actor_name(&r.set_by).to_string(),
            set_at: r.set_at.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string(),
        })
        .collect();
    Ok(TeamsPage {
        c: Chrome::new(user, lang, "/admin/teams", title),
        tabs: tabs(user, lang, "/admin/teams"),
        teams,
        may_write: crate::web::capability::may_write(user),
        editing,
        form,
        errors,
        saved: None,
        codes_today,
        versions,
        codes_form: CodesForm { valid_from: today.to_string(), ..CodesForm::default() },
    })
}

async fn list(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<SavedQuery>,
) -> Result<TeamsPage, PageError> {
    let mut p = page(&s, &user, lang, None, TeamForm::default(), FieldErrors::default()).await?;
    // only a team that exists is named as saved
    p.saved = q.saved.filter(|id| p.teams.iter().any(|t| &t.id == id));
    Ok(p)
}

async fn create(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    CsrfForm(form): CsrfForm<TeamForm>,
) -> Result<Response, PageError> {
    match teams::create_team(&s.cases, &writer, form.id.trim(), &form.input()).await {
        Ok(team) => Ok(Redirect::to(&format!("/admin/teams?saved={}", team.id)).into_response()),
        Err(e) => {
            let errors = FieldErrors::from_refusal(lang, e)?;
            Ok(refused(page(&s, &user, lang, None, form, errors).await?))
        }
    }
}

/// Team `id` of a path, when it exists.
async fn existing(s: &AppState, id: &TeamId) -> Result<Team, PageError> {
    Ok(teams::team(&s.cases, &Scope::all(), id).await?)
}

async fn edit_page(
    State(s): State<AppState>,
    PageWriter { user, .. }: PageWriter,
    PageLang(lang): PageLang,
    PagePath(id): PagePath<TeamId>,
    Query(q): Query<SavedQuery>,
) -> Result<TeamsPage, PageError> {
    let team = existing(&s, &id).await?;
    let form = TeamForm { id: team.id.clone(), name: team.name, owner: team.owner.unwrap_or_default() };
    let mut p = page(&s, &user, lang, Some(team.id.clone()), form, FieldErrors::default()).await?;
    p.saved = q.saved.filter(|saved| *saved == team.id);
    Ok(p)
}

async fn edit(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    PagePath(id): PagePath<TeamId>,
    CsrfForm(mut form): CsrfForm<TeamForm>,
) -> Result<Response, PageError> {
    let team = existing(&s, &id).await?;
    // the id is the path's: a form cannot move the edit to another team
    form.id = team.id.clone();
    match teams::put_team(&s.cases, &writer, &team.id, &form.input()).await {
        Ok(team) => Ok(Redirect::to(&format!("/admin/teams?saved={}", team.id)).into_response()),
        Err(e) => {
            let errors = FieldErrors::from_refusal(lang, e)?;
            Ok(refused(page(&s, &user, lang, Some(team.id), form, errors).await?))
        }
    }
}

/// Sets the edited team's finance codes from a day; refused, the edit page again with the fields' messages and
/// what was typed.
async fn put_codes(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    PagePath(id): PagePath<TeamId>,
    CsrfForm(codes): CsrfForm<CodesForm>,
) -> Result<Response, PageError> {
    let team = existing(&s, &id).await?;
    match finance_codes::put(&s.cases, &writer, &id, &codes.input()).await {
        Ok(_) => Ok(Redirect::to(&format!("/admin/teams/{}?saved={}", team.id, team.id)).into_response()),
        Err(e) => {
            let errors = FieldErrors::from_refusal(lang, e)?;
            let form = TeamForm { id: team.id.clone(), name: team.name, owner: team.owner.unwrap_or_default() };
            let mut p = page(&s, &user, lang, Some(team.id), form, errors).await?;
            p.codes_form = codes;
            Ok(refused(p))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Role;
    use crate::web::layout::tests::user;

    #[test]
    fn the_team_form_comes_back_with_the_fields_message() {
        let u = user(Role::Finance, &[]);
        let mut errors = FieldErrors::default();
        errors.push(Lang::Zh, "name", "must not be blank");
        let page = TeamsPage {
            c: Chrome::new(&u, Lang::Zh, "/admin/teams", "团队"),
            tabs: tabs(&u, Lang::Zh, "/admin/teams"),
            teams: vec![Team { id: "algo".into(), name: "算法团队".into(), owner: Some("张三".into()) }],
            may_write: true,
            editing: None,
            form: TeamForm { id: "équipe".into(), name: String::new(), owner: "<b>".into() },
            errors,
            saved: None,
            codes_today: BTreeMap::from([(
                "algo".to_string(),
                FinanceCodes { cost_centre: Some("CC-1001".into()), ..Default::default() },
            )]),
            versions: Vec::new(),
            codes_form: CodesForm::default(),
        };
        let html = page.render().unwrap();
        assert!(html.contains("算法团队") && html.contains("张三"), "{html}");
        assert!(html.contains(r#"<span class="field-error">不能为空</span>"#), "{html}");
        // what was typed comes back, escaped
        assert!(html.contains(r#"value="équipe""#) && html.contains("&#60;b&#62;"), "{html}");
        assert!(html.contains(r#"<input type="hidden" name="csrf" value="tok-123">"#), "{html}");
        assert!(html.contains(r#"href="/admin/teams/algo""#), "{html}");
    }
}
