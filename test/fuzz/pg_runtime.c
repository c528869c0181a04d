/*-------------------------------------------------------------------------
 *
 * pg_runtime.c
 *	  The few parts of a PostgreSQL backend that idem_gate's canonical-JSON
 *	  toolkit (src/jcs.c, jcs_json.c, jcs_json_lex.c, jcs_number.c) calls,
 *	  so that the fuzzers can run it in-process, millions of times a
 *	  minute, under AddressSanitizer.
 *
 * The toolkit is linked unchanged.  What it needs of the backend is small:
 * memory allocation, ereport()/elog(), check_stack_depth(),
 * CHECK_FOR_INTERRUPTS() and two multibyte helpers.  StringInfo, SHA-256,
 * the shortest float8 digits and the UTF-8 tables come from PostgreSQL's
 * own libpgcommon.
 *
 * Memory: every chunk is a malloc() of exactly the size asked for, behind
 * a header that links it into one list, so AddressSanitizer sees a write
 * one byte past any chunk, and rt_reset() frees everything an input
 * allocated, as the end of a query frees its memory context (an error
 * leaves its chunks behind, as in the server).  The limits are the
 * server's: a request over MaxAllocSize (MaxAllocHugeSize for the _huge
 * calls) is an error, not a crash.
 *
 * Errors: ereport(ERROR) records the SQLSTATE and the message and jumps to
 * the rt_try() of the harness, as PG_TRY would catch it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "pg_runtime.h"

/* a chunk's header: the list of live chunks, and its size */
typedef struct Chunk
{
	struct Chunk *prev;
	struct Chunk *next;
	size_t		size;
	size_t		pad;			/* keeps the data MAXALIGNed */
} Chunk;

static Chunk chunks = {&chunks, &chunks, 0, 0};

/* the error being reported, and where ERROR goes */
static int	cur_elevel;
static int	cur_sqlstate;
static char cur_message[1024];
static sigjmp_buf *rt_jump;

RtError		rt_error;

MemoryContext CurrentMemoryContext = NULL;
volatile sig_atomic_t InterruptPending = false;

/* the stack depth at which check_stack_depth() refuses, like the server */
static char *stack_base;
static long stack_limit = 2L * 1024 * 1024 - 512 * 1024;

/*
 * Allocate size bytes in the list of live chunks, refusing what the
 * server refuses.
 */
