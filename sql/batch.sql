--
-- idem_claim_many and idem_release: every rule of their contract sections
-- and every error with its SQLSTATE.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

CREATE FUNCTION b_try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text; msg text; ctx text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, ctx = PG_EXCEPTION_CONTEXT;
	RETURN st || ': ' || msg || coalesce(' (' || substring(ctx from 'element \d+ of keys') || ')', '');
END $$;

-- one row per element, in input order, each claimed as idem_claim_ex would
SELECT outcome FROM idem_claim_ex('b2', 'bwf');
SELECT idem_complete('b2', 'bwf', (SELECT token FROM idem_status('b2', 'bwf')), '{"receipt": 2}');
SELECT idem_claim('b3', 'bwf');
SELECT idem_fail('b3', 'bwf', NULL, 'before', true);
SELECT idem_claim('b4', 'bwf');
SELECT idem_fail('b4', 'bwf', NULL, 'after', false);
SELECT ord, key, outcome, token IS NOT NULL AS owns, attempt, state, result
  FROM idem_claim_many(ARRAY['b5', 'b2', 'b3', 'b4', 'b1', 'b5'], 'bwf', NULL, NULL, 'run-1');
-- a repeated key is in_flight at every later occurrence, without a token
SELECT ord, outcome, token IS NULL AS no_token
  FROM idem_claim_many(ARRAY['b6', 'b6', 'b6'], 'bwf');
-- the owning run comes back: same tokens, as idem_claim_ex re-entry
SELECT ord, outcome, token = (SELECT token FROM idem_status(m.key, 'bwf')) AS same_token
  FROM idem_claim_many(ARRAY['b5', 'b1'], 'bwf', NULL, NULL, 'run-1') m;
-- tokens handed out by idem_claim_many are required
SELECT b_try($$SELECT idem_complete('b5', 'bwf')$$);
-- stale takeovers, as idem_claim_ex
UPDATE idem_gate.claims SET created_at = created_at - interval '1 hour',
	claimed_at = claimed_at - interval '1 hour', updated_at = updated_at - interval '1 hour'
 WHERE workflow = 'bwf' AND key = 'b1';
SELECT ord, outcome, attempt FROM idem_claim_many(ARRAY['b1', 'b5'], 'bwf', '10 minutes');
-- fingerprints, one per key
SELECT ord, outcome FROM idem_claim_many(ARRAY['b7', 'b8'], 'bwf', NULL, ARRAY['fp-7', 'fp-8']);
SELECT key, fingerprint FROM idem_gate.claims WHERE key IN ('b7', 'b8') ORDER BY key;
SELECT b_try($$SELECT * FROM idem_claim_many(ARRAY['b9', 'b7'], 'bwf', NULL, ARRAY['fp-9', 'other'])$$);
SELECT count(*) AS b9_kept FROM idem_gate.claims WHERE key = 'b9';
-- a repeated key with another fingerprint than the key now has
SELECT b_try($$SELECT * FROM idem_claim_many(ARRAY['b10', 'b10'], 'bwf', NULL, ARRAY['fp-a', 'fp-b'])$$);
SELECT ord, outcome FROM idem_claim_many(ARRAY['b10', 'b10'], 'bwf', NULL, ARRAY['fp-a', 'fp-a']);
-- the owning run coming back writes nothing, so a repeat is checked
-- against the fingerprint the key has (none here), not the one it gave
SELECT outcome FROM idem_claim_ex('b14', 'bwf', NULL, NULL, 'run-14');
SELECT ord, outcome FROM idem_claim_many(ARRAY['b14', 'b14'], 'bwf', NULL, ARRAY['fp-a', 'fp-b'], 'run-14');
SELECT fingerprint FROM idem_status('b14', 'bwf');
-- a retry of a failed_retryable key, and the takeover of a stale one, store
-- the fingerprint the key lacked: a repeat is checked against it
SELECT outcome FROM idem_claim_ex('b15', 'bwf');
SELECT idem_fail('b15', 'bwf', (SELECT token FROM idem_status('b15', 'bwf')), 'timeout', true);
SELECT b_try($$SELECT * FROM idem_claim_many(ARRAY['b15', 'b15'], 'bwf', NULL, ARRAY['fp-a', 'fp-b'])$$);
SELECT ord, outcome, attempt FROM idem_claim_many(ARRAY['b15', 'b15'], 'bwf', NULL, ARRAY['fp-a', 'fp-a']);
SELECT outcome FROM idem_claim_ex('b16', 'bwf');
UPDATE idem_gate.claims SET created_at = created_at - interval '1 hour',
	claimed_at = claimed_at - interval '1 hour', updated_at = updated_at - interval '1 hour'
 WHERE workflow = 'bwf' AND key = 'b16';
