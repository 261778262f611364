-- The memory side of oversubscription (SPEC §7): the share of a card's memory one unit of a row is promised,
-- 0–1. NULL on rows stored before it: the report derives their share from kind, fraction and MIG profile, except
-- HAMi's (it came from the container's requests), reported as unknown. Also NULL where metering could not know it.
ALTER TABLE gpu_usage_hourly ADD COLUMN memory_share double precision
    CHECK (memory_share >= 0 AND memory_share <= 1);
ALTER TABLE replaced_usage_hourly ADD COLUMN memory_share double precision;
