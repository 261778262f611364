-- A close only of a complete month (SPEC §6): the windows an ingest could not read are recorded, so the month's
-- readiness can name them until every hour of the window has been stored again.

CREATE TABLE ingest_failures (
    id          bigserial PRIMARY KEY,
    cluster     text NOT NULL REFERENCES clusters (name),
    -- the hours [hour_from, hour_to) the run could not store
    hour_from   timestamptz NOT NULL CHECK (date_trunc('hour', hour_from) = hour_from),
    hour_to     timestamptz NOT NULL CHECK (date_trunc('hour', hour_to) = hour_to AND hour_to > hour_from),
    command     text NOT NULL,
    error       text NOT NULL,
    failed_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ingest_failures_span ON ingest_failures (cluster, hour_to, hour_from);

-- SPEC §4: a team label becomes a team id by one fixed rule — ASCII letters lower-cased, every character outside
-- [a-z0-9-] as '-', '-' trimmed from both ends, at most 63 characters; the label as written is the display name.
-- `NLP` and `nlp` are one team. Mirrored by `validate::TeamId::from_label`.
CREATE FUNCTION team_id_of_label(p_label text) RETURNS text IMMUTABLE LANGUAGE sql AS $$
    SELECT nullif(rtrim(left(btrim(regexp_replace(
        translate(p_label, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'),
        '[^a-z0-9-]', '-', 'g'), '-'), 63), '-'), '')
$$;

CREATE OR REPLACE FUNCTION team_of(p_cluster text, p_namespace text, p_hour timestamptz, p_label text) RETURNS text
STABLE LANGUAGE sql AS $$
    SELECT coalesce(
        (SELECT m.team_id FROM namespace_mappings m
         WHERE m.namespace = p_namespace AND (m.cluster = p_cluster OR m.cluster IS NULL)
           AND m.valid_from <= billing_date(p_hour)
         ORDER BY (m.cluster IS NULL), m.valid_from DESC
         LIMIT 1),
        team_id_of_label(p_label),
        'unassigned')
$$;

-- Every team label value seen, with the team it makes: ingest health reports labels that make one team.
CREATE TABLE team_labels (
    label       text PRIMARY KEY,
    team_id     text NOT NULL REFERENCES teams (id),
    first_hour  timestamptz NOT NULL,
    last_hour   timestamptz NOT NULL
);
CREATE INDEX team_labels_team ON team_labels (team_id);

-- The labels stored so far: their teams registered (the first label in sort order names the team) and listed.
INSERT INTO teams (id, name)
SELECT DISTINCT ON (id) id, left(label, 200) FROM (
    SELECT DISTINCT label_team AS label, team_id_of_label(label_team) AS id FROM gpu_usage_hourly
    WHERE label_team IS NOT NULL) l
WHERE id IS NOT NULL ORDER BY id, label COLLATE "C"
ON CONFLICT (id) DO NOTHING;
INSERT INTO team_labels (label, team_id, first_hour, last_hour)
SELECT label_team, team_id_of_label(label_team), min(hour), max(hour) FROM gpu_usage_hourly
WHERE team_id_of_label(label_team) IS NOT NULL GROUP BY label_team;

-- Rows whose team came from a label not written as its id move to that id (open months restate the move on
-- their next statement; closed months stay as closed).
CREATE TEMPORARY TABLE retagged AS
SELECT DISTINCT cluster, hour, namespace FROM gpu_usage_hourly
WHERE team IS DISTINCT FROM team_of(cluster, namespace, hour, label_team);
UPDATE gpu_usage_hourly g SET team = team_of(g.cluster, g.namespace, g.hour, g.label_team)
FROM retagged r WHERE g.cluster = r.cluster AND g.hour = r.hour AND g.namespace = r.namespace;
UPDATE usage_namespace_hourly u SET team = g.team
FROM (SELECT g.cluster, g.hour, g.namespace, g.gpu_model, g.kind, max(g.team) AS team
      FROM gpu_usage_hourly g JOIN retagged r USING (cluster, hour, namespace)
      GROUP BY g.cluster, g.hour, g.namespace, g.gpu_model, g.kind) g
WHERE u.cluster = g.cluster AND u.hour = g.hour AND u.namespace = g.namespace
  AND u.gpu_model = g.gpu_model AND u.kind = g.kind AND u.team IS DISTINCT FROM g.team;
UPDATE usage_pod_daily d SET team = h.team
FROM (SELECT g.cluster, g.hour, g.namespace, g.pod, max(g.team) AS team
      FROM gpu_usage_hourly g JOIN retagged r USING (cluster, hour, namespace)
      GROUP BY g.cluster, g.hour, g.namespace, g.pod) h
WHERE h.cluster = d.cluster AND h.hour = d.last_hour AND h.namespace = d.namespace AND h.pod = d.pod
  AND d.team IS DISTINCT FROM h.team;
SELECT refresh_daily(c, d) FROM (SELECT DISTINCT cluster AS c, billing_date(hour) AS d FROM retagged) x;
DROP TABLE retagged;
