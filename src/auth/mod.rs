//! Who is calling: bearer API tokens (stored as SHA-256 digests), roles, and the data scope a role may see.
//!
//! Handlers never look at a role: each takes the capability extractor it needs ([`Finance`], [`GlobalReader`],
//! [`ScopedReader`]), so a handler without one does not compile against an authenticated caller, and one with the
//! wrong one is visible in its signature.

mod extract;
mod token;

pub use extract::{AuthRejection, Finance, GlobalReader, Reader, ScopedReader, bearer_token};
pub use token::{NewToken, hash_token, new_token};

use serde::{Deserialize, Serialize};

use crate::db::usage::Scope;

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
    fn writes(self) -> bool {
        matches!(self, Self::Admin | Self::Finance)
    }

    /// May read every team's data and the cluster-wide figures.
    fn reads_globally(self) -> bool {
        !matches!(self, Self::TeamLead)
    }
}

/// An authenticated caller (only the capability extractors hand one to a handler).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub token_id: i64,
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
        format!("token:{}:{}", self.token_id, self.name)
    }
}
