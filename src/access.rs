//! Who may see what: the roles a caller holds, the caller, and the access scope every query, export and page is
//! given (a team lead: its own teams; everyone else: everything). Pure data, below every face and every query.

use serde::{Deserialize, Serialize};

/// Who may see what: `None` is everything (finance, admin, viewer); `Some(teams)` only those teams' usage.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub teams: Option<Vec<String>>,
}

impl Scope {
    pub fn all() -> Self {
        Self { teams: None }
    }

    pub fn teams(teams: Vec<String>) -> Self {
        Self { teams: Some(teams) }
    }

    pub fn allows(&self, team: &str) -> bool {
        self.teams.as_ref().is_none_or(|t| t.iter().any(|x| x == team))
    }

    /// Whether this scope reads every team and the cluster-wide figures.
    pub fn is_global(&self) -> bool {
        self.teams.is_none()
    }
}

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything, tokens included.
    Admin,
    /// Everything finance needs: rates, mappings, bills, closing months.
    Finance,
    /// Reads its own teams' usage and bills; other teams do not exist for it.
    #[value(name = "team_lead")]
    TeamLead,
    /// Reads everything, changes nothing.
    Viewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Finance => "finance",
            Self::TeamLead => "team_lead",
            Self::Viewer => "viewer",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "admin" => Some(Self::Admin),
            "finance" => Some(Self::Finance),
            "team_lead" => Some(Self::TeamLead),
            "viewer" => Some(Self::Viewer),
            _ => None,
        }
    }

    /// May change rates, mappings, teams, budgets and close months.
    pub fn writes(self) -> bool {
        matches!(self, Self::Admin | Self::Finance)
    }

    /// May read every team's data and the cluster-wide figures.
    pub fn reads_globally(self) -> bool {
        !matches!(self, Self::TeamLead)
    }
}

/// How a caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// An API bearer token (its id).
    Token(i64),
    /// A portal user signed in with a password (the user's id).
    User(i64),
    /// A user named by the authenticating proxy's headers (SSO mode): not a stored user.
    Proxy,
    /// The command line: whoever runs `cardhour` with the database's credentials (its name is the audit's actor
    /// as given).
    Operator,
}

/// An authenticated caller (only the capability extractors hand one to a handler).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub credential: Credential,
    pub name: String,
    pub role: Role,
    /// The teams of a team lead.
    pub teams: Vec<String>,
}

impl Principal {
    /// The data this caller may read.
    pub fn scope(&self) -> Scope {
        if self.role.reads_globally() { Scope::all() } else { Scope::teams(self.teams.clone()) }
    }

    /// The name written in the audit log.
    pub fn actor(&self) -> String {
        match self.credential {
            Credential::Token(id) => format!("token:{id}:{}", self.name),
            Credential::User(_) => format!("user:{}", self.name),
            Credential::Proxy => format!("sso:{}", self.name),
            Credential::Operator => self.name.clone(),
        }
    }

    /// The operator of the command line, audited as `actor`: it holds the database's credentials, so it may do
    /// what an admin may.
    pub fn operator(actor: impl Into<String>) -> Self {
        Principal { credential: Credential::Operator, name: actor.into(), role: Role::Admin, teams: Vec::new() }
    }
}

/// A caller who may change things (finance, admin): every write use case takes one, so a write that skipped the
/// permission check does not compile. Only [`Writer::of`] makes one, from a principal whose role writes.
///
/// ```rust,compile_fail
/// # async fn f(s: &cardhour::usecase::Services, input: &cardhour::usecase::teams::TeamInput) {
/// // an actor's name is no permission: a write use case wants a `Writer`
/// cardhour::usecase::teams::put_team(s, "user:eve", "vision", input).await;
/// # }
/// ```
///
/// ```rust,compile_fail
/// # use cardhour::access::{Principal, Writer};
/// // nor made by hand: its constructor is private
/// let w = Writer(Principal::operator("eve"));
/// ```
#[derive(Debug, Clone)]
pub struct Writer(Principal);

impl Writer {
    /// The writer `p` is, when its role writes.
    pub fn of(p: &Principal) -> Option<Self> {
        p.role.writes().then(|| Writer(p.clone()))
    }

    pub fn principal(&self) -> &Principal {
        &self.0
    }

    /// The name written in the audit log.
    pub fn actor(&self) -> String {
        self.0.actor()
    }
}

/// An administrator: the users and tokens use cases take one. Only [`Administrator::of`] makes one, from an admin.
#[derive(Debug, Clone)]
pub struct Administrator(Principal);

impl Administrator {
    /// The administrator `p` is, when it is an admin.
    pub fn of(p: &Principal) -> Option<Self> {
        (p.role == Role::Admin).then(|| Administrator(p.clone()))
    }

    pub fn principal(&self) -> &Principal {
        &self.0
    }

    /// The name written in the audit log.
    pub fn actor(&self) -> String {
        self.0.actor()
    }

    /// An admin writes too.
    pub fn writer(&self) -> Writer {
        Writer(self.0.clone())
    }
}

/// Who an audit actor names (`user:eve`, `sso:eve`, `token:7:eve`): the person (or the token's name) a reader knows,
/// not the credential it came with.
pub fn actor_name(actor: &str) -> &str {
    match actor.split_once(':') {
        Some(("token", rest)) => rest.split_once(':').map_or(rest, |(_, name)| name),
        Some(("user" | "sso", name)) => name,
        _ => actor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_actor_is_named_as_a_reader_knows_them() {
        assert_eq!(actor_name("user:eve"), "eve");
        assert_eq!(actor_name("sso:eve"), "eve");
        assert_eq!(actor_name("token:7:finance"), "finance");
        assert_eq!(actor_name("cli"), "cli");
    }

    fn principal(role: Role) -> Principal {
        Principal { credential: Credential::User(1), name: "u".into(), role, teams: Vec::new() }
    }

    #[test]
    fn only_writing_roles_make_a_writer_and_only_admins_an_administrator() {
        let writes = |r| Writer::of(&principal(r)).is_some();
        let admins = |r| Administrator::of(&principal(r)).is_some();
        assert_eq!([Role::Admin, Role::Finance, Role::TeamLead, Role::Viewer].map(writes), [true, true, false, false]);
        assert_eq!([Role::Admin, Role::Finance, Role::TeamLead, Role::Viewer].map(admins), [true, false, false, false]);
        assert_eq!(Writer::of(&principal(Role::Finance)).unwrap().actor(), "user:u");
        let cli = Principal::operator("cli:root");
        assert_eq!(Administrator::of(&cli).unwrap().writer().actor(), "cli:root");
    }
}
