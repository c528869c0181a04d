-- idem_gate's side of the claim benchmark: the same 100,000 completed keys
-- the baseline preloads, written through the API.
CREATE EXTENSION idem_gate;
SELECT count(idem_complete(k, 'wf', NULL, '{"action_id":"inv_1"}'))
  FROM (SELECT 'dup_' || g AS k, idem_claim('dup_' || g, 'wf') FROM generate_series(1, 100000) g) s;
VACUUM ANALYZE idem_gate.claims;
