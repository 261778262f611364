//! The nodes page (issue 33): what a month's data marks — GPU models nothing names or prices (billed at nothing),
//! nodes whose cards could not be counted — and assigning a node's model, cards or replicas without the command
//! line, as `PUT /api/v1/nodes/{cluster}/{node}` does ([`crate::usecase::nodes`]): the form previews what the
//! change moves (GPU-hours and ¥ per team, the capacity cost, the unallocated part; on a closed month the
//! restatements it causes) before the save is offered, and a save whose settings are not the ones previewed is
//! previewed again instead. Global readers read and preview; writers save (audited by the use case).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::capability::{PageGlobalReader, PageWriter, may_write};
use super::fmt::{card_hours, yuan};
use super::i18n::{PageLang, t};
use super::layout::{Chrome, MonthQuery, PageError};
use super::policy::{PolicyQuery, team_id_note};
use crate::billing::{Month, PolicyChoice};
use crate::export::Lang;
use crate::glossary;
use crate::ledger::readiness::Blocker;
use crate::usecase::nodes::{self, NodePreview, NodeSettingsView};
use crate::usecase::state::AppState;
use crate::usecase::{self, closing};
use crate::validate::ClusterName;
use crate::web::extract::{CsrfForm, PageUser};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/nodes", get(list))
        .route("/nodes/{cluster}/{node}", get(edit).post(save))
        .route("/nodes/{cluster}/{node}/preview", post(preview))
}

/// The sharing kinds a node may be set to (the API's names), in the select's order.
const SHARINGS: [&str; 4] = ["none", "time-slicing", "mps", "hami"];

/// A sharing kind in words.
fn sharing_words(lang: Lang, x: &str) -> String {
    let key = match x {
        "none" => "nodes.sharing.none",
        "time-slicing" => "nodes.sharing.time-slicing",
        "mps" => "nodes.sharing.mps",
        "hami" => "nodes.sharing.hami",
        other => return other.to_string(),
    };
    t(lang, key).to_string()
}

/// A GPU model the month's data leaves unpriced: unknown, or without a rate for some day.
pub struct ModelRow {
    pub model: String,
    pub unknown: bool,
    pub usage: String,
    pub capacity: String,
}

/// A node the month's data marks, its marks in words.
pub struct NodeRow {
    pub cluster: String,
    pub node: String,
    pub marks: String,
    pub hours: i64,
    pub model: String,
    pub held: String,
    pub capacity: String,
    pub settings: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "nodes.html")]
pub struct NodesPage {
    pub c: Chrome,
    pub month: String,
    pub models: Vec<ModelRow>,
    pub nodes: Vec<NodeRow>,
    /// `cluster/node` just saved.
    pub saved: Option<String>,
}

/// `?month=&saved=`.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(flatten)]
    pub month: MonthQuery,
    pub saved: Option<String>,
}

fn settings_words(lang: Lang, s: Option<&NodeSettingsView>) -> String {
    let Some(s) = s else { return "–".into() };
    let mut parts = Vec::new();
    if let Some(m) = &s.gpu_model {
        parts.push(m.clone());
    }
    if let Some(c) = s.cards {
        parts.push(format!("{} {c}", t(lang, "nodes.cards")));
    }
    if let Some(r) = s.replicas {
        parts.push(format!("{} {r}", t(lang, "nodes.replicas")));
    }
    if let Some(x) = &s.sharing {
        parts.push(sharing_words(lang, x));
    }
    if parts.is_empty() { "–".into() } else { parts.join(lang.pick("，", ", ")) }
}

