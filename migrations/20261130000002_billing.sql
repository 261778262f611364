-- Pricing, teams, bills: rates with a dated history, namespace → team mappings, closed months, audit, API tokens.

CREATE TABLE teams (
    id          text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    owner       text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO teams (id, name, owner) VALUES ('unassigned', 'unassigned', NULL);

-- Explicit namespace → team, valid from a date in the billing time zone; the newest valid one wins.
-- cluster NULL applies to every cluster; a cluster-specific mapping beats it.
CREATE TABLE namespace_mappings (
    id          bigserial PRIMARY KEY,
    cluster     text,
    namespace   text NOT NULL,
    team_id     text NOT NULL REFERENCES teams (id),
    valid_from  date NOT NULL,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX namespace_mappings_unique ON namespace_mappings (coalesce(cluster, ''), namespace, valid_from);

-- The newest ingest is part of what cached statements are checked against.
CREATE INDEX ingested_hours_ingested_at ON ingested_hours (ingested_at);

-- Settings shared by SQL and the application.
CREATE TABLE settings (
    key     text PRIMARY KEY,
    value   text NOT NULL
);
INSERT INTO settings (key, value) VALUES ('billing_timezone', 'Asia/Shanghai');

CREATE FUNCTION billing_date(t timestamptz) RETURNS date STABLE LANGUAGE sql AS $$
    SELECT (t AT TIME ZONE (SELECT value FROM settings WHERE key = 'billing_timezone'))::date
$$;

-- SPEC §4: an explicit mapping valid on that date (cluster-specific first), else the namespace's team label,
-- else unassigned.
CREATE FUNCTION team_of(p_cluster text, p_namespace text, p_hour timestamptz, p_label text) RETURNS text
STABLE LANGUAGE sql AS $$
    SELECT coalesce(
        (SELECT m.team_id FROM namespace_mappings m
         WHERE m.namespace = p_namespace AND (m.cluster = p_cluster OR m.cluster IS NULL)
           AND m.valid_from <= billing_date(p_hour)
         ORDER BY (m.cluster IS NULL), m.valid_from DESC
         LIMIT 1),
        nullif(p_label, ''),
        'unassigned')
$$;

-- The resolved team of every usage row, kept current by the ingest and by every mapping change.
ALTER TABLE gpu_usage_hourly ADD COLUMN team text;
UPDATE gpu_usage_hourly SET team = team_of(cluster, namespace, hour, label_team);
ALTER TABLE gpu_usage_hourly ALTER COLUMN team SET NOT NULL;

-- Usage per namespace and hour, kept in step with gpu_usage_hourly in the same transaction: bills and summaries
-- read this instead of every pod's rows.
CREATE TABLE usage_namespace_hourly (
    cluster                 text NOT NULL REFERENCES clusters (name),
    hour                    timestamptz NOT NULL,
    namespace               text NOT NULL,
    team                    text NOT NULL,
    gpu_model               text NOT NULL,
    kind                    text NOT NULL,
    gpu_seconds             double precision NOT NULL,
    effective_gpu_seconds   double precision NOT NULL,
    unmetered_gpu_seconds   double precision NOT NULL,
    PRIMARY KEY (cluster, hour, namespace, gpu_model, kind)
);
CREATE INDEX usage_namespace_hourly_hour ON usage_namespace_hourly (hour);
CREATE INDEX usage_namespace_hourly_team ON usage_namespace_hourly (team, hour);

INSERT INTO usage_namespace_hourly
SELECT cluster, hour, namespace, max(team), gpu_model, kind,
       sum(gpu_seconds), sum(effective_gpu_seconds), sum(unmetered_gpu_seconds)
FROM gpu_usage_hourly GROUP BY cluster, hour, namespace, gpu_model, kind;

-- The same per billing day (settings.billing_timezone): month bills and month summaries read ~30 rows per
-- namespace instead of ~720.
CREATE TABLE usage_namespace_daily (
    cluster                 text NOT NULL REFERENCES clusters (name),
    day                     date NOT NULL,
    namespace               text NOT NULL,
    team                    text NOT NULL,
    gpu_model               text NOT NULL,
    kind                    text NOT NULL,
    gpu_seconds             double precision NOT NULL,
    effective_gpu_seconds   double precision NOT NULL,
    unmetered_gpu_seconds   double precision NOT NULL,
    PRIMARY KEY (cluster, day, namespace, team, gpu_model, kind)
);
CREATE INDEX usage_namespace_daily_day ON usage_namespace_daily (day);

CREATE TABLE capacity_daily (
    cluster         text NOT NULL REFERENCES clusters (name),
    day             date NOT NULL,
    gpu_model       text NOT NULL,
    card_seconds    double precision NOT NULL,
    PRIMARY KEY (cluster, day, gpu_model)
);

-- Rebuilds the daily rows of one cluster and billing day from the hourly ones.
CREATE FUNCTION refresh_daily(p_cluster text, p_day date) RETURNS void VOLATILE LANGUAGE sql AS $$
    DELETE FROM usage_namespace_daily WHERE cluster = p_cluster AND day = p_day;
    INSERT INTO usage_namespace_daily
    SELECT cluster, p_day, namespace, team, gpu_model, kind,
           sum(gpu_seconds), sum(effective_gpu_seconds), sum(unmetered_gpu_seconds)
    FROM usage_namespace_hourly
    WHERE cluster = p_cluster AND billing_date(hour) = p_day
      AND hour >= (p_day - 1)::timestamptz AND hour < (p_day + 2)::timestamptz
    GROUP BY cluster, namespace, team, gpu_model, kind;
    DELETE FROM capacity_daily WHERE cluster = p_cluster AND day = p_day;
    INSERT INTO capacity_daily
    SELECT cluster, p_day, gpu_model, sum(card_seconds)
    FROM node_capacity_hourly
    WHERE cluster = p_cluster AND billing_date(hour) = p_day
      AND hour >= (p_day - 1)::timestamptz AND hour < (p_day + 2)::timestamptz
    GROUP BY cluster, gpu_model;
$$;

SELECT refresh_daily(c, d) FROM (SELECT DISTINCT cluster AS c, billing_date(hour) AS d FROM node_capacity_hourly
                                 UNION SELECT DISTINCT cluster, billing_date(hour) FROM usage_namespace_hourly) x;

-- Bill defaults (a bill may override them).
INSERT INTO settings (key, value) VALUES ('bill_mode', 'showback'), ('unallocated_policy', 'kept_by_platform');

-- DCGM modelName → pricing model, where the built-in catalogue is not enough.
CREATE TABLE gpu_model_aliases (
    model_name      text PRIMARY KEY,
    pricing_model   text NOT NULL
);

CREATE TABLE rate_versions (
    id              bigserial PRIMARY KEY,
    gpu_model       text NOT NULL,
    effective_from  date NOT NULL,
    rate            numeric(14, 4) NOT NULL CHECK (rate >= 0),
    tco             jsonb,
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (gpu_model, effective_from)
);

CREATE TABLE cloud_rates (
    gpu_model   text PRIMARY KEY,
    on_demand   numeric(14, 4) CHECK (on_demand >= 0),
    spot        numeric(14, 4) CHECK (spot >= 0),
    reserved    numeric(14, 4) CHECK (reserved >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A closed month: the bills exactly as finance closed them (immutable; no UPDATE or DELETE path exists).
CREATE TABLE closed_months (
    month       text PRIMARY KEY CHECK (month ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    closed_at   timestamptz NOT NULL DEFAULT now(),
    closed_by   text NOT NULL,
    snapshot    jsonb NOT NULL
);

CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text NOT NULL,
    action      text NOT NULL,
    entity      text NOT NULL,
    before      jsonb,
    after       jsonb
);

CREATE TABLE api_tokens (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL,
    token_hash  text NOT NULL UNIQUE,
    role        text NOT NULL CHECK (role IN ('admin', 'finance', 'team_lead', 'viewer')),
    teams       text[] NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
