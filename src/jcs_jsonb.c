/*-------------------------------------------------------------------------
 *
 * jcs_jsonb.c
 *	  Canonical JSON of jsonb documents.
 *
 * jsonb documents are walked directly in their binary container format: no
 * JsonbValue tree and no iterator allocations, only a member array per
 * object (kept on one reusable stack in the JcsState) to sort its members
 * by UTF-16 code units.  jsonb has already dropped duplicate member names
 * and refused lone surrogates, so nothing here needs to check them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "jcs.h"
#include "jcs_jsonb.h"
#include "jcs_number.h"

/*
 * Append a jsonb numeric.
 */
static void
emit_numeric(JcsState *st, Numeric num)
{
	char	   *s;

	if (numeric_is_nan(num) || numeric_is_inf(num))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("number %s is not allowed in canonical JSON",
						numeric_is_nan(num) ? "NaN" : "Infinity"),
				 errdetail("RFC 8785 refuses NaN and Infinity.")));
	s = DatumGetCString(DirectFunctionCall1(numeric_out,
											NumericGetDatum(num)));
	jcs_put_number(st, s, strlen(s));
	pfree(s);
}

/*
 * Append the jsonb value described by a JEntry, the data area it lives in
 * and its start and end offsets in that area.
 */
static inline void
emit_jentry(JcsState *st, JEntry je, const char *base,
			uint32 off, uint32 end)
{
	switch (je & JENTRY_TYPEMASK)
	{
		case JENTRY_ISSTRING:
			jcs_put_string(&st->sink, base + off, end - off);
			break;
		case JENTRY_ISNUMERIC:
			emit_numeric(st, (Numeric) (base + INTALIGN(off)));
			break;
		case JENTRY_ISBOOL_FALSE:
			jcs_putn(&st->sink, "false", 5);
			break;
		case JENTRY_ISBOOL_TRUE:
			jcs_putn(&st->sink, "true", 4);
			break;
		case JENTRY_ISNULL:
			jcs_putn(&st->sink, "null", 4);
			break;
		case JENTRY_ISCONTAINER:
			jcs_emit_jsonb(st, (const JsonbContainer *) (base + INTALIGN(off)));
			break;
		default:
			elog(ERROR, "unknown jsonb entry type 0x%08x", je);
	}
}

/*
 * Reserve n members on the state's member stack; returns the index of the
 * first.  The stack may move, so callers keep indexes, not pointers.
 */
static int
members_alloc(JcsState *st, int n)
{
	int			first = st->nmembers;

	if (st->nmembers + n > st->maxmembers)
	{
		int			newmax = Max(st->maxmembers * 2, st->nmembers + n);

		st->members = repalloc_huge(st->members, (Size) newmax * sizeof(JcsMember));
		st->maxmembers = newmax;
	}
	st->nmembers += n;
	return first;
}

/*
 * Append a jsonb object or array (or the single value of a scalar root).
 */
void
jcs_emit_jsonb(JcsState *st, const JsonbContainer *jc)
{
	uint32		n = JsonContainerSize(jc);
	uint32		off = 0;
	uint32		i;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();

	if (JsonContainerIsObject(jc))
	{
		const char *base = (const char *) &jc->children[n * 2];
		int			first = members_alloc(st, n);
		JcsMember  *m = st->members + first;

		for (i = 0; i < n; i++)
		{
			m[i].key = base + off;
			JBE_ADVANCE_OFFSET(off, jc->children[i]);
			m[i].keylen = (base + off) - m[i].key;
		}
		for (i = 0; i < n; i++)
		{
			m[i].ventry = jc->children[n + i];
			m[i].voff = off;
			JBE_ADVANCE_OFFSET(off, jc->children[n + i]);
			m[i].vend = off;
		}
		jcs_sort_members(m, n);

		jcs_putc(&st->sink, '{');
		for (i = 0; i < n; i++)
		{
			/* the stack may have moved while writing the previous value */
			m = st->members + first + i;
			if (i > 0)
				jcs_putc(&st->sink, ',');
			jcs_put_string(&st->sink, m->key, m->keylen);
			jcs_putc(&st->sink, ':');
			jcs_path_push(st, m->key, m->keylen, -1);
			emit_jentry(st, m->ventry, base, m->voff, m->vend);
			jcs_path_pop(st);
		}
		jcs_putc(&st->sink, '}');
		st->nmembers = first;
	}
	else
	{
		const char *base = (const char *) &jc->children[n];
		bool		scalar = JsonContainerIsScalar(jc);

		if (!scalar)
			jcs_putc(&st->sink, '[');
		for (i = 0; i < n; i++)
		{
			uint32		start = off;

			JBE_ADVANCE_OFFSET(off, jc->children[i]);
			if (i > 0)
				jcs_putc(&st->sink, ',');
			if (!scalar)
				jcs_path_push(st, NULL, 0, i);
			emit_jentry(st, jc->children[i], base, start, off);
			if (!scalar)
				jcs_path_pop(st);
		}
		if (!scalar)
			jcs_putc(&st->sink, ']');
	}
}

/*
 * Append a JsonbValue as returned by the jsonb lookup functions.
 */
void
jcs_emit_jsonbvalue(JcsState *st, const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			jcs_putn(&st->sink, "null", 4);
			break;
		case jbvBool:
			if (v->val.boolean)
				jcs_putn(&st->sink, "true", 4);
			else
				jcs_putn(&st->sink, "false", 5);
			break;
		case jbvString:
			jcs_put_string(&st->sink, v->val.string.val, v->val.string.len);
			break;
		case jbvNumeric:
			emit_numeric(st, v->val.numeric);
			break;
		case jbvBinary:
			jcs_emit_jsonb(st, v->val.binary.data);
			break;
		default:
			elog(ERROR, "unexpected jsonb value type %d", (int) v->type);
	}
}
