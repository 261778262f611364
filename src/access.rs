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
        }
    }
}
