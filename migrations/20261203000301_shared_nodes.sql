-- Shared cards as clusters run them (issue 16): MPS replicas are a kind of their own, and the nodes whose cards,
-- replicas, model or sharing nothing on the node tells are configured here (read by the ingest).

ALTER TABLE gpu_usage_hourly DROP CONSTRAINT gpu_usage_hourly_kind_check;
ALTER TABLE gpu_usage_hourly ADD CONSTRAINT gpu_usage_hourly_kind_check
    CHECK (kind IN ('whole', 'mig', 'timeslice', 'mps', 'hami'));

CREATE TABLE node_settings (
    cluster     text NOT NULL CHECK (cluster ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
    node        text NOT NULL CHECK (length(node) BETWEEN 1 AND 253),
    cards       integer CHECK (cards BETWEEN 1 AND 1024),
    replicas    integer CHECK (replicas BETWEEN 1 AND 1024),
    gpu_model   text CHECK (length(gpu_model) BETWEEN 1 AND 200),
    sharing     text CHECK (sharing IN ('none', 'time-slicing', 'mps', 'hami')),
    updated_by  text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, node)
);
