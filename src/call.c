/*-------------------------------------------------------------------------
 *
 * call.c
 *	  The frame of one API call: argument checks, acting as the owner of
 *	  the function called, the guard for code attached to the extension's
 *	  tables, one SPI connection, and the errors the gate functions raise.
 *
 * The gate functions act as the owner of the function called (normally
 * the superuser who created the extension), the way referential-integrity
 * triggers act as the table owner: clients need EXECUTE on the API, not
 * privileges on the table, so no client can forge a completed row.  What
 * runs with the owner's rights must never resolve a name the caller
 * controls; ig_call_guard_user_code() is where that is enforced for code a
 * DBA attached to the table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "executor/spi.h"
#include "common/int.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "acl.h"
#include "call.h"
#include "keyed_workflows.h"

/*
 * A key or workflow argument: present, then as ig_check_name() says;
 * secret keeps a keyed workflow's key out of the messages.  Returns the
 * value as a C string, and the datum in *value.
 */
const char *
ig_call_text_arg(FunctionCallInfo fcinfo, int argno, const char *what,
				 Datum *value, bool secret)
{
	bool		is_key = (strcmp(what, "key") == 0);
	text	   *t;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what),
				 errhint(is_key ?
						 "Pass the event's identity, such as the provider's event id, or derive one with idem_hash()." :
						 "Pass the name of the side effect the key protects, such as 'stripe_charge'.")));
	t = PG_GETARG_TEXT_PP(argno);
	*value = PointerGetDatum(t);
	return ig_check_name(t, what, is_key, secret);
}

/*
 * Element ord (1-based) of a keys array, checked like a key argument and
 * named by its position in messages.  In a keyed workflow *value becomes
 * its current stored form and *forms all of them; the returned string,
 * for messages, is the stored form too.
 */
const char *
ig_call_key_element(IgCall *call, Datum d, int ord, Datum *value,
					IgKeyForms **forms)
{
	text	   *t = DatumGetTextPP(d);
	const char *str;

	*value = PointerGetDatum(t);
	str = ig_check_name(t, psprintf("keys[%d]", ord), true, call->workflow_keyed);
	*forms = NULL;
	if (!call->workflow_keyed)
		return str;
	*forms = ig_keyed_forms(call->workflow_str, t);
	*value = (*forms)->form[0];
	return (*forms)->form_str[0];
}

/*
 * A token argument that must be given.
 */
int64
ig_call_token_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("token must not be null"),
				 errhint("Pass the token returned by idem_claim_ex() for this claim.")));
	return PG_GETARG_INT64(argno);
}

/*
 * An interval argument as a duration of fixed length, in microseconds:
 * its EXTRACT(epoch) seconds (a year is 365.25 days, a month 30 days, a
 * day 24 hours), whatever the session's time zone or the calendar.  A
 * calendar interval such as '1 day -23:59:00' would otherwise mean a
 * different length on a day when daylight saving time begins.  It must be
 * positive, and subtracting it from now must stay a valid timestamp.
 */
int64
ig_call_duration_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	Interval   *iv = PG_GETARG_INTERVAL_P(argno);
	int64		years = iv->month / MONTHS_PER_YEAR;
	int64		months = iv->month % MONTHS_PER_YEAR;
	int64		usecs;
	int64		part;
	bool		overflow;

	overflow = pg_mul_s64_overflow(years, (int64) (DAYS_PER_YEAR * SECS_PER_DAY) * USECS_PER_SEC, &usecs) ||
		pg_mul_s64_overflow(months, (int64) DAYS_PER_MONTH * USECS_PER_DAY, &part) ||
		pg_add_s64_overflow(usecs, part, &usecs) ||
		pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, &part) ||
		pg_add_s64_overflow(usecs, part, &usecs) ||
		pg_add_s64_overflow(usecs, iv->time, &usecs);

	if (!overflow && usecs <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a positive duration, not \"%s\"", what,
						DatumGetCString(DirectFunctionCall1(interval_out,
															IntervalPGetDatum(iv)))),
				 errdetail("Intervals are measured as fixed durations: a day is 24 hours, a month 30 days."),
				 errhint("Pass NULL to never take over a claim, or a positive interval longer than the side effect can take, such as '15 minutes'.")));
	if (overflow ||
		GetCurrentTransactionStartTimestamp() - MIN_TIMESTAMP < usecs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s \"%s\" is too long", what,
						DatumGetCString(DirectFunctionCall1(interval_out,
															IntervalPGetDatum(iv)))),
				 errdetail("Subtracting it from the current time would leave the range of timestamps."),
				 errhint("Pass an interval of at most some thousand years, or NULL to never take over a claim.")));
	return usecs;
}

