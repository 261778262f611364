-- Finance codes per team (SPEC §11, issue 30): the cost centre, GL account and legal entity a team's spend is booked
-- to in the company's books, dated — a version holds from `valid_from` (a day of the billing time zone) until the
-- team's next. A version with no code clears them from its day. Every bill line computed per day carries the codes
-- of its days (a change mid-month splits the team's lines at that day); a month closed keeps the codes it was closed
-- with (its snapshot), and a code changed later restates nothing: codes move no money.

CREATE TABLE team_finance_codes (
    team_id      text NOT NULL REFERENCES teams (id),
    valid_from   date NOT NULL,
    cost_centre  text CHECK (char_length(cost_centre) BETWEEN 1 AND 64 AND cost_centre = btrim(cost_centre)),
    gl_account   text CHECK (char_length(gl_account) BETWEEN 1 AND 64 AND gl_account = btrim(gl_account)),
    legal_entity text CHECK (char_length(legal_entity) BETWEEN 1 AND 200 AND legal_entity = btrim(legal_entity)),
    set_by       text NOT NULL,
    set_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, valid_from)
);

-- statements read it: their caches must see every change
CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON team_finance_codes
    FOR EACH STATEMENT EXECUTE FUNCTION data_version_touch();
