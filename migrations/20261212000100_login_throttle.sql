-- The login throttle, atomic (issue 27): an attempt takes its place among the recent failures of its name and of its
-- address *before* its password is checked, so a burst of attempts cannot all be checked. Before, each attempt
-- counted the failures, checked the password and then recorded its failure: 30 attempts sent at once all counted 0
-- and all were checked.
--
-- login_admit locks the name, then the address (transaction-level advisory locks, always in that order, so two
-- attempts never wait for each other in a circle), counts their failures of the window with a snapshot taken after
-- the locks (a PL/pgSQL statement of a volatile function takes a new one), and either answers when a slot frees
-- (throttled: nothing recorded) or records the attempt as a failure and answers NULL. The caller then checks the
-- password; a success forgets its name's failures (this attempt's row with them), a failure leaves the row. One
-- statement, one round trip: the locks are held for the time of a count and an insert, never for a password check.
CREATE FUNCTION login_admit(p_username text, p_address inet, p_window_secs integer, p_max_by_name integer,
                            p_max_by_address integer) RETURNS timestamptz
VOLATILE LANGUAGE plpgsql AS $$
DECLARE
    since timestamptz := clock_timestamp() - make_interval(secs => p_window_secs);
    by_name bigint;
    oldest_by_name timestamptz;
    by_address bigint;
    oldest_by_address timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('cardhour:login-name:' || p_username, 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('cardhour:login-address:' || host(p_address), 0));
    SELECT count(*) FILTER (WHERE username = p_username), min(at) FILTER (WHERE username = p_username),
           count(*) FILTER (WHERE address = p_address), min(at) FILTER (WHERE address = p_address)
      INTO by_name, oldest_by_name, by_address, oldest_by_address
      FROM login_failures WHERE at > since AND (username = p_username OR address = p_address);
    IF by_name >= p_max_by_name OR by_address >= p_max_by_address THEN
        -- free when the oldest failure of each exhausted limit leaves the window
        RETURN greatest(CASE WHEN by_name >= p_max_by_name THEN oldest_by_name END,
                        CASE WHEN by_address >= p_max_by_address THEN oldest_by_address END)
               + make_interval(secs => p_window_secs);
    END IF;
    DELETE FROM login_failures WHERE at <= since;
    INSERT INTO login_failures (at, username, address) VALUES (clock_timestamp(), p_username, p_address);
    RETURN NULL;
END
$$;
