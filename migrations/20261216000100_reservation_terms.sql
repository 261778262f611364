-- Reserved-quota billing (SPEC §10, issue 29): the terms of a quota scope's reservation — the GPU model its
-- guaranteed cards are priced as and the factor on that model's rate — dated like mappings, cluster-specific first.
-- A quota metric says how many cards a scope is promised, never which model: finance states it here.
CREATE TABLE reservation_terms (
    id          bigserial PRIMARY KEY,
    cluster     text REFERENCES clusters (name),
    scope_kind  text NOT NULL CHECK (scope_kind IN ('namespace', 'cluster_queue', 'volcano_queue')),
    scope       text NOT NULL CHECK (scope <> ''),
    gpu_model   text NOT NULL CHECK (gpu_model <> ''),
    factor      numeric(6, 4) NOT NULL CHECK (factor > 0 AND factor <= 10),
    valid_from  date NOT NULL,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX reservation_terms_unique ON reservation_terms (coalesce(cluster, ''), scope_kind, scope, valid_from);

-- drafts and cached statements read them
CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON reservation_terms
    FOR EACH STATEMENT EXECUTE FUNCTION data_version_touch();