async fn list(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<ListQuery>,
) -> Result<NodesPage, PageError> {
    let month = q.month.month(&s)?;
    let scope = user.principal.scope();
    let readiness = closing::readiness(&s.cases, &scope, month).await?;
    let models = readiness
        .blockers
        .iter()
        .filter_map(|b| match b {
            Blocker::UnknownGpuModel { gpu_model, usage_card_hours, capacity_card_hours, .. } => Some(ModelRow {
                model: glossary::model(lang, gpu_model),
                unknown: gpu_model == "unknown",
                usage: card_hours(*usage_card_hours),
                capacity: card_hours(*capacity_card_hours),
            }),
            _ => None,
        })
        .collect();
    let marked = nodes::marked(&s.cases, &scope, month).await?;
    let mut rows: Vec<NodeRow> = Vec::new();
    for m in marked {
        let mark = glossary::term(lang, &format!("anomaly.{}", m.kind));
        match rows.iter_mut().find(|r| r.cluster == m.cluster && r.node == m.node) {
            // one row per node, its marks together
            Some(r) => {
                r.marks = format!("{}{}{mark}", r.marks, lang.pick("；", "; "));
                r.hours = r.hours.max(m.hours);
            }
            None => rows.push(NodeRow {
                marks: mark,
                hours: m.hours,
                model: glossary::model(lang, m.gpu_model.as_deref().unwrap_or("unknown")),
                held: card_hours(m.held_card_hours),
                capacity: card_hours(m.capacity_card_hours),
                settings: settings_words(lang, m.settings.as_ref()),
                cluster: m.cluster,
                node: m.node,
            }),
        }
    }
    Ok(NodesPage {
        c: Chrome::new(&user, lang, "/nodes", format!("{} {month}", t(lang, "nodes.title"))),
        month: month.to_string(),
        models,
        nodes: rows,
        saved: q.saved.filter(|x| !x.is_empty() && x.len() <= 200),
    })
}

/// The node form as sent: every field text (blank: not set).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct NodeForm {
    #[serde(default)]
    pub month: String,
    #[serde(default)]
    pub mode: String,
    #[serde(default)]
    pub unallocated: String,
    #[serde(default)]
    pub gpu_model: String,
    #[serde(default)]
    pub cards: String,
    #[serde(default)]
    pub replicas: String,
    #[serde(default)]
    pub sharing: String,
    /// The settings the preview showed, as [`NodeForm::key`] writes them (the save checks it).
    #[serde(default)]
    pub previewed: String,
}

impl NodeForm {
    fn of(month: Month, q: &PolicyQuery, s: Option<&NodeSettingsView>) -> Self {
        let n = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_default();
        NodeForm {
            month: month.to_string(),
            mode: q.mode.clone().unwrap_or_default(),
            unallocated: q.unallocated.clone().unwrap_or_default(),
            gpu_model: s.and_then(|s| s.gpu_model.clone()).unwrap_or_default(),
            cards: n(s.and_then(|s| s.cards)),
            replicas: n(s.and_then(|s| s.replicas)),
            sharing: s.and_then(|s| s.sharing.clone()).unwrap_or_default(),
            previewed: String::new(),
        }
    }

