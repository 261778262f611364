-- Batched writes (issue 9): an ingest stores a batch of hours in one transaction and refreshes the rollups once per
-- batch, only for the billing days and namespaces, and the UTC days and pods, that the batch touched (what its hours
-- held before and hold now). The whole-day refreshes (an undo, a mapping change) become the same functions over
-- every namespace or pod of the day, so there is one way to build each rollup. Every sum adds its rows in a fixed
-- order: floating-point addition is not associative, and a rollup rebuilt by another path or plan must come out
-- bit for bit the same.

-- One cluster's billing day for the given namespaces (usage), and the whole day's capacity (a few rows per model).
CREATE FUNCTION refresh_daily_namespaces(p_cluster text, p_day date, p_namespaces text[])
RETURNS void VOLATILE LANGUAGE sql AS $$
    DELETE FROM usage_namespace_daily
    WHERE cluster = p_cluster AND day = p_day AND namespace = ANY (p_namespaces);
    INSERT INTO usage_namespace_daily (cluster, day, namespace, team, gpu_model, kind, gpu_seconds,
                                       effective_gpu_seconds, unmetered_gpu_seconds)
    SELECT cluster, p_day, namespace, team, gpu_model, kind, sum(gpu_seconds ORDER BY hour),
           sum(effective_gpu_seconds ORDER BY hour), sum(unmetered_gpu_seconds ORDER BY hour)
    FROM usage_namespace_hourly
    WHERE cluster = p_cluster AND namespace = ANY (p_namespaces) AND billing_date(hour) = p_day
      AND hour >= (p_day - 1)::timestamptz AND hour < (p_day + 2)::timestamptz
    GROUP BY cluster, namespace, team, gpu_model, kind;
    DELETE FROM capacity_daily WHERE cluster = p_cluster AND day = p_day;
    INSERT INTO capacity_daily (cluster, day, gpu_model, card_seconds, offered_card_seconds)
    SELECT cluster, p_day, gpu_model, sum(card_seconds ORDER BY hour, node), sum(offered_card_seconds ORDER BY hour, node)
    FROM node_capacity_hourly
    WHERE cluster = p_cluster AND billing_date(hour) = p_day
      AND hour >= (p_day - 1)::timestamptz AND hour < (p_day + 2)::timestamptz
    GROUP BY cluster, gpu_model;
$$;

CREATE OR REPLACE FUNCTION refresh_daily(p_cluster text, p_day date) RETURNS void VOLATILE LANGUAGE sql AS $$
    SELECT refresh_daily_namespaces(p_cluster, p_day, ARRAY(
        SELECT namespace FROM usage_namespace_daily WHERE cluster = p_cluster AND day = p_day
        UNION
        SELECT namespace FROM usage_namespace_hourly
        WHERE cluster = p_cluster AND billing_date(hour) = p_day
          AND hour >= (p_day - 1)::timestamptz AND hour < (p_day + 2)::timestamptz));
$$;

-- Per pod and hour (the rows of its containers and resources summed, in a fixed order).
CREATE OR REPLACE FUNCTION usage_pod_hours(p_cluster text, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (cluster text, hour timestamptz, namespace text, pod text, team text, gpu_model text,
               cards double precision, gpu_seconds double precision, effective_gpu_seconds double precision,
               unmetered_gpu_seconds double precision, peak_fb_used_mib double precision)
STABLE LANGUAGE sql AS $$
    SELECT cluster, hour, namespace, pod, max(team), max(gpu_model),
           sum(units * fraction ORDER BY container, resource, gpu_model),
           sum(gpu_seconds ORDER BY container, resource, gpu_model),
           sum(effective_gpu_seconds ORDER BY container, resource, gpu_model),
           sum(unmetered_gpu_seconds ORDER BY container, resource, gpu_model),
           max(peak_fb_used_mib)
    FROM gpu_usage_hourly
    WHERE (p_cluster IS NULL OR cluster = p_cluster) AND hour >= p_from AND hour < p_to
    GROUP BY cluster, hour, namespace, pod
$$;

-- One cluster's UTC day for the given pods (p_namespaces[i], p_pods[i]). Team and model come from the pod's last
-- hour; the sums run over its hours in order. The planner takes the unnested pods for ten rows whatever their
-- number, and would probe the day's rows once per pod (the hourly key is (cluster, hour, namespace, pod, …), so
-- a probe reads the whole day): quadratic in the pods of a busy day. Without nested loops it hashes them.
CREATE FUNCTION refresh_pod_daily_pods(p_cluster text, p_day date, p_namespaces text[], p_pods text[])
RETURNS void VOLATILE LANGUAGE sql SET enable_nestloop = off AS $$
    DELETE FROM usage_pod_daily d
    USING unnest(p_namespaces, p_pods) AS t (namespace, pod)
    WHERE d.cluster = p_cluster AND d.day = p_day AND d.namespace = t.namespace AND d.pod = t.pod;
    INSERT INTO usage_pod_daily (cluster, day, namespace, pod, last_hour, team, gpu_model, cards, gpu_seconds,
                                 effective_gpu_seconds, unmetered_gpu_seconds, peak_fb_used_mib)
    SELECT DISTINCT ON (cluster, namespace, pod) cluster, p_day, namespace, pod, hour, team, gpu_model,
           max(cards) OVER p, sum(gpu_seconds) OVER p, sum(effective_gpu_seconds) OVER p,
           sum(unmetered_gpu_seconds) OVER p, max(peak_fb_used_mib) OVER p
    FROM (SELECT u.cluster, u.hour, u.namespace, u.pod, max(u.team) AS team, max(u.gpu_model) AS gpu_model,
                 sum(u.units * u.fraction ORDER BY u.container, u.resource, u.gpu_model) AS cards,
                 sum(u.gpu_seconds ORDER BY u.container, u.resource, u.gpu_model) AS gpu_seconds,
                 sum(u.effective_gpu_seconds ORDER BY u.container, u.resource, u.gpu_model) AS effective_gpu_seconds,
                 sum(u.unmetered_gpu_seconds ORDER BY u.container, u.resource, u.gpu_model) AS unmetered_gpu_seconds,
                 max(u.peak_fb_used_mib) AS peak_fb_used_mib
          FROM gpu_usage_hourly u
          JOIN unnest(p_namespaces, p_pods) AS t (namespace, pod) ON u.namespace = t.namespace AND u.pod = t.pod
          WHERE u.cluster = p_cluster
            AND u.hour >= p_day::timestamp AT TIME ZONE 'UTC' AND u.hour < (p_day + 1)::timestamp AT TIME ZONE 'UTC'
          GROUP BY u.cluster, u.hour, u.namespace, u.pod) h
    WINDOW p AS (PARTITION BY cluster, namespace, pod ORDER BY hour
                 ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
    ORDER BY cluster, namespace, pod, hour DESC;
$$;

CREATE OR REPLACE FUNCTION refresh_pod_daily(p_cluster text, p_day date) RETURNS void VOLATILE LANGUAGE sql AS $$
    SELECT refresh_pod_daily_pods(p_cluster, p_day, coalesce(array_agg(namespace), '{}'), coalesce(array_agg(pod), '{}'))
    FROM (SELECT namespace, pod FROM usage_pod_daily WHERE cluster = p_cluster AND day = p_day
          UNION
          SELECT namespace, pod FROM gpu_usage_hourly
          WHERE cluster = p_cluster AND hour >= p_day::timestamp AT TIME ZONE 'UTC'
            AND hour < (p_day + 1)::timestamp AT TIME ZONE 'UTC') t;
$$;
