-- Idempotency keys of POST requests: per caller (the SHA-256 of its bearer token) and key, the request's
-- fingerprint and, once answered, the answer to replay. A row without a status is a request in flight.
-- Not ledger data: no data-version trigger, and rows expire.

CREATE TABLE idempotency_keys (
    caller          text NOT NULL,
    key             text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    fingerprint     text NOT NULL,
    status          smallint CHECK (status BETWEEN 100 AND 599),
    content_type    text,
    body            bytea,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (caller, key)
);

CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
