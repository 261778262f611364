//! Teams: the ones a caller may see, one of them, and creating or renaming one (finance).

use serde::{Deserialize, Serialize};

use super::{Error, Services};
use crate::access::{Scope, Writer};
use crate::db::{self, audit, teams::Team};
use crate::validate::{self, Invalid, TeamId};

/// The teams `scope` may see (a team lead: its own).
pub async fn teams(s: &Services, scope: &Scope) -> Result<Vec<Team>, Error> {
    Ok(db::teams::list(&s.pool, scope).await?)
}

/// Team `id`, when `scope` may see it; outside the scope it does not exist.
pub async fn team(s: &Services, scope: &Scope, id: &TeamId) -> Result<Team, Error> {
    let not_found = || Error::NotFound(format!("team {id}"));
    if !scope.allows(id.as_str()) {
        return Err(not_found());
    }
    let mut conn = s.pool.acquire().await?;
    db::teams::get(&mut conn, id).await?.ok_or_else(not_found)
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TeamInput {
    pub name: String,
    pub owner: Option<String>,
}

/// Creates or renames team `id` (finance). Every field checked, all errors reported at once. Audited.
pub async fn put_team(s: &Services, by: &Writer, id: &str, input: &TeamInput) -> Result<Team, Error> {
    let actor = &by.actor();
    let team = validate_team(id, &input.name, input.owner.as_deref()).map_err(Error::Invalid)?;
    let mut tx = s.pool.begin().await?;
    // a put of the name and owner stored writes nothing and audits nothing
    let change = db::teams::upsert(&mut tx, &team).await?;
    if audit::record_change(&mut tx, actor, "team.put", &format!("team:{id}"), &change).await? {
        tx.commit().await?;
    }
    Ok(team)
}

/// Creates team `id` (finance; the portal's create form): as [`put_team`], but a team that exists is a conflict on
/// `id` and stays as it is. Audited as `put_team` audits.
pub async fn create_team(s: &Services, by: &Writer, id: &str, input: &TeamInput) -> Result<Team, Error> {
    let actor = &by.actor();
    let team = validate_team(id, &input.name, input.owner.as_deref()).map_err(Error::Invalid)?;
    let mut tx = s.pool.begin().await?;
    if !db::teams::create(&mut tx, &team).await? {
        return Err(Error::Conflict { field: Some("id".into()), message: format!("team `{id}` exists") });
    }
    audit::record(&mut tx, actor, "team.put", &format!("team:{id}"), None, json(&team)).await?;
    tx.commit().await?;
    Ok(team)
}

/// A value as audited: `None` for nothing (or what cannot be written as JSON).
pub(super) fn json<T: Serialize>(v: &T) -> Option<serde_json::Value> {
    serde_json::to_value(v).ok().filter(|v| !v.is_null())
}

fn validate_team(id: &str, name: &str, owner: Option<&str>) -> Result<Team, Vec<Invalid>> {
    let id = TeamId::parse("id", id);
    let name = validate::text("name", name, validate::NAME_MAX);
    // `null` clears the owner; a string must be a name (the document's rule; a CMDB cell may be blank instead)
    let owner = owner.map(|o| validate::text("owner", o, validate::NAME_MAX)).transpose();
    match (id, name, owner) {
        (Ok(id), Ok(name), Ok(owner)) => Ok(Team { id: id.into_string(), name, owner }),
        (id, name, owner) => Err([id.err(), name.err(), owner.err()].into_iter().flatten().collect()),
    }
}
