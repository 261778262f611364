//! `migrate`, `retention`, `token`, `mappings`, `queue-mappings`: the schema and the service role, dropping old
//! raw rows, API tokens, CMDB imports of namespace → team mappings and CSV imports of queue → team mappings.

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};

use super::{
    MappingsCommand, MigrateArgs, QueueMappingsCommand, RetentionArgs, SummaryFormat, TokenCommand, cli_actor,
    operator, resolve_time, services_on,
};
use crate::db;
use crate::usecase;
use crate::validate;

pub(super) async fn retention_cmd(a: RetentionArgs) -> anyhow::Result<()> {
    let pool = a.db.connect(1).await.context("cannot connect to the database")?;
    let mut tx = pool.begin().await?;
    let now = a.now.unwrap_or_else(Utc::now);
    let steps = db::retention::apply(&mut tx, i32::from(a.keep_months), now, !a.dry_run)
        .await
        .context("retention failed (nothing was dropped)")?;
    tx.commit().await?;
    let verb = |action: &str| match (action, a.dry_run) {
        ("drop", true) => "would drop",
        ("drop", false) => "dropped",
        (_, true) => "would delete",
        (_, false) => "deleted",
    };
    for s in &steps {
        match s.action.as_str() {
            "nothing" => println!("nothing to drop: {}", s.relation),
            "horizon" => println!(
                "raw hourly rows {} from {} on (months closed and more than {} before the current one dropped)",
                if a.dry_run { "would be kept" } else { "are kept" },
                s.relation,
                a.keep_months
            ),
            "drop" => println!("{} {} rows of {} ({} bytes before)", verb("drop"), s.rows, s.relation, s.bytes),
            "keep" => println!(
                "{} {} rows of {} (time-sliced, or on a node-hour with an anomaly: a closed month's bill is computed \
                 from them again for the restatements of the next open month)",
                if a.dry_run { "would keep" } else { "kept" },
                s.rows,
                s.relation
            ),
            _ => println!("{} {} rows of {}", verb(&s.action), s.rows, s.relation),
        }
    }
    Ok(())
}

pub(super) async fn migrate_cmd(a: MigrateArgs) -> anyhow::Result<()> {
    // structure changes are admitted under this declaration only (the DDL guard)
    let pool = db::connect_migrating(&a.db.database_url, 2).await.context("cannot connect to the database")?;
    db::migrate(&pool).await.context("migration failed")?;
    println!("database schema is up to date");
    if !db::ddl_guard_installed(&pool).await.context("reading the event triggers")? {
        eprintln!(
            "warning: the DDL guard is not installed (only a superuser can create an event trigger): as a superuser, \
             once per database: CREATE EVENT TRIGGER cardhour_ddl_guard ON ddl_command_start EXECUTE FUNCTION \
             ddl_guard(); (docs/database.md)"
        );
    }
    if let Some(role) = &a.grant_app_role {
        db::roles::grant_app_role(&pool, role).await.context("granting the service role failed")?;
        println!("role {role} may run ingest, serve and worker (set its password: ALTER ROLE {role} PASSWORD …)");
    }
    Ok(())
}

pub(super) async fn token_cmd(t: TokenCommand) -> anyhow::Result<()> {
    match t {
        TokenCommand::Create { db: d, name, role, teams, expires_in, expires_at } => {
            let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
            let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
            let expires_at = expires_at.map(|t| resolve_time("--expires-at", t, tz)).transpose()?;
            let expires_at = match (expires_in, expires_at) {
                (Some(d), _) => Some(
                    chrono::Duration::from_std(d)
                        .ok()
                        .and_then(|d| Utc::now().checked_add_signed(d))
                        .filter(|t| chrono::Datelike::year(t) <= 9999)
                        .with_context(|| {
                            format!("--expires-in {}: too far in the future", humantime::format_duration(d))
                        })?,
                ),
                (None, t) => t,
            };
            let sv = services_on(pool).await?;
            let req = usecase::tokens::TokenRequest { name: name.trim().to_string(), role, teams, expires_at };
            let issued = match usecase::tokens::create(&sv, &operator("cli"), &req).await {
                Ok(t) => t,
                Err(usecase::Error::Invalid(problems)) => {
                    let flag = |f: &str| match f {
                        "expires_at" if expires_in.is_some() => "--expires-in".to_string(),
                        f => format!("--{}", f.replace('_', "-")),
                    };
                    let lines: Vec<String> =
                        problems.iter().map(|p| format!("{}: {}", flag(&p.field), p.message)).collect();
                    bail!("{}", lines.join("; "));
                }
                Err(e) => return Err(e.into()),
            };
            let until = expires_at.map_or_else(
                || "does not expire".to_string(),
                |t| format!("expires {}", t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            );
            eprintln!("token {} for {} ({}, {until}); shown only now:", issued.id, req.name, role.as_str());
            println!("{}", issued.secret);
        }
        TokenCommand::List { db: d, format } => {
            let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
            let tokens = usecase::tokens::list(&services_on(pool).await?).await?;
            match format {
                SummaryFormat::Json => println!("{}", serde_json::to_string_pretty(&tokens)?),
                SummaryFormat::Text => print!("{}", token_table(&tokens, Utc::now())),
            }
        }
        TokenCommand::Revoke { db: d, id } => {
            let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
            let sv = services_on(pool).await?;
            match usecase::tokens::revoke(&sv, &operator("cli"), id).await {
                Ok(()) => println!("token {id} revoked"),
                Err(usecase::Error::NotFoundField { .. }) => bail!("no active token {id}"),
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

pub(super) async fn mappings_cmd(m: MappingsCommand) -> anyhow::Result<()> {
    let MappingsCommand::Import { db: d, file, dry_run } = m;
    let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    // the refused fields in the API's own JSON shape (`{field, message}`)
    let refused = |errors: Vec<validate::FieldError>| {
        eprintln!("{}", serde_json::json!({ "errors": errors }));
        anyhow::anyhow!("{}: {} problem(s); nothing imported", file.display(), errors.len())
    };
    let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
    let sv = services_on(pool).await?;
    let report = match usecase::mappings::import(&sv, &operator(cli_actor()).writer(), &bytes, dry_run).await {
        Ok(r) => r,
        Err(usecase::Error::Invalid(errors)) => return Err(refused(errors)),
        Err(e) => return Err(e.into()),
    };
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

pub(super) async fn queue_mappings_cmd(m: QueueMappingsCommand) -> anyhow::Result<()> {
    let QueueMappingsCommand::Import { db: d, file, dry_run } = m;
    let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    // the refused fields in the API's own JSON shape (`{field, message}`), as `mappings import` prints them
    let refused = |errors: Vec<validate::FieldError>| {
        eprintln!("{}", serde_json::json!({ "errors": errors }));
        anyhow::anyhow!("{}: {} problem(s); nothing imported", file.display(), errors.len())
    };
    let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
    let sv = services_on(pool).await?;
    let writer = operator(cli_actor()).writer();
    let report = match usecase::queue_mappings::import(&sv, &writer, &bytes, dry_run).await {
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
