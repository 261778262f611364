-- The portal's users, their sessions and failed logins (issue 8 item 3).
--
-- users: a login name, a role as the API tokens have them, a team lead's teams (at least one; that each exists is
-- checked by the use case in the creating transaction, as for tokens), an argon2 PHC string, and disabled_at
-- (a disabled user's sessions stop working at their next request: the session is re-read against this row).
CREATE TABLE users (
    id            bigserial PRIMARY KEY,
    username      text NOT NULL UNIQUE CHECK (username ~ '^[a-z0-9][a-z0-9_.@-]{0,63}$'),
    role          text NOT NULL CHECK (role IN ('admin', 'finance', 'team_lead', 'viewer')),
    teams         text[] NOT NULL DEFAULT '{}',
    password_hash text NOT NULL CHECK (password_hash LIKE '$argon2%'),
    disabled_at   timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_team_lead_has_teams CHECK ((role = 'team_lead') = (cardinality(teams) > 0))
);

-- The portal's sessions (tower-sessions records, stored by db::sessions): the SHA-256 of the session id (the
-- cookie's value; a reader of this table cannot take a session over), the session's data and its expiry (pushed
-- back while the session is used). Not the store crate's own table: it turns on sqlx's `time` feature, and its
-- migrate() would CREATE SCHEMA, which the service's least-privilege role may not; here the migrations stay the
-- one source of the schema.
CREATE TABLE portal_sessions (
    id_hash     text PRIMARY KEY,
    data        jsonb NOT NULL,
    expiry_date timestamptz NOT NULL
);
CREATE INDEX portal_sessions_expiry ON portal_sessions (expiry_date);

-- Failed logins, one row each, by the name tried (lower-cased, whether or not it exists) and the client's address:
-- the throttle counts the recent ones per name and per address, in the database so it holds across instances.
-- Rows older than the window are deleted as new failures arrive.
CREATE TABLE login_failures (
    id       bigserial PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    username text NOT NULL,
    address  inet NOT NULL
);
CREATE INDEX login_failures_username ON login_failures (username, at);
CREATE INDEX login_failures_address ON login_failures (address, at);
