-- Stress bookkeeping: every grant and every completion, as the clients saw
-- them, written in the same transaction as the call that produced them.
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS stress CASCADE;
CREATE SCHEMA stress;
TRUNCATE idem_gate.claims;

CREATE TABLE stress.grants (
	id		bigserial PRIMARY KEY,
	key		text NOT NULL,
	token	bigint NOT NULL,
	run		text NOT NULL,
	outcome	idem_gate.outcome NOT NULL
);
CREATE TABLE stress.calls (
	what	text NOT NULL,
	ok		boolean NOT NULL,
	n		bigint NOT NULL DEFAULT 1
);

-- an owner's action; a refusal (its claim was granted to another run) is
-- counted, not raised, so that pgbench keeps going
CREATE FUNCTION stress.act(k text, tok bigint, op int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF op <= 55 THEN
		PERFORM idem_complete(k, 'stress', tok, jsonb_build_object('token', tok));
		INSERT INTO stress.calls VALUES ('complete', true);
	ELSIF op <= 70 THEN
		PERFORM idem_fail(k, 'stress', tok, 'clean failure', true);
		INSERT INTO stress.calls VALUES ('fail_retryable', true);
	ELSIF op <= 78 THEN
		PERFORM idem_fail(k, 'stress', tok, 'ambiguous failure', false);
		INSERT INTO stress.calls VALUES ('fail_review', true);
	ELSIF op <= 90 THEN
		IF idem_heartbeat(k, 'stress', tok) THEN
			PERFORM idem_complete(k, 'stress', tok, jsonb_build_object('token', tok));
			INSERT INTO stress.calls VALUES ('heartbeat_complete', true);
		ELSE
			INSERT INTO stress.calls VALUES ('heartbeat_lost', true);
		END IF;
	ELSE
		-- the run dies between the side effect and its completion
		INSERT INTO stress.calls VALUES ('abandon', true);
	END IF;
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	INSERT INTO stress.calls VALUES ('refused_' || CASE WHEN op <= 55 OR op > 78 THEN 'complete' ELSE 'fail' END, false);
END $$;

-- an operator sends needs_review claims back for a retry now and then
CREATE FUNCTION stress.review(k text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF (SELECT state FROM idem_status(k, 'stress')) = 'needs_review' THEN
		PERFORM idem_resolve(k, 'stress', 'retry');
		INSERT INTO stress.calls VALUES ('resolve_retry', true);
	END IF;
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	NULL;
END $$;
