--
-- Boundaries of the claim state machine: a claim exactly as old as the
-- stale interval, and timestamps from a clock that was stepped back.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;
DELETE FROM idem_gate.claims WHERE workflow = 'bnd';

------------------------------------------------------------------------
-- staleness: updated_at at exactly transaction start - stale_interval is
-- stale; one microsecond later it is not
------------------------------------------------------------------------
SELECT idem_claim('edge', 'bnd'), idem_claim('inside', 'bnd');
BEGIN;
UPDATE idem_gate.claims
   SET created_at = now() - interval '10 minutes',
       claimed_at = now() - interval '10 minutes',
       updated_at = now() - interval '10 minutes'
 WHERE workflow = 'bnd' AND key = 'edge';
UPDATE idem_gate.claims
   SET created_at = now() - interval '10 minutes',
       claimed_at = now() - interval '10 minutes',
       updated_at = now() - interval '10 minutes' + interval '1 microsecond'
 WHERE workflow = 'bnd' AND key = 'inside';
SELECT idem_claim('edge', 'bnd', '10 minutes') AS edge,
	   idem_claim('inside', 'bnd', '10 minutes') AS inside;
COMMIT;
SELECT key, attempt FROM idem_gate.claims WHERE workflow = 'bnd' ORDER BY key;

-- the same boundary through idem_claim_ex, which also returns the new token
BEGIN;
UPDATE idem_gate.claims
   SET created_at = now() - interval '1 hour',
       claimed_at = now() - interval '1 hour',
       updated_at = now() - interval '1 hour'
 WHERE workflow = 'bnd' AND key = 'inside';
SELECT outcome, attempt,
	   token > (SELECT min(token) FROM idem_gate.claims WHERE workflow = 'bnd') AS new_token
  FROM idem_claim_ex('inside', 'bnd', '1 hour');
COMMIT;

------------------------------------------------------------------------
-- the clock was stepped back: rows carry timestamps an hour ahead of
-- now(), and every write keeps claimed_at <= updated_at (and
-- completed_at = updated_at) instead of moving them backwards
------------------------------------------------------------------------
DELETE FROM idem_gate.claims WHERE workflow = 'bnd';
-- bnd_ahead(key): push a row's claim an hour into the future
CREATE FUNCTION bnd_ahead(k text) RETURNS void
LANGUAGE sql AS $$
	UPDATE idem_gate.claims
	   SET claimed_at = claimed_at + interval '1 hour',
	       updated_at = updated_at + interval '1 hour'
	 WHERE workflow = 'bnd' AND key = k $$;
-- bnd_ordered(key): the row's timestamps are in order and not behind its
-- claim
CREATE FUNCTION bnd_ordered(k text) RETURNS TABLE (state idem_gate.state, ordered boolean)
LANGUAGE sql AS $$
	SELECT state, created_at <= claimed_at AND claimed_at <= updated_at
		   AND updated_at > now() + interval '59 minutes'
		   AND (completed_at IS NULL OR completed_at = updated_at)
	  FROM idem_gate.claims WHERE workflow = 'bnd' AND key = k $$;

SELECT idem_claim('done', 'bnd'), bnd_ahead('done');
SELECT idem_complete('done', 'bnd', NULL, '{"ok": true}');
SELECT * FROM bnd_ordered('done');

SELECT token AS tok FROM idem_claim_ex('done_tok', 'bnd') \gset
SELECT bnd_ahead('done_tok');
SELECT idem_complete('done_tok', 'bnd', :tok, '{"ok": true}');
SELECT * FROM bnd_ordered('done_tok');

SELECT idem_claim('retryable', 'bnd'), bnd_ahead('retryable');
SELECT idem_fail('retryable', 'bnd', NULL, 'timeout', true);
SELECT * FROM bnd_ordered('retryable');
-- and its retry: the new claim is not behind the failure either
SELECT idem_claim('retryable', 'bnd');
SELECT * FROM bnd_ordered('retryable');

SELECT idem_claim('review', 'bnd'), bnd_ahead('review');
SELECT idem_fail('review', 'bnd', NULL, 'half done', false);
SELECT * FROM bnd_ordered('review');
SELECT idem_resolve('review', 'bnd', 'completed', '{"checked": true}');
SELECT * FROM bnd_ordered('review');

SELECT token AS tok FROM idem_claim_ex('beat', 'bnd') \gset
SELECT bnd_ahead('beat');
SELECT idem_heartbeat('beat', 'bnd', :tok);
SELECT * FROM bnd_ordered('beat');

DROP FUNCTION bnd_ahead(text);
DROP FUNCTION bnd_ordered(text);
DELETE FROM idem_gate.claims WHERE workflow = 'bnd';
