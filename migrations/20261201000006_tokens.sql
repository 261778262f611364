-- API tokens: an optional expiry per token and when each was last used (written at most once a minute per token,
-- so authenticating a read does not become a write on every request).
-- No data-version trigger here on purpose: a token's last use is bookkeeping, not billing data, and must not
-- invalidate the cached statements and usage answers.

ALTER TABLE api_tokens
    ADD COLUMN expires_at   timestamptz,
    ADD COLUMN last_used_at timestamptz,
    ADD CONSTRAINT api_tokens_expiry_after_creation CHECK (expires_at IS NULL OR expires_at > created_at);
