/*-------------------------------------------------------------------------
 *
 * upgrade.c
 *	  What the extension's update scripts need from C.
 *
 * An update that must replace an object (a view whose query changes, a
 * function whose language changes) carries the privileges DBAs granted on
 * the old one over to the new one.  Statements run inside an extension
 * script are recorded as the extension's own initial privileges
 * (pg_init_privs), which pg_dump leaves out: a DBA's grant carried over
 * that way would be lost at the next dump and restore.  The carried grants
 * therefore run here, outside that recording, so that they stay the DBA's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"


/*
 * idem_gate.outside_extension(statements text[]): run GRANT statements of
 * the update script as a DBA's, not as the extension's initial
 * privileges.  Only an extension script may call it, and it runs nothing
 * but GRANT and REVOKE.
 */
PG_FUNCTION_INFO_V1(idem_gate_outside_extension);

Datum
idem_gate_outside_extension(PG_FUNCTION_ARGS)
{
	Datum	   *stmts;
	bool	   *nulls;
	int			n;
	bool		was_creating = creating_extension;

	if (!creating_extension)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem_gate.outside_extension() is called only by the extension's update scripts")));
	if (PG_ARGISNULL(0))
		PG_RETURN_VOID();
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), TEXTOID, -1, false,
					  TYPALIGN_INT, &stmts, &nulls, &n);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PG_TRY();
	{
		creating_extension = false;
		for (int i = 0; i < n; i++)
		{
			char	   *sql;

			if (nulls[i])
				continue;
			sql = TextDatumGetCString(stmts[i]);
			if (pg_strncasecmp(sql, "GRANT ", 6) != 0 &&
				pg_strncasecmp(sql, "REVOKE ", 7) != 0)
				elog(ERROR, "idem_gate.outside_extension() runs GRANT and REVOKE only");
			if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
				elog(ERROR, "could not run \"%s\"", sql);
		}
	}
	PG_FINALLY();
	{
		creating_extension = was_creating;
	}
	PG_END_TRY();
	SPI_finish();
	PG_RETURN_VOID();
}
