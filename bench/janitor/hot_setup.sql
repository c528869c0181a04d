-- Index designs for HOT completions (issue 37), prototyped in plain SQL:
-- four copies of one claims table, the same 1M rows, each with the
-- primary key and one design's other indexes (bench/janitor/hot.sh).
--   a: the janitor's btree (state, workflow, updated_at, token), as in 1.2
--   b: a btree on columns set once per grant: (workflow, claimed_at, token)
--   c: b, plus a BRIN on updated_at (summarizing: no HOT blocker on 16+)
--   d: the primary key alone (the one-index floor)
DROP SCHEMA IF EXISTS p CASCADE; CREATE SCHEMA p;
CREATE TYPE p.st AS ENUM ('processing','completed','failed_retryable','needs_review');
CREATE TABLE p.tmpl (
  workflow text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL,
  state p.st NOT NULL, attempt int NOT NULL DEFAULT 1, token bigint NOT NULL,
  execution_id text, fingerprint text, result jsonb, last_error text,
  created_at timestamptz NOT NULL, claimed_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
  completed_at timestamptz, alerted_token bigint, token_issued boolean NOT NULL DEFAULT true);
-- 1M rows over 10 days (one every 0.864 s): completed 2 s after their claim;
-- the last 10,000 processing with a fresh heartbeat; 50 stuck (claimed 3 h ago, last heartbeat 2 h ago)
INSERT INTO p.tmpl
SELECT 'wf', 'k' || g,
  CASE WHEN g > 990000 OR g % 20000 = 7 THEN 'processing' ELSE 'completed' END::p.st, 1, g, NULL, NULL,
  CASE WHEN g > 990000 OR g % 20000 = 7 THEN NULL ELSE '{"action_id":"inv_1"}'::jsonb END, NULL,
  t, t,
  CASE WHEN g > 990000 THEN now() WHEN g % 20000 = 7 THEN least(t + interval '1 hour', now() - interval '2 hours') ELSE t + interval '2 s' END,
  CASE WHEN g > 990000 OR g % 20000 = 7 THEN NULL ELSE t + interval '2 s' END, NULL, true
FROM (SELECT g, now() - interval '10 days' + g * interval '864 ms' AS t FROM generate_series(1, 1000000) g) s;
CREATE TABLE p.a (LIKE p.tmpl); INSERT INTO p.a SELECT * FROM p.tmpl;
ALTER TABLE p.a ADD PRIMARY KEY (workflow, key); CREATE INDEX ON p.a (state, workflow, updated_at, token);
CREATE TABLE p.b (LIKE p.tmpl); INSERT INTO p.b SELECT * FROM p.tmpl;
ALTER TABLE p.b ADD PRIMARY KEY (workflow, key); CREATE INDEX ON p.b (workflow, claimed_at, token);
CREATE TABLE p.c (LIKE p.tmpl); INSERT INTO p.c SELECT * FROM p.tmpl;
ALTER TABLE p.c ADD PRIMARY KEY (workflow, key); CREATE INDEX ON p.c (workflow, claimed_at, token);
CREATE INDEX ON p.c USING brin (updated_at) WITH (pages_per_range = 8);
CREATE TABLE p.d (LIKE p.tmpl); INSERT INTO p.d SELECT * FROM p.tmpl;
ALTER TABLE p.d ADD PRIMARY KEY (workflow, key);
VACUUM ANALYZE p.a, p.b, p.c, p.d;
CREATE SEQUENCE p.seq START 2000000;