/*
 * Become the owner of the called function, in a security-restricted
 * operation (no SET ROLE, no temporary objects can be created), as
 * PostgreSQL does for maintenance commands.
 */
void
ig_call_act_as_owner(FunctionCallInfo fcinfo, Oid *save_userid,
					 int *save_sec_context)
{
	HeapTuple	proctup;
	Oid			owner;

	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (!HeapTupleIsValid(proctup))
		elog(ERROR, "cache lookup failed for function %u",
			 fcinfo->flinfo->fn_oid);
	owner = ((Form_pg_proc) GETSTRUCT(proctup))->proowner;
	ReleaseSysCache(proctup);

	GetUserIdAndSecContext(save_userid, save_sec_context);
	SetUserIdAndSecContext(owner,
						   *save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}

/*
 * Start an API call: check the key and workflow, refuse writes in a
 * read-only transaction (and so on a standby) with PostgreSQL's own error,
 * act as the function's owner.  In a keyed workflow the key becomes its
 * stored form under the current secret (call->keyed holds them all).
 */
void
ig_call_begin(FunctionCallInfo fcinfo, IgCall *call, const char *fname,
			  bool writes)
{
	/* a keyed workflow's key is kept out of every message, even this one's */
	bool		secret = !PG_ARGISNULL(1) &&
		ig_keyed_workflows_has(text_to_cstring(PG_GETARG_TEXT_PP(1)));

	call->key_str = ig_call_text_arg(fcinfo, 0, "key", &call->key, secret);
	ig_call_open(fcinfo, call, fname, writes);
	if (call->workflow_keyed)
	{
		call->keyed = ig_keyed_forms(call->workflow_str,
									 DatumGetTextPP(call->key));
		call->key = call->keyed->form[0];
		call->key_str = call->keyed->form_str[0];
	}
}

/*
 * Start a call whose keys come later (idem_claim_many): check the
 * workflow (argument 1), then as ig_call_begin().
 */
void
ig_call_open(FunctionCallInfo fcinfo, IgCall *call, const char *fname,
			 bool writes)
{
	call->workflow_str = ig_call_text_arg(fcinfo, 1, "workflow", &call->workflow,
										  false);
	call->workflow_keyed = ig_keyed_workflows_has(call->workflow_str);
	call->keyed = NULL;

	if (writes)
		PreventCommandIfReadOnly(fname);

	call->callcxt = CurrentMemoryContext;
	ig_call_act_as_owner(fcinfo, &call->save_userid, &call->save_sec_context);
	ig_acl_check(call->save_userid, GetUserId(), call->workflow_str);
	call->guc_level = 0;
	call->spi_connected = false;
	call->writes = writes;
}

/*
 * Connect to SPI, once per call: the SQL path of the store, the audit
 * trail and the history share the connection, which ig_call_end() closes.
 */
void
ig_call_spi(IgCall *call)
{
	if (call->spi_connected)
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	call->spi_connected = true;
}

/*
 * Pin search_path to pg_catalog, pg_temp until the matching
 * AtEOXact_GUC(true, level); an error unwinds it with the transaction.
 * Domain CHECKs the session planned before (the type cache keeps them) are
 * planned again, under the pinned path, at their next use.
 */
int
ig_call_pin_search_path(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	ig_shape_refresh_domains();
	return level;
}

/*
 * Code somebody attached to one of the extension's tables (a trigger, a
 * rule, a CHECK or default calling a function, a domain, an index
 * expression, a row security policy) is about to run with the owner's
 * rights.  Whatever it resolves by name must not be something the caller
 * made: search_path is pinned to pg_catalog, pg_temp for the rest of the
 * call, and a caller whose session has a temporary schema is refused,
 * because PostgreSQL searches that schema for relations and types whatever
 * the path says (a temporary view named like the DBA's audit table, with
 * an INSTEAD OF trigger, would otherwise run the caller's code as the
 * owner).  what describes the code, table names the table.  call is NULL
 * for a caller that pins the path itself (idem_gate.janitor_run()).
 */
void
ig_call_guard_user_code(IgCall *call, IgTable table, const char *what)
{
	Oid			temp_nsp;
	Oid			temp_toast_nsp;

	GetTempNamespaceState(&temp_nsp, &temp_toast_nsp);
	if (OidIsValid(temp_nsp))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("idem_gate cannot run %s of %s for a session that has temporary objects",
						what, ig_shape_table_name(table)),
				 errdetail("Code attached to the extension's tables runs with the rights of the extension's owner, and PostgreSQL resolves table and type names in the calling session's temporary schema first."),
				 errhint("Call idem_gate's functions from a session that has created no temporary objects, or remove %s from %s.",
						 what, ig_shape_table_name(table))));
	if (call != NULL && call->guc_level == 0)
		call->guc_level = ig_call_pin_search_path();
}

