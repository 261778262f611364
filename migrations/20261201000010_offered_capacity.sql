-- Capacity offered to workloads (SPEC §3 "Capacity", §6 "Bills"): a cordoned node (`kube_node_spec_unschedulable`)
-- offers none of its cards, a node whose `kube_node_status_allocatable` is below its capacity (unhealthy devices)
-- offers only those. The platform keeps what is not offered; it is never spread over teams.
--
-- `offered_card_seconds` sits beside `card_seconds`. Rows stored before this were read without allocatable or
-- cordon state and are taken as fully offered, which is also what a read without an allocatable series (an old
-- kube-state-metrics) stores; `offered_source` says which: `allocatable` (read) or `capacity` (taken as offered).

ALTER TABLE node_capacity_hourly
    ADD COLUMN offered_card_seconds double precision,
    ADD COLUMN offered_source text NOT NULL DEFAULT 'capacity' CHECK (offered_source IN ('allocatable', 'capacity'));
UPDATE node_capacity_hourly SET offered_card_seconds = card_seconds;
ALTER TABLE node_capacity_hourly
    ALTER COLUMN offered_card_seconds SET NOT NULL,
    ADD CONSTRAINT node_capacity_hourly_offered CHECK (offered_card_seconds >= 0 AND offered_card_seconds <= card_seconds);

-- A row inserted without its offered seconds (hand-made data, old tooling) is fully offered, like old rows.
CREATE FUNCTION offered_defaults_to_capacity() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.offered_card_seconds := coalesce(NEW.offered_card_seconds, NEW.card_seconds);
    RETURN NEW;
END
$$;
CREATE TRIGGER offered_default BEFORE INSERT ON node_capacity_hourly
    FOR EACH ROW EXECUTE FUNCTION offered_defaults_to_capacity();

-- The history of replaced rows has the same columns in the same order (it was created LIKE the table), so a
-- replacement is saved and an undo restores the offered seconds too; rows replaced before this were fully offered.
ALTER TABLE replaced_node_capacity_hourly
    ADD COLUMN offered_card_seconds double precision,
    ADD COLUMN offered_source text NOT NULL DEFAULT 'capacity';
UPDATE replaced_node_capacity_hourly SET offered_card_seconds = card_seconds;
ALTER TABLE replaced_node_capacity_hourly ALTER COLUMN offered_card_seconds SET NOT NULL;

-- The daily rollup bills and reports read.
ALTER TABLE capacity_daily ADD COLUMN offered_card_seconds double precision;
UPDATE capacity_daily SET offered_card_seconds = card_seconds;
ALTER TABLE capacity_daily ALTER COLUMN offered_card_seconds SET NOT NULL;

CREATE OR REPLACE FUNCTION refresh_daily(p_cluster text, p_day date) RETURNS void VOLATILE LANGUAGE sql AS $$
    DELETE FROM usage_namespace_daily WHERE cluster = p_cluster AND day = p_day;
    INSERT INTO usage_namespace_daily
    SELECT cluster, p_day, namespace, team, gpu_model, kind,
           sum(gpu_seconds), sum(effective_gpu_seconds), sum(unmetered_gpu_seconds)
    FROM usage_namespace_hourly
    WHERE cluster = p_cluster AND billing_date(hour) = p_day
      AND hour >= (p_day - 1)::timestamptz AND hour < (p_day + 2)::timestamptz
    GROUP BY cluster, namespace, team, gpu_model, kind;
    DELETE FROM capacity_daily WHERE cluster = p_cluster AND day = p_day;
    INSERT INTO capacity_daily (cluster, day, gpu_model, card_seconds, offered_card_seconds)
    SELECT cluster, p_day, gpu_model, sum(card_seconds), sum(offered_card_seconds)
    FROM node_capacity_hourly
    WHERE cluster = p_cluster AND billing_date(hour) = p_day
      AND hour >= (p_day - 1)::timestamptz AND hour < (p_day + 2)::timestamptz
    GROUP BY cluster, gpu_model;
$$;
