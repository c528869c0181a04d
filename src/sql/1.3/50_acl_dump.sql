
/*
 * A grant outlives its role: DROP ROLE does not see idem_gate.workflow_acl
 * (a regrole column records no dependency), so the row stays, its role
 * shown as a bare oid.  pg_dump wrote that oid, and a restore into another
 * cluster read it back as whichever role has that oid there: a dropped
 * operator's workflows went to a stranger.  pg_dump now keeps only the
 * grants of roles that exist, which it writes by name.
 */
SELECT pg_catalog.pg_extension_config_dump('idem_gate.workflow_acl',
	'WHERE EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role)');
