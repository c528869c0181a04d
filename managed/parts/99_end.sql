/*
 * idem_gate managed edition: its version.  The C extension's version is
 * in pg_extension; the managed edition's is this function's answer, which
 * its update files check and move.
 */
CREATE FUNCTION idem_gate.managed_version()
RETURNS pg_catalog.text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT '1.3'::pg_catalog.text
$$;
COMMENT ON FUNCTION idem_gate.managed_version() IS 'the version of the managed edition installed here (the C extension has none of this function)';
GRANT EXECUTE ON FUNCTION idem_gate.managed_version() TO PUBLIC;
