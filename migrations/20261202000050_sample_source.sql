-- Where each cluster's raw samples are read (issue 9): the source the last run used, why, and whether an `auto`
-- probe chose it (only a probe's choice is reused by the next `auto` run against the same URL).
ALTER TABLE clusters
    ADD COLUMN sample_source        text CHECK (sample_source IN ('remote-read', 'vm-export', 'query')),
    ADD COLUMN sample_source_reason text,
    ADD COLUMN sample_source_probed boolean NOT NULL DEFAULT false,
    ADD COLUMN sample_source_at     timestamptz;
