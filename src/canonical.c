/*-------------------------------------------------------------------------
 *
 * canonical.c
 *	  RFC 8785 (JCS) canonical JSON: the SQL functions idem_canonical and
 *	  idem_hash.
 *
 * Workflows derive idempotency keys and payload fingerprints from JSON
 * documents.  Hashing jsonb::text or a body in arrival order misses
 * duplicates (key order, whitespace and number spelling vary between
 * retries), so idem_gate hashes the RFC 8785 canonical form instead, which
 * any JCS implementation reproduces byte for byte.
 *
 * This file holds the SQL entry points: argument checks, the memory
 * context of a call, and the identity fields of idem_hash(doc, fields).
 * The serializer is below it and never calls back: jcs.c (sink, strings,
 * member order, paths), jcs_jsonb.c (jsonb walker), jcs_json.c (json text
 * parser) and jcs_number.c (numbers).
 *
 * Each call works in a child memory context that is deleted at the end.
 * idem_hash streams the canonical bytes into SHA-256 through a small
 * buffer, so its memory use does not grow with the canonical form.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/sha2.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "jcs.h"
#include "jcs_json.h"
#include "jcs_jsonb.h"

PG_FUNCTION_INFO_V1(idem_canonical_jsonb);
PG_FUNCTION_INFO_V1(idem_canonical_json);
PG_FUNCTION_INFO_V1(idem_hash_jsonb);
PG_FUNCTION_INFO_V1(idem_hash_json);
PG_FUNCTION_INFO_V1(idem_hash_fields);

/*
 * The canonical form is defined over Unicode text and is hashed as UTF-8,
 * so the database must store UTF-8: other encodings cannot hold every
 * string (SQL_ASCII does not even say what its bytes mean).
 */
static void
check_encoding(void)
{
	if (GetDatabaseEncoding() != PG_UTF8)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("canonical JSON needs a UTF8 database"),
				 errdetail("The database encoding is %s; RFC 8785 canonical JSON is UTF-8 text.",
						   GetDatabaseEncodingName()),
				 errhint("Create the database with ENCODING 'UTF8'.")));
}

/*
 * Read the numbers => argument.
 */
static JcsNumbers
parse_numbers(text *t)
{
	char	   *s = text_to_cstring(t);

	if (strcmp(s, "safe") == 0)
		return JCS_NUMBERS_SAFE;
	if (strcmp(s, "rfc") == 0)
		return JCS_NUMBERS_RFC;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown numbers policy \"%s\"", jcs_display(s, strlen(s))),
			 errhint("Use numbers => 'safe' (the default: refuse a number that a double would change at or beyond 2^53 or below 2^-1022) or numbers => 'rfc' (round every number to the nearest double).")));
	return JCS_NUMBERS_SAFE;	/* keep the compiler quiet */
}

/*
 * Set up a call: the state lives in a fresh child memory context, made the
 * current one.  In text mode the output buffer is allocated in the
 * caller's context, sized for the input, and becomes the result as is.
 */
static MemoryContext
call_begin(JcsState *st, JcsNumbers numbers, bool hash, size_t size_hint)
{
	MemoryContext callcxt = CurrentMemoryContext;

	MemoryContextSwitchTo(AllocSetContextCreate(callcxt,
												"idem_gate canonical JSON",
												ALLOCSET_DEFAULT_SIZES));
	jcs_init(st, numbers, hash, size_hint, callcxt);
	return callcxt;
}

/*
 * Finish a text mode call: the buffer becomes a text datum.
 */
static text *
call_finish_text(JcsState *st, MemoryContext callcxt)
{
	MemoryContext cxt = CurrentMemoryContext;
	text	   *result = (text *) st->sink.data;

	SET_VARSIZE(result, st->sink.len);
	MemoryContextSwitchTo(callcxt);
	MemoryContextDelete(cxt);
	return result;
}

/*
 * Finish a hash mode call: 64 lowercase hex digits of the SHA-256 digest.
 */
static text *
call_finish_hash(JcsState *st, MemoryContext callcxt)
{
	MemoryContext cxt = CurrentMemoryContext;
	char		hex[PG_SHA256_DIGEST_LENGTH * 2];

	jcs_hash_hex(st, hex);
	MemoryContextSwitchTo(callcxt);
	MemoryContextDelete(cxt);
	return cstring_to_text_with_len(hex, sizeof(hex));
}

