-- History nobody can forge (issue 27): a closed month enters `closed_months` only through the close itself. Before,
-- any role that could INSERT (the owner, and the service's role, which closes months) could write a row for a month
-- that was never closed, and it was served as closed — JSON and PDF — and could never be removed (the table refuses
-- UPDATE and DELETE).
--
-- The door is close_month(), which the close calls in its own transaction (after its checks): it refuses a month that
-- has not ended in the billing time zone and inserts the row together with the close's audit entry, so no month is
-- ever closed without its entry in the (append-only) audit log. Only the service's role may call it (EXECUTE is
-- revoked from PUBLIC here and granted by `cardhour migrate --grant-app-role`). A row trigger refuses every other
-- INSERT, whoever sends it, the owner included: it reads the PL/pgSQL call stack (PG_CONTEXT, which no client can
-- set) and admits the row only when the statement inserting it is close_month's own INSERT and close_month was
-- called by the client itself (exactly three frames: this trigger, that INSERT, close_month) — a DO block or a
-- function of someone else's that repeats the same statement is another frame and refused. Superusers are not held
-- (they can disable any trigger anyway; docs/database.md). Changing or dropping the trigger or the function is a
-- structure change, which the DDL guard (the next migration) leaves to `cardhour migrate`.

CREATE FUNCTION close_month(p_month text, p_closed_by text, p_snapshot jsonb, p_action text, p_summary jsonb)
RETURNS boolean
VOLATILE LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    tz text := coalesce((SELECT value FROM settings WHERE key = 'billing_timezone'), 'Asia/Shanghai');
    inserted integer;
BEGIN
    IF p_month !~ '^[0-9]{4}-(0[1-9]|1[0-2])$' THEN
        RAISE EXCEPTION 'not a month: %', p_month USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- the month's end, in the billing time zone
    IF (to_date(p_month, 'YYYY-MM') + interval '1 month')::timestamp AT TIME ZONE tz > now() THEN
        RAISE EXCEPTION 'month % has not ended yet', p_month USING ERRCODE = 'check_violation';
    END IF;
    IF p_action NOT IN ('month.close', 'month.close_override') THEN
        RAISE EXCEPTION 'not a close: %', p_action USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO closed_months (month, closed_by, snapshot) VALUES (p_month, p_closed_by, p_snapshot) ON CONFLICT (month) DO NOTHING;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    IF inserted = 1 THEN
        INSERT INTO audit_log (actor, action, entity, before, after)
        VALUES (p_closed_by, p_action, 'month:' || p_month, NULL, p_summary);
    END IF;
    RETURN inserted = 1;
END
$$;

CREATE FUNCTION closed_month_door() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stack text;
    frames text[];
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = session_user) THEN
        RETURN NEW;
    END IF;
    GET DIAGNOSTICS stack = PG_CONTEXT;
    frames := string_to_array(stack, E'\n');
    IF cardinality(frames) = 3
       AND frames[2] = 'SQL statement "INSERT INTO closed_months (month, closed_by, snapshot) VALUES (p_month, p_closed_by, p_snapshot) ON CONFLICT (month) DO NOTHING"'
       AND frames[3] ~ '^PL/pgSQL function ([a-z_][a-z0-9_]*\.)?close_month\(text,text,jsonb,text,jsonb\) line [0-9]+ at SQL statement$' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied for INSERT INTO closed_months: a month is closed by the close only'
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'close a month with POST /api/v1/bills/{month}/close or `cardhour close`; it calls close_month()';
END
$$;

CREATE TRIGGER door BEFORE INSERT ON closed_months FOR EACH ROW EXECUTE FUNCTION closed_month_door();

-- a SECURITY DEFINER function is everyone's by default: the close is the service's (and the owner's) only
REVOKE ALL ON FUNCTION close_month(text, text, jsonb, text, jsonb) FROM PUBLIC;

-- the search path of both pinned (pg_temp last: a temporary table cannot stand in for closed_months)
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION close_month(text, text, jsonb, text, jsonb) SET search_path = %I, pg_temp',
                   current_schema());
    EXECUTE format('ALTER FUNCTION closed_month_door() SET search_path = %I, pg_temp', current_schema());
END
$$;
