
/* The helpers of this update are not part of 1.2. */
DROP FUNCTION idem_gate.upgrade_grants(pg_catalog.aclitem[], pg_catalog.oid, pg_catalog.text);
DROP FUNCTION idem_gate.outside_extension(pg_catalog.text[]);
