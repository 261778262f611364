-- Tokens and requests served (SPEC §9, issue 36): per hour × cluster × namespace × pod × model × engine, the
-- increases of the serving engines' counters by the counter rule, written by the ingest in the transaction that
-- stores the hour's GPU usage (replaced, kept, archived and restored with it). Triton counts no tokens (NULL).
-- The cost of serving is not stored: it is the pod's GPU cost in the hour, priced when a report asks (as bills).
CREATE TABLE serving_hourly (
    cluster       text NOT NULL REFERENCES clusters (name),
    hour          timestamptz NOT NULL,
    namespace     text NOT NULL,
    pod           text NOT NULL,
    model         text NOT NULL,
    engine        text NOT NULL CHECK (engine IN ('vllm', 'sglang', 'tgi', 'triton')),
    input_tokens  bigint CHECK (input_tokens >= 0),
    output_tokens bigint CHECK (output_tokens >= 0),
    requests      bigint NOT NULL CHECK (requests >= 0),
    CHECK ((engine = 'triton') = (input_tokens IS NULL AND output_tokens IS NULL)),
    PRIMARY KEY (cluster, hour, namespace, pod, model, engine)
);
CREATE INDEX serving_hourly_hour ON serving_hourly (hour);

-- What a replacement removed, kept with the run that replaced it (as replaced_usage_hourly).
CREATE TABLE replaced_serving_hourly (run_id bigint NOT NULL, LIKE serving_hourly);
CREATE INDEX replaced_serving_hourly_run ON replaced_serving_hourly (run_id, cluster, hour);

-- cached answers read it (unit-cost reports)
CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON serving_hourly
    FOR EACH STATEMENT EXECUTE FUNCTION data_version_touch();
