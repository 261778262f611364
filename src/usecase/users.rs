//! The portal's users: creating one (a name, a role, a team lead's existing teams, a password), listing them,
//! disabling one, setting a new password — every change audited in its own transaction — and checking a login.

use super::{Error, Services};
use crate::access::{Administrator, Credential, Principal, Role};
use crate::auth::password;
use crate::db::{self, audit, users::User};
use crate::validate::{Invalid, TeamId};

/// A login name: 1–64 of `a-z 0-9 . _ @ -`, starting with a letter or digit (the `users` table's rule). Names
/// are compared as stored, so upper case is refused rather than silently folded.
pub fn username(field: &str, s: &str) -> Result<String, Invalid> {
    let mut chars = s.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '@' | '-'));
    if ok {
        Ok(s.to_string())
    } else {
        Err(Invalid::new(field, "use a-z, 0-9, `.`, `_`, `@`, `-` (at most 64, starting with a-z or 0-9)"))
    }
}

/// A new password: [`password::MIN_LEN`]–[`password::MAX_LEN`] characters, no NUL or other control character.
pub fn new_password(field: &str, s: &str) -> Result<String, Invalid> {
    let n = s.chars().count();
    if n < password::MIN_LEN {
        return Err(Invalid::new(field, format!("must be at least {} characters", password::MIN_LEN)));
    }
    if n > password::MAX_LEN {
        return Err(Invalid::new(field, format!("must be at most {} characters", password::MAX_LEN)));
    }
    if s.chars().any(char::is_control) {
        return Err(Invalid::new(field, "must not contain control characters (a NUL, a line break, …)"));
    }
    Ok(s.to_string())
}

fn audited(u: &User) -> Option<serde_json::Value> {
    super::teams::json(u)
}

/// Creates a user. Refused, with every problem listed and nothing written: a bad or taken name, a team lead
/// without a team or a team for another role, an unknown team, a password too short or too long.
pub async fn create(
    s: &Services,
    by: &Administrator,
    name: &str,
    role: Role,
    teams: &[String],
    pw: &str,
) -> Result<User, Error> {
    let actor = &by.actor();
    let mut problems = Vec::new();
    let name = username("username", name).map_err(|e| problems.push(e)).ok();
    let pw = new_password("password", pw).map_err(|e| problems.push(e)).ok();
    let mut team_ids = Vec::new();
    for t in teams {
        match TeamId::parse("team", t) {
            Ok(id) if !team_ids.contains(&id) => team_ids.push(id),
            Ok(_) => {}
            Err(e) => problems.push(e),
        }
    }
    match role {
        Role::TeamLead if teams.is_empty() => {
            problems.push(Invalid::new("team", "a team_lead needs at least one team"))
        }
        Role::TeamLead => {}
        _ if !teams.is_empty() => {
            problems.push(Invalid::new("team", format!("only a team_lead has teams, not a {}", role.as_str())))
        }
        _ => {}
    }
    let mut tx = s.pool.begin().await?;
    for t in &team_ids {
        if db::teams::get(&mut tx, t).await?.is_none() {
            problems.push(Invalid::new("team", format!("unknown team `{t}` (create it first)")));
        }
    }
    let (Some(name), Some(pw), true) = (name, pw, problems.is_empty()) else {
        return Err(Error::Invalid(problems));
    };
    // hashing is deliberately slow: off the async workers
    let hash = tokio::task::spawn_blocking(move || password::hash(&pw)).await.map_err(anyhow::Error::from)?;
    let Some(user) = db::users::insert(&mut tx, &name, role, &team_ids, &hash).await? else {
        return Err(Error::Conflict { field: Some("username".into()), message: format!("user `{name}` exists") });
    };
    audit::record(&mut tx, actor, "user.create", &format!("user:{name}"), None, audited(&user)).await?;
    tx.commit().await?;
    Ok(user)
}

/// Every user, by name (never a hash).
pub async fn list(s: &Services) -> Result<Vec<User>, Error> {
    Ok(db::users::list(&s.pool).await?)
}

/// When each user last signed in with its password, by user id (never: absent).
pub async fn last_logins(s: &Services) -> Result<std::collections::HashMap<i64, chrono::DateTime<chrono::Utc>>, Error> {
    Ok(db::users::last_logins(&s.pool).await?.into_iter().collect())
}

/// Disables user `name`: it can no longer log in, and its sessions stop working at their next request.
pub async fn disable(s: &Services, by: &Administrator, name: &str) -> Result<User, Error> {
    let actor = &by.actor();
    let mut tx = s.pool.begin().await?;
    let before = db::users::get_for_update(&mut tx, name).await?.ok_or_else(|| not_found(name))?;
    let after = db::users::disable(&mut tx, before.id).await?;
    audit::record(&mut tx, actor, "user.disable", &format!("user:{name}"), audited(&before), audited(&after)).await?;
    tx.commit().await?;
    Ok(after)
}

