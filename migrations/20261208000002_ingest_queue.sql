-- Several workers, one database (issue 11): the hours due for ingest, per cluster, taken in batches of consecutive
-- hours under a lease. A row is work still to do: it is deleted in the transaction that stores its hour, so an
-- hour is either stored or still queued, whichever worker dies when. A lease that expires (its worker died or
-- stalled) is free to take; the transaction storing a batch checks it still holds the lease (a fence), so a
-- worker that lost it stores nothing.
CREATE TABLE ingest_queue (
    cluster      text NOT NULL REFERENCES clusters (name),
    hour         timestamptz NOT NULL CHECK (date_trunc('hour', hour) = hour),
    -- not taken before: the hour's end plus the lateness; after a failed read, later (capped backoff)
    not_before   timestamptz NOT NULL,
    leased_by    text,
    lease_until  timestamptz,
    -- reads that failed for this hour since it was last stored
    failures     int NOT NULL DEFAULT 0,
    last_error   text,
    queued_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, hour),
    CHECK ((leased_by IS NULL) = (lease_until IS NULL))
);
CREATE INDEX ingest_queue_due ON ingest_queue (hour, cluster);

-- What the workers saw of each cluster's source, for the health page and the metrics: the batch size they read
-- with (smaller after timeouts, back up after successes), failures in a row, the last error and when it cleared.
CREATE TABLE ingest_cluster_state (
    cluster               text PRIMARY KEY REFERENCES clusters (name),
    batch_hours           int NOT NULL CHECK (batch_hours BETWEEN 1 AND 168),
    failures_in_row       int NOT NULL DEFAULT 0,
    last_success_at       timestamptz,
    last_error            text,
    last_error_kind       text,
    last_error_at         timestamptz,
    -- the first success after a run of failures
    recovered_at          timestamptz,
    updated_at            timestamptz NOT NULL DEFAULT now()
);
