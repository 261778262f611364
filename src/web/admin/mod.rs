//! The admin pages: teams, namespace → team mappings (with the CMDB CSV upload and its preview), users, API
//! tokens and the audit log. Who opens what mirrors the API: global readers see the lists, writers (finance,
//! admin) change teams and mappings, only an admin sees users and tokens; for anyone else such a page is the
//! not-found page, and a form sent by them writes nothing. Each page is a file of its own; what they share —
//! the access rule, the section's tabs, the field messages of a refused form in the page's language — is here.

mod audit;
mod mappings;
mod teams;
mod tokens;
mod users;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::field_errors::localize;
use super::i18n::{self, Lang, Word};
use super::layout::PageError;
use crate::access::{Administrator, Principal};
use crate::usecase;
use crate::usecase::state::AppState;
use crate::validate::{FieldError, Problem};
use crate::web::extract::PageUser;

pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(teams::routes())
        .merge(mappings::routes())
        .merge(users::routes())
        .merge(tokens::routes())
        .merge(audit::routes())
}

/// Who a tab is for (what the header offers; the pages themselves take [`PageGlobalReader`], [`PageWriter`] or
/// [`PageAdmin`]).
///
/// [`PageGlobalReader`]: crate::web::capability::PageGlobalReader
/// [`PageWriter`]: crate::web::capability::PageWriter
/// [`PageAdmin`]: crate::web::capability::PageAdmin
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Reads every team (viewer, finance, admin): the lists.
    Reader,
    /// Users and tokens: admin only.
    Admin,
}

impl Need {
    fn admits(self, p: &Principal) -> bool {
        match self {
            Need::Reader => p.scope().is_global(),
            Need::Admin => Administrator::of(p).is_some(),
        }
    }
}

/// One tab of the admin section.
pub struct Tab {
    pub href: &'static str,
    pub label: &'static str,
    pub active: bool,
}

/// The admin pages the caller may open, `active` marked.
pub fn tabs(user: &PageUser, lang: Lang, active: &str) -> Vec<Tab> {
    const ALL: &[(&str, &str, Need)] = &[
        ("/admin/teams", "admin.teams", Need::Reader),
        ("/admin/mappings", "admin.mappings", Need::Reader),
        ("/admin/users", "admin.users", Need::Admin),
        ("/admin/tokens", "admin.tokens", Need::Admin),
        ("/admin/audit", "admin.audit", Need::Reader),
    ];
    ALL.iter()
        .filter(|(.., need)| need.admits(&user.principal))
        .map(|(href, key, _)| Tab { href, label: i18n::t(lang, key), active: *href == active })
        .collect()
}

/// Each bad field of a form, its message in the page's language.
#[derive(Debug, Default, Clone)]
pub struct FieldErrors(pub Vec<FieldError>);

