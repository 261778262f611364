//! Who is calling: bearer API tokens (stored as SHA-256 digests), roles, and the data scope a role may see.

mod extract;
mod token;

pub use extract::Caller;
pub use token::{NewToken, hash_token, new_token};

use serde::{Deserialize, Serialize};

use crate::db::usage::Scope;
use crate::error::ApiError;

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
}

/// An authenticated caller.
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
        match self.role {
            Role::TeamLead => Scope::teams(self.teams.clone()),
            Role::Admin | Role::Finance | Role::Viewer => Scope::all(),
        }
    }

    /// May change rates, mappings, teams and close months.
    pub fn require_finance(&self) -> Result<(), ApiError> {
        match self.role {
            Role::Admin | Role::Finance => Ok(()),
            Role::TeamLead | Role::Viewer => Err(ApiError::Forbidden),
        }
    }

    /// May read everything (not only its own teams).
    pub fn require_global_read(&self) -> Result<(), ApiError> {
        match self.role {
            Role::TeamLead => Err(ApiError::Forbidden),
            _ => Ok(()),
        }
    }

    /// The name written in the audit log.
    pub fn actor(&self) -> String {
        format!("token:{}:{}", self.token_id, self.name)
    }
}
