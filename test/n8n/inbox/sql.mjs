// ---- SQL (the CI test runs exactly these, read from the JSON files) ----
export const INBOX_SQL = {
  // the list: what the filter selects (at most 500 rows, oldest first), and
  // the count of every workflow and reason for the filter's choices
  list:
    'WITH i AS (\n' +
    '  SELECT workflow, key, reason, since, state::text AS state, attempt, left(last_error, 300) AS last_error,\n' +
    '         payload IS NOT NULL AS has_payload, payload_dropped_bytes\n' +
    '  FROM idem_gate.inbox),\n' +
    "f AS (SELECT * FROM i WHERE ($1::text = '' OR workflow = $1::text) AND ($2::text = '' OR reason = $2::text))\n" +
    'SELECT\n' +
    "  (SELECT coalesce(jsonb_agg(jsonb_build_object('workflow', workflow, 'key', key, 'reason', reason,\n" +
    "            'since', to_char(since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),\n" +
    "            'age_s', floor(extract(epoch FROM now() - since)), 'state', state, 'attempt', attempt,\n" +
    "            'last_error', last_error, 'has_payload', has_payload, 'payload_dropped_bytes', payload_dropped_bytes)\n" +
    "          ORDER BY since, workflow, key), '[]'::jsonb)\n" +
    '     FROM (SELECT * FROM f ORDER BY since, workflow, key LIMIT 500) AS l) AS items,\n' +
    '  (SELECT count(*)::int FROM f) AS matching,\n' +
    "  (SELECT coalesce(jsonb_agg(jsonb_build_object('workflow', workflow, 'reason', reason, 'n', n,\n" +
    "            'oldest_s', oldest_s) ORDER BY workflow, reason), '[]'::jsonb)\n" +
    '     FROM (SELECT workflow, reason, count(*)::int AS n, floor(extract(epoch FROM now() - min(since))) AS oldest_s\n' +
    '           FROM i GROUP BY workflow, reason) AS g) AS groups;',
  // one claim: its row without the token, why it is in the inbox, its history
  item:
    "SELECT (SELECT to_jsonb(s) - 'token' - 'alerted_token' FROM idem_status($1::text, $2::text) AS s) AS claim,\n" +
    "       (SELECT jsonb_build_object('reason', i.reason, 'age_s', floor(extract(epoch FROM now() - i.since)))\n" +
    '          FROM idem_gate.inbox AS i WHERE i.workflow = $2::text AND i.key = $1::text LIMIT 1) AS inbox,\n' +
    "       (SELECT coalesce(jsonb_agg(to_jsonb(h) ORDER BY h.at), '[]'::jsonb)\n" +
    '          FROM idem_gate.history($1::text, $2::text) AS h) AS history;',
  resolveCompleted:
    "SELECT idem_resolve($1::text, $2::text, 'completed', $3::jsonb, $4::text, $5::text)::text AS state;",
  resolveRetry:
    "SELECT idem_resolve($1::text, $2::text, 'retry', NULL, $3::text, $4::text)::text AS state;",
  release: 'SELECT idem_release($1::text, $2::text, $3::text, $4::text) AS released;',
  // records the replay (who, why) and answers the payload to send; refuses
  // a claim that cannot be replayed before anything is sent
  replay:
    'SELECT idem_replay($1::text, $2::text, $3::text, $4::text) AS payload;',
  // the alert names a workflow, a reason and a time: the item it most likely
  // is, the one of that workflow and reason whose last change is nearest to
  // the alert's time (idem_fail's needs_review and failing are announced as
  // they are written; a stuck claim's last change is older, and the nearest
  // is then the newest stuck one), how many wait in that workflow, and
  // whether the inbox's role may see that workflow at all (per-workflow
  // access): an alert about one it may not see is not posted
  alertItem:
    'SELECT $1::text AS workflow, $2::text AS reason, idem_gate.workflow_visible($1::text) AS visible,\n' +
    '       i.key, i.attempt, floor(extract(epoch FROM now() - i.since)) AS age_s,\n' +
    '       (SELECT count(*)::int FROM idem_gate.inbox AS j WHERE j.workflow = $1::text) AS waiting\n' +
    'FROM (SELECT 1) AS one\n' +
    'LEFT JOIN LATERAL (\n' +
    '  SELECT key, attempt, since FROM idem_gate.inbox\n' +
    '  WHERE workflow = $1::text AND reason = $2::text\n' +
    "  ORDER BY abs(extract(epoch FROM since - coalesce($3::timestamptz, now()))), since DESC\n" +
    '  LIMIT 1) AS i ON true;',
  // the digest: every workflow and reason with its count and oldest age, and
  // whether the live alerts' LISTEN session (the same role) still exists
  digest:
    "SELECT coalesce(sum(n), 0)::int AS total,\n" +
    "       coalesce(jsonb_agg(jsonb_build_object('workflow', workflow, 'reason', reason, 'n', n, 'oldest_s', oldest_s)\n" +
    "                ORDER BY workflow, reason), '[]'::jsonb) AS groups,\n" +
    '       (SELECT count(*)::int FROM pg_stat_activity\n' +
    "         WHERE usename = current_user AND query ILIKE 'LISTEN%idem_gate_alert%') AS listeners\n" +
    'FROM (SELECT workflow, reason, count(*)::int AS n, floor(extract(epoch FROM now() - min(since))) AS oldest_s\n' +
    '      FROM idem_gate.inbox GROUP BY workflow, reason) AS g;',
};

