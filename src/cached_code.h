/*-------------------------------------------------------------------------
 *
 * cached_code.h
 *	  Code attached to an extension table that PostgreSQL keeps, parsed,
 *	  in a per-backend cache, and whose meaning there depends on the
 *	  search_path of whoever filled the cache (cached_code.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_CACHED_CODE_H
#define IDEM_GATE_CACHED_CODE_H

#include "utils/relcache.h"

extern char *ig_cached_code_find(Relation rel);

#endif							/* IDEM_GATE_CACHED_CODE_H */
