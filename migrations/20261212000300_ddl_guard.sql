-- Structure changes belong to `cardhour migrate` (issue 27). Before, the tables' owner could `ALTER TABLE … RENAME`,
-- `DISABLE TRIGGER` (and so write a closed month or rewrite the audit log), `DROP TRIGGER`, … from any session.
--
-- An event trigger on ddl_command_start refuses every structure change (CREATE, ALTER, DROP, GRANT, COMMENT, …) of
-- a role that is not a superuser, unless
--   * the session declared itself a migration: `cardhour.migrating = on`, which `cardhour migrate` (and nothing
--     else in cardhour) sets on its connections; or
--   * the change is made by one of the schema's own maintenance functions, called by the client itself: the
--     month partitions an ingest makes (ensure_month_partitions) and what `cardhour retention` drops
--     (apply_raw_retention). The outermost frame of the PL/pgSQL call stack (PG_CONTEXT, which no client can set)
--     must be one of them.
--
-- What this is and is not (docs/database.md): a non-superuser owner cannot disable, alter or drop an event trigger
-- (only its owner, a superuser, can) nor set session_replication_role, so the guard stops ad-hoc and accidental
-- structure changes made as the owner — a psql session, a script, a tool — and with them every way to switch off the
-- triggers that keep closed months and the audit log immutable. It is not a wall against someone who holds the
-- owner's password and deliberately declares a migration: `cardhour.migrating` is a custom setting any session may
-- set, as `cardhour migrate` does; the owner's credentials belong to the deployment, not to people.
--
-- Only a superuser may create an event trigger (PostgreSQL 15). Migrating as a superuser installs it here; migrating
-- as a non-superuser owner (as docs/database.md recommends) creates the function and leaves a WARNING, and a DBA
-- installs the trigger once per database:
--   CREATE EVENT TRIGGER cardhour_ddl_guard ON ddl_command_start EXECUTE FUNCTION ddl_guard();
-- `cardhour migrate` says so while it is missing.

CREATE FUNCTION ddl_guard() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE
    stack text;
    outermost text;
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = session_user)
       OR current_setting('cardhour.migrating', true) = 'on' THEN
        RETURN;
    END IF;
    GET DIAGNOSTICS stack = PG_CONTEXT;
    outermost := (string_to_array(stack, E'\n'))[cardinality(string_to_array(stack, E'\n'))];
    IF outermost ~ ('^PL/pgSQL function ([a-z_][a-z0-9_]*\.)?(ensure_month_partitions\(timestamp with time zone,'
                    'timestamp with time zone\)|apply_raw_retention\(integer,timestamp with time zone,boolean\)) '
                    'line [0-9]+ at [A-Z ]+$') THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'permission denied for %: structure changes belong to `cardhour migrate`', tg_tag
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'closed months, the audit log and their triggers are the database''s guarantees; change the schema with a migration';
END
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION ddl_guard() SET search_path = %I, pg_temp', current_schema());
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        CREATE EVENT TRIGGER cardhour_ddl_guard ON ddl_command_start EXECUTE FUNCTION ddl_guard();
    ELSE
        RAISE WARNING 'the DDL guard needs a superuser once: CREATE EVENT TRIGGER cardhour_ddl_guard ON ddl_command_start EXECUTE FUNCTION %.ddl_guard();', current_schema();
    END IF;
END
$$;
