//! `migrate`, `token`, `mappings`: the schema and the service role, API tokens, CMDB imports of namespace → team
//! mappings.

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};

use super::{MappingsCommand, MigrateArgs, SummaryFormat, TokenCommand, cli_actor, resolve_time, services_on};
use crate::db;
use crate::usecase;
use crate::validate;

pub(super) async fn migrate_cmd(a: MigrateArgs) -> anyhow::Result<()> {
    let pool = db::connect(&a.db.database_url, 2).await.context("cannot connect to the database")?;
    db::migrate(&pool).await.context("migration failed")?;
    println!("database schema is up to date");
    if let Some(role) = &a.grant_app_role {
        db::roles::grant_app_role(&pool, role).await.context("granting the service role failed")?;
        println!("role {role} may run ingest, serve and worker (set its password: ALTER ROLE {role} PASSWORD …)");
    }
    Ok(())
}

pub(super) async fn token_cmd(t: TokenCommand) -> anyhow::Result<()> {
    match t {
        TokenCommand::Create { db: d, name, role, teams, expires_in, expires_at } => {
            if name.trim().is_empty() {
                bail!("--name must not be empty");
            }
            if (role == crate::auth::Role::TeamLead) == teams.is_empty() {
                bail!("--team is required for a team_lead token, and only for one");
            }
            let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
            let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
            let expires_at = expires_at.map(|t| resolve_time("--expires-at", t, tz)).transpose()?;
            let now = Utc::now();
            let expires_at = match (expires_in, expires_at) {
                (Some(d), _) => Some(
                    chrono::Duration::from_std(d)
                        .ok()
                        .and_then(|d| now.checked_add_signed(d))
                        .filter(|t| chrono::Datelike::year(t) <= 9999)
                        .with_context(|| {
                            format!("--expires-in {}: too far in the future", humantime::format_duration(d))
                        })?,
                ),
                (None, Some(t)) if t <= now => bail!("--expires-at {} is not in the future", t.to_rfc3339()),
                (None, t) => t,
            };
            let mut tx = pool.begin().await?;
            for team in &teams {
                if db::teams::get(&mut tx, team).await?.is_none() {
                    bail!("unknown team `{team}` (create it first: PUT /api/v1/teams/{team} or a mapping import)");
                }
            }
            let token = crate::auth::new_token();
            let id = db::tokens::insert_expiring(&mut tx, name.trim(), &token.hash, role, &teams, expires_at).await?;
            let after = serde_json::json!({ "id": id, "name": name.trim(), "role": role.as_str(), "teams": teams,
                                            "expires_at": expires_at });
            db::audit::record(&mut tx, "cli", "token.create", &format!("token:{id}"), None, Some(after)).await?;
            tx.commit().await?;
            let until = expires_at.map_or_else(
                || "does not expire".to_string(),
                |t| format!("expires {}", t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            );
            eprintln!("token {id} for {} ({}, {until}); shown only now:", name.trim(), role.as_str());
            println!("{}", token.secret);
        }
        TokenCommand::List { db: d, format } => {
            let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
            let tokens = db::tokens::list(&pool).await?;
            match format {
                SummaryFormat::Json => println!("{}", serde_json::to_string_pretty(&tokens)?),
                SummaryFormat::Text => print!("{}", token_table(&tokens, Utc::now())),
            }
        }
        TokenCommand::Revoke { db: d, id } => {
            let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
            let mut tx = pool.begin().await?;
            if !db::tokens::revoke(&mut tx, id).await? {
                bail!("no active token {id}");
            }
            db::audit::record(&mut tx, "cli", "token.revoke", &format!("token:{id}"), None, None).await?;
            tx.commit().await?;
            println!("token {id} revoked");
        }
    }
    Ok(())
}

pub(super) async fn mappings_cmd(m: MappingsCommand) -> anyhow::Result<()> {
    let MappingsCommand::Import { db: d, file, dry_run } = m;
    let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    let refused = |errors: Vec<validate::Invalid>| {
        let errors: Vec<_> =
            errors.iter().map(|e| serde_json::json!({"field": e.field, "message": e.message})).collect();
        eprintln!("{}", serde_json::json!({ "errors": errors }));
        anyhow::anyhow!("{}: {} problem(s); nothing imported", file.display(), errors.len())
    };
    let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
    let sv = services_on(pool).await?;
    let report = match usecase::mappings::import(&sv, &cli_actor(), &bytes, dry_run).await {
        Ok(r) => r,
        Err(usecase::Error::Invalid(errors)) => return Err(refused(errors)),
        Err(e) => return Err(e.into()),
    };
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// `token list` as text: one line per token, with its state now.
fn token_table(tokens: &[db::tokens::TokenInfo], now: DateTime<Utc>) -> String {
    let time = |t: Option<DateTime<Utc>>, none: &str| {
        t.map_or_else(|| none.to_string(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string())
    };
    let mut out = format!(
        "{:>5}  {:<20} {:<9} {:<16} {:<8} {:<20} {:<20} {}\n",
        "id", "name", "role", "teams", "state", "expires", "last used", "created"
    );
    for t in tokens {
        let state = match (t.revoked_at, t.expires_at) {
            (Some(_), _) => "revoked",
            (None, Some(e)) if e <= now => "expired",
            _ => "active",
        };
        out.push_str(&format!(
            "{:>5}  {:<20} {:<9} {:<16} {:<8} {:<20} {:<20} {}\n",
            t.id,
            t.name,
            t.role,
            if t.teams.is_empty() { "-".to_string() } else { t.teams.join(",") },
            state,
            time(t.expires_at, "never"),
            time(t.last_used_at, "never"),
            time(Some(t.created_at), "")
        ));
    }
    out
}
