//! API tokens: issuing one (its secret returned once, only its digest stored), listing them and revoking one —
//! for the command line and the portal's admin pages alike; every change audited in its own transaction.

use chrono::{DateTime, Utc};

use super::{Error, Services};
use crate::access::Role;
use crate::db::{self, audit, tokens::TokenInfo};
use crate::validate::{self, Invalid, TeamId};

/// The longest name of a token's holder.
pub const NAME_MAX: usize = 100;

/// A token as issued: its id and the secret, which exists nowhere else (the database holds its digest).
pub struct Issued {
    pub id: i64,
    pub secret: String,
}

/// What a new token is: who holds it, its role, a team lead's teams, when it stops working (`None`: never).
#[derive(Debug, Clone)]
pub struct TokenRequest {
    pub name: String,
    pub role: Role,
    pub teams: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// Issues a token by `actor`. Refused, with every problem listed and nothing written: a blank or too long name, a
/// team lead without a team or a team for another role, an unknown team, an expiry not in the future.
pub async fn create(s: &Services, actor: &str, req: &TokenRequest) -> Result<Issued, Error> {
    let mut problems = Vec::new();
    let name = validate::text("name", &req.name, NAME_MAX).map_err(|e| problems.push(e)).ok();
    let mut teams: Vec<String> = Vec::new();
    for t in &req.teams {
        match TeamId::parse("team", t) {
            Ok(id) if !teams.iter().any(|x| x == id.as_str()) => teams.push(id.into_string()),
            Ok(_) => {}
            Err(e) => problems.push(e),
        }
    }
    if (req.role == Role::TeamLead) == req.teams.is_empty() {
        problems
            .push(Invalid::new("team", "a team_lead token needs at least one team, and only a team_lead has teams"));
    }
    if let Some(t) = req.expires_at {
        if t <= Utc::now() {
            problems.push(Invalid::new("expires_at", format!("{} is not in the future", t.to_rfc3339())));
        } else if let Err(e) = validate::instant("expires_at", t) {
            problems.push(e);
        }
    }
    let mut tx = s.pool.begin().await?;
    for t in &teams {
        if db::teams::get(&mut tx, t).await?.is_none() {
            problems.push(Invalid::new("team", format!("unknown team `{t}` (create it first)")));
        }
    }
    let (Some(name), true) = (name, problems.is_empty()) else { return Err(Error::Invalid(problems)) };
    let token = crate::auth::new_token();
    let id = db::tokens::insert_expiring(&mut tx, &name, &token.hash, req.role, &teams, req.expires_at).await?;
    let after = serde_json::json!({ "id": id, "name": name, "role": req.role.as_str(), "teams": teams,
                                    "expires_at": req.expires_at });
    audit::record(&mut tx, actor, "token.create", &format!("token:{id}"), None, Some(after)).await?;
    tx.commit().await?;
    Ok(Issued { id, secret: token.secret })
}

/// Every token, oldest first (never a secret or a digest).
pub async fn list(s: &Services) -> Result<Vec<TokenInfo>, Error> {
    Ok(db::tokens::list(&s.pool).await?)
}

/// Revokes token `id` by `actor`; not found when there is no active token of that id.
pub async fn revoke(s: &Services, actor: &str, id: i64) -> Result<(), Error> {
    let mut tx = s.pool.begin().await?;
    if !db::tokens::revoke(&mut tx, id).await? {
        return Err(Error::NotFoundField { field: "id".into(), message: format!("no active token {id}") });
    }
    audit::record(&mut tx, actor, "token.revoke", &format!("token:{id}"), None, None).await?;
    tx.commit().await?;
    Ok(())
}