/*
 * Refuse to write one of the extension's tables that has a rule: a rule
 * rewrites the gate's statements (INSERT ... ON CONFLICT, UPDATE ...
 * RETURNING, data-modifying WITH), so the gate can neither honour it nor
 * write around it.  Refuse too where a write would run code that this
 * backend may hold parsed under the caller's search_path (cached_code.c):
 * pinning the path during the call cannot reach it.  Nothing is changed.
 */
void
ig_call_refuse_rules(IgTable table)
{
	const IgTableShape *s = ig_shape_table(table);

	if (s->rule != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem_gate cannot write %s: rule \"%s\" is attached to it",
						ig_shape_table_name(table), s->rule),
				 errdetail("A rule rewrites the gate's INSERT ... ON CONFLICT, UPDATE ... RETURNING and data-modifying WITH statements, so the gate could neither honour it nor write around it."),
				 errhint("Drop the rule; a trigger can do what it did, and the gate honours triggers.")));
	if (s->cached_code != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem_gate cannot write %s: %s, a LANGUAGE sql function parsed under the caller's search_path",
						ig_shape_table_name(table), s->cached_code),
				 errdetail("PostgreSQL inlines such a function into a cache that lives as long as the session, under the search_path of whoever first used it, and the gate writes with its owner's rights."),
				 errhint("Give the function its own path (ALTER FUNCTION ... SET search_path = pg_catalog, public) or write its body as BEGIN ATOMIC ... END.")));
}

/*
 * The call is about to read (write = false) or write one of the
 * extension's tables through SQL: guard it if that runs code somebody
 * attached (ig_call_guard_user_code()).  A write runs the table's
 * triggers, rules, CHECKs, defaults, domains and index expressions; a
 * read or write where row security applies to the acting role runs its
 * policies.
 */
void
ig_call_guard_table(IgCall *call, IgTable table, bool write)
{
	const char *what;

	if (write)
		ig_call_refuse_rules(table);
	what = ig_call_attached_code(table, write);
	if (what != NULL)
		ig_call_guard_user_code(call, table, what);
}

/*
 * The code somebody attached that a read (write = false) or write of a
 * table runs, as a description, or NULL: what a write runs, else the
 * policies where row security applies to the acting role.  A copy: the
 * table's shape is decided again, its strings freed, after any catalog
 * access that saw it change (under debug_discard_caches, after every
 * one), and asking whether row security applies is one.  A pointer into
 * the shape read before that question would point into freed memory.
 */
char *
ig_call_attached_code(IgTable table, bool write)
{
	const char *what = write ? ig_shape_table(table)->write_code : NULL;

	if (what == NULL && ig_shape_table(table)->policy_code != NULL &&
		ig_shape_rls_applies(table))
		what = ig_shape_table(table)->policy_code;
	return what != NULL ? pstrdup(what) : NULL;
}

/*
 * Finish an API call: disconnect from SPI, restore search_path and become
 * the caller again.  What the store opened is closed before
 * (ig_store_close()).
 */
