// ---- SQL (the CI test runs exactly these, read from the JSON files) ----
// a bulk decision's query: $1 the keys (JSON), $2 the workflow, $3 the
// resolution (resolve only), $4 the reason, $5 the actor, $6 when the form was shown
const bulkSql = (call, state) =>
  'WITH k AS (SELECT coalesce(array_agg(v ORDER BY n), \'{}\') AS keys FROM jsonb_array_elements_text($1::jsonb) WITH ORDINALITY AS j(v, n)),\n' +
  'used AS (SELECT EXISTS (\n' +
  '  SELECT 1 FROM k, unnest(k.keys) AS u(key), idem_gate.history(u.key, $2::text) AS h\n' +
  '  WHERE idem_gate.workflow_visible($2::text) AND h.actor = $5::text AND h.reason = $4::text\n' +
  '    AND h.at >= to_timestamp($6::double precision)) AS replayed)\n' +
  'SELECT used.replayed, r.ord, r.key, r.outcome' + state + ',\n' +
  "       CASE WHEN r.outcome IN ('already_decided', 'not_found') AND idem_gate.workflow_visible($2::text) THEN\n" +
  "         (SELECT h.action || ' by ' || coalesce(h.actor, h.session_role::text) || ' at ' || to_char(h.at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC'\n" +
  '            FROM idem_gate.history(r.key, $2::text) AS h ORDER BY h.at DESC LIMIT 1) END AS last_action\n' +
  'FROM used LEFT JOIN LATERAL (\n' +
  '  SELECT m.* FROM k, ' + call + ' AS m WHERE NOT used.replayed) AS r ON true\n' +
  'ORDER BY r.ord;';