    /// The settings asked for, field by field: each bad field's message in `lang`.
    fn settings(&self, lang: Lang) -> Result<NodeSettingsView, Vec<(String, String)>> {
        let mut errors = Vec::new();
        let mut count = |field: &str, s: &str| {
            let s = s.trim();
            if s.is_empty() {
                return None;
            }
            match s.parse::<u32>() {
                Ok(n) if (1..=1024).contains(&n) => Some(n),
                _ => {
                    errors.push((field.to_string(), t(lang, "nodes.err.whole").to_string()));
                    None
                }
            }
        };
        let cards = count("cards", &self.cards);
        let replicas = count("replicas", &self.replicas);
        let model = self.gpu_model.trim();
        if model.eq_ignore_ascii_case("unknown") || model == glossary::term(Lang::Zh, "model.unknown") {
            errors.push(("gpu_model".into(), t(lang, "nodes.err.unknown").into()));
        }
        let sharing = self.sharing.trim();
        if !sharing.is_empty() && !SHARINGS.contains(&sharing) {
            errors.push(("sharing".into(), t(lang, "nodes.err.invalid").into()));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(NodeSettingsView {
            cards,
            replicas,
            gpu_model: Some(model.to_string()).filter(|m| !m.is_empty()),
            sharing: Some(sharing.to_string()).filter(|s| !s.is_empty()),
        })
    }

    /// What identifies a preview: the month, the policy and the settings.
    fn key(&self, settings: &NodeSettingsView) -> String {
        format!(
            "{}|{}|{}|{:?}|{:?}|{:?}|{:?}",
            self.month.trim(),
            self.mode.trim(),
            self.unallocated.trim(),
            settings.gpu_model,
            settings.cards,
            settings.replicas,
            settings.sharing
        )
    }

    fn policy(&self) -> Result<PolicyChoice, PageError> {
        PolicyQuery { mode: Some(self.mode.clone()), unallocated: Some(self.unallocated.clone()) }.choice()
    }
}

/// One team's move as printed.
pub struct MoveRow {
    pub name: String,
    pub id_note: Option<String>,
    pub card_hours_before: String,
    pub card_hours_after: String,
    pub total_before: String,
    pub total_after: String,
    pub delta: String,
}

/// A cluster figure before and after.
pub struct FigureRow {
    pub label: String,
    pub before: String,
    pub after: String,
}

/// The preview as printed.
pub struct PreviewView {
    pub closed: bool,
    pub teams: Vec<MoveRow>,
    pub figures: Vec<FigureRow>,
}

impl PreviewView {
    fn of(p: &NodePreview, lang: Lang) -> Self {
        let teams = p
            .teams
            .iter()
            .map(|m| {
                let (name, id_note) = team_id_note(lang, &m.team, &m.name);
                MoveRow {
                    name,
                    id_note,
                    card_hours_before: card_hours(m.card_hours_before),
                    card_hours_after: card_hours(m.card_hours_after),
                    total_before: yuan(m.total_before),
                    total_after: yuan(m.total_after),
                    delta: yuan(m.delta),
                }
            })
            .collect();
        let fig =
            |key: &'static str, before: String, after: String| FigureRow { label: t(lang, key).into(), before, after };
        PreviewView {
            closed: p.closed,
            teams,
            figures: vec![
                fig(
                    "nodes.capacity_card_hours",
                    card_hours(p.capacity_card_hours_before),
                    card_hours(p.capacity_card_hours_after),
                ),
                fig("capacity_cost", yuan(p.capacity_cost_before), yuan(p.capacity_cost_after)),
                fig("unallocated", yuan(p.unallocated_before), yuan(p.unallocated_after)),
                fig("platform_kept", yuan(p.platform_kept_before), yuan(p.platform_kept_after)),
            ],
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "node_edit.html")]
pub struct NodePage {
    pub c: Chrome,
    pub cluster: String,
    pub node: String,
    pub form: NodeForm,
    pub preview: Option<PreviewView>,
    pub notice: Option<&'static str>,
    pub may_save: bool,
    pub errors: Vec<(String, String)>,
}

impl NodePage {
    pub fn error(&self, field: &str) -> Option<&str> {
        self.errors.iter().find(|(f, _)| f == field).map(|(_, m)| m.as_str())
    }

