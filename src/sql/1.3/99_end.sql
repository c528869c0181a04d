
/* The helper of this update is not part of 1.3. */
DROP FUNCTION idem_gate.outside_extension(pg_catalog.text[]);
