-- Storage that grows for years (issue 11): the hourly tables and the big daily rollups are partitioned by calendar
-- month (native declarative partitioning, RANGE on the hour or the day). A month's rows sit in one partition, so a
-- statement or a report of a month reads only its month's partitions (pruned when planned or when run), a year of
-- history costs the reads of one month nothing, and dropping a month's raw rows (`cardhour retention`) drops a
-- table instead of deleting millions of rows and vacuuming after them.
--
-- Partitioned: gpu_usage_hourly, usage_namespace_hourly, node_capacity_hourly (by the hour's UTC month),
-- usage_namespace_daily (by the billing day's month: a billing month's days are exactly one partition) and
-- usage_pod_daily (by the UTC day's month). Not partitioned: capacity_daily (a few rows a day per model, ~1,100 a
-- year for 3 models: no read gains from it), ingested_hours and the rest (one row an hour or less).
--
-- Partitions are made ahead by ensure_month_partitions(from, to), which the ingest calls in a batch's transaction
-- before it writes the batch's hours; each table also has a DEFAULT partition, so no insert ever fails for want
-- of a partition (a row there is moved into its month's partition when that partition is made).
--
-- pg_partman was not used: what it would add here (premake, retention by age) is ~60 lines of SQL below, and it
-- would be one more extension to install on every database, including the restored copy of a backup.

-- The tables and how they are partitioned: the key column, and whether it is a timestamptz (hour) or a date (day).
CREATE FUNCTION month_partitioned_tables() RETURNS TABLE (tbl text, key text, is_hour boolean)
IMMUTABLE LANGUAGE sql AS $$
    VALUES ('gpu_usage_hourly', 'hour', true), ('usage_namespace_hourly', 'hour', true),
           ('node_capacity_hourly', 'hour', true), ('usage_namespace_daily', 'day', false),
           ('usage_pod_daily', 'day', false)
$$;

-- The partition of `tbl` for the month starting at `m` (the first of a month): tbl_pYYYY_MM.
CREATE FUNCTION month_partition_name(tbl text, m date) RETURNS text IMMUTABLE LANGUAGE sql AS $$
    SELECT tbl || '_p' || to_char(m, 'YYYY_MM')
$$;

-- Where the raw hourly rows start, once `cardhour retention` has dropped some (no row: none dropped). A UTC month
-- start: whole partitions are dropped, never a part of one.
CREATE TABLE raw_retention (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),
    kept_from   timestamptz NOT NULL CHECK (date_trunc('month', kept_from AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' = kept_from),
    keep_months integer NOT NULL CHECK (keep_months >= 0),
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- Refuses hours before the retention horizon: their months' rollups could no longer be rebuilt from raw rows. The
-- ingest calls it in the batch's transaction (a lookup of one row).
CREATE FUNCTION raw_retention_check(p_from timestamptz) RETURNS boolean STABLE LANGUAGE plpgsql AS $$
DECLARE
    kept_from timestamptz := (SELECT r.kept_from FROM raw_retention r);
BEGIN
    IF p_from < kept_from THEN
        RAISE EXCEPTION 'the raw hourly rows before % were dropped by `cardhour retention`: hour % cannot be written',
            kept_from, p_from
            USING ERRCODE = 'restrict_violation',
                  HINT = 'the months before it are closed; their rollups and statements are kept as they are';
    END IF;
    RETURN true;
END
$$;

-- Makes the monthly partitions of every partitioned table for the months of [p_from, p_to] (hours), with a day
-- of margin on each side for the billing days (a billing day is within 14 hours of its UTC day). Cheap when they
-- exist (one catalog lookup per table and month); otherwise it takes a transaction-scoped advisory lock (two
-- ingests making the same month wait for each other instead of failing on the name), makes the partition as a
-- plain table, moves into it any row of its month that the DEFAULT partition holds, and attaches it. Attaching
-- locks the DEFAULT partition (ACCESS EXCLUSIVE) until commit: call it in a transaction of its own, before the
-- batch's (the ingest does), never inside a long one — another ingest writing the same table would wait for it. Refuses hours
-- before the retention horizon (raw_retention): their month's rollups could no longer be rebuilt from raw rows.
-- SECURITY DEFINER: the service's role creates nothing; partitions belong to the tables' owner.
CREATE FUNCTION ensure_month_partitions(p_from timestamptz, p_to timestamptz) RETURNS integer
VOLATILE LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    first_month date := date_trunc('month', (p_from AT TIME ZONE 'UTC') - interval '1 day')::date;
    last_month date := date_trunc('month', (p_to AT TIME ZONE 'UTC') + interval '1 day')::date;
    m date;
    t record;
    part text;
    lo text;
    hi text;
    made integer := 0;
    locked boolean := false;
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR p_to < p_from THEN
        RAISE EXCEPTION 'ensure_month_partitions: bad range [%, %]', p_from, p_to;
    END IF;
    IF last_month > first_month + interval '1200 months' THEN
        RAISE EXCEPTION 'ensure_month_partitions: more than 100 years asked ([%, %])', p_from, p_to;
    END IF;
    PERFORM raw_retention_check(p_from);
    m := first_month;
    WHILE m <= last_month LOOP
        FOR t IN SELECT * FROM month_partitioned_tables() LOOP
            -- an hourly table needs the months of the hours only (and none before the retention horizon)
            CONTINUE WHEN t.is_hour AND (m < date_trunc('month', p_from AT TIME ZONE 'UTC')
                                         OR m > date_trunc('month', p_to AT TIME ZONE 'UTC'));
            part := month_partition_name(t.tbl, m);
            CONTINUE WHEN to_regclass(quote_ident(part)) IS NOT NULL;
            IF NOT locked THEN
                PERFORM pg_advisory_xact_lock(hashtext('cardhour.ensure_month_partitions'));
                locked := true;
                CONTINUE WHEN to_regclass(quote_ident(part)) IS NOT NULL;
            END IF;
            IF t.is_hour THEN
                lo := quote_literal(to_char(m, 'YYYY-MM-DD') || ' 00:00:00+00');
                hi := quote_literal(to_char(m + interval '1 month', 'YYYY-MM-DD') || ' 00:00:00+00');
            ELSE
                lo := quote_literal(to_char(m, 'YYYY-MM-DD'));
                hi := quote_literal(to_char(m + interval '1 month', 'YYYY-MM-DD'));
            END IF;
            EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, t.tbl);
            EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= %s AND %I < %s RETURNING *)
                            INSERT INTO %I SELECT * FROM moved',
                           t.tbl || '_default', t.key, lo, t.key, hi, part);
            EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', t.tbl, part, lo, hi);
            made := made + 1;
        END LOOP;
        m := m + interval '1 month';
    END LOOP;
    RETURN made;
END
$$;

-- Converting a table: a partitioned twin with the same columns in the same order (`INSERT … SELECT u.*` into the
-- kept replaced rows relies on it), defaults and CHECK constraints, and a DEFAULT partition; the partitions of every
-- month held, by the same function the ingest calls; the rows moved; the old table dropped; then keys, indexes,
-- the foreign key to clusters and the triggers as they were, under the same names (a primary key of a partitioned
-- table must contain the partition key: every one of these does).
-- Five twins must exist before ensure_month_partitions can make their partitions: convert all of them first.
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM month_partitioned_tables() LOOP
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE
                        INCLUDING COMMENTS) PARTITION BY RANGE (%I)', t.tbl || '_partitioned', t.tbl, t.key);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', t.tbl || '_default', t.tbl || '_partitioned');
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t.tbl, t.tbl || '_unpartitioned');
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t.tbl || '_partitioned', t.tbl);
    END LOOP;
