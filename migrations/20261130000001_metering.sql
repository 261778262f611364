-- Metering core: clusters, hourly usage per container × resource, node capacity, ingest bookkeeping.

CREATE TABLE clusters (
    name            text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
    prometheus_url  text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- One row per cluster × hour × container × resource × GPU model. Seconds are card-seconds (q · f · Δ summed).
CREATE TABLE gpu_usage_hourly (
    cluster                 text NOT NULL REFERENCES clusters (name),
    hour                    timestamptz NOT NULL CHECK (date_trunc('hour', hour) = hour),
    namespace               text NOT NULL,
    pod                     text NOT NULL,
    container               text NOT NULL,
    resource                text NOT NULL,
    gpu_model               text NOT NULL,
    kind                    text NOT NULL CHECK (kind IN ('whole', 'mig', 'timeslice', 'hami')),
    mig_profile             text,
    node                    text NOT NULL,
    units                   double precision NOT NULL CHECK (units > 0),
    fraction                double precision NOT NULL CHECK (fraction > 0 AND fraction <= 1),
    gpu_seconds             double precision NOT NULL CHECK (gpu_seconds >= 0),
    effective_gpu_seconds   double precision NOT NULL CHECK (effective_gpu_seconds >= 0),
    unmetered_gpu_seconds   double precision NOT NULL CHECK (unmetered_gpu_seconds >= 0),
    util_source             text NOT NULL,
    peak_fb_used_mib        double precision,
    label_team              text,
    PRIMARY KEY (cluster, hour, namespace, pod, container, resource, gpu_model)
);
CREATE INDEX gpu_usage_hourly_hour ON gpu_usage_hourly (hour);
CREATE INDEX gpu_usage_hourly_ns ON gpu_usage_hourly (namespace, hour);

CREATE TABLE node_capacity_hourly (
    cluster         text NOT NULL REFERENCES clusters (name),
    hour            timestamptz NOT NULL CHECK (date_trunc('hour', hour) = hour),
    node            text NOT NULL,
    gpu_model       text NOT NULL,
    cards           double precision NOT NULL CHECK (cards > 0),
    card_seconds    double precision NOT NULL CHECK (card_seconds >= 0),
    PRIMARY KEY (cluster, hour, node)
);

-- Each ingested hour: what was read and how. Re-ingesting an hour replaces its row.
CREATE TABLE ingested_hours (
    cluster             text NOT NULL REFERENCES clusters (name),
    hour                timestamptz NOT NULL CHECK (date_trunc('hour', hour) = hour),
    scrape_interval_ms  bigint,
    usage_rows          integer NOT NULL,
    ingested_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, hour)
);

CREATE TABLE ingest_anomalies (
    cluster     text NOT NULL REFERENCES clusters (name),
    hour        timestamptz NOT NULL,
    kind        text NOT NULL,
    subject     text NOT NULL,
    count       bigint NOT NULL,
    PRIMARY KEY (cluster, hour, kind, subject)
);

-- Every hour before complete_until, from the first one ingested, is stored.
CREATE TABLE ingest_watermarks (
    cluster         text PRIMARY KEY REFERENCES clusters (name),
    complete_until  timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
