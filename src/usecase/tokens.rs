//! API tokens: issuing one (its secret returned once, only its digest stored), listing them and revoking one —
//! for the command line and the portal's admin pages alike; every change audited in its own transaction.

use chrono::{DateTime, Utc};

use super::{Error, Services};
use crate::access::{Administrator, Role, Writer};
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

/// Issues a token by an administrator (of any role). Refused, with every problem listed and nothing written: a
/// blank or too long name, a team lead without a team or a team for another role, an unknown team, an expiry not
/// in the future.
pub async fn create(s: &Services, by: &Administrator, req: &TokenRequest) -> Result<Issued, Error> {
    issue(s, &by.actor(), req).await
}

/// Issues a token audited under `actor`, whose right to was checked by the caller.
async fn issue(s: &Services, actor: &str, req: &TokenRequest) -> Result<Issued, Error> {
    let mut problems = Vec::new();
    let name = validate::text("name", &req.name, NAME_MAX).map_err(|e| problems.push(e)).ok();
    let mut teams: Vec<TeamId> = Vec::new();
    for t in &req.teams {
        match TeamId::parse("team", t) {
            Ok(id) if !teams.contains(&id) => teams.push(id),
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
    // the tests' fixtures insert tokens as text: the table's text[] binds from strings
    let ids: Vec<String> = teams.iter().map(TeamId::to_string).collect();
    let id = db::tokens::insert_expiring(&mut tx, &name, &token.hash, req.role, &ids, req.expires_at).await?;
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

/// Revokes token `id` by an administrator; not found when there is no active token of that id.
pub async fn revoke(s: &Services, by: &Administrator, id: i64) -> Result<(), Error> {
    withdraw(s, &by.actor(), id).await
}

/// Revokes token `id` audited under `actor`, whose right to was checked by the caller.
async fn withdraw(s: &Services, actor: &str, id: i64) -> Result<(), Error> {
    let mut tx = s.pool.begin().await?;
    if !db::tokens::revoke(&mut tx, id).await? {
        return Err(Error::NotFoundField { field: "id".into(), message: format!("no active token {id}") });
    }
    audit::record(&mut tx, actor, "token.revoke", &format!("token:{id}"), None, None).await?;
    tx.commit().await?;
    Ok(())
}

/// Who may issue a token of `role` (issue 33: finance makes its own integration tokens, which were admin-only):
/// an admin any role; finance a finance, viewer or team-lead token — never an admin one, so no role can raise
/// itself above what it is; a viewer or a team lead none.
pub fn may_issue(actor: Role, role: Role) -> bool {
    match actor {
        Role::Admin => true,
        Role::Finance => role != Role::Admin,
        Role::Viewer | Role::TeamLead => false,
    }
}

/// Who may list tokens and revoke a token of `role`: an admin any; finance those it may issue.
pub fn may_revoke(actor: Role, role: Role) -> bool {
    may_issue(actor, role)
}

/// Issues a token for writer `by` by the rule of [`may_issue`] (refused as forbidden, nothing written) and audited
/// under its name: what the API and the token page call for a finance or admin user.
pub async fn create_as(s: &Services, by: &Writer, req: &TokenRequest) -> Result<Issued, Error> {
    if !may_issue(by.principal().role, req.role) {
        return Err(Error::Forbidden);
    }
    issue(s, &by.actor(), req).await
}

/// The tokens `actor` may see: every one for an admin, the non-admin ones for finance, none for anyone else.
pub async fn list_as(s: &Services, actor: &crate::access::Principal) -> Result<Vec<TokenInfo>, Error> {
    if !may_issue(actor.role, Role::Viewer) {
        return Err(Error::Forbidden);
    }
    let all = list(s).await?;
    Ok(all.into_iter().filter(|t| Role::parse(&t.role).is_some_and(|r| may_revoke(actor.role, r))).collect())
}

/// Revokes token `id` for writer `by` by the rule of [`may_revoke`]: a token it may not revoke is as unknown to it.
pub async fn revoke_as(s: &Services, by: &Writer, id: i64) -> Result<(), Error> {
    let token = list(s).await?.into_iter().find(|t| t.id == id && t.revoked_at.is_none());
    match token.and_then(|t| Role::parse(&t.role)) {
        Some(role) if may_revoke(by.principal().role, role) => withdraw(s, &by.actor(), id).await,
        _ => Err(Error::NotFoundField { field: "id".into(), message: format!("no active token {id}") }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finance_issues_every_token_but_an_admin_one() {
        use Role::*;
        for role in [Admin, Finance, Viewer, TeamLead] {
            assert!(may_issue(Admin, role));
            assert_eq!(may_issue(Finance, role), role != Admin, "{role:?}");
            assert!(!may_issue(Viewer, role) && !may_issue(TeamLead, role));
        }
        assert!(!may_revoke(Finance, Admin) && may_revoke(Finance, TeamLead));
    }
}