/*
 * The numbers => argument (argno): NULL is an error, not a NULL result, so
 * that a hash used as a fingerprint is never silently missing.
 */
static JcsNumbers
numbers_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("numbers must not be null"),
				 errhint("Use numbers => 'safe' (the default) or numbers => 'rfc'.")));
	return parse_numbers(PG_GETARG_TEXT_PP(argno));
}

/*
 * The four whole-document functions: idem_canonical and idem_hash of a
 * jsonb or a json document.  A NULL document gives NULL, like any SQL
 * function of a missing value.
 */
static Datum
whole_document(FunctionCallInfo fcinfo, bool is_json, bool hash)
{
	JcsNumbers	numbers;
	JcsState	st;
	MemoryContext callcxt;

	check_encoding();
	numbers = numbers_arg(fcinfo, 1);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (is_json)
	{
		text	   *json = PG_GETARG_TEXT_PP(0);

		callcxt = call_begin(&st, numbers, hash, VARSIZE_ANY_EXHDR(json));
		jcs_emit_json_text(&st, VARDATA_ANY(json), VARSIZE_ANY_EXHDR(json));
	}
	else
	{
		Jsonb	   *jb = PG_GETARG_JSONB_P(0);

		callcxt = call_begin(&st, numbers, hash, VARSIZE(jb));
		jcs_emit_jsonb(&st, &jb->root);
	}
	if (hash)
		PG_RETURN_TEXT_P(call_finish_hash(&st, callcxt));
	PG_RETURN_TEXT_P(call_finish_text(&st, callcxt));
}

/* idem_canonical(doc jsonb, numbers text) returns text */
Datum
idem_canonical_jsonb(PG_FUNCTION_ARGS)
{
	return whole_document(fcinfo, false, false);
}

/* idem_canonical(doc json, numbers text) returns text */
Datum
idem_canonical_json(PG_FUNCTION_ARGS)
{
	return whole_document(fcinfo, true, false);
}

/* idem_hash(doc jsonb, numbers text) returns text */
Datum
idem_hash_jsonb(PG_FUNCTION_ARGS)
{
	return whole_document(fcinfo, false, true);
}

/* idem_hash(doc json, numbers text) returns text */
Datum
idem_hash_json(PG_FUNCTION_ARGS)
{
	return whole_document(fcinfo, true, true);
}

/*
 * Name a jsonb value's type for messages.
 */
static const char *
jsonb_type_name(Jsonb *jb)
{
	JsonbValue	v;

	if (JB_ROOT_IS_SCALAR(jb))
	{
		JsonbExtractScalar(&jb->root, &v);
		switch (v.type)
		{
			case jbvString:
				return "a string";
			case jbvNumeric:
				return "a number";
			case jbvBool:
				return "a boolean";
			default:
				return "null";
		}
	}
	if (JB_ROOT_IS_ARRAY(jb))
		return "an array";
	return "an object";
}

/*
 * Raise the error for an identity field absent from the document.
 */
static void
field_missing(const char *spec, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("identity field \"%s\" is missing from the document",
					jcs_display(spec, strlen(spec))),
			 detail ? errdetail_internal("%s", detail) : 0,
			 errhint("Every identity field must be present: idem_gate never hashes a partial identity.")));
}

/*
 * Find the value of one identity field: a top-level member name, or an
 * RFC 6901 JSON Pointer when it starts with '/'.  Errors if it is absent.
 */
