-- Development stand-in for idem_hash, used by e2e.sh only when asked
-- (IDEM_E2E_HASH_STANDIN=1) and only while canonical JSON is not installed.
-- It hashes jsonb's own text form, which is NOT RFC 8785 canonical.
CREATE FUNCTION public.idem_hash(doc jsonb, numbers text DEFAULT 'safe') RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT encode(sha256(convert_to(doc::text, 'UTF8')), 'hex') $$;
CREATE FUNCTION public.idem_hash(doc jsonb, fields text[], numbers text DEFAULT 'safe') RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT public.idem_hash(jsonb_object_agg(f, CASE WHEN left(f, 1) = '/'
      THEN doc #> string_to_array(substr(f, 2), '/') ELSE doc -> f END))
  FROM unnest(fields) AS f $$;
