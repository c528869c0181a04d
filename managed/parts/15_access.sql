/*
 * idem_gate managed edition: per-workflow access (the C edition's
 * src/acl.c and src/acl_sql.c).
 *
 * Whether it applies to a role is decided from what a session cannot
 * change: idem_gate.workflow_acl as the session has it (a session can
 * only restrict itself further by setting it on: a placeholder it turns
 * off is not read as off where the catalog says on), or the same setting
 * attached with ALTER ROLE ... SET or ALTER DATABASE ... SET to the role,
 * to any role whose privileges it has, or to every role of the database.
 * On PostgreSQL 15 and later only a superuser may attach a setting that no
 * loaded library defines, as every idem_gate.* is here, to a role or a
 * database: the installing role of a managed service is none, so it turns
 * the setting on for a role with idem_gate.set_workflow_acl() instead,
 * kept in idem_gate_call.workflow_acl_roles and read as that setting is.
 * Superusers and the owner of idem_gate (who installed it) are never
 * restricted.  The C edition caches the decision per backend; here
 * nothing is cached, because anything a session could keep a cache in
 * (a setting, a temporary table) the session could also change.
 */

/* The role that installed the managed edition: the owner of its schema. */
CREATE FUNCTION idem_gate.m_owner()
	RETURNS pg_catalog.oid
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	RETURN (SELECT n.nspowner FROM pg_catalog.pg_namespace n
		 WHERE n.nspname OPERATOR(pg_catalog.=) 'idem_gate');
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_owner() FROM PUBLIC;

/*
 * The roles the owner restricted with idem_gate.set_workflow_acl(), for
 * services where it may not run ALTER ROLE ... SET idem_gate.workflow_acl.
 * In schema idem_gate_call, beside the bodies, because only the managed
 * edition has it; no role but the owner reads or writes it.  A role is
 * kept as a regrole, which pg_dump writes by name: a restore into another
 * cluster, where the role has another oid, restricts the same role (a
 * bare oid restricted whichever role had it there, and left the role
 * itself free).  A role dropped since is skipped, never an error.
 */
CREATE TABLE idem_gate_call.workflow_acl_roles (
	roleid pg_catalog.regrole PRIMARY KEY
);
REVOKE ALL ON idem_gate_call.workflow_acl_roles FROM PUBLIC;

/*
 * Turn per-workflow access on (or off again) for a role, as ALTER ROLE
 * ... SET idem_gate.workflow_acl = on does for the C edition; the roles
 * that have its privileges are restricted too.  Only the owner may call
 * it.  What ALTER ROLE or ALTER DATABASE turned on stays on.
 */
CREATE FUNCTION idem_gate.set_workflow_acl(role pg_catalog.name, enabled pg_catalog.bool)
	RETURNS void
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	r pg_catalog.oid;
BEGIN
	IF role IS NULL THEN
		RAISE EXCEPTION 'role must not be null'
			USING ERRCODE = '22004', HINT = 'Name the role whose sessions per-workflow access restricts.';
	END IF;
	IF enabled IS NULL THEN
		RAISE EXCEPTION 'enabled must not be null'
			USING ERRCODE = '22004', HINT = 'Pass true to restrict the role to its granted workflows, false to lift that.';
	END IF;
	SELECT g.oid INTO r FROM pg_catalog.pg_roles g WHERE g.rolname OPERATOR(pg_catalog.=) set_workflow_acl.role;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'role "%" does not exist', role
			USING ERRCODE = '42704', HINT = 'Check the spelling (role names are case sensitive), or create the role first.';
	END IF;
	IF enabled THEN
		INSERT INTO idem_gate_call.workflow_acl_roles AS w (roleid) VALUES (r)
			ON CONFLICT (roleid) DO NOTHING;
	ELSE
		DELETE FROM idem_gate_call.workflow_acl_roles w WHERE w.roleid OPERATOR(pg_catalog.=) r;
	END IF;