END
$$;

SELECT ensure_month_partitions(lo, hi)
FROM (SELECT min(lo) AS lo, max(hi) AS hi FROM (
          SELECT min(hour) AS lo, max(hour) AS hi FROM gpu_usage_hourly_unpartitioned
          UNION ALL SELECT min(hour), max(hour) FROM usage_namespace_hourly_unpartitioned
          UNION ALL SELECT min(hour), max(hour) FROM node_capacity_hourly_unpartitioned
          UNION ALL SELECT min(day)::timestamptz, max(day)::timestamptz FROM usage_namespace_daily_unpartitioned
          UNION ALL SELECT min(day)::timestamptz, max(day)::timestamptz FROM usage_pod_daily_unpartitioned) x) r
WHERE lo IS NOT NULL;

INSERT INTO gpu_usage_hourly SELECT * FROM gpu_usage_hourly_unpartitioned;
INSERT INTO usage_namespace_hourly SELECT * FROM usage_namespace_hourly_unpartitioned;
INSERT INTO node_capacity_hourly SELECT * FROM node_capacity_hourly_unpartitioned;
INSERT INTO usage_namespace_daily SELECT * FROM usage_namespace_daily_unpartitioned;
INSERT INTO usage_pod_daily SELECT * FROM usage_pod_daily_unpartitioned;

