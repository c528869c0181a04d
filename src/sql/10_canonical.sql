
/*
 * Canonical JSON (RFC 8785, JCS): canonical.c, jcs_number.c, jcs_json.c.
 * Pure functions of their arguments, executable by everyone.  See
 * docs/canonical.md.
 */
CREATE FUNCTION @extschema@.idem_canonical(doc pg_catalog.jsonb,
										   numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'idem_canonical_jsonb'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idem_canonical(pg_catalog.jsonb, pg_catalog.text) IS
	'RFC 8785 canonical form of a jsonb document; numbers => ''safe'' (default) or ''rfc''';

CREATE FUNCTION @extschema@.idem_canonical(doc pg_catalog.json,
										   numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'idem_canonical_json'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idem_canonical(pg_catalog.json, pg_catalog.text) IS
	'RFC 8785 canonical form of a json document (duplicate member names are refused); numbers => ''safe'' (default) or ''rfc''';

CREATE FUNCTION @extschema@.idem_hash(doc pg_catalog.jsonb,
									  numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'idem_hash_jsonb'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.jsonb, pg_catalog.text) IS
	'SHA-256 (64 lowercase hex digits) of the RFC 8785 canonical form of a jsonb document';

CREATE FUNCTION @extschema@.idem_hash(doc pg_catalog.json,
									  numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'idem_hash_json'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.json, pg_catalog.text) IS
	'SHA-256 (64 lowercase hex digits) of the RFC 8785 canonical form of a json document (duplicate member names are refused)';

CREATE FUNCTION @extschema@.idem_hash(doc pg_catalog.jsonb,
									  fields pg_catalog.text[],
									  numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'idem_hash_fields'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.jsonb, pg_catalog.text[], pg_catalog.text) IS
	'SHA-256 of the canonical object that maps each identity field (member name, or JSON pointer starting with /) to its value; a missing field is an error';