END
$$;
COMMENT ON FUNCTION idem_gate.set_workflow_acl(pg_catalog.name, pg_catalog.bool) IS 'managed edition: per-workflow access on or off for a role, where ALTER ROLE ... SET idem_gate.workflow_acl needs a superuser';
REVOKE ALL ON FUNCTION idem_gate.set_workflow_acl(pg_catalog.name, pg_catalog.bool) FROM PUBLIC;

/*
 * Does a setting of pg_db_role_setting, for every database or this one,
 * turn idem_gate.workflow_acl on for role or a role whose privileges it
 * has?  A setting for every role of a database counts too, and so does
 * idem_gate.set_workflow_acl().
 */
CREATE FUNCTION idem_gate.m_role_setting_on(role pg_catalog.oid)
	RETURNS pg_catalog.bool
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	RETURN (SELECT EXISTS (
			SELECT 1
			  FROM pg_catalog.pg_db_role_setting s
			 CROSS JOIN LATERAL pg_catalog.unnest(s.setconfig) AS item
			 WHERE (s.setdatabase OPERATOR(pg_catalog.=) 0
					OR s.setdatabase OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d
															  WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()))
			   AND (s.setrole OPERATOR(pg_catalog.=) 0
					OR pg_catalog.pg_has_role(role, s.setrole, 'USAGE'))
			   AND pg_catalog.lower(pg_catalog.split_part(item, '=', 1)) OPERATOR(pg_catalog.=) 'idem_gate.workflow_acl'
			   AND pg_catalog.lower(pg_catalog.substr(item, pg_catalog.strpos(item, '=') OPERATOR(pg_catalog.+) 1))
				   OPERATOR(pg_catalog.=) ANY (ARRAY['on', 'true', 'yes', '1', 't', 'y', 'tr', 'tru', 'ye']))
		OR EXISTS (
			SELECT 1 FROM idem_gate_call.workflow_acl_roles w
			 WHERE CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_roles g WHERE g.oid OPERATOR(pg_catalog.=) w.roleid)
						THEN pg_catalog.pg_has_role(m_role_setting_on.role, w.roleid, 'USAGE') ELSE false END));
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_role_setting_on(pg_catalog.oid) FROM PUBLIC;

/*
 * Does per-workflow access apply to role?  Never to a superuser or the
 * owner; otherwise when the session has the setting on, when the catalog
 * turns it on for the role, or when the session's login is restricted and
 * became another role (SET ROLE does not lift it).
 */
CREATE FUNCTION idem_gate.m_acl_applies(role pg_catalog.oid)
	RETURNS pg_catalog.bool
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	login pg_catalog.oid;
BEGIN
	/* one query for who is exempt: on every call's path */
	IF role OPERATOR(pg_catalog.=) (SELECT n.nspowner FROM pg_catalog.pg_namespace n
									WHERE n.nspname OPERATOR(pg_catalog.=) 'idem_gate')
	   OR (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role) THEN
		RETURN false;
	END IF;
	IF pg_catalog.lower(COALESCE(pg_catalog.current_setting('idem_gate.workflow_acl', true), 'off'))
		   OPERATOR(pg_catalog.=) ANY (ARRAY['on', 'true', 'yes', '1', 't', 'y', 'tr', 'tru', 'ye'])
	   OR idem_gate.m_role_setting_on(role) THEN
		RETURN true;
	END IF;
	login := SESSION_USER::pg_catalog.regrole::pg_catalog.oid;
	RETURN login OPERATOR(pg_catalog.<>) role
		AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) login)
		AND idem_gate.m_role_setting_on(login);
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_acl_applies(pg_catalog.oid) FROM PUBLIC;

/*
 * A pattern as a LIKE pattern: % is the one wildcard, \% and \\ are a
 * literal % and \, and _ stands for itself.
 */