DROP TABLE gpu_usage_hourly_unpartitioned, usage_namespace_hourly_unpartitioned, node_capacity_hourly_unpartitioned,
    usage_namespace_daily_unpartitioned, usage_pod_daily_unpartitioned;

-- Keys, indexes and foreign keys as they were (on the partitioned table: every partition gets them).
ALTER TABLE gpu_usage_hourly
    ADD CONSTRAINT gpu_usage_hourly_pkey PRIMARY KEY (cluster, hour, namespace, pod, container, resource, gpu_model),
    ADD CONSTRAINT gpu_usage_hourly_cluster_fkey FOREIGN KEY (cluster) REFERENCES clusters (name);
CREATE INDEX gpu_usage_hourly_hour ON gpu_usage_hourly (hour);
CREATE INDEX gpu_usage_hourly_ns ON gpu_usage_hourly (namespace, hour);
CREATE INDEX gpu_usage_hourly_timeslice ON gpu_usage_hourly (hour) WHERE kind = 'timeslice';

ALTER TABLE usage_namespace_hourly
    ADD CONSTRAINT usage_namespace_hourly_pkey PRIMARY KEY (cluster, hour, namespace, gpu_model, kind),
    ADD CONSTRAINT usage_namespace_hourly_cluster_fkey FOREIGN KEY (cluster) REFERENCES clusters (name);
CREATE INDEX usage_namespace_hourly_hour ON usage_namespace_hourly (hour);
CREATE INDEX usage_namespace_hourly_team ON usage_namespace_hourly (team, hour);

ALTER TABLE node_capacity_hourly
    ADD CONSTRAINT node_capacity_hourly_pkey PRIMARY KEY (cluster, hour, node),
    ADD CONSTRAINT node_capacity_hourly_cluster_fkey FOREIGN KEY (cluster) REFERENCES clusters (name);
CREATE TRIGGER offered_default BEFORE INSERT ON node_capacity_hourly
    FOR EACH ROW EXECUTE FUNCTION offered_defaults_to_capacity();

ALTER TABLE usage_namespace_daily
    ADD CONSTRAINT usage_namespace_daily_pkey PRIMARY KEY (cluster, day, namespace, team, gpu_model, kind),
    ADD CONSTRAINT usage_namespace_daily_cluster_fkey FOREIGN KEY (cluster) REFERENCES clusters (name);
CREATE INDEX usage_namespace_daily_day ON usage_namespace_daily (day);

ALTER TABLE usage_pod_daily
    ADD CONSTRAINT usage_pod_daily_pkey PRIMARY KEY (cluster, day, namespace, pod),
    ADD CONSTRAINT usage_pod_daily_cluster_fkey FOREIGN KEY (cluster) REFERENCES clusters (name);
CREATE INDEX usage_pod_daily_day ON usage_pod_daily (day);
CREATE INDEX usage_pod_daily_team ON usage_pod_daily (team, day);