static void *
chunk_alloc(size_t size, size_t limit, bool zero)
{
	Chunk	   *c;

	if (size > limit)
		elog(ERROR, "invalid memory alloc request size %zu", size);
	c = malloc(sizeof(Chunk) + size);
	if (c == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (zero)
		memset(c + 1, 0, size);
	c->size = size;
	c->next = chunks.next;
	c->prev = &chunks;
	chunks.next->prev = c;
	chunks.next = c;
	return c + 1;
}

/*
 * Resize a chunk; the list keeps the moved header.
 */
static void *
chunk_realloc(void *p, size_t size, size_t limit)
{
	Chunk	   *c = (Chunk *) p - 1;
	Chunk	   *n;

	if (size > limit)
		elog(ERROR, "invalid memory alloc request size %zu", size);
	c->prev->next = c->next;
	c->next->prev = c->prev;
	n = realloc(c, sizeof(Chunk) + size);
	if (n == NULL)
	{
		/* the chunk is still valid: relink it, then fail */
		c->next = chunks.next;
		c->prev = &chunks;
		chunks.next->prev = c;
		chunks.next = c;
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}
	n->next = chunks.next;
	n->prev = &chunks;
	chunks.next->prev = n;
	chunks.next = n;
	n->size = size;
	return n + 1;
}

/* The backend's allocation calls, on the list of live chunks. */
void *
palloc(Size size)
{
	return chunk_alloc(size, MaxAllocSize, false);
}

/* palloc(), zeroed. */
void *
palloc0(Size size)
{
	return chunk_alloc(size, MaxAllocSize, true);
}

/* palloc() with the flags the toolkit may pass: huge, zeroed. */
void *
palloc_extended(Size size, int flags)
{
	return chunk_alloc(size,
					   (flags & MCXT_ALLOC_HUGE) ? MaxAllocHugeSize : MaxAllocSize,
					   (flags & MCXT_ALLOC_ZERO) != 0);
}

/* One context only: every chunk is freed at the end of the input. */
void *
MemoryContextAlloc(MemoryContext context, Size size)
{
	return chunk_alloc(size, MaxAllocSize, false);
}

/* MemoryContextAlloc(), zeroed. */
void *
MemoryContextAllocZero(MemoryContext context, Size size)
{
	return chunk_alloc(size, MaxAllocSize, true);
}

/* Up to MaxAllocHugeSize, as the server allows. */
void *
MemoryContextAllocHuge(MemoryContext context, Size size)
{
	return chunk_alloc(size, MaxAllocHugeSize, false);
}

/* Resize within the server's limit. */
void *
repalloc(void *pointer, Size size)
{
	return chunk_realloc(pointer, size, MaxAllocSize);
}

/* Resize within the huge limit. */
void *
repalloc_huge(void *pointer, Size size)
{
	return chunk_realloc(pointer, size, MaxAllocHugeSize);
}

/* Free one chunk and take it off the list. */
void
pfree(void *pointer)
{
	Chunk	   *c = (Chunk *) pointer - 1;

	c->prev->next = c->next;
	c->next->prev = c->prev;
	free(c);
}

/* A copy of a string, on the list. */
char *
pstrdup(const char *in)
{
	size_t		len = strlen(in) + 1;

	return memcpy(palloc(len), in, len);
}

/* A terminated copy of size bytes, on the list. */
char *
pnstrdup(const char *in, Size size)
{
	char	   *out = palloc(size + 1);

	memcpy(out, in, size);
	out[size] = '\0';
	return out;
}

/*
 * Free every chunk still allocated: the end of one input.
 */
void
rt_reset(void)
{
	while (chunks.next != &chunks)
		pfree(chunks.next + 1);
}

/*
 * Run fn(arg) as a query would run: an ERROR ends it, and rt_error says
 * which.  Returns true when it ended without an error.
 */
bool
rt_try(void (*fn) (void *), void *arg)
{
	sigjmp_buf	here;
	sigjmp_buf *save = rt_jump;
	char		base;

	rt_error.sqlstate = 0;
	rt_error.message[0] = '\0';
	stack_base = &base;
	if (sigsetjmp(here, 0) == 0)
	{
		rt_jump = &here;
		fn(arg);
		rt_jump = save;
		return true;
	}
	rt_jump = save;
	rt_error.sqlstate = cur_sqlstate;
	memcpy(rt_error.message, cur_message, sizeof(rt_error.message));
	return false;
}

/* The SQLSTATE as its five characters. */
const char *
rt_sqlstate(int code)
{
	static char buf[6];

	buf[0] = PGUNSIXBIT(code);
	buf[1] = PGUNSIXBIT(code >> 6);
	buf[2] = PGUNSIXBIT(code >> 12);
	buf[3] = PGUNSIXBIT(code >> 18);
	buf[4] = PGUNSIXBIT(code >> 24);
	buf[5] = '\0';
	return buf;
}

/* Start an ereport(): only ERROR and above are of interest here. */
bool
errstart(int elevel, const char *domain)
{
	if (elevel < ERROR)
		return false;			/* nothing below ERROR is of interest */
	cur_elevel = elevel;
	cur_sqlstate = ERRCODE_INTERNAL_ERROR;
	cur_message[0] = '\0';
	return true;
}

/* The ERROR form of errstart() the compiler calls for constant levels. */
bool
errstart_cold(int elevel, const char *domain)
{
	return errstart(elevel, domain);
}

/* The SQLSTATE, which the harness checks against the contract. */
int
errcode(int sqlerrcode)
{
	cur_sqlstate = sqlerrcode;
	return 0;
}

/* Format an ereport() argument's message into a buffer. */
#define FORMAT_INTO(buf, fmt) \
	do { \
		va_list		ap_; \
		va_start(ap_, fmt); \
		vsnprintf(buf, sizeof(buf), fmt, ap_); \
		va_end(ap_); \
	} while (0)

/* The message is kept, for the harness to show with the SQLSTATE. */
int
errmsg(const char *fmt,...)
{
	FORMAT_INTO(cur_message, fmt);
	return 0;
}

/* elog()'s message, kept like errmsg()'s. */
int
errmsg_internal(const char *fmt,...)
{
	FORMAT_INTO(cur_message, fmt);
	return 0;
}

/* A detail is formatted, so that a bad format or argument shows, and dropped. */
int
errdetail(const char *fmt,...)
{
	char		buf[1024];

	FORMAT_INTO(buf, fmt);
	return 0;
}

/* A hint likewise. */
int
errhint(const char *fmt,...)
{
	char		buf[1024];

	FORMAT_INTO(buf, fmt);
	return 0;
}

/* The end of an ereport(): an ERROR returns to rt_try(). */
void
errfinish(const char *filename, int lineno, const char *funcname)
{
	if (cur_elevel >= FATAL || rt_jump == NULL)
	{
		fprintf(stderr, "%s at %s:%d: %s\n", cur_elevel >= FATAL ? "FATAL" : "ERROR outside rt_try",
				filename, lineno, cur_message);
		abort();
	}
	siglongjmp(*rt_jump, 1);
}

/*
 * A failed Assert() is what the fuzzer looks for: abort, so that it keeps
 * the input.
 */
#if PG_VERSION_NUM >= 160000
void
ExceptionalCondition(const char *conditionName, const char *fileName,
					 int lineNumber)
#else
void
ExceptionalCondition(const char *conditionName, const char *errorType,
					 const char *fileName, int lineNumber)
#endif
{
	fprintf(stderr, "TRAP: failed Assert(\"%s\"), File: \"%s\", Line: %d\n",
			conditionName, fileName, lineNumber);
	abort();
}

/*
 * The server's check: an error once the stack below the start of the
 * query is deeper than max_stack_depth (2 MB) less its safety margin.
 */
void
check_stack_depth(void)
{
	char		here;
	long		depth = (long) (stack_base - &here);

	if (depth < 0)
		depth = -depth;
	if (stack_base != NULL && depth > stack_limit)
		ereport(ERROR,
				(errcode(ERRCODE_STATEMENT_TOO_COMPLEX),
				 errmsg("stack depth limit exceeded")));
}

/* Nothing interrupts a fuzzer's input. */
void
ProcessInterrupts(void)
{
	InterruptPending = false;
}

/* The database encoding is UTF-8, as the toolkit's callers check. */
int
pg_mbstrlen_with_len(const char *mbstr, int limit)
{
	int			len = 0;

	while (limit > 0 && *mbstr)
	{
		int			l = pg_utf_mblen((const unsigned char *) mbstr);

		limit -= l;
		mbstr += l;
		len++;
	}
	return len;
}

/* Bytes of the first limit characters, for clipping a message. */
int
pg_mbcharcliplen(const char *mbstr, int len, int limit)
{
	int			clen = 0;
	int			nch = 0;

	while (len > 0 && *mbstr)
	{
		int			l = pg_utf_mblen((const unsigned char *) mbstr);

		if (++nch > limit)
			break;
		clen += l;
		len -= l;
		mbstr += l;
	}
	return clen;
}
