/*
 * idem_gate managed edition: what the shared update steps call.
 *
 * The C edition's update scripts carry a DBA's grants over to a replaced
 * object through idem_gate.outside_extension(), so that pg_dump keeps them
 * as the DBA's.  The managed edition is no extension: the same GRANT and
 * REVOKE statements simply run.  The shared steps create and drop it
 * around each use, as they do in the C edition.
 */
CREATE FUNCTION idem_gate.outside_extension(statements pg_catalog.text[])
	RETURNS void
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	s pg_catalog.text;
BEGIN
	FOREACH s IN ARRAY COALESCE(statements, '{}') LOOP
		IF s !~* '^\s*(GRANT|REVOKE)\s' THEN
			RAISE EXCEPTION 'idem_gate.outside_extension() runs only GRANT and REVOKE'
				USING ERRCODE = '42501';
		END IF;
		EXECUTE s;
	END LOOP;
END
$$;
