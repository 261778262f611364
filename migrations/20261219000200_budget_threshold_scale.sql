-- A budget's alert thresholds are shares of the budget up to 10 (1000 %) with 4 decimals (the API's rule since
-- issue 27), but the columns were numeric(5, 4): at most 9.9999, so a threshold of 10 was refused by the database
-- as "out of range" (schemathesis: `PUT /budgets/2000-01/nlp` with `"thresholds": ["10.0000"]`). Widened to hold
-- the rule's whole range; every stored value keeps its digits.
ALTER TABLE budgets ALTER COLUMN thresholds TYPE numeric(6, 4)[];
ALTER TABLE budget_alerts ALTER COLUMN threshold TYPE numeric(6, 4);
