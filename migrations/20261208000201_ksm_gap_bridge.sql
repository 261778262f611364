-- kube-state-metrics scrape gaps (docs/metering.md): the part of a row's GPU-seconds counted through a KSM gap the
-- pod was Running across (a restart, an upgrade; at most the configured bridge span), so reports and health can
-- show what was bridged. Rows stored before bridged nothing. Added to the replaced rows as well, in the same
-- position: history copies a stored row by column order.
ALTER TABLE gpu_usage_hourly ADD COLUMN bridged_gpu_seconds double precision NOT NULL DEFAULT 0;
-- NOT VALID: checked for every row written from now on without scanning the stored ones (all 0)
ALTER TABLE gpu_usage_hourly ADD CONSTRAINT gpu_usage_hourly_bridged_check CHECK (bridged_gpu_seconds >= 0) NOT VALID;
ALTER TABLE replaced_usage_hourly ADD COLUMN bridged_gpu_seconds double precision NOT NULL DEFAULT 0;
