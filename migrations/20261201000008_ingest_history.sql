-- Nothing stored is lost (SPEC §6): every ingest is a run; an hour is replaced only by a read at least as large as
-- what is stored (or with --replace-smaller, audited), and the rows a replacement removes are kept with its run so
-- `cardhour ingest undo RUN` can put them back.

CREATE TABLE ingest_runs (
    id               bigserial PRIMARY KEY,
    cluster          text NOT NULL REFERENCES clusters (name),
    -- ingest, worker or undo
    command          text NOT NULL CHECK (command IN ('ingest', 'worker', 'undo')),
    actor            text NOT NULL,
    replace_smaller  boolean NOT NULL DEFAULT false,
    -- the run an undo reverted
    undoes           bigint REFERENCES ingest_runs (id),
    started_at       timestamptz NOT NULL DEFAULT now()
);

-- What was read for a stored hour (NULL for hours stored before this migration: compared by rows alone), and by
-- which run.
ALTER TABLE ingested_hours ADD COLUMN samples_read bigint CHECK (samples_read >= 0);
ALTER TABLE ingested_hours ADD COLUMN run_id bigint REFERENCES ingest_runs (id);

-- The stored hours a run replaced, as they were, and their rows. Only replacements that changed something are
-- kept (a re-read of unchanged samples leaves no history).
CREATE TABLE replaced_hours (
    run_id              bigint NOT NULL REFERENCES ingest_runs (id),
    cluster             text NOT NULL,
    hour                timestamptz NOT NULL,
    scrape_interval_ms  bigint,
    usage_rows          integer NOT NULL,
    samples_read        bigint,
    previous_run_id     bigint,
    ingested_at         timestamptz NOT NULL,
    replaced_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, cluster, hour)
);
CREATE TABLE replaced_usage_hourly (run_id bigint NOT NULL, LIKE gpu_usage_hourly);
CREATE INDEX replaced_usage_hourly_run ON replaced_usage_hourly (run_id, cluster, hour);
CREATE TABLE replaced_node_capacity_hourly (run_id bigint NOT NULL, LIKE node_capacity_hourly);
CREATE INDEX replaced_node_capacity_hourly_run ON replaced_node_capacity_hourly (run_id, cluster, hour);
CREATE TABLE replaced_ingest_anomalies (run_id bigint NOT NULL, LIKE ingest_anomalies);
CREATE INDEX replaced_ingest_anomalies_run ON replaced_ingest_anomalies (run_id, cluster, hour);

-- Hours a run did not replace because it read less than is stored: what ingest health lists until a later read is
-- as large again (or the hour is replaced on purpose).
CREATE TABLE kept_hours (
    cluster         text NOT NULL REFERENCES clusters (name),
    hour            timestamptz NOT NULL,
    run_id          bigint NOT NULL REFERENCES ingest_runs (id),
    stored_rows     integer NOT NULL,
    stored_samples  bigint,
    read_rows       integer NOT NULL,
    read_samples    bigint NOT NULL,
    at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, hour)
);
