/*-------------------------------------------------------------------------
 *
 * base.c
 *	  What every layer shares: the labels of states and outcomes and their
 *	  enum caches, the checks of a key or workflow name with the setting
 *	  that bounds it, the display of a name in a message, and whether the
 *	  library was preloaded.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/syscache.h"

#include "base.h"

const char *const ig_state_names[IG_NUM_STATES] = {
	"processing", "completed", "failed_retryable", "needs_review"
};

static const char *const outcome_names[IG_NUM_OUTCOMES] = {
	"new", "in_flight", "completed", "stale_taken", "needs_review"
};

bool		ig_preloaded = false;

/* idem_gate.max_key_length */
static int	max_key_length = 255;

/*
 * Enum label OIDs, looked up once per backend and again only if the type's
 * OID changes (the extension was dropped and created again).
 */
typedef struct EnumCache
{
	Oid			typoid;
	Oid			labels[IG_NUM_OUTCOMES];
} EnumCache;

static EnumCache state_cache;
static EnumCache outcome_cache;

/*
 * Define idem_gate.max_key_length, which every key and workflow argument
 * is checked against, and remember whether we are being preloaded: a
 * backend forked from the postmaster inherits the flag.
 */
void
ig_base_init(void)
{
	ig_preloaded = process_shared_preload_libraries_in_progress;

	DefineCustomIntVariable("idem_gate.max_key_length",
							"Longest accepted key or workflow name, in characters.",
							"Longer values are refused with SQLSTATE 22023; derive a shorter key with idem_hash(). A key or workflow also takes at most 1300 bytes.",
							&max_key_length,
							255,
							1,
							1000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
}

/*
 * Make a value printable in a message: long keys are cut, so that an error
 * about a 255-character key stays readable.
 */
char *
ig_display(const char *s)
{
	int			len = strlen(s);
	int			clip;

	if (pg_mbstrlen_with_len(s, len) <= IG_DISPLAY_CHARS)
		return pstrdup(s);
	clip = pg_mbcharcliplen(s, len, IG_DISPLAY_CHARS - 3);
	return psprintf("%.*s...", clip, s);
}

/*
 * Check a key or workflow value: not empty, not longer than
 * idem_gate.max_key_length characters nor IG_MAX_NAME_BYTES bytes.  The
 * limit keeps index entries far below btree's size limit and makes a
 * payload-as-key mistake loud.  what names the argument in messages;
 * secret (a key of a keyed workflow) keeps the value out of them.
 * Returns the value as a C string.
 */
const char *
ig_check_name(text *t, const char *what, bool is_key, bool secret)
{
	int			bytes = VARSIZE_ANY_EXHDR(t);
	int			chars;
	char	   *str = text_to_cstring(t);

	if (bytes == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what),
				 errhint(is_key ?
						 "An empty key would make every delivery without an id one event; refuse such deliveries before claiming." :
						 "Pass the name of the side effect the key protects, such as 'stripe_charge'.")));

	if (bytes > max_key_length)
	{
		chars = pg_mbstrlen_with_len(VARDATA_ANY(t), bytes);
		if (chars > max_key_length)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 secret ? errmsg("%s is too long", what) :
					 errmsg("%s \"%s\" is too long", what, ig_display(str)),
					 errdetail("It has %d characters; idem_gate.max_key_length is %d.",
							   chars, max_key_length),
					 errhint("Derive a shorter key, for example with idem_hash(), or raise idem_gate.max_key_length.")));
		if (bytes > IG_MAX_NAME_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 secret ? errmsg("%s is too long", what) :
					 errmsg("%s \"%s\" is too long", what, ig_display(str)),
					 errdetail("It takes %d bytes; a key or workflow takes at most %d bytes, so that both fit in one index entry.",
							   bytes, IG_MAX_NAME_BYTES),
					 errhint("Derive a shorter key, for example with idem_hash().")));
	}
	return str;
}

/*
 * Load the label OIDs of one of our enum types, once per type OID.
 */
static void
enum_load(EnumCache *cache, Oid typoid, const char *const *names, int n)
{
	Oid			labels[IG_NUM_OUTCOMES];

	if (cache->typoid == typoid)
		return;

	for (int i = 0; i < n; i++)
	{
		labels[i] = GetSysCacheOid2(ENUMTYPOIDNAME, Anum_pg_enum_oid,
									ObjectIdGetDatum(typoid),
									CStringGetDatum(names[i]));
		if (!OidIsValid(labels[i]))
			elog(ERROR, "type %s has no label \"%s\"",
				 format_type_be(typoid), names[i]);
	}
	memcpy(cache->labels, labels, sizeof(Oid) * n);
	cache->typoid = typoid;
}

/* Enum datum of a state, for a result of type idem_gate.state. */
Datum
ig_state_datum(Oid typoid, IgState state)
{
	enum_load(&state_cache, typoid, ig_state_names, IG_NUM_STATES);
	return ObjectIdGetDatum(state_cache.labels[state]);
}

/* Enum datum of an outcome, for a result of type idem_gate.outcome. */
Datum
ig_outcome_datum(Oid typoid, IgOutcome outcome)
{
	enum_load(&outcome_cache, typoid, outcome_names, IG_NUM_OUTCOMES);
	return ObjectIdGetDatum(outcome_cache.labels[outcome]);
}

/* Decode a state read from the table. */
IgState
ig_state_from_datum(Oid typoid, Datum d)
{
	enum_load(&state_cache, typoid, ig_state_names, IG_NUM_STATES);
	for (int i = 0; i < IG_NUM_STATES; i++)
		if (state_cache.labels[i] == DatumGetObjectId(d))
			return (IgState) i;
	elog(ERROR, "unrecognized idem_gate.state value %u", DatumGetObjectId(d));
	return IG_PROCESSING;		/* keep compiler quiet */
}

/*
 * The return type of an enum-returning API function: from the call site,
 * or by name when called without an expression tree.
 */
Oid
ig_rettype(FunctionCallInfo fcinfo, const char *name)
{
	Oid			rettype = get_fn_expr_rettype(fcinfo->flinfo);

	if (OidIsValid(rettype))
		return rettype;
	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
						   CStringGetDatum(name),
						   ObjectIdGetDatum(get_namespace_oid("idem_gate", false)));
}

/*
 * idem_gate.preloaded(): lets the install script and administrators see
 * whether the worker and the counters are available.
 */
PG_FUNCTION_INFO_V1(idem_gate_preloaded);

Datum
idem_gate_preloaded(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(ig_preloaded);
}