SELECT b_try($$SELECT * FROM idem_claim_many(ARRAY['b16', 'b16'], 'bwf', '10 minutes', ARRAY['fp-a', 'fp-b'])$$);
SELECT ord, outcome, attempt FROM idem_claim_many(ARRAY['b16', 'b16'], 'bwf', '10 minutes', ARRAY['fp-a', 'fp-a']);
SELECT key, fingerprint FROM idem_gate.claims WHERE key IN ('b15', 'b16') ORDER BY key;
-- an empty array returns no rows
SELECT count(*) FROM idem_claim_many('{}', 'bwf');
-- bad input: each an error naming the element, nothing changed
SELECT b_try($$SELECT * FROM idem_claim_many(NULL, 'bwf')$$);
SELECT b_try($$SELECT * FROM idem_claim_many(ARRAY['b11', NULL], 'bwf')$$);
SELECT b_try($$SELECT * FROM idem_claim_many(ARRAY['b11', ''], 'bwf')$$);
-- with a key's hint, not a workflow's
SELECT * FROM idem_claim_many(ARRAY['b11', ''], 'bwf');
SELECT b_try($$SELECT * FROM idem_claim_many(ARRAY['b11', repeat('x', 300)], 'bwf')$$);
SELECT b_try($$SELECT * FROM idem_claim_many(ARRAY['b11'], 'bwf', NULL, ARRAY['a', 'b'])$$);
SELECT b_try($$SELECT * FROM idem_claim_many(ARRAY['b11'], 'bwf', NULL, ARRAY[NULL])$$);
SELECT b_try($$SELECT * FROM idem_claim_many(ARRAY['b11'], 'bwf', NULL, ARRAY[''])$$);
SELECT b_try($$SELECT * FROM idem_claim_many(ARRAY[['b11'], ['b12']], 'bwf')$$);
SELECT b_try($$SELECT * FROM idem_claim_many('{}', NULL)$$);
SELECT b_try($$SELECT * FROM idem_claim_many('{}', 'bwf', '-1 minute')$$);
SELECT b_try($$SELECT * FROM idem_claim_many('{}', 'bwf', NULL, NULL, '')$$);
SELECT count(*) AS b11_kept FROM idem_gate.claims WHERE key IN ('b11', 'b12');

-- idem_release: forgets a claim in any state, so the next delivery is new
SELECT key, state FROM idem_gate.claims WHERE workflow = 'bwf' AND key IN ('b2', 'b3', 'b4', 'b5') ORDER BY key;
SELECT key, idem_release(key, 'bwf', 'test ' || key) FROM unnest(ARRAY['b2', 'b3', 'b4', 'b5']) key;
SELECT idem_release('b2', 'bwf');
SELECT idem_release('never', 'bwf');
SELECT outcome FROM idem_claim_ex('b2', 'bwf');
SELECT action, key, state_before, state_after, reason, acting_role = current_user AS by_me
  FROM idem_gate.audit WHERE workflow = 'bwf' ORDER BY id;
SELECT b_try($$SELECT idem_release(NULL, 'bwf')$$);
SELECT b_try($$SELECT idem_release('b2', NULL)$$);
SELECT has_function_privilege('public', 'idem_release(text,text,text)', 'EXECUTE') AS public_release;
-- idem_resolve records its reason
SELECT idem_claim('b13', 'bwf');
SELECT idem_resolve('b13', 'bwf', 'completed', '{"by": "ops"}', 'paid by hand');
SELECT action, state_before, state_after, reason FROM idem_gate.audit WHERE key = 'b13';

-- idem_gate.claim_many_group: one shard group of a batch on Citus (only
-- the gate calls it; without Citus it claims here, as idem_claim_many)
SELECT ord, key, outcome, token IS NOT NULL AS has_token
  FROM idem_gate.claim_many_group(ARRAY['g2', 'g1', 'g2'], 'gwf', NULL, NULL, NULL, 'g2', ARRAY[7, 3, 9], 'postgres');
SELECT b_try($$SELECT * FROM idem_gate.claim_many_group(ARRAY['g3', 'g3'], 'gwf', NULL, ARRAY['fp-a', 'fp-b'], NULL, 'g3', ARRAY[4, 5], current_user)$$);
SELECT b_try($$SELECT * FROM idem_gate.claim_many_group(ARRAY['g3', ''], 'gwf', NULL, NULL, NULL, 'g3', ARRAY[4, 5], current_user)$$);
SELECT b_try($$SELECT * FROM idem_gate.claim_many_group(ARRAY['g3'], 'gwf', NULL, NULL, NULL, 'g3', NULL, current_user)$$);
SELECT b_try($$SELECT * FROM idem_gate.claim_many_group(ARRAY['g3'], 'gwf', NULL, NULL, NULL, 'g3', ARRAY[1, 2], current_user)$$);
SELECT b_try($$SELECT * FROM idem_gate.claim_many_group(ARRAY['g3', 'g4'], 'gwf', NULL, NULL, NULL, 'g3', ARRAY[[1, 2]], current_user)$$);
SELECT b_try($$SELECT * FROM idem_gate.claim_many_group(ARRAY['g3'], 'gwf', NULL, NULL, NULL, 'g3', ARRAY[0], current_user)$$);
SELECT b_try($$SELECT * FROM idem_gate.claim_many_group(ARRAY['g3'], 'gwf', NULL, NULL, NULL, 'g3', ARRAY[NULL::int], current_user)$$);
SELECT b_try($$SELECT * FROM idem_gate.claim_many_group(ARRAY['g3'], 'gwf', NULL, NULL, NULL, 'g3', ARRAY[1], NULL)$$);
SELECT b_try($$SELECT * FROM idem_gate.claim_many_group(ARRAY['g3'], 'gwf', NULL, NULL, NULL, 'g3', ARRAY[1], 'no_such_role')$$);
SELECT count(*) AS g3_claimed FROM idem_gate.claims WHERE key = 'g3';
SELECT has_function_privilege('public', 'idem_gate.claim_many_group(text[],text,interval,text[],text,text,integer[],name)', 'EXECUTE') AS public_group;

DELETE FROM idem_gate.claims WHERE workflow IN ('bwf', 'gwf');
DROP FUNCTION b_try(text);
