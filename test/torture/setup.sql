-- idem_gate fault torture: what the harness adds to its throwaway database.
--
-- torture.history is an audit trail of every committed change to
-- idem_gate.claims, written by a trigger inside the same transaction as the
-- change: a change lost in a crash is lost from the history too, and a
-- change that survived is in both.  Per (workflow, key) the id order is the
-- order of the changes, because the trigger runs while the row is locked.
-- The invariants compare it with what the clients were told.

CREATE EXTENSION idem_gate;
CREATE EXTENSION amcheck;
CREATE SCHEMA torture;

CREATE TABLE torture.history (
	id				bigserial PRIMARY KEY,
	op				"char" NOT NULL,		-- I, U, D
	workflow		text NOT NULL,
	key				text NOT NULL,
	state			idem_gate.state NOT NULL,
	token			bigint NOT NULL,
	attempt			integer NOT NULL,
	execution_id	text,
	result			jsonb,
	claimed_at		timestamptz NOT NULL,
	updated_at		timestamptz NOT NULL,
	alerted_token	bigint
);

CREATE FUNCTION torture.record() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	r idem_gate.claims;
BEGIN
	IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
	INSERT INTO torture.history (op, workflow, key, state, token, attempt,
		execution_id, result, claimed_at, updated_at, alerted_token)
	VALUES (left(TG_OP, 1), r.workflow, r.key, r.state, r.token, r.attempt,
		r.execution_id, r.result, r.claimed_at, r.updated_at, r.alerted_token);
	RETURN NULL;
END $$;

CREATE TRIGGER torture_history
	AFTER INSERT OR UPDATE OR DELETE ON idem_gate.claims
	FOR EACH ROW EXECUTE FUNCTION torture.record();