    /// The sharing kinds to choose from: (value, words, selected).
    pub fn sharings(&self) -> Vec<(&'static str, String, &'static str)> {
        SHARINGS
            .iter()
            .map(|x| {
                let words = sharing_words(self.c.lang, x);
                (*x, words, if self.form.sharing.trim() == *x { "selected" } else { "" })
            })
            .collect()
    }
}

/// A cluster and node in a path, by the API's rules; anything else names no page.
fn node_of(cluster: &str, node: &str) -> Result<(ClusterName, String), PageError> {
    let cluster = ClusterName::parse("cluster", cluster).map_err(|_| PageError::NotFound)?;
    let node = crate::validate::node_name("node", node).map_err(|_| PageError::NotFound)?;
    Ok((cluster, node))
}

fn page(
    user: &PageUser,
    lang: Lang,
    (cluster, node): (String, String),
    form: NodeForm,
    preview: Option<PreviewView>,
    notice: Option<&'static str>,
    errors: Vec<(String, String)>,
) -> NodePage {
    NodePage {
        c: Chrome::new(user, lang, "/nodes", format!("{} {cluster}/{node}", t(lang, "nodes.edit_title"))),
        cluster,
        node,
        form,
        preview,
        notice: notice.map(|key| t(lang, key)),
        may_save: may_write(user),
        errors,
    }
}

/// `?month=&mode=&unallocated=`.
#[derive(Debug, Default, Deserialize)]
pub struct EditQuery {
    #[serde(flatten)]
    pub month: MonthQuery,
    #[serde(flatten)]
    pub policy: PolicyQuery,
}

async fn edit(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Path((cluster, node)): Path<(String, String)>,
    Query(q): Query<EditQuery>,
) -> Result<NodePage, PageError> {
    let (cluster, node) = node_of(&cluster, &node)?;
    let month = q.month.month(&s)?;
    q.policy.choice()?;
    let stored = nodes::configured(&s.cases, &user.principal.scope(), Some(&cluster)).await?;
    let now = stored.iter().find(|x| x.node == node).map(|x| NodeSettingsView::from(&x.settings()));
    let form = NodeForm::of(month, &q.policy, now.as_ref());
    Ok(page(&user, lang, (cluster.into_string(), node), form, None, None, Vec::new()))
}

/// The month a form names, by the page rules: none, or one to come, names no page.
fn form_month(s: &AppState, form: &NodeForm) -> Result<Month, PageError> {
    MonthQuery { month: Some(form.month.clone()) }.month(s)
}

/// The preview of `form`'s settings, or the form back with each bad field.
async fn previewed(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    at: (String, String),
    mut form: NodeForm,
    notice: Option<&'static str>,
) -> Result<Response, PageError> {
    let month = form_month(s, &form)?;
    let choice = form.policy()?;
    let settings = match form.settings(lang) {
        Ok(v) => v,
        Err(errors) => {
            let p = page(user, lang, at, form, None, None, errors);
            return Ok((StatusCode::UNPROCESSABLE_ENTITY, p).into_response());
        }
    };
    let scope = user.principal.scope();
    match nodes::preview(&s.cases, &scope, month, choice, &at.0, &at.1, &settings).await {
        Ok(p) => {
            form.previewed = form.key(&settings);
            Ok(page(user, lang, at, form, Some(PreviewView::of(&p, lang)), notice, Vec::new()).into_response())
        }
        Err(usecase::Error::Invalid(list)) => {
            let errors = list.into_iter().map(|i| (i.field, super::field_errors::localize(lang, &i.message))).collect();
            let p = page(user, lang, at, form, None, None, errors);
            Ok((StatusCode::UNPROCESSABLE_ENTITY, p).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

async fn preview(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Path((cluster, node)): Path<(String, String)>,
    CsrfForm(form): CsrfForm<NodeForm>,
) -> Result<Response, PageError> {
    let (cluster, node) = node_of(&cluster, &node)?;
    let at = (cluster.into_string(), node);
    previewed(&s, &user, lang, at, form, None).await
}

async fn save(
    State(s): State<AppState>,
    writer: PageWriter,
    PageLang(lang): PageLang,
    Path((cluster, node)): Path<(String, String)>,
    CsrfForm(form): CsrfForm<NodeForm>,
) -> Result<Response, PageError> {
    let (cluster, node) = node_of(&cluster, &node)?;
    let at = (cluster.into_string(), node);
    let month = form_month(&s, &form)?;
    // saved only as previewed: other settings (or none previewed) are previewed first
    let settings = match form.settings(lang) {
        Ok(v) if form.key(&v) == form.previewed => v,
        _ => return previewed(&s, &writer.user, lang, at, form, Some("nodes.repreview")).await,
    };
    match nodes::assign(&s.cases, &writer.writer, &at.0, &at.1, &settings).await {
        Ok(_) => {
            let saved: String = url::form_urlencoded::byte_serialize(format!("{}/{}", at.0, at.1).as_bytes()).collect();
            Ok(Redirect::to(&format!("/nodes?month={month}&saved={saved}")).into_response())
        }
        Err(usecase::Error::Invalid(list)) => {
            let errors = list.into_iter().map(|i| (i.field, super::field_errors::localize(lang, &i.message))).collect();
            let p = page(&writer.user, lang, at, form, None, None, errors);
            Ok((StatusCode::UNPROCESSABLE_ENTITY, p).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(cards: &str, replicas: &str, model: &str) -> NodeForm {
        NodeForm {
            month: "2026-11".into(),
            cards: cards.into(),
            replicas: replicas.into(),
            gpu_model: model.into(),
            ..NodeForm::default()
        }
    }

    #[test]
    fn each_bad_field_is_named_in_the_pages_language() {
        let fields = |f: NodeForm| f.settings(Lang::Zh).unwrap_err().into_iter().map(|(f, _)| f).collect::<Vec<_>>();
        assert_eq!(fields(form("abc", "0", "unknown")), ["cards", "replicas", "gpu_model"]);
        assert_eq!(fields(form("1025", "", " 未知型号 ")), ["cards", "gpu_model"]);
        let e = form("8.5", "", "").settings(Lang::Zh).unwrap_err();
        assert_eq!(e[0].1, "请输入 1 到 1024 之间的整数");
        let ok = form(" 8 ", "", " NVIDIA H100 80GB HBM3 ").settings(Lang::En).unwrap();
        assert_eq!((ok.cards, ok.replicas, ok.gpu_model.as_deref()), (Some(8), None, Some("NVIDIA H100 80GB HBM3")));
    }

    #[test]
    fn a_save_is_the_preview_only_when_nothing_changed() {
        let f = form("8", "", "NVIDIA L40S");
        let s = f.settings(Lang::En).unwrap();
        let key = f.key(&s);
        let other = form("4", "", "NVIDIA L40S");
        assert_ne!(key, other.key(&other.settings(Lang::En).unwrap()));
        let policy = NodeForm { mode: "chargeback".into(), ..f.clone() };
        assert_ne!(key, policy.key(&s));
    }

    #[test]
    fn the_preview_names_the_restatement_of_a_closed_month() {
        let user = crate::web::layout::tests::user(crate::access::Role::Finance, &[]);
        let preview = PreviewView {
            closed: true,
            teams: vec![MoveRow {
                name: "视觉组".into(),
                id_note: Some("vision".into()),
                card_hours_before: "10.400".into(),
                card_hours_after: "10.400".into(),
                total_before: "¥0.00".into(),
                total_after: "¥208.00".into(),
                delta: "¥208.00".into(),
            }],
            figures: vec![],
        };
        let p = page(&user, Lang::Zh, ("sim".into(), "n1".into()), form("8", "", "X"), Some(preview), None, vec![]);
        let html = p.render().unwrap();
        assert!(html.contains("追溯调整") && html.contains("¥208.00"), "{html}");
        assert!(html.contains(r#"formaction="/nodes/sim/n1""#), "the save is offered: {html}");
        assert!(html.contains(r#"<input type="hidden" name="csrf" value="tok-123">"#), "{html}");
        let viewer = crate::web::layout::tests::user(crate::access::Role::Viewer, &[]);
        let p = page(&viewer, Lang::Zh, ("sim".into(), "n1".into()), form("8", "", "X"), None, None, vec![]);
        assert!(!p.render().unwrap().contains(r#"formaction="/nodes/sim/n1""#), "a reader previews, never saves");
    }
}