CREATE FUNCTION idem_gate.m_like(pattern pg_catalog.text)
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	RETURN (SELECT pg_catalog.replace(pattern, '_', '\_'));
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_like(pg_catalog.text) FROM PUBLIC;

/*
 * May role use the workflow: a pattern granted to it, or to a role whose
 * privileges it has; where the session's restricted login became role,
 * one granted to the login's roles too.
 */
CREATE FUNCTION idem_gate.m_acl_allows(role pg_catalog.oid, workflow pg_catalog.text)
	RETURNS pg_catalog.bool
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	login pg_catalog.oid := SESSION_USER::pg_catalog.regrole::pg_catalog.oid;
	via_login pg_catalog.bool;
BEGIN
	/*
	 * a restricted login that became role (SET ROLE) keeps its team's
	 * workflows, as in C; a superuser's login is never restricted (it has
	 * the privileges of every role, so every role's setting would count)
	 */
	via_login := login OPERATOR(pg_catalog.<>) role
		AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) login)
		AND idem_gate.m_role_setting_on(login);
	RETURN (SELECT EXISTS (
			SELECT 1 FROM ONLY idem_gate.workflow_acl a
			 WHERE (pg_catalog.pg_has_role(m_acl_allows.role, a.role::pg_catalog.oid, 'USAGE')
					OR via_login AND pg_catalog.pg_has_role(login, a.role::pg_catalog.oid, 'USAGE'))
			   AND m_acl_allows.workflow COLLATE "C" OPERATOR(pg_catalog.~~) idem_gate.m_like(a.pattern)));
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_acl_allows(pg_catalog.oid, pg_catalog.text) FROM PUBLIC;

/*
 * May the calling role act on the workflow?  Raises 42501 naming both
 * when not, as the C edition's ig_acl_check().
 */
CREATE FUNCTION idem_gate.m_acl_check(role pg_catalog.oid, workflow pg_catalog.text)
	RETURNS void
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF idem_gate.m_acl_applies(role) AND NOT idem_gate.m_acl_allows(role, workflow) THEN
		RAISE EXCEPTION 'role "%" may not use workflow "%"',
			(SELECT u.rolname FROM pg_catalog.pg_roles u WHERE u.oid OPERATOR(pg_catalog.=) role),
			idem_gate.m_display(workflow)
			USING ERRCODE = '42501',
				  DETAIL = 'idem_gate.workflow_acl is on, and no pattern granted to this role or a role it belongs to matches the workflow.',
				  HINT = 'An administrator can grant it with idem_gate.grant_workflow(role, pattern).';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_acl_check(pg_catalog.oid, pg_catalog.text) FROM PUBLIC;

/*
 * The visibility the row security policies and the views ask of each
 * row, for the role reading (its body acts as the owner, which alone may
 * read the grants).
 */
CREATE FUNCTION idem_gate_call.workflow_visible(caller pg_catalog.regrole, workflow pg_catalog.text)
	RETURNS pg_catalog.bool
	LANGUAGE plpgsql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF caller IS NULL OR NOT pg_catalog.pg_has_role(SESSION_USER, caller::pg_catalog.oid, 'MEMBER') THEN
		RETURN false;
	END IF;
	RETURN NOT idem_gate.m_acl_applies(caller::pg_catalog.oid)
		OR idem_gate.m_acl_allows(caller::pg_catalog.oid, workflow);
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.workflow_visible(pg_catalog.regrole, pg_catalog.text) TO PUBLIC;

CREATE FUNCTION idem_gate.workflow_visible(workflow pg_catalog.text)
	RETURNS pg_catalog.bool
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT idem_gate_call.workflow_visible(CURRENT_USER::pg_catalog.regrole, workflow)
$$;
COMMENT ON FUNCTION idem_gate.workflow_visible(pg_catalog.text) IS 'may the current role see this workflow''s claims and audit rows (per-workflow access)';
GRANT EXECUTE ON FUNCTION idem_gate.workflow_visible(pg_catalog.text) TO PUBLIC;
