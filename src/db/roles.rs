//! The service's least-privilege role: it reads and writes what ingest, serve and the worker need, and nothing
//! else — no TRUNCATE, no UPDATE or DELETE of the audit log, no direct write of closed months (the close calls
//! `close_month()`), no ownership (so it cannot alter tables or disable their triggers), no writes to the data
//! version or the migrations table.

use sqlx::{PgPool, Row};

/// Why a role cannot be made the service's role.
#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    #[error("`{0}` is not a plain role name: use lower-case letters, digits and `_`, starting with a letter or `_`")]
    BadName(String),
    #[error("role `{0}` is the role running the migration (the tables' owner); the service needs a role of its own")]
    IsOwner(String),
    #[error("role `{0}` is a superuser, or may create roles or bypass row security; a service role must not")]
    Privileged(String),
    #[error("role `{0}` is a member of the owner role `{1}` and would have its rights; use a role of its own")]
    MemberOfOwner(String, String),
    #[error("role `{0}` owns {1} objects in this database; the service's role must own nothing")]
    OwnsObjects(String, i64),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// Tables the service only reads, on top of the write restrictions below: the data version (written by
/// SECURITY DEFINER triggers only), settings (changed by an operator as the owner), the migrations table, and the
/// closed months (written by the close through `close_month()`, SECURITY DEFINER; its trigger refuses any other
/// INSERT anyway).
const READ_ONLY: &str = "data_version, data_version_pending, settings, _sqlx_migrations, closed_months";
/// Append-only: INSERT, never UPDATE or DELETE (the audit log's triggers refuse those anyway; a close event's body,
/// as signed and sent, and the record of its POSTs are never rewritten by the service either).
const APPEND_ONLY: &str = "audit_log, close_events, close_delivery_attempts";

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && name.len() <= 63
        && !name.starts_with("pg_")
}

/// Creates `name` (LOGIN, no other attribute; its password is set by the DBA) unless it exists, and grants it
/// exactly what the service needs on every table of the current schema as it is now — so run it after every
/// migration (`cardhour migrate --grant-app-role` does both). Idempotent; one transaction.
pub async fn grant_app_role(pool: &PgPool, name: &str) -> Result<(), RoleError> {
    if !valid_name(name) {
        return Err(RoleError::BadName(name.to_string()));
    }
    let mut tx = pool.begin().await?;
    let me: String = sqlx::query_scalar!(r#"SELECT current_user AS "me!""#).fetch_one(&mut *tx).await?;
    if me == name {
        return Err(RoleError::IsOwner(name.to_string()));
    }
    let existing = sqlx::query!(
        "SELECT rolsuper OR rolcreaterole OR rolbypassrls OR rolreplication AS privileged,
                pg_has_role(rolname, current_user, 'MEMBER') AS member_of_owner
         FROM pg_roles WHERE rolname = $1",
        name
    )
    .fetch_optional(&mut *tx)
    .await?;
    match existing {
        Some(r) if r.privileged == Some(true) => return Err(RoleError::Privileged(name.to_string())),
        Some(r) if r.member_of_owner == Some(true) => return Err(RoleError::MemberOfOwner(name.to_string(), me)),
        Some(_) => {}
        None => {
            // identifiers cannot be bound as parameters; `name` is checked to be a plain identifier above
            sqlx::query(&format!(
                "CREATE ROLE \"{name}\" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
            ))
            .execute(&mut *tx)
            .await?;
        }
    }
    let owned = sqlx::query_scalar!(
        r#"SELECT (SELECT count(*) FROM pg_class WHERE relowner = r.oid)
                + (SELECT count(*) FROM pg_proc WHERE proowner = r.oid)
                + (SELECT count(*) FROM pg_namespace WHERE nspowner = r.oid) AS "n!"
           FROM pg_roles r WHERE rolname = $1"#,
        name
    )
    .fetch_one(&mut *tx)
    .await?;
    if owned > 0 {
        return Err(RoleError::OwnsObjects(name.to_string(), owned));
    }
    let where_ = sqlx::query("SELECT quote_ident(current_database()), quote_ident(current_schema())")
        .fetch_one(&mut *tx)
        .await?;
    let (database, schema): (String, String) = (where_.get(0), where_.get(1));
    let role = format!("\"{name}\"");
    for sql in [
        format!("GRANT CONNECT ON DATABASE {database} TO {role}"),
        format!("GRANT USAGE ON SCHEMA {schema} TO {role}"),
        format!("REVOKE CREATE ON SCHEMA {schema} FROM {role}"),
        // start from nothing, so a second run also takes back what an earlier schema needed
        format!("REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role}"),
        format!("REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {role}"),
        format!("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}"),
        format!("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"),
        format!("REVOKE INSERT, UPDATE, DELETE ON {READ_ONLY} FROM {role}"),
        format!("REVOKE UPDATE, DELETE ON {APPEND_ONLY} FROM {role}"),
        // the close's one door into closed_months (SECURITY DEFINER, not PUBLIC's)
        format!("GRANT EXECUTE ON FUNCTION {schema}.close_month(text, text, jsonb, text, jsonb) TO {role}"),
    ] {
        sqlx::query(&sql).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn role_names() {
        for ok in ["cardhour_app", "_svc", "app2"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "App", "2app", "a-b", "a\"b", "pg_app", "a b", &"a".repeat(64)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
