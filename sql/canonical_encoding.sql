--
-- Canonical JSON needs a UTF8 database: the canonical form is UTF-8 text.
--
-- Leave the database as found: the other suites expect to create idem_gate.
SELECT NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'idem_gate') AS canonical_created \gset
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;
\set regress_db :DBNAME
CREATE DATABASE canonical_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
\c canonical_latin1
SET client_min_messages = warning;
CREATE EXTENSION idem_gate;
RESET client_min_messages;
\set VERBOSITY default
SELECT idem_canonical('{"a":1}'::jsonb);
SELECT idem_hash('{"a":1}'::json);
SELECT idem_hash('{"a":1}'::jsonb, ARRAY['a']);
\set VERBOSITY sqlstate
SELECT idem_canonical('{"a":1}'::json);
\c :regress_db
DROP DATABASE canonical_latin1;
SELECT idem_canonical('{"a":1}'::jsonb) AS utf8_works;

\if :canonical_created
DROP EXTENSION idem_gate;
\endif