-- The data version (20261201000005_integrity.sql): a statement trigger on the partitioned table fires for every
-- statement naming it, whichever partitions the rows land in.
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM month_partitioned_tables() LOOP
        EXECUTE format('CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %I
                        FOR EACH STATEMENT EXECUTE FUNCTION data_version_touch()', t.tbl);
    END LOOP;
    EXECUTE format('ALTER FUNCTION ensure_month_partitions(timestamptz, timestamptz) SET search_path = %I, pg_temp',
                   current_schema());
END
$$;

-- Retention of raw rows (`cardhour retention --keep-months N`). The raw hourly usage (gpu_usage_hourly, per
-- container and resource) and the kept replaced rows of ingest runs (replaced_usage_hourly,
-- replaced_node_capacity_hourly) of billing months that are closed and more than N months before the current one
-- are dropped — all but the few raw rows a closed month's bill is computed from again for the restatements of
-- the next open month (time-sliced rows, rows on node-hours with an anomaly); every rollup (per namespace and hour, per day, per pod and day, capacity per node and hour, which
-- the daily capacity is rebuilt from) and every closed statement stays. A UTC-month partition of the raw usage is
-- emptied only when every hour in it lies in such a month, and only a run of them from the oldest on: the horizon
-- (raw_retention.kept_from) is one instant, the start of a UTC month, and only moves forward.
--
-- After it, nothing may rebuild a rollup from raw rows that are gone: ensure_month_partitions refuses an ingest of
-- an hour before the horizon, and each partition of the per-pod daily rollup before it refuses any change (an
-- undo of a run over those hours, which would rebuild the pod-days from nothing, fails instead).
CREATE FUNCTION refuse_retained_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% holds days whose raw hourly rows were dropped by `cardhour retention`: % refused',
        TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation',
              HINT = 'the rollups of months before the retention horizon are kept as they are';
END
$$;

-- What retention drops (p_apply false: what it would drop), as (action, relation, rows, bytes), the first row
-- being ('horizon', the new kept_from as text, 0, 0) or ('nothing', reason, 0, 0); then per partition ('drop',
-- partition, rows dropped, its bytes before) and ('keep', partition, rows kept, 0), and ('delete', table, rows, 0). p_now is the current instant (a
-- parameter so a test can pin it).
CREATE FUNCTION apply_raw_retention(p_keep_months integer, p_now timestamptz, p_apply boolean)
RETURNS TABLE (action text, relation text, row_count bigint, bytes bigint)
VOLATILE LANGUAGE plpgsql AS $$
DECLARE
    tz text := (SELECT value FROM settings WHERE key = 'billing_timezone');
    current_month date;
    last_eligible date;
    oldest timestamptz;
    m date;
    horizon timestamptz;
    old_horizon timestamptz := (SELECT r.kept_from FROM raw_retention r);
    part text;
    n bigint;
    kept bigint;
    -- the raw rows a closed month's bill reads again when the next open month computes its restatements
    -- (src/db/replica_policy.rs node_usage_by_day): time-sliced rows, and rows on a node-hour with an anomaly
    -- (a superset of the unverified ones). A few per month; kept with the rollups.
    keep_row text := $k$t.kind = 'timeslice' OR EXISTS (SELECT FROM ingest_anomalies a
                         WHERE a.cluster = t.cluster AND a.hour = t.hour AND a.subject = t.node)$k$;
BEGIN
    IF p_keep_months IS NULL OR p_keep_months < 0 OR p_keep_months > 1200 THEN
        RAISE EXCEPTION 'keep_months must be between 0 and 1200, not %', p_keep_months
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    current_month := date_trunc('month', p_now AT TIME ZONE tz)::date;
    last_eligible := current_month - make_interval(months => p_keep_months + 1);
    oldest := least((SELECT min(hour) FROM gpu_usage_hourly), (SELECT min(hour) FROM replaced_usage_hourly),
                    (SELECT min(hour) FROM replaced_node_capacity_hourly));
    IF oldest IS NULL THEN
        RETURN QUERY SELECT 'nothing', 'no raw hourly rows are stored', 0::bigint, 0::bigint;
        RETURN;
    END IF;
    -- the first billing month from the oldest raw row on that is not closed or not old enough
    m := date_trunc('month', oldest AT TIME ZONE tz)::date;
    WHILE m <= last_eligible AND EXISTS (SELECT FROM closed_months c WHERE c.month = to_char(m, 'YYYY-MM')) LOOP
        m := m + interval '1 month';
    END LOOP;
    -- its first instant, down to a UTC month start: every hour before it is in an eligible month
    horizon := date_trunc('month', (m::timestamp AT TIME ZONE tz) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    IF horizon <= coalesce(old_horizon, '-infinity') OR horizon <= oldest THEN
        RETURN QUERY SELECT 'nothing', format('raw rows are kept from %s; billing month %s is %s',
            to_char(greatest(oldest, old_horizon) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
            to_char(m, 'YYYY-MM'),
            CASE WHEN m > last_eligible THEN format('within %s months of the current one (%s)', p_keep_months,
                                                    to_char(current_month, 'YYYY-MM'))
                 ELSE 'not closed' END), 0::bigint, 0::bigint;
        RETURN;
    END IF;
    RETURN QUERY SELECT 'horizon', to_char(horizon AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 0::bigint,
        0::bigint;
    m := date_trunc('month', greatest(oldest, old_horizon) AT TIME ZONE 'UTC')::date;
    WHILE (m::timestamp AT TIME ZONE 'UTC') < horizon LOOP
        part := month_partition_name('gpu_usage_hourly', m);
        IF to_regclass(quote_ident(part)) IS NOT NULL THEN
            EXECUTE format('SELECT count(*), count(*) FILTER (WHERE %s) FROM %I t', keep_row, part) INTO n, kept;
            RETURN QUERY SELECT 'drop', part, n - kept, pg_total_relation_size(quote_ident(part)::regclass);
            RETURN QUERY SELECT 'keep', part, kept, 0::bigint;
            IF p_apply THEN
                -- the kept rows into a new table that replaces the partition (no dead rows left to vacuum)
                EXECUTE format('CREATE TABLE %I (LIKE gpu_usage_hourly INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                               part || '_kept');
                EXECUTE format('INSERT INTO %I SELECT * FROM %I t WHERE %s', part || '_kept', part, keep_row);
                EXECUTE format('DROP TABLE %I', part);
                EXECUTE format('ALTER TABLE %I RENAME TO %I', part || '_kept', part);
                EXECUTE format('ALTER TABLE gpu_usage_hourly ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', part,
                               to_char(m, 'YYYY-MM-DD') || ' 00:00:00+00',
                               to_char(m + interval '1 month', 'YYYY-MM-DD') || ' 00:00:00+00');
            END IF;
        END IF;
        part := month_partition_name('usage_pod_daily', m);
        IF p_apply AND to_regclass(quote_ident(part)) IS NOT NULL THEN
            EXECUTE format('CREATE TRIGGER raw_retained BEFORE INSERT OR UPDATE OR DELETE ON %I
                            FOR EACH ROW EXECUTE FUNCTION refuse_retained_change()', part);
        END IF;
        m := m + interval '1 month';
    END LOOP;
    -- rows before the horizon outside those partitions (the DEFAULT one), and the kept replaced rows; a DELETE on
    -- the partitioned table also moves the data version (dropping a partition fires no trigger)
    IF p_apply THEN
        EXECUTE format('DELETE FROM gpu_usage_hourly t WHERE hour < %L AND NOT (%s)', horizon, keep_row);
        GET DIAGNOSTICS n = ROW_COUNT;
    ELSE
        EXECUTE format('SELECT count(*) FROM gpu_usage_hourly_default t WHERE hour < %L AND NOT (%s)', horizon,
                       keep_row) INTO n;
    END IF;
    RETURN QUERY SELECT 'delete', 'gpu_usage_hourly_default', n, 0::bigint;
    IF p_apply THEN
        DELETE FROM replaced_usage_hourly WHERE hour < horizon;
        GET DIAGNOSTICS n = ROW_COUNT;
    ELSE
        SELECT count(*) INTO n FROM replaced_usage_hourly WHERE hour < horizon;
    END IF;
    RETURN QUERY SELECT 'delete', 'replaced_usage_hourly', n, 0::bigint;
    IF p_apply THEN
        DELETE FROM replaced_node_capacity_hourly WHERE hour < horizon;
        GET DIAGNOSTICS n = ROW_COUNT;
    ELSE
        SELECT count(*) INTO n FROM replaced_node_capacity_hourly WHERE hour < horizon;
    END IF;
    RETURN QUERY SELECT 'delete', 'replaced_node_capacity_hourly', n, 0::bigint;
    IF p_apply THEN
        INSERT INTO raw_retention (id, kept_from, keep_months, applied_at) VALUES (true, horizon, p_keep_months, now())
        ON CONFLICT (id) DO UPDATE SET kept_from = EXCLUDED.kept_from, keep_months = EXCLUDED.keep_months,
                                       applied_at = EXCLUDED.applied_at;
    END IF;
END
$$;
