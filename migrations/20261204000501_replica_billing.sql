-- How time-sliced replicas are billed (issue 16 item 3, SPEC §3): by fraction (the default: a replica is
-- 1/replicas of a card) or as a whole card each. Dated like rates, per cluster or per node pool (a pool's
-- setting wins over its cluster's); a node belongs to the pool named in its node_settings row.

CREATE TABLE replica_billing_policies (
    cluster         text NOT NULL CHECK (cluster ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
    -- '' is the whole cluster (a primary key cannot hold NULL)
    pool            text NOT NULL DEFAULT '' CHECK (length(pool) <= 253),
    effective_from  date NOT NULL,
    policy          text NOT NULL CHECK (policy IN ('fraction', 'whole_card')),
    set_by          text NOT NULL,
    set_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, pool, effective_from)
);

ALTER TABLE node_settings ADD COLUMN pool text CHECK (length(pool) BETWEEN 1 AND 253);

-- statements read it: a change must invalidate what was cached from it
CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON replica_billing_policies
    FOR EACH STATEMENT EXECUTE FUNCTION data_version_touch();
