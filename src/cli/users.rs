//! `user create|list|disable|set-password`: the portal's users. Passwords are read from standard input only
//! (`--password-stdin`: never an argument, which `ps` and shell histories would show).

use std::io::Read;

use anyhow::{Context, bail};

use super::config::DatabaseArgs;
use super::{SummaryFormat, cli_actor, operator, services};
use crate::db::users::User;
use crate::usecase;

#[derive(Debug, clap::Subcommand)]
pub enum UserCommand {
    /// Create a portal user; the password is read from standard input.
    Create {
        #[command(flatten)]
        db: DatabaseArgs,
        /// The login name: a-z, 0-9, `.`, `_`, `@`, `-`.
        #[arg(long)]
        username: String,
        #[arg(long, value_enum)]
        role: crate::auth::Role,
        /// A team lead's team (repeat for several; each must exist).
        #[arg(long = "team")]
        teams: Vec<String>,
        /// Read the password from standard input (its first line; required).
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// Every user: role, teams, whether disabled (never a password hash).
    List {
        #[command(flatten)]
        db: DatabaseArgs,
        #[arg(long, value_enum, default_value = "text")]
        format: SummaryFormat,
    },
    /// Disable a user: no more logins, and its open sessions stop working at their next request.
    Disable {
        #[command(flatten)]
        db: DatabaseArgs,
        username: String,
    },
    /// Give a user a new password, read from standard input.
    SetPassword {
        #[command(flatten)]
        db: DatabaseArgs,
        username: String,
        /// Read the password from standard input (its first line; required).
        #[arg(long, required = true)]
        password_stdin: bool,
    },
}

pub(super) async fn user_cmd(c: UserCommand) -> anyhow::Result<()> {
    match c {
        UserCommand::Create { db, username, role, teams, password_stdin: _ } => {
            let pw = read_password()?;
            let sv = services(&db, 2).await?;
            let u = usecase::users::create(&sv, &operator(cli_actor()), &username, role, &teams, &pw)
                .await
                .map_err(refused)?;
            println!("user {} created ({}{})", u.username, u.role, teams_suffix(&u));
        }
        UserCommand::List { db, format } => {
            let sv = services(&db, 2).await?;
            let users = usecase::users::list(&sv).await?;
            match format {
                SummaryFormat::Json => println!("{}", serde_json::to_string_pretty(&users)?),
                SummaryFormat::Text => print!("{}", table(&users)),
            }
        }
        UserCommand::Disable { db, username } => {
            let sv = services(&db, 2).await?;
            let u = usecase::users::disable(&sv, &operator(cli_actor()), &username).await.map_err(refused)?;
            println!("user {} disabled", u.username);
        }
        UserCommand::SetPassword { db, username, password_stdin: _ } => {
            let pw = read_password()?;
            let sv = services(&db, 2).await?;
            let u = usecase::users::set_password(&sv, &operator(cli_actor()), &username, &pw, None)
                .await
                .map_err(refused)?;
            println!("password of {} changed", u.username);
        }
    }
    Ok(())
}

/// The first line of standard input, without its line ending (what `echo pw |` and `printf pw |` both send).
fn read_password() -> anyhow::Result<String> {
    let mut raw = Vec::new();
    std::io::stdin().take(64 * 1024).read_to_end(&mut raw).context("reading the password from standard input")?;
    let text = String::from_utf8(raw).context("the password on standard input is not UTF-8")?;
    let line = text.split('\n').next().unwrap_or("");
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.is_empty() {
        bail!("no password on standard input (--password-stdin reads its first line)");
    }
    Ok(line.to_string())
}

/// A refused change as one message per problem.
fn refused(e: usecase::Error) -> anyhow::Error {
    match e {
        usecase::Error::Invalid(problems) => anyhow::anyhow!(
            "{}; nothing written",
            problems.iter().map(|p| format!("--{}: {}", p.field, p.message)).collect::<Vec<_>>().join("; ")
        ),
        other => anyhow::anyhow!("{other}; nothing written"),
    }
}

fn teams_suffix(u: &User) -> String {
    if u.teams.is_empty() { String::new() } else { format!(" of {}", u.teams.join(", ")) }
}

fn table(users: &[User]) -> String {
    let mut out = format!("{:<24} {:<9} {:<24} {:<9} {}\n", "username", "role", "teams", "state", "created");
    for u in users {
        out.push_str(&format!(
            "{:<24} {:<9} {:<24} {:<9} {}\n",
            u.username,
            u.role,
            if u.teams.is_empty() { "-".to_string() } else { u.teams.join(",") },
            if u.disabled_at.is_some() { "disabled" } else { "active" },
            u.created_at.format("%Y-%m-%d %H:%M UTC")
        ));
    }
    out
}