void
ig_call_end(IgCall *call)
{
	if (call->spi_connected && SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
	call->spi_connected = false;
	if (call->guc_level != 0)
		AtEOXact_GUC(true, call->guc_level);
	call->guc_level = 0;
	SetUserIdAndSecContext(call->save_userid, call->save_sec_context);
}

/* Raise the "no claim exists" error; detail (or NULL) says what became of it. */
void
ig_call_error_no_claim(IgCall *call, const char *verb, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_NO_DATA_FOUND),
			 errmsg("cannot %s key \"%s\" in workflow \"%s\": no claim exists",
					verb, ig_display(call->key_str),
					ig_display(call->workflow_str)),
			 detail ? errdetail("%s", detail) : 0,
			 errhint("Claim the key with idem_claim() or idem_claim_ex() first; completed and failed claims are deleted once their retention has passed.")));
}

/*
 * Raise the "stale token" error: the caller's run lost its claim to a
 * takeover, so it must not record an outcome.  It never shows the token
 * that owns the claim now: only its owner may know it.
 */
void
ig_call_error_stale_token(IgCall *call, int64 token, IgState state, int attempt)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("token " INT64_FORMAT " no longer owns key \"%s\" in workflow \"%s\"",
					token, ig_display(call->key_str),
					ig_display(call->workflow_str)),
			 errdetail("The claim was granted to another run: it is now %s, attempt %d.",
					   ig_state_names[state], attempt),
			 errhint("Another run owns this event now; this run must not record an outcome for it.")));
}

/*
 * Raise the error for a NULL token on a claim whose token was handed out:
 * only its owner knows the token, so a call without it may be a duplicate
 * delivery trying to record somebody else's outcome.
 */
void
ig_call_error_token_required(IgCall *call, const char *fname)
{
	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("token must not be null for key \"%s\" in workflow \"%s\"",
					ig_display(call->key_str),
					ig_display(call->workflow_str)),
			 errdetail("The claim was granted by idem_claim_ex() or idem_claim_many(), which handed its token to the run that owns it."),
			 errhint("Pass the token returned with the claim to %s; an operator acts on any claim with idem_resolve() or idem_release().",
					 fname)));
}

/*
 * Raise the "transition not allowed" error, with a hint that fits the
 * state the claim is in; detail (or NULL) names who decided it and when.
 */
void
ig_call_error_state(IgCall *call, const char *verb, IgState state,
					const char *detail)
{
	const char *hint;

	switch (state)
	{
		case IG_COMPLETED:
			hint = "A completed claim is final; idem_status() shows its receipt.";
			break;
		case IG_NEEDS_REVIEW:
			hint = "Decide the outcome with idem_resolve(key, workflow, 'completed') or idem_resolve(key, workflow, 'retry').";
			break;
		case IG_FAILED_RETRYABLE:
			if (strcmp(verb, "resolve") == 0)
				hint = "Only needs_review and processing claims can be resolved; a failed_retryable claim runs again at its next claim.";
			else
				hint = "Claim the key again with idem_claim() or idem_claim_ex() before recording an outcome.";
			break;
		default:
			if (strcmp(verb, "replay") == 0)
				hint = "Only a failed_retryable claim is replayed: a processing claim's run may still finish it.";
			else
				hint = "Only needs_review and processing claims can be resolved.";
			break;
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot %s key \"%s\" in workflow \"%s\": the claim is %s",
					verb, ig_display(call->key_str),
					ig_display(call->workflow_str),
					ig_state_names[state]),
			 detail ? errdetail("%s", detail) : 0,
			 errhint("%s", hint)));
}

/*
 * The error REPEATABLE READ and SERIALIZABLE raise when the row of the key
 * was written by a transaction the caller's snapshot does not see: the
 * claim can neither wait and read that row (as under READ COMMITTED) nor
 * ignore it.
 */
void
ig_call_error_serialization(IgCall *call, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access to key \"%s\" in workflow \"%s\" due to concurrent %s",
					ig_display(call->key_str),
					ig_display(call->workflow_str), what),
			 errdetail("The claim was written by a transaction that this transaction's snapshot does not see."),
			 errhint("Retry the transaction, or call idem_gate's functions under READ COMMITTED, where they wait for a concurrent claim and answer from its row.")));
}
