-- Budgets per team and month, and the webhook alerts they raise (each threshold once per month, retried until
-- delivered).

CREATE TABLE budgets (
    team_id     text NOT NULL REFERENCES teams (id),
    month       text NOT NULL CHECK (month ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    amount      numeric(16, 2) NOT NULL CHECK (amount > 0),
    thresholds  numeric(5, 4)[] NOT NULL DEFAULT '{0.8, 1.0}',
    updated_by  text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, month)
);

CREATE TABLE budget_alerts (
    team_id         text NOT NULL,
    month           text NOT NULL,
    threshold       numeric(5, 4) NOT NULL,
    -- 'forecast' (the run rate will cross it) or 'actual' (spent already)
    basis           text NOT NULL CHECK (basis IN ('forecast', 'actual')),
    first_seen_at   timestamptz NOT NULL DEFAULT now(),
    payload         jsonb NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    last_error      text,
    delivered_at    timestamptz,
    PRIMARY KEY (team_id, month, threshold, basis),
    FOREIGN KEY (team_id, month) REFERENCES budgets (team_id, month)
);
