-- Statistics after large backfills (issue 9): a backfill can fill a fresh table (or month partition) with
-- millions of rows faster than autovacuum analyzes it, and autovacuum never analyzes a partitioned table's parent;
-- until then the planner plans the rollup refreshes and the pages on the statistics of an empty table. The ingest
-- calls this between batches: it analyzes the ingest's tables (and their partitions) that changed by more than a
-- fifth, and at least p_min_rows rows, since their statistics were taken, and returns their names.
-- SECURITY DEFINER: only a table's owner may analyze it, and the service's role owns nothing (docs/database.md).
CREATE FUNCTION analyze_stale_ingest_tables(p_min_rows bigint) RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    t regclass;
BEGIN
    FOR t IN
        WITH ingest AS (
            SELECT c.oid FROM pg_class c
            WHERE c.relnamespace = current_schema()::regnamespace
              AND c.relname IN ('gpu_usage_hourly', 'usage_namespace_hourly', 'usage_namespace_daily',
                                'node_capacity_hourly', 'capacity_daily', 'usage_pod_daily', 'ingested_hours',
                                'ingest_anomalies'))
        SELECT s.relid::regclass FROM pg_stat_user_tables s
        WHERE (s.relid IN (SELECT oid FROM ingest)
               OR s.relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent IN (SELECT oid FROM ingest)))
          AND s.n_mod_since_analyze > greatest(p_min_rows, 0.2 * s.n_live_tup)
        ORDER BY 1
    LOOP
        EXECUTE format('ANALYZE %s', t);
        RETURN NEXT t::text;
    END LOOP;
END
$$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION analyze_stale_ingest_tables(bigint) SET search_path = %I, pg_temp', current_schema());
END
$$;
