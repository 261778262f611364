-- Adjustments with maker-checker (SPEC §11, issue 30): a credit or debit of a team in a month, entered by finance
-- with a reason and approved (or rejected) by another finance or admin user. Only approved ones reach a statement:
-- the statement of the month they correct while it is open, else — that month closed before the approval — the
-- first open month after it, as a restatement of the closed one (`booked_month`, fixed at the approval under the
-- close's own lock). A close freezes the approved ones booked to its month into its snapshot.

CREATE TABLE adjustments (
    id             bigserial PRIMARY KEY,
    -- the month corrected
    month          text NOT NULL CHECK (month ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    team_id        text NOT NULL REFERENCES teams (id),
    -- yuan, to the fen: positive a debit (the team owes more), negative a credit
    amount         numeric(16, 2) NOT NULL CHECK (amount <> 0 AND abs(amount) <= 10000000000),
    reason         text NOT NULL CHECK (char_length(reason) BETWEEN 1 AND 500 AND reason = btrim(reason)),
    entered_by     text NOT NULL,
    entered_at     timestamptz NOT NULL DEFAULT now(),
    status         text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    decided_by     text,
    decided_at     timestamptz,
    decision_note  text CHECK (char_length(decision_note) <= 500),
    -- the month whose statement carries it: set by the approval only
    booked_month   text CHECK (booked_month ~ '^[0-9]{4}-(0[1-9]|1[0-2])$' AND booked_month >= month),
    CHECK ((status = 'pending') = (decided_by IS NULL AND decided_at IS NULL)),
    CHECK ((status = 'approved') = (booked_month IS NOT NULL)),
    -- maker-checker, here too: whoever entered it never decides it
    CHECK (decided_by IS DISTINCT FROM entered_by)
);
CREATE INDEX adjustments_booked ON adjustments (booked_month) WHERE status = 'approved';
CREATE INDEX adjustments_pending ON adjustments (month) WHERE status = 'pending';

-- A decision is made once: a pending row may become approved or rejected, nothing else ever changes, and no row is
-- deleted (an approved one may be frozen in a closed statement; a rejected one is the record of the refusal).
CREATE FUNCTION adjustments_decide_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'adjustments are never deleted (adjustment %)', OLD.id USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF OLD.status <> 'pending' OR NEW.status = 'pending'
       OR (NEW.id, NEW.month, NEW.team_id, NEW.amount, NEW.reason, NEW.entered_by, NEW.entered_at)
          IS DISTINCT FROM (OLD.id, OLD.month, OLD.team_id, OLD.amount, OLD.reason, OLD.entered_by, OLD.entered_at) THEN
        RAISE EXCEPTION 'adjustment % is decided once and never rewritten', OLD.id USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER decide_once BEFORE UPDATE OR DELETE ON adjustments
    FOR EACH ROW EXECUTE FUNCTION adjustments_decide_once();

-- statements read it: their caches must see every change
CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON adjustments
    FOR EACH STATEMENT EXECUTE FUNCTION data_version_touch();
