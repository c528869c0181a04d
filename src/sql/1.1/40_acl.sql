
/*
 * Per-workflow access.  With idem_gate.workflow_acl on, a role may call the
 * gate's functions only for workflows matching a LIKE pattern granted to it
 * or to a role it is a member of.  pg_dump keeps the grants (roles by name).
 */
CREATE TABLE idem_gate.workflow_acl (
	role		regrole NOT NULL,
	pattern		text NOT NULL,
	CONSTRAINT workflow_acl_pkey PRIMARY KEY (role, pattern),
	CONSTRAINT workflow_acl_pattern_not_empty CHECK (pattern OPERATOR(pg_catalog.<>) '')
);
COMMENT ON TABLE idem_gate.workflow_acl IS 'which roles may use which workflows (LIKE patterns) when idem_gate.workflow_acl is on; change it with grant_workflow() and revoke_workflow()';
REVOKE ALL ON TABLE idem_gate.workflow_acl FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('idem_gate.workflow_acl', '');

CREATE FUNCTION idem_gate.workflow_acl_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_gate_workflow_acl_changed'
LANGUAGE C;
COMMENT ON FUNCTION idem_gate.workflow_acl_changed() IS 'makes every session see changed workflow grants at its next call';
REVOKE ALL ON FUNCTION idem_gate.workflow_acl_changed() FROM PUBLIC;
CREATE TRIGGER workflow_acl_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON idem_gate.workflow_acl
	FOR EACH STATEMENT EXECUTE FUNCTION idem_gate.workflow_acl_changed();

/*
 * The role a grant or revoke names, checked: both arguments given, the
 * pattern not empty, the role existing.
 */
CREATE FUNCTION idem_gate.workflow_role(role name, pattern text)
RETURNS pg_catalog.regrole
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r oid;
BEGIN
	IF role IS NULL OR pattern IS NULL THEN
		RAISE EXCEPTION '% must not be null', CASE WHEN role IS NULL THEN 'role' ELSE 'pattern' END
			USING ERRCODE = '22004',
				  HINT = 'Name a role and a LIKE pattern of workflows, such as ''orders_%''.';
	END IF;
	IF pattern OPERATOR(pg_catalog.=) '' THEN
		RAISE EXCEPTION 'pattern must not be empty'
			USING ERRCODE = '22023',
				  HINT = 'Use ''%'' for every workflow.';
	END IF;
	SELECT a.oid INTO r FROM pg_catalog.pg_roles a WHERE a.rolname OPERATOR(pg_catalog.=) role;
	IF r IS NULL THEN
		RAISE EXCEPTION 'role "%" does not exist', role
			USING ERRCODE = '42704',
				  HINT = 'Check the spelling (role names are case sensitive), or create the role first.';
	END IF;
	RETURN r::pg_catalog.regrole;
END
$$;
COMMENT ON FUNCTION idem_gate.workflow_role(name, text) IS 'the checked role of grant_workflow() and revoke_workflow(); it reads only what pg_roles shows everyone';

CREATE FUNCTION idem_gate.grant_workflow(role name, pattern text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	INSERT INTO idem_gate.workflow_acl (role, pattern)
		VALUES (idem_gate.workflow_role(role, pattern), pattern)
		ON CONFLICT DO NOTHING;
	RETURN FOUND;
END
$$;
COMMENT ON FUNCTION idem_gate.grant_workflow(name, text) IS 'let a role (and its members) use the workflows matching a LIKE pattern; false if already granted';
REVOKE ALL ON FUNCTION idem_gate.grant_workflow(name, text) FROM PUBLIC;

CREATE FUNCTION idem_gate.revoke_workflow(role name, pattern text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r pg_catalog.regrole := idem_gate.workflow_role(role, pattern);
BEGIN
	DELETE FROM idem_gate.workflow_acl a
	 WHERE a.role OPERATOR(pg_catalog.=) r
	   AND a.pattern OPERATOR(pg_catalog.=) revoke_workflow.pattern;
	RETURN FOUND;
END
$$;
COMMENT ON FUNCTION idem_gate.revoke_workflow(name, text) IS 'take back a grant_workflow(); false if there was no such grant';
REVOKE ALL ON FUNCTION idem_gate.revoke_workflow(name, text) FROM PUBLIC;