/// Gives user `name` a new password (the audit entry says so, without the hash) and ends every session of that
/// user but `keep` (the session of a user changing its own password stays signed in): whoever knew the old
/// password is signed out with it.
pub async fn set_password(
    s: &Services,
    by: &Administrator,
    name: &str,
    pw: &str,
    keep: Option<&tower_sessions::session::Id>,
) -> Result<User, Error> {
    let actor = &by.actor();
    let pw = new_password("password", pw)?;
    let mut tx = s.pool.begin().await?;
    let before = db::users::get_for_update(&mut tx, name).await?.ok_or_else(|| not_found(name))?;
    let hash = tokio::task::spawn_blocking(move || password::hash(&pw)).await.map_err(anyhow::Error::from)?;
    let after = db::users::set_password(&mut tx, before.id, &hash).await?;
    db::sessions::end_user_sessions(&mut tx, before.id, keep).await?;
    audit::record(&mut tx, actor, "user.set_password", &format!("user:{name}"), audited(&before), audited(&after))
        .await?;
    tx.commit().await?;
    Ok(after)
}

fn not_found(name: &str) -> Error {
    Error::NotFoundField { field: "username".into(), message: format!("no user `{name}`") }
}

/// The caller a stored, enabled user is (a row whose role is not one of ours is nobody).
pub fn principal(u: &User) -> Option<Principal> {
    Some(Principal {
        credential: Credential::User(u.id),
        name: u.username.clone(),
        role: u.role()?,
        teams: u.teams.clone(),
    })
}

/// Checks a login: the enabled user named `name` whose password is `pw`, else `None` — the same answer, after
/// the same work, for an unknown name, a disabled user and a wrong password.
pub async fn check_login(s: &Services, name: &str, pw: &str) -> Result<Option<User>, Error> {
    let found = if username("username", name).is_ok() && pw.len() <= password::MAX_LEN * 4 {
        db::users::credentials(&s.pool, name).await?
    } else {
        None
    };
    let pw = pw.to_string();
    let ok = tokio::task::spawn_blocking(move || match found {
        Some(c) => password::verify(&pw, &c.password_hash).then_some(c.user),
        None => {
            password::verify_nothing(&pw);
            None
        }
    })
    .await
    .map_err(anyhow::Error::from)?;
    Ok(ok)
}

/// The login throttle: a name with [`MAX_FAILURES_PER_NAME`] failed logins within [`THROTTLE_WINDOW`], or an
/// address with [`MAX_FAILURES_PER_ADDRESS`], is refused without its password being checked until the oldest of
/// those failures leaves the window. An attempt takes its place among the failures before its password is checked
/// (atomically, in the database: a burst of attempts is admitted up to the limit and no further), and a success
/// forgets its name's failures. Refused attempts are not counted (waiting is enough to get in again). The address
/// limit is higher because an office behind one NAT shares it: one user mistyping does not lock out the
/// colleagues, but guessing across many names from one address does.
pub const THROTTLE_WINDOW: chrono::TimeDelta = chrono::TimeDelta::minutes(15);
pub const MAX_FAILURES_PER_NAME: i32 = 5;
pub const MAX_FAILURES_PER_ADDRESS: i32 = 20;

/// What a login attempt came to.
#[derive(Debug)]
pub enum Login {
    Ok(User),
    /// Unknown name, disabled user or wrong password (the same answer for each).
    Refused,
    /// Too many recent failures: try again after this many seconds.
    Throttled {
        retry_after_secs: i64,
    },
}

/// A login attempt of `name` with `pw` from `address`, throttled (see [`THROTTLE_WINDOW`]).
pub async fn login(s: &Services, name: &str, pw: &str, address: std::net::IpAddr) -> Result<Login, Error> {
    // the name as tried, bounded: counted whether or not it exists (else the throttle tells which names do)
    let key: String = name.chars().take(64).collect::<String>().to_lowercase();
    let limits = db::logins::Limits {
        window: THROTTLE_WINDOW,
        by_name: MAX_FAILURES_PER_NAME,
        by_address: MAX_FAILURES_PER_ADDRESS,
    };
    if let Some(free_at) = db::logins::admit(&s.pool, &key, &address.to_string(), limits).await? {
        let retry_after_secs = (free_at - chrono::Utc::now()).num_seconds().max(1);
        return Ok(Login::Throttled { retry_after_secs });
    }
    // admitted, and counted as a failure until it proves otherwise
    match check_login(s, name, pw).await? {
        Some(user) => {
            db::logins::forget(&s.pool, &key).await?;
            db::users::record_login(&s.pool, user.id).await?;
            Ok(Login::Ok(user))
        }
        None => Ok(Login::Refused),
    }
}

/// The enabled user `id` a session names, as a caller: re-read on every request so disabling takes effect at once.
pub async fn session_user(s: &Services, id: i64) -> Result<Option<(User, Principal)>, Error> {
    Ok(db::users::find_active(&s.pool, id).await?.and_then(|u| principal(&u).map(|p| (u, p))))
}
