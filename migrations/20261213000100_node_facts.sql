-- What each node was taken to be in each ingested hour (issue 34): its physical cards, the units advertised per
-- card (replicas, HAMi's split, MIG instances), its sharing strategy, and the evidence they were decided from
-- (SPEC §3's order of trust: GFD's count, GFD's replicas, configuration, DCGM's devices as a lower bound), so a
-- wrong decision can be seen per node-hour. Written by the ingest in the transaction that stores the hour; an
-- undo or a replacement of the hour removes it with the hour's rows, retention with the raw rows.
CREATE TABLE node_facts_hourly (
    cluster      text NOT NULL REFERENCES clusters (name),
    hour         timestamptz NOT NULL,
    node         text NOT NULL,
    gpu_model    text NOT NULL,
    -- NULL: nothing counts the cards (a unit taken as a card, unverified)
    cards        double precision CHECK (cards > 0),
    replicas     double precision CHECK (replicas > 0),
    strategy     text NOT NULL CHECK (strategy IN ('whole', 'time-slicing', 'mps', 'mig-single', 'mig-mixed', 'hami')),
    cards_source text NOT NULL CHECK (cards_source IN ('dcgm', 'gfd_count', 'gfd_replicas', 'config', 'face_value')),
    evidence     text NOT NULL,
    conflict     boolean NOT NULL DEFAULT false,
    PRIMARY KEY (cluster, hour, node)
);
CREATE INDEX node_facts_hourly_hour ON node_facts_hourly (hour);
