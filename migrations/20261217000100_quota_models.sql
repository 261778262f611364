-- Reserved-quota billing credits the card-hours a scope used within its guarantee at the rate of the GPU model
-- that ran them (SPEC §10: the usage lines charged them at that rate), so the ingest records, per hour and quota
-- scope, what each GPU model used and its part of the used-within (pro rata over the scope's models). Written,
-- replaced, kept, archived and restored with the hour's quota_hourly rows. Hours stored before this table have no
-- rows here: their credit is read at the reservation terms' model, as before.
CREATE TABLE quota_model_hourly (
    cluster                   text NOT NULL,
    hour                      timestamptz NOT NULL,
    scope_kind                text NOT NULL,
    scope                     text NOT NULL,
    gpu_model                 text NOT NULL,
    used_card_seconds         double precision NOT NULL CHECK (used_card_seconds > 0),
    used_within_card_seconds  double precision NOT NULL
        CHECK (used_within_card_seconds >= 0 AND used_within_card_seconds <= used_card_seconds),
    PRIMARY KEY (cluster, hour, scope_kind, scope, gpu_model),
    FOREIGN KEY (cluster, hour, scope_kind, scope) REFERENCES quota_hourly (cluster, hour, scope_kind, scope)
        ON DELETE CASCADE
);
CREATE INDEX quota_model_hourly_hour ON quota_model_hourly (hour);
CREATE TABLE replaced_quota_model_hourly (run_id bigint NOT NULL, LIKE quota_model_hourly);
CREATE INDEX replaced_quota_model_hourly_run ON replaced_quota_model_hourly (run_id, cluster, hour);

CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON quota_model_hourly
    FOR EACH STATEMENT EXECUTE FUNCTION data_version_touch();
