-- Integrity in the database itself (issue 10): a data version in commit order for every cache, closed months and
-- the audit log immutable, a content hash per closed statement.

-- 1. The data version. One row, bumped once by every committing transaction that wrote to a table answers depend
-- on. Why this orders commits: the bump is an UPDATE of that one row, so it takes the row's lock and holds it until
-- the transaction ends; a second transaction bumping waits for the first to commit (its data visible by then),
-- re-reads the row (READ COMMITTED re-evaluates a blocked UPDATE on the newest version) and writes version + 1. So
-- version N+1 is always committed after version N, and a reader that sees version N sees every transaction that
-- got N or less. A writer still running when a reader read N will bump to more than N when it commits, so what
-- was cached under N is recomputed. The bump is deferred to commit time (a DEFERRABLE INITIALLY DEFERRED
-- constraint trigger), so the row is locked only for the moment between the bump and the commit: ingests of two
-- clusters never wait for each other's hour of work, only for each other's commit.
CREATE TABLE data_version (
    id      boolean PRIMARY KEY DEFAULT true CHECK (id),
    version bigint NOT NULL
);
INSERT INTO data_version (id, version) VALUES (true, 1);

-- Transactions that wrote and have not bumped yet: a row is inserted by a statement trigger of a versioned table
-- (once per transaction) and deleted by the bump at commit, so no row outlives its transaction. Constraint
-- triggers are row triggers only; this table lets big tables (hourly usage, rollups) take part with a statement
-- trigger, and makes one bump per transaction however many rows or statements it wrote.
CREATE TABLE data_version_pending (
    txid bigint PRIMARY KEY
);

-- SECURITY DEFINER: the service's role writes neither table; the search path is pinned below (pg_temp last, so a
-- temporary table cannot stand in for them).
CREATE FUNCTION data_version_touch() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO data_version_pending (txid) VALUES (txid_current()) ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE FUNCTION data_version_bump() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    UPDATE data_version SET version = version + 1;
    DELETE FROM data_version_pending WHERE txid = NEW.txid;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER bump AFTER INSERT ON data_version_pending DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION data_version_bump();

-- Every table a statement, a usage answer, an idle list or a budget reads. Not api_tokens (last-use bookkeeping
-- must not invalidate caches), not budget_alerts (the worker's delivery bookkeeping; no cached answer reads it),
-- nor tables of later migrations unless they add their own trigger.
DO $$
DECLARE
    t text;
BEGIN
    EXECUTE format('ALTER FUNCTION data_version_touch() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION data_version_bump() SET search_path = %I, pg_temp', current_schema());
    FOREACH t IN ARRAY ARRAY['clusters', 'gpu_usage_hourly', 'node_capacity_hourly', 'ingested_hours',
        'ingest_anomalies', 'ingest_watermarks', 'teams', 'namespace_mappings', 'settings', 'usage_namespace_hourly',
        'usage_namespace_daily', 'capacity_daily', 'usage_pod_daily', 'gpu_model_aliases', 'rate_versions',
        'cloud_rates', 'closed_months', 'audit_log', 'budgets']
    LOOP
        EXECUTE format('CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %I
                        FOR EACH STATEMENT EXECUTE FUNCTION data_version_touch()', t);
    END LOOP;
END
$$;

-- 3. A content hash per closed statement: sha256 of the snapshot's canonical text (jsonb prints keys in one
-- order and no insignificant whitespace). One definition for the backfill, for new closes and for the check when
-- a closed statement is served.
CREATE FUNCTION snapshot_hash(s jsonb) RETURNS text IMMUTABLE STRICT LANGUAGE sql AS $$
    SELECT encode(sha256(convert_to(s::text, 'UTF8')), 'hex')
$$;

ALTER TABLE closed_months ADD COLUMN content_hash text;
UPDATE closed_months SET content_hash = snapshot_hash(snapshot);
ALTER TABLE closed_months ALTER COLUMN content_hash SET NOT NULL;

-- A close cannot store a hash of its own choosing.
CREATE FUNCTION closed_month_hash() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.content_hash := snapshot_hash(NEW.snapshot);
    RETURN NEW;
END
$$;
CREATE TRIGGER content_hash BEFORE INSERT ON closed_months FOR EACH ROW EXECUTE FUNCTION closed_month_hash();

-- 2. What is immutable is protected here, not only by the absence of an UPDATE path in the application: every
-- UPDATE, DELETE and TRUNCATE statement on closed months and the audit log is refused (statement triggers: even
-- one matching no row). Only the tables' owner can drop or disable these triggers; the service's role
-- (`cardhour migrate --grant-app-role`) owns nothing.
CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is immutable: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation',
              HINT = CASE TG_TABLE_NAME
                  WHEN 'closed_months' THEN 'a closed month never changes; differences appear as restatements on the next open month'
                  ELSE 'the audit log is append-only' END;
END
$$;

CREATE TRIGGER immutable BEFORE UPDATE OR DELETE OR TRUNCATE ON closed_months
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
CREATE TRIGGER immutable BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
