--
-- Per-workflow access: with idem_gate.workflow_acl on, a role uses only
-- the workflows granted to it or to a role it belongs to.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

CREATE ROLE regress_acl_orders;
CREATE ROLE regress_acl_team;
CREATE ROLE regress_acl_member IN ROLE regress_acl_team;
GRANT USAGE ON SCHEMA idem_gate TO regress_acl_orders, regress_acl_member;
GRANT EXECUTE ON FUNCTION idem_claim(text, text, interval),
	idem_claim_ex(text, text, interval, text, text),
	idem_claim_many(text[], text, interval, text[], text),
	idem_complete(text, text, bigint, jsonb),
	idem_fail(text, text, bigint, text, boolean),
	idem_heartbeat(text, text, bigint),
	idem_status(text, text),
	idem_resolve(text, text, text, jsonb, text),
	idem_release(text, text, text)
	TO regress_acl_orders, regress_acl_member;

-- grants
SELECT idem_gate.grant_workflow('regress_acl_orders', 'orders_%');
SELECT idem_gate.grant_workflow('regress_acl_orders', 'orders_%');
SELECT idem_gate.grant_workflow('regress_acl_team', 'crm');
SELECT role, pattern FROM idem_gate.workflow_acl ORDER BY pattern, role::text;
-- bad input: each an error, nothing changed
SELECT idem_gate.grant_workflow(NULL, 'x');
SELECT idem_gate.grant_workflow('regress_acl_orders', NULL);
SELECT idem_gate.grant_workflow('regress_acl_orders', '');
SELECT idem_gate.grant_workflow('regress_acl_nobody', 'x');
SELECT idem_gate.revoke_workflow('regress_acl_nobody', 'x');
SELECT idem_gate.revoke_workflow('regress_acl_orders', 'never_granted');
SELECT count(*) FROM idem_gate.workflow_acl;

-- off (the default): no check
SET ROLE regress_acl_orders;
SELECT idem_claim('a1', 'crm');
RESET ROLE;

SET idem_gate.workflow_acl = on;
SET ROLE regress_acl_orders;
SELECT idem_claim('a1', 'orders_eu');
SELECT outcome FROM idem_claim_ex('a2', 'orders_us');
-- % also stands for no character at all: orders_% covers orders_
SELECT idem_claim('a3', 'orders_');
SELECT idem_claim('a1', 'crm');
SELECT * FROM idem_claim_ex('a1', 'crm');
SELECT * FROM idem_claim_many(ARRAY['a1'], 'crm');
SELECT idem_complete('a1', 'crm');
SELECT idem_fail('a1', 'crm');
SELECT idem_heartbeat('a1', 'crm', 1);
SELECT * FROM idem_status('a1', 'crm');
SELECT idem_resolve('a1', 'crm', 'retry');
SELECT idem_release('a1', 'crm');
RESET ROLE;
SELECT state FROM idem_status('a1', 'crm');
-- a grant to a role covers its members
SET ROLE regress_acl_member;
SELECT state FROM idem_status('a1', 'crm');
SELECT idem_claim('a1', 'orders_eu');
RESET ROLE;
-- a revoke takes effect at the next call
SELECT idem_gate.revoke_workflow('regress_acl_team', 'crm');
SET ROLE regress_acl_member;
SELECT state FROM idem_status('a1', 'crm');
RESET ROLE;
-- several patterns, the role's own and its group's: each one grants
SELECT idem_gate.grant_workflow('regress_acl_member', 'billing_%');
SELECT idem_gate.grant_workflow('regress_acl_member', 'ship_%');
SELECT idem_gate.grant_workflow('regress_acl_team', 'crm');
SET ROLE regress_acl_member;
SELECT w, idem_claim('a3', w) FROM unnest(ARRAY['billing_eu', 'ship_eu', 'crm']) w;
SELECT idem_claim('a3', 'orders_eu');
RESET ROLE;
-- leaving the group takes its grants away at the next call, in the same
-- session; joining it again gives them back
REVOKE regress_acl_team FROM regress_acl_member;
SET ROLE regress_acl_member;
SELECT idem_claim('a3', 'crm');
RESET ROLE;
GRANT regress_acl_team TO regress_acl_member;
SET ROLE regress_acl_member;
SELECT idem_claim('a3', 'crm');
RESET ROLE;
SELECT idem_gate.revoke_workflow('regress_acl_member', p) FROM unnest(ARRAY['billing_%', 'ship_%']) p;
SELECT idem_gate.revoke_workflow('regress_acl_team', 'crm');
DELETE FROM idem_gate.claims WHERE key = 'a3';
-- superusers always pass
SELECT state FROM idem_status('a1', 'crm');

-- nobody else changes the grants
SET ROLE regress_acl_orders;
SELECT idem_gate.grant_workflow('regress_acl_orders', '%');
INSERT INTO idem_gate.workflow_acl VALUES ('regress_acl_orders', '%');
RESET ROLE;
RESET idem_gate.workflow_acl;

SELECT idem_gate.revoke_workflow('regress_acl_orders', 'orders_%');
REVOKE ALL ON FUNCTION idem_claim(text, text, interval),
	idem_claim_ex(text, text, interval, text, text),
	idem_claim_many(text[], text, interval, text[], text),
	idem_complete(text, text, bigint, jsonb),
	idem_fail(text, text, bigint, text, boolean),
	idem_heartbeat(text, text, bigint),
	idem_status(text, text),
	idem_resolve(text, text, text, jsonb, text),
	idem_release(text, text, text)
	FROM regress_acl_orders, regress_acl_member;
REVOKE USAGE ON SCHEMA idem_gate FROM regress_acl_orders, regress_acl_member;
DELETE FROM idem_gate.claims WHERE workflow IN ('crm', 'orders_eu', 'orders_us');
DROP ROLE regress_acl_orders, regress_acl_member, regress_acl_team;

-- DROP ROLE leaves a role's grants (a regrole records no dependency): the
-- janitor's pass removes them, so that the oid they name cannot reach a
-- role created later, and keeps the grants of roles that exist
CREATE ROLE regress_acl_gone;
CREATE ROLE regress_acl_stays;
SELECT idem_gate.grant_workflow('regress_acl_gone', p) FROM unnest(ARRAY['gone_a%', 'gone_b']) p;
SELECT idem_gate.grant_workflow('regress_acl_stays', 'stays_%');
DROP ROLE regress_acl_gone;
SELECT count(*) AS orphaned FROM idem_gate.workflow_acl w
 WHERE NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = w.role);
-- ... but not while a rule is attached to the grants table, which the
-- pass's DELETE would run
CREATE RULE regress_acl_rule AS ON DELETE TO idem_gate.workflow_acl DO ALSO NOTHING;
SET client_min_messages = error;
SELECT 1 AS pass FROM idem_gate.janitor_run();
RESET client_min_messages;
SELECT count(*) AS orphaned FROM idem_gate.workflow_acl w
 WHERE NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = w.role);
DROP RULE regress_acl_rule ON idem_gate.workflow_acl;
SET client_min_messages = error;
SELECT 1 AS pass FROM idem_gate.janitor_run();
RESET client_min_messages;
SELECT count(*) AS orphaned FROM idem_gate.workflow_acl w
 WHERE NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = w.role);
SELECT role, pattern FROM idem_gate.workflow_acl WHERE pattern LIKE 'stays%' OR pattern LIKE 'gone%';
SELECT idem_gate.revoke_workflow('regress_acl_stays', 'stays_%');
DROP ROLE regress_acl_stays;
