/* idem_gate 1.2 -> 1.3 (also the last part of a fresh 1.3 install) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem_gate UPDATE TO '1.3'" to load this file. \quit

SET LOCAL search_path = pg_catalog, pg_temp;