static JsonbValue *
resolve_field(Jsonb *jb, const char *spec)
{
	JsonbValue	key;
	JsonbValue *cur;
	JsonbValue	rootv;
	const char *p;

	if (spec[0] != '/')
	{
		key.type = jbvString;
		key.val.string.val = (char *) spec;
		key.val.string.len = strlen(spec);
		cur = findJsonbValueFromContainer(&jb->root, JB_FOBJECT, &key);
		if (cur == NULL)
			field_missing(spec, NULL);
		return cur;
	}

	rootv.type = jbvBinary;
	rootv.val.binary.data = &jb->root;
	rootv.val.binary.len = VARSIZE(jb) - VARHDRSZ;
	cur = &rootv;
	p = spec;
	while (*p == '/')
	{
		StringInfoData tok;
		const JsonbContainer *jc;

		/* unescape one reference token */
		initStringInfo(&tok);
		for (p++; *p && *p != '/'; p++)
		{
			if (*p == '~')
			{
				if (p[1] == '0')
					appendStringInfoChar(&tok, '~');
				else if (p[1] == '1')
					appendStringInfoChar(&tok, '/');
				else
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid JSON pointer \"%s\" in identity fields",
									jcs_display(spec, strlen(spec))),
							 errdetail("In a JSON pointer \"~\" must be followed by \"0\" or \"1\" (RFC 6901)."),
							 errhint("Write \"~0\" for \"~\" and \"~1\" for \"/\" in a member name.")));
				p++;
			}
			else
				appendStringInfoChar(&tok, *p);
		}

		if (cur->type != jbvBinary)
			field_missing(spec, psprintf("The pointer goes through a scalar before \"%s\".",
										 jcs_display(tok.data, tok.len)));
		jc = cur->val.binary.data;
		if (JsonContainerIsObject(jc))
		{
			key.type = jbvString;
			key.val.string.val = tok.data;
			key.val.string.len = tok.len;
			cur = findJsonbValueFromContainer(unconstify(JsonbContainer *, jc), JB_FOBJECT, &key);
			if (cur == NULL)
				field_missing(spec, psprintf("There is no member \"%s\".",
											 jcs_display(tok.data, tok.len)));
		}
		else
		{
			uint32		idx = 0;
			int			i;
			bool		valid = tok.len > 0 && tok.len <= 9 &&
				!(tok.len > 1 && tok.data[0] == '0');

			for (i = 0; valid && i < tok.len; i++)
			{
				if (tok.data[i] < '0' || tok.data[i] > '9')
					valid = false;
				else
					idx = idx * 10 + (tok.data[i] - '0');
			}
			if (!valid || idx >= JsonContainerSize(jc))
				field_missing(spec, psprintf("The array has no element \"%s\".",
											 jcs_display(tok.data, tok.len)));
			cur = getIthJsonbValueFromContainer((JsonbContainer *) jc, idx);
		}
	}
	return cur;
}

/*
 * idem_hash(doc jsonb, fields text[], numbers text) returns text
 *
 * The hash of the object that maps each field spec to its value, so that
 * any JCS implementation can reproduce it from the same projection.
 */
Datum
idem_hash_fields(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb;
	ArrayType  *arr;
	JcsNumbers	numbers;
	JcsState	st;
	MemoryContext callcxt;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;
	JcsMember  *m;
	JsonbValue **values;

	check_encoding();
	numbers = numbers_arg(fcinfo, 2);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("identity fields must not be null"),
				 errhint("Name the members that identify the event, for example ARRAY['id'].")));
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	jb = PG_GETARG_JSONB_P(0);
	arr = PG_GETARG_ARRAYTYPE_P(1);

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("identity fields must be a one-dimensional array")));
	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot take identity fields from %s", jsonb_type_name(jb)),
				 errdetail("idem_hash(doc, fields) needs a JSON object.")));

	callcxt = call_begin(&st, numbers, true, 0);

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("identity fields must not be empty"),
				 errdetail("A hash of no fields would be the same for every document."),
				 errhint("Name the members that identify the event, for example ARRAY['id'].")));

	m = palloc(n * sizeof(JcsMember));
	values = palloc(n * sizeof(JsonbValue *));
	for (i = 0; i < n; i++)
	{
		char	   *spec;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("identity field %d is null", i + 1),
					 errhint("Remove the null or replace it with a member name or JSON pointer.")));
		spec = TextDatumGetCString(elems[i]);
		m[i].key = spec;
		m[i].keylen = strlen(spec);
		m[i].voff = i;
		values[i] = resolve_field(jb, spec);
	}

	jcs_sort_members(m, n);
	jcs_putc(&st.sink, '{');
	for (i = 0; i < n; i++)
	{
		if (i > 0)
		{
			if (jcs_key_cmp(m[i - 1].key, m[i - 1].keylen,
							m[i].key, m[i].keylen) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("identity field \"%s\" is listed twice",
								jcs_display(m[i].key, m[i].keylen))));
			jcs_putc(&st.sink, ',');
		}
		jcs_put_string(&st.sink, m[i].key, m[i].keylen);
		jcs_putc(&st.sink, ':');
		jcs_path_push(&st, m[i].key, m[i].keylen,
					  m[i].key[0] == '/' ? JCS_PATH_POINTER : -1);
		jcs_emit_jsonbvalue(&st, values[m[i].voff]);
		jcs_path_pop(&st);
	}
	jcs_putc(&st.sink, '}');

	PG_RETURN_TEXT_P(call_finish_hash(&st, callcxt));
}
