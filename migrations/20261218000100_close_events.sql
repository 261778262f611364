-- The signed close event (SPEC §11, issue 30): closing a month POSTs a signed event — the month, each statement's
-- stable id and content hash — to every active endpoint finance configured, retried with backoff until
-- acknowledged, every attempt recorded. The event and its deliveries are written in the close's own transaction
-- (an outbox): a close never exists without its event, a rolled-back close has none.
--
-- No data_version trigger on these tables: no statement, usage answer or budget reads them (like budget_alerts,
-- they are delivery bookkeeping, and a delivery must not invalidate the cached statements).

CREATE TABLE close_endpoints (
    id          bigserial PRIMARY KEY,
    url         text NOT NULL CHECK (url ~ '^https?://'),
    -- the HMAC key; never answered after the create but masked
    secret      text NOT NULL CHECK (char_length(secret) >= 16),
    active      boolean NOT NULL DEFAULT true,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE close_events (
    -- the event's id, as sent (X-Cardhour-Event-Id, Idempotency-Key)
    id          text PRIMARY KEY,
    -- the closed month (no foreign key: closed_months refuses TRUNCATE as immutable, and a key would answer first)
    month       text NOT NULL CHECK (month ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    -- the body exactly as POSTed (every delivery sends these bytes)
    payload     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX close_events_month ON close_events (month);

CREATE TABLE close_deliveries (
    id              bigserial PRIMARY KEY,
    event_id        text NOT NULL REFERENCES close_events (id),
    endpoint_id     bigint NOT NULL REFERENCES close_endpoints (id),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    last_status     integer,
    last_error      text CHECK (char_length(last_error) <= 500),
    UNIQUE (event_id, endpoint_id)
);
-- what a deliverer claims: the undelivered, by when they are due
CREATE INDEX close_deliveries_due ON close_deliveries (next_attempt_at) WHERE delivered_at IS NULL;

-- every POST of a delivery: when, and the answer's status or the error
CREATE TABLE close_delivery_attempts (
    id           bigserial PRIMARY KEY,
    delivery_id  bigint NOT NULL REFERENCES close_deliveries (id),
    at           timestamptz NOT NULL,
    status       integer,
    error        text CHECK (char_length(error) <= 500)
);
CREATE INDEX close_delivery_attempts_delivery ON close_delivery_attempts (delivery_id, at);
