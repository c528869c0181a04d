/* idem_gate 1.2 -> 1.3 (also the last part of a fresh 1.3 install) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem_gate UPDATE TO '1.3'" to load this file. \quit

SET LOCAL search_path = pg_catalog, pg_temp;

/*
 * A helper of this update, dropped again at its end (99_end.sql): it runs
 * GRANT statements for the objects the update replaces as a DBA's grants,
 * not as the extension's initial privileges, so that pg_dump keeps them.
 */
CREATE FUNCTION idem_gate.outside_extension(statements pg_catalog.text[])
RETURNS void
AS 'MODULE_PATHNAME', 'idem_gate_outside_extension'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION idem_gate.outside_extension(pg_catalog.text[]) FROM PUBLIC;
