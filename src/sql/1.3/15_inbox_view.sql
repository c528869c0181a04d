
/*
 * The inbox reads only the stuck claims, not every claim in flight.  In
 * 1.2 a claim is stuck when its updated_at is older than its workflow's
 * stuck_after, a cutoff that depends on the claim's own policy, so no
 * index condition could use it: listing the inbox read every processing
 * row from the heap (10,000 in flight cost 10,000 heap pages to find 3,000
 * stuck ones).  Every stuck claim is also older than the shortest
 * stuck_after in force (the setting's, or any policy's), a bound computed
 * once per query; with it the janitor's index (state, workflow,
 * updated_at, token) finds the stuck claims and no fresh one.  The rows
 * are the same: the bound only ever admits a superset of the per-workflow
 * rule, which still decides.
 *
 * A view's query cannot be changed in place: 1.2's view is renamed, the
 * new one created, the grants a DBA gave on the old one given again on
 * the new one as the DBA's (not as the extension's initial privileges, so
 * pg_dump keeps them), and the old one dropped.  A DBA's own view over
 * idem_gate.inbox would be dropped with it: the update refuses instead,
 * naming it.
 */
ALTER VIEW idem_gate.inbox RENAME TO inbox_1_2;

CREATE VIEW idem_gate.inbox WITH (security_barrier = true) AS
SELECT i.workflow, i.key, i.reason, i.since, i.state, i.attempt, i.execution_id,
	i.last_error, i.payload, i.payload_dropped_bytes, i.fingerprint, i.claimed_at,
	i.updated_at
FROM (
	SELECT c.workflow, c.key, 'needs_review'::pg_catalog.text AS reason, c.updated_at AS since,
		c.state, c.attempt, c.execution_id, c.last_error, c.payload,
		c.payload_dropped_bytes, c.fingerprint, c.claimed_at, c.updated_at
	  FROM ONLY idem_gate.claims c
	 WHERE c.state OPERATOR(pg_catalog.=) 'needs_review'::idem_gate.state
	UNION ALL
	SELECT c.workflow, c.key, 'stuck', c.updated_at, c.state, c.attempt, c.execution_id,
		c.last_error, c.payload, c.payload_dropped_bytes, c.fingerprint, c.claimed_at,
		c.updated_at
	  FROM ONLY idem_gate.claims c
	  LEFT JOIN ONLY idem_gate.policies p ON p.workflow OPERATOR(pg_catalog.=) c.workflow
	 WHERE c.state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state
	   AND c.updated_at OPERATOR(pg_catalog.<=) (
			SELECT pg_catalog.now() OPERATOR(pg_catalog.-)
				   pg_catalog.make_interval(secs => pg_catalog.min(s.secs))
			  FROM (SELECT pg_catalog.date_part('epoch',
							pg_catalog.current_setting('idem_gate.stuck_after')::pg_catalog.interval) AS secs
					UNION ALL
					SELECT pg_catalog.date_part('epoch', q.stuck_after)
					  FROM ONLY idem_gate.policies q
					 WHERE q.stuck_after IS NOT NULL) s)
	   AND c.updated_at OPERATOR(pg_catalog.<=) (pg_catalog.now() OPERATOR(pg_catalog.-)
			pg_catalog.make_interval(secs => pg_catalog.date_part('epoch',
				COALESCE(p.stuck_after,
						 pg_catalog.current_setting('idem_gate.stuck_after')::pg_catalog.interval))))
	UNION ALL
	SELECT c.workflow, c.key, 'failing', c.updated_at, c.state, c.attempt, c.execution_id,
		c.last_error, c.payload, c.payload_dropped_bytes, c.fingerprint, c.claimed_at,
		c.updated_at
	  FROM ONLY idem_gate.claims c
	 WHERE c.state OPERATOR(pg_catalog.=) 'failed_retryable'::idem_gate.state
	   AND c.attempt OPERATOR(pg_catalog.>=)
			pg_catalog.current_setting('idem_gate.max_attempts')::pg_catalog.int4
) i
WHERE idem_gate.workflow_visible(i.workflow)
ORDER BY i.since, i.workflow, i.key;
COMMENT ON VIEW idem_gate.inbox IS 'claims that need a person, oldest first: needs_review, stuck in processing, failing repeatedly; no tokens';
REVOKE ALL ON TABLE idem_gate.inbox FROM PUBLIC;

DO $$
DECLARE
	g pg_catalog.text[];
	theirs pg_catalog.text;
BEGIN
	SELECT pg_catalog.string_agg(DISTINCT pg_catalog.format('%s.%s',
				pg_catalog.quote_ident(n.nspname), pg_catalog.quote_ident(v.relname)), ', ')
	  INTO theirs
	  FROM pg_catalog.pg_depend d
	  JOIN pg_catalog.pg_rewrite r ON r.oid OPERATOR(pg_catalog.=) d.objid
	  JOIN pg_catalog.pg_class v ON v.oid OPERATOR(pg_catalog.=) r.ev_class
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) v.relnamespace
	 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
	   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
	   AND d.refobjid OPERATOR(pg_catalog.=) 'idem_gate.inbox_1_2'::pg_catalog.regclass
	   AND r.ev_class OPERATOR(pg_catalog.<>) 'idem_gate.inbox_1_2'::pg_catalog.regclass;
	IF theirs IS NOT NULL THEN
		RAISE EXCEPTION 'the update to 1.3 replaces the view idem_gate.inbox, and % depends on it', theirs
			USING ERRCODE = '2BP01',
				  DETAIL = 'The view idem_gate.inbox is dropped and created again with a faster way to find stuck claims; the views built on it would be dropped with it.',
				  HINT = 'Save their definitions, drop them, run the update, and create them again.';
	END IF;
	SELECT pg_catalog.array_agg(pg_catalog.format('GRANT %s%s ON TABLE idem_gate.inbox TO %s%s',
			a.privilege_type, COALESCE(' (' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(a.attname) OPERATOR(pg_catalog.||) ')', ''),
			CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
				 ELSE pg_catalog.quote_ident(r.rolname) END,
			CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END))
	  INTO g
	  FROM (SELECT NULL::pg_catalog.name AS attname, x.grantee, x.privilege_type, x.is_grantable
			  FROM pg_catalog.pg_class c
			 CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) x
			 WHERE c.oid OPERATOR(pg_catalog.=) 'idem_gate.inbox_1_2'::pg_catalog.regclass
			   AND x.grantee OPERATOR(pg_catalog.<>) c.relowner
			UNION ALL
			SELECT t.attname, x.grantee, x.privilege_type, x.is_grantable
			  FROM pg_catalog.pg_attribute t
			 CROSS JOIN LATERAL pg_catalog.aclexplode(t.attacl) x
			 WHERE t.attrelid OPERATOR(pg_catalog.=) 'idem_gate.inbox_1_2'::pg_catalog.regclass
			   AND NOT t.attisdropped) a
	  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee;
	IF g IS NOT NULL THEN
		PERFORM idem_gate.outside_extension(g);
	END IF;
END
$$;

DROP VIEW idem_gate.inbox_1_2;