export const INBOX_SQL = {
  // the list: one page of what the filter selects, oldest first, by keyset
  // (since, workflow, key) after the cursor ($7-$9; '' on the first page),
  // $10 items and one more (to know whether a next page exists); how many
  // match; the count of every workflow and reason; and when it was read.
  // The inbox is read once (a), for the counts and the filter alike: what
  // the view lists is read from indexes (claims_inbox_since, and the
  // janitor's index for stuck claims) and, for stuck claims, their rows.
  // A filter then costs what the inbox holds, whatever the number of
  // claims: a workflow ($1), a reason ($2), a key ($3, a JSON array: the
  // key as typed and its stored forms in keyed workflows), a key prefix
  // ($4, and $5 its upper bound, computed by the page: the prefix with its
  // last character's successor), an age ($6, older than).  The columns the
  // list shows beyond those are fetched for the page's rows only, by their
  // primary key; every comparison there is leakproof, so it reaches
  // through the view's security barrier to the index.
  list:
    'WITH a AS MATERIALIZED (\n' +
    '  SELECT workflow, key, reason, since, state::text AS state, attempt FROM idem_gate.inbox),\n' +
    'g AS (\n' +
    '  SELECT workflow, reason, count(*)::int AS n, min(since) AS oldest FROM a GROUP BY workflow, reason),\n' +
    'f AS MATERIALIZED (\n' +
    '  SELECT * FROM a\n' +
    "  WHERE ($1::text = '' OR workflow = $1::text)\n" +
    "    AND ($2::text = '' OR reason = $2::text)\n" +
    "    AND ($3::jsonb = '[]'::jsonb OR key = ANY (ARRAY(SELECT jsonb_array_elements_text($3::jsonb))))\n" +
    "    AND ($4::text = '' OR (key >= $4::text AND ($5::text = '' OR key < $5::text) AND left(key, length($4::text)) = $4::text))\n" +
    "    AND ($6::text = '' OR since <= now() - nullif($6::text, '')::interval)),\n" +
    'q AS (\n' +
    "  SELECT * FROM f WHERE (since, workflow, key) > (coalesce(nullif($7::text, '')::timestamptz, '-infinity'), $8::text, $9::text)\n" +
    '  ORDER BY since, workflow, key LIMIT $10::int + 1),\n' +
    'p AS (\n' +
    '  SELECT q.*, d.execution_id, d.last_error, d.has_payload, d.payload_dropped_bytes FROM q\n' +
    '  LEFT JOIN LATERAL (SELECT i.execution_id, left(i.last_error, 300) AS last_error, i.payload IS NOT NULL AS has_payload,\n' +
    '                            i.payload_dropped_bytes FROM idem_gate.inbox AS i\n' +
    '                     WHERE i.workflow = q.workflow AND i.key = q.key AND i.reason = q.reason LIMIT 1) AS d ON true)\n' +
    'SELECT\n' +
    "  (SELECT coalesce(jsonb_agg(jsonb_build_object('workflow', workflow, 'key', key, 'reason', reason,\n" +
    "            'since', to_char(since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),\n" +
    "            'since_exact', to_char(since AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),\n" +
    "            'age_s', floor(extract(epoch FROM now() - since)), 'state', state, 'attempt', attempt, 'execution_id', execution_id,\n" +
    "            'last_error', last_error, 'has_payload', has_payload, 'payload_dropped_bytes', payload_dropped_bytes)\n" +
    "          ORDER BY since, workflow, key), '[]'::jsonb) FROM p) AS items,\n" +
    '  (SELECT count(*)::int FROM f) AS matching,\n' +
    "  (SELECT coalesce(jsonb_agg(jsonb_build_object('workflow', workflow, 'reason', reason, 'n', n,\n" +
    "            'oldest_s', floor(extract(epoch FROM now() - oldest))) ORDER BY workflow, reason), '[]'::jsonb) FROM g) AS groups,\n" +
    "  to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC' AS read_at;",
  // a key search over every workflow: the key as typed, and its stored form
  // in each keyed workflow the role may see (idem_key_forms(), idem_gate
  // 1.3, which reads the policies, not the inbox; the DBA grants its
  // EXECUTE on request: without it this fails, and the page searches the
  // key as typed only)
  keyForms:
    "SELECT coalesce(jsonb_agg(DISTINCT f), '[]'::jsonb) AS forms\n" +
    'FROM (SELECT $1::text AS f UNION SELECT stored_key FROM idem_key_forms($1::text)) AS x;',
  // the keys a bulk decision takes: the current filter's (one workflow,
  // oldest first, at most 1001: one more than a submit takes, to say so),
  // or the ones selected ($8, a JSON array), as they are
  bulkKeys:
    "SELECT CASE WHEN $1::text = 'filter' THEN\n" +
    "         (SELECT coalesce(jsonb_agg(key ORDER BY since, key), '[]'::jsonb) FROM (\n" +
    '            SELECT key, since FROM idem_gate.inbox\n' +
    "            WHERE workflow = $2::text AND ($3::text = '' OR reason = $3::text) AND ($4::text = '' OR key = $4::text)\n" +
    "              AND ($5::text = '' OR (key >= $5::text AND ($6::text = '' OR key < $6::text) AND left(key, length($5::text)) = $5::text))\n" +
    "              AND ($7::text = '' OR since <= now() - nullif($7::text, '')::interval)\n" +
    '            ORDER BY since, workflow, key LIMIT 1001) AS k)\n' +
    '       ELSE $8::jsonb END AS keys,\n' +
    "       to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC' AS read_at;",
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
  // bulk decisions on the keys the confirm page showed ($1, a JSON array,
  // in that order), each decided on its own, one row per key.  A form is
  // used once: when any of its keys has an action by this person with this
  // reason since the form was shown ($6, seconds since 1970), it was sent
  // already, and nothing is decided (replayed is true, and no row follows).
  // For a key decided already, who did it last, and when.
  resolveMany: bulkSql('idem_resolve_many(k.keys, $2::text, $3::text, NULL, $4::text, $5::text)', ', r.state::text AS state'),
  releaseMany: bulkSql('idem_release_many(k.keys, $2::text, $4::text, $5::text)', ", NULL::text AS state"),
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

