-- Quotas, reservations and queues (SPEC §10, issue 29), written by the ingest in the transaction that stores the
-- hour's GPU usage (replaced, kept, archived and restored with it), like serving_hourly.

-- Per hour × cluster × quota scope (a namespace's ResourceQuota where the namespace is in no queue, a Kueue
-- ClusterQueue, a Volcano queue): the guarantee's card-seconds split by the scope's own metered GPU-seconds.
-- The team is resolved when read (team_of for a namespace, queue_team_of for a queue): mappings dated later apply.
CREATE TABLE quota_hourly (
    cluster                     text NOT NULL REFERENCES clusters (name),
    hour                        timestamptz NOT NULL CHECK (date_trunc('hour', hour) = hour),
    scope_kind                  text NOT NULL CHECK (scope_kind IN ('namespace', 'cluster_queue', 'volcano_queue')),
    scope                       text NOT NULL,
    guaranteed_card_seconds     double precision NOT NULL CHECK (guaranteed_card_seconds >= 0),
    used_within_card_seconds    double precision NOT NULL CHECK (used_within_card_seconds >= 0),
    borrowed_card_seconds       double precision NOT NULL CHECK (borrowed_card_seconds >= 0),
    reserved_idle_card_seconds  double precision NOT NULL CHECK (reserved_idle_card_seconds >= 0),
    label_team                  text,
    PRIMARY KEY (cluster, hour, scope_kind, scope)
);
CREATE INDEX quota_hourly_hour ON quota_hourly (hour);
CREATE TABLE replaced_quota_hourly (run_id bigint NOT NULL, LIKE quota_hourly);
CREATE INDEX replaced_quota_hourly_run ON replaced_quota_hourly (run_id, cluster, hour);

-- Per hour × GPU pod object an hour of its wait: seen Pending in it, or started Running in it. A pod's wait is
-- its first Pending to its first Running over all its rows (or to its last seen, if it never ran).
CREATE TABLE pod_wait_hourly (
    cluster              text NOT NULL REFERENCES clusters (name),
    hour                 timestamptz NOT NULL CHECK (date_trunc('hour', hour) = hour),
    namespace            text NOT NULL,
    pod                  text NOT NULL,
    uid                  text NOT NULL,
    gpu_model            text NOT NULL,
    -- q·f at its last request sample of the hour, and its queue ('cluster_queue/cq-a'), for the what-if replay
    cards                double precision NOT NULL CHECK (cards >= 0),
    queue                text,
    first_pending        timestamptz,
    first_running        timestamptz,
    last_seen            timestamptz NOT NULL,
    pending_card_seconds double precision NOT NULL CHECK (pending_card_seconds >= 0),
    label_team           text,
    PRIMARY KEY (cluster, hour, uid)
);
CREATE INDEX pod_wait_hourly_hour ON pod_wait_hourly (hour);
CREATE INDEX pod_wait_hourly_uid ON pod_wait_hourly (cluster, uid);
CREATE TABLE replaced_pod_wait_hourly (run_id bigint NOT NULL, LIKE pod_wait_hourly);
CREATE INDEX replaced_pod_wait_hourly_run ON replaced_pod_wait_hourly (run_id, cluster, hour);

-- A Kueue ClusterQueue's or a Volcano queue's team, kept like namespace mappings: dated, cluster-specific first.
CREATE TABLE queue_mappings (
    id          bigserial PRIMARY KEY,
    cluster     text REFERENCES clusters (name),
    queue_kind  text NOT NULL CHECK (queue_kind IN ('cluster_queue', 'volcano_queue')),
    queue       text NOT NULL CHECK (queue <> ''),
    team_id     text NOT NULL REFERENCES teams (id),
    valid_from  date NOT NULL,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX queue_mappings_unique ON queue_mappings (coalesce(cluster, ''), queue_kind, queue, valid_from);

CREATE FUNCTION queue_team_of(p_cluster text, p_kind text, p_queue text, p_hour timestamptz) RETURNS text
STABLE LANGUAGE sql AS $$
    SELECT coalesce(
        (SELECT m.team_id FROM queue_mappings m
         WHERE m.queue_kind = p_kind AND m.queue = p_queue AND (m.cluster = p_cluster OR m.cluster IS NULL)
           AND m.valid_from <= billing_date(p_hour)
         ORDER BY (m.cluster IS NULL), m.valid_from DESC
         LIMIT 1),
        'unassigned')
$$;

-- A quota scope's team in an hour: its namespace's, or its queue's.
CREATE FUNCTION scope_team_of(p_cluster text, p_kind text, p_scope text, p_hour timestamptz, p_label text)
RETURNS text STABLE LANGUAGE sql AS $$
    SELECT CASE WHEN p_kind = 'namespace' THEN team_of(p_cluster, p_scope, p_hour, p_label)
                ELSE queue_team_of(p_cluster, p_kind, p_scope, p_hour) END
$$;

-- cached answers read them (quota and queue reports)
CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON quota_hourly
    FOR EACH STATEMENT EXECUTE FUNCTION data_version_touch();
CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON pod_wait_hourly
    FOR EACH STATEMENT EXECUTE FUNCTION data_version_touch();
CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON queue_mappings
    FOR EACH STATEMENT EXECUTE FUNCTION data_version_touch();
