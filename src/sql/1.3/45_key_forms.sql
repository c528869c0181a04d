/*
 * A key's stored forms for a search over every workflow: idem_key_forms()
 * answers the key's form in each keyed workflow the caller may see, from
 * the policies, so that the inbox page finds a keyed claim from the
 * personal value without reading the inbox for the workflows in it. Like
 * idem_key() it is a dictionary for whoever may call it: not public, and
 * granted by the DBA on request.
 */
CREATE FUNCTION @extschema@.idem_key_forms(key pg_catalog.text,
	OUT workflow pg_catalog.text, OUT stored_key pg_catalog.text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_key_forms'
LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.idem_key_forms(text) IS 'the form the gate stores a key in, in each keyed workflow the caller may see: for a search over every workflow';
REVOKE ALL ON FUNCTION @extschema@.idem_key_forms(text) FROM PUBLIC;