impl FieldErrors {
    pub fn get(&self, field: &str) -> Option<&str> {
        self.0.iter().find(|e| e.field == field).map(|e| e.message.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn push(&mut self, lang: Lang, field: &str, message: &str) {
        self.0.push(FieldError::new(field, localize(lang, message)));
    }

    fn of(lang: Lang, list: Vec<FieldError>) -> Self {
        FieldErrors(list.into_iter().map(|e| FieldError { message: localize(lang, &e.message), ..e }).collect())
    }

    /// The fields a use case refused, or the error as a page when it is not about a field.
    pub fn from_refusal(lang: Lang, e: usecase::Error) -> Result<Self, PageError> {
        use usecase::Error as E;
        match e {
            E::Invalid(list) => Ok(Self::of(lang, list)),
            E::NotFoundField { field, message } => Ok(Self::of(lang, vec![FieldError::new(field, message)])),
            E::Conflict { field: Some(field), message } => {
                Ok(Self::of(lang, vec![FieldError::of(field, Problem::Taken, message)]))
            }
            other => Err(other.into()),
        }
    }
}

/// A form sent back with its messages: 422.
pub fn refused(page: impl IntoResponse) -> Response {
    (StatusCode::UNPROCESSABLE_ENTITY, page).into_response()
}

/// A text field of a form left blank: `None`.
pub fn blank_none(s: &str) -> Option<String> {
    (!s.trim().is_empty()).then(|| s.to_string())
}

/// A comma-separated list of team ids as typed (`vision, nlp`): its items, blanks dropped.
pub fn team_list(s: &str) -> Vec<String> {
    s.split([',', '，', ' ']).map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect()
}

/// A role's name on a page.
pub fn role_word(lang: Lang, role: &str) -> String {
    let key = match role {
        "admin" => "role.admin",
        "finance" => "role.finance",
        "viewer" => "role.viewer",
        "team_lead" => "role.team_lead",
        other => return other.to_string(),
    };
    // English readers read the role's own name; others the word and the name the API and CLI use
    if lang == Lang::En { role.to_string() } else { format!("{} ({role})", i18n::t(lang, key)) }
}

/// The roles a form offers, in the order it lists them.
pub const ROLES: [&str; 4] = ["admin", "finance", "viewer", "team_lead"];

/// The admin section's words.
pub(in crate::web) const WORDS: &[Word] = &[
    ("nav.admin", "管理", "Admin"),
    ("admin.teams", "团队", "Teams"),
    ("admin.mappings", "命名空间映射", "Namespace mappings"),
    ("admin.users", "用户", "Users"),
    ("admin.tokens", "API 令牌", "API tokens"),
    ("admin.audit", "审计日志", "Audit log"),
    ("admin.all_teams", "全部团队", "All teams"),
    ("admin.all_mappings", "全部映射", "All mappings"),
    ("admin.all_users", "全部用户", "All users"),
    ("admin.all_tokens", "全部令牌", "All tokens"),
    ("admin.id", "ID", "ID"),
    ("admin.name", "显示名称", "Display name"),
    ("admin.edit", "编辑", "Edit"),
    ("admin.team_new", "新建团队", "New team"),
    ("admin.team_edit", "编辑团队", "Edit team"),
    ("admin.create", "创建", "Create"),
    ("admin.save", "保存", "Save"),
    ("admin.saved", "已保存：", "Saved:"),
    ("admin.none", "暂无。", "None yet."),
    ("admin.read_only", "只读：修改需要财务或管理员角色。", "Read only: changes need the finance or admin role."),
    ("admin.cluster", "集群（留空为所有集群）", "Cluster (blank: every cluster)"),
    ("admin.all_clusters", "所有集群", "every cluster"),
    ("admin.valid_from", "生效日期", "Valid from"),
    ("admin.created_by", "创建人", "Created by"),
    ("admin.created_at", "创建时间", "Created"),
    ("admin.mapping_put", "添加或修改映射", "Add or change a mapping"),
    (
        "admin.mapping_hint",
        "同一集群、命名空间和生效日期已有映射时，改为指向所选团队。",
        "A mapping of the same cluster, namespace and day is pointed at the chosen team.",
    ),
    ("admin.change", "修改", "Change"),
    ("admin.upload", "上传 CMDB CSV", "Upload a CMDB CSV"),
    (
        "admin.upload_hint",
        "表头 namespace,team,valid_from，可选 team_name、owner、cluster；UTF-8 或 GBK；日期如 2026-11-01 或 2026/11/01。先预览，确认后才写入。",
        "Header namespace,team,valid_from, optional team_name, owner, cluster; UTF-8 or GBK; dates as 2026-11-01 or 2026/11/01. Previewed first; nothing is written until you apply.",
    ),
    ("admin.file", "CSV 文件", "CSV file"),
    ("admin.preview", "预览", "Preview"),
    ("admin.preview_title", "导入预览", "Import preview"),
    (
        "admin.preview_note",
        "以下是应用后将发生的变化，目前尚未写入任何内容。",
        "What applying will change; nothing is written yet.",
    ),
    ("admin.line", "行", "Line"),
    ("admin.action", "变化", "Change"),
    ("admin.previous", "原团队", "Team before"),
    ("admin.added", "新增", "added"),
    ("admin.changed", "修改", "changed"),
    ("admin.unchanged", "不变", "unchanged"),
    ("admin.errors", "错误", "errors"),
    ("admin.error", "错误", "error"),
    ("admin.teams_created", "将新建的团队", "teams to create"),
    ("admin.apply", "应用此导入", "Apply this import"),
    (
        "admin.cannot_apply",
        "文件有错误，不能应用：请修正后重新上传。",
        "The file has errors and cannot be applied: fix them and upload it again.",
    ),
    ("admin.nothing_to_apply", "没有需要写入的变化。", "Nothing to change."),
    ("admin.imported", "已导入：", "Imported:"),
    ("admin.back", "返回", "Back"),
    ("admin.username", "用户名", "Username"),
    ("admin.role", "角色", "Role"),
    ("admin.teams_field", "团队（团队负责人必填，逗号分隔）", "Teams (team leads only, comma-separated)"),
    ("admin.disabled", "已停用", "Disabled"),
    ("admin.active", "启用", "active"),
    ("admin.last_login", "最近登录", "Last login"),
    ("admin.never_logged_in", "从未登录", "never"),
    ("admin.never_used", "从未使用", "never"),
    ("admin.password", "初始密码", "Initial password"),
    ("admin.new_password", "新密码", "New password"),
    ("admin.set_password", "设置密码", "Set password"),
    (
        "admin.set_password_note",
        "设置新密码后，该用户的其他会话将全部退出。",
        "Setting a password signs that user out of every other session.",
    ),
    ("admin.password_set", "密码已设置：", "Password set:"),
    ("admin.disable", "停用", "Disable"),
    ("admin.user_new", "新建用户", "New user"),
    ("admin.token_new", "新建 API 令牌", "New API token"),
    ("admin.holder", "持有者", "Held by"),
    (
        "admin.expires",
        "到期日（当天 0 点起失效，留空为永不过期）",
        "Expires on (refused from that day on; blank: never)",
    ),
    ("admin.expires_col", "到期", "Expires"),
    ("admin.never", "永不", "never"),
    ("admin.last_used", "最近使用", "Last used"),
    ("admin.revoked", "已吊销", "Revoked"),
    ("admin.revoke", "吊销", "Revoke"),
    ("admin.token_created", "令牌已创建", "Token created"),
    (
        "admin.token_once",
        "这是唯一一次显示该令牌，请立即复制保存；之后无法再次查看。",
        "This is the only time the token is shown: copy it now, it cannot be shown again.",
    ),
    ("admin.at", "时间", "Time"),
    ("admin.actor", "操作人", "Actor"),
    ("admin.entity", "对象", "Entity"),
    ("admin.before", "修改前", "Before"),
    ("admin.after", "修改后", "After"),
    ("admin.newest", "最新", "Newest"),
    ("admin.older", "更早 →", "Older →"),
    ("role.admin", "管理员", "admin"),
    ("role.finance", "财务", "finance"),
    ("role.viewer", "只读", "viewer"),
    ("role.team_lead", "团队负责人", "team lead"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Role;
    use crate::web::layout::tests::user;

    #[test]
    fn messages_speak_the_pages_language() {
        assert_eq!(localize(Lang::Zh, "must be at most 200 characters"), "最多 200 个字符");
        assert_eq!(localize(Lang::En, "must be at most 200 characters"), "must be at most 200 characters");
        assert_eq!(localize(Lang::Zh, "unknown team `nope` (create it first)"), "团队 `nope` 不存在（请先创建）");
        assert_eq!(localize(Lang::Zh, "must not contain a NUL byte"), "不能包含 NUL 字符");
        assert_eq!(
            localize(Lang::Zh, "must be between 2000-01-01 and 2100-12-31"),
            "必须在 2000-01-01 与 2100-12-31 之间"
        );
        // a message the table does not know is shown as it is
        assert_eq!(localize(Lang::Zh, "something new"), "something new");
    }

    #[test]
    fn the_tabs_follow_the_role() {
        let hrefs = |r| tabs(&user(r, &[]), Lang::En, "/admin/teams").into_iter().map(|t| t.href).collect::<Vec<_>>();
        assert_eq!(
            hrefs(Role::Admin),
            ["/admin/teams", "/admin/mappings", "/admin/users", "/admin/tokens", "/admin/audit"]
        );
        assert_eq!(hrefs(Role::Finance), ["/admin/teams", "/admin/mappings", "/admin/audit"]);
        assert_eq!(hrefs(Role::Viewer), hrefs(Role::Finance));
        assert!(hrefs(Role::TeamLead).is_empty());
        assert_eq!(team_list(" vision,nlp ，x  "), ["vision", "nlp", "x"]);
    }
}
