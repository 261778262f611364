-- Usage per pod and UTC day, kept in step with gpu_usage_hourly in the same transaction (the ingest, a mapping
-- change): the idle-waste list over a week reads ~7 rows per pod plus the hours of the window's partial days,
-- instead of 168 rows per pod.
CREATE TABLE usage_pod_daily (
    cluster                 text NOT NULL REFERENCES clusters (name),
    -- the UTC day (not the billing day: a window of whole hours is cut at UTC midnights whatever the billing
    -- time zone, and changing that setting needs no rebuild of this table)
    day                     date NOT NULL,
    namespace               text NOT NULL,
    pod                     text NOT NULL,
    last_hour               timestamptz NOT NULL,
    -- team and GPU model as of last_hour (a pod sits on one node, so one model an hour; should a restart under the
    -- same name land on another model within the hour, the greater name)
    team                    text NOT NULL,
    gpu_model               text NOT NULL,
    -- the most cards it held in one hour of the day (Σ units × fraction over its rows of that hour)
    cards                   double precision NOT NULL,
    gpu_seconds             double precision NOT NULL,
    effective_gpu_seconds   double precision NOT NULL,
    unmetered_gpu_seconds   double precision NOT NULL,
    peak_fb_used_mib        double precision,
    PRIMARY KEY (cluster, day, namespace, pod)
);
CREATE INDEX usage_pod_daily_day ON usage_pod_daily (day);
CREATE INDEX usage_pod_daily_team ON usage_pod_daily (team, day);

-- Per pod and hour: what one hour of gpu_usage_hourly says about each pod (the rows of its containers and
-- resources summed). Both the daily rollup and the partial days of a window are built from it.
CREATE FUNCTION usage_pod_hours(p_cluster text, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (cluster text, hour timestamptz, namespace text, pod text, team text, gpu_model text,
               cards double precision, gpu_seconds double precision, effective_gpu_seconds double precision,
               unmetered_gpu_seconds double precision, peak_fb_used_mib double precision)
STABLE LANGUAGE sql AS $$
    SELECT cluster, hour, namespace, pod, max(team), max(gpu_model),
           sum(units * fraction), sum(gpu_seconds), sum(effective_gpu_seconds), sum(unmetered_gpu_seconds),
           max(peak_fb_used_mib)
    FROM gpu_usage_hourly
    WHERE (p_cluster IS NULL OR cluster = p_cluster) AND hour >= p_from AND hour < p_to
    GROUP BY cluster, hour, namespace, pod
$$;

-- Rebuilds the rows of one cluster and UTC day from the hourly ones. Team and model come from the pod's last hour:
-- one sort by pod and hour, whatever the statistics say (a join on the last hour chose nested loops on the stale
-- statistics of a table a backfill had just filled, and took seconds).
CREATE FUNCTION refresh_pod_daily(p_cluster text, p_day date) RETURNS void VOLATILE LANGUAGE sql AS $$
    DELETE FROM usage_pod_daily WHERE cluster = p_cluster AND day = p_day;
    INSERT INTO usage_pod_daily
    SELECT DISTINCT ON (cluster, namespace, pod) cluster, p_day, namespace, pod, hour, team, gpu_model,
           max(cards) OVER p, sum(gpu_seconds) OVER p, sum(effective_gpu_seconds) OVER p,
           sum(unmetered_gpu_seconds) OVER p, max(peak_fb_used_mib) OVER p
    FROM usage_pod_hours(p_cluster, p_day::timestamp AT TIME ZONE 'UTC', (p_day + 1)::timestamp AT TIME ZONE 'UTC')
    WINDOW p AS (PARTITION BY cluster, namespace, pod ORDER BY hour DESC
                 ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
    ORDER BY cluster, namespace, pod, hour DESC;
$$;

SELECT count(refresh_pod_daily(c, d))
FROM (SELECT DISTINCT cluster AS c, (hour AT TIME ZONE 'UTC')::date AS d FROM ingested_hours) days;
