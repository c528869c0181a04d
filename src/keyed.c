/*-------------------------------------------------------------------------
 *
 * keyed.c
 *	  Keyed keys for personal data: the secrets of idem_gate.secret_file,
 *	  and the stored forms of a caller's key (which workflows are keyed is
 *	  keyed_workflows.c's).
 *
 * Some senders have no event id, and the key is then the contact's email
 * or phone number: a plain hash of it is a dictionary away from the
 * value.  For a workflow whose row in idem_gate.policies says keyed, the
 * gate stores HMAC-SHA256(secret, workflow || 0x00 || key), written as
 * the secret's id, a colon and 64 hex digits, and never the key itself.
 *
 * The secrets are read from the file idem_gate.secret_file names, by the
 * setting's check hook: in the postmaster at start and at every reload,
 * and in every backend at its reload.  A file that other users can read,
 * a secret shorter than 32 bytes or a malformed line makes the check fail:
 * PostgreSQL logs it (with the line number, never the line) and the last
 * good secrets stay in force.  When the library is preloaded, the
 * postmaster also publishes them in shared memory before it tells the
 * backends to reload, so that every backend sees a rotation at the same
 * moment.
 *
 * Rotation: the first line is the current secret; a key claimed under an
 * older secret still listed is found, every listed secret being probed
 * newest first.  Two first claims of one key whose lists of secrets differ
 * for a moment (a reload between them) would insert two rows, one under
 * each secret; so after inserting, a first claim looks for the key under
 * every other listed secret, waiting for a claim still in progress there,
 * and yields with a serialization failure when one exists (claim.c).
 *
 * Each backend takes the secrets in force into its own copy at its first
 * keyed call and again at the first after each reload, and prepares then
 * what it hashes with under each (keyed_hmac.c): the key's pads are hashed
 * once per secret and backend, not once per call.  What a reload removed
 * is overwritten or wiped by then.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sha2.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "base.h"
#include "compat.h"
#include "keyed.h"
#include "keyed_hmac.h"

/* Bytes of a secret: at least this many, and at most MAX_SECRET_BYTES. */
#define MIN_SECRET_BYTES	32
#define MAX_SECRET_BYTES	128

/* The largest secret file read. */
#define MAX_FILE_BYTES		65536

/* One secret of the file. */
typedef struct Secret
{
	char		id[IG_KEYED_MAX_ID + 1];
	int			len;
	uint8		key[MAX_SECRET_BYTES];
} Secret;

/* The secrets of the file, newest first. */
typedef struct SecretSet
{
	int			n;
	Secret		s[IG_KEYED_MAX_SECRETS];
} SecretSet;

/* What the postmaster publishes: even generation = complete. */
typedef struct SharedSecrets
{
	pg_atomic_uint64 generation;
	SecretSet	set;
} SharedSecrets;

/* idem_gate.secret_file */
static char *secret_file = NULL;

/* The setting is being defined in the session of a role that is not a superuser. */
static bool defining_for_others = false;

/* The set the setting's last good check gave, and how often it changed. */
static SecretSet *assigned = NULL;
static uint64 assigned_generation = 0;

static SharedSecrets *shared = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* This backend's copy of the secrets in force, and its generation. */
static SecretSet local;
static uint64 local_generation = 0;

/* What each secret of the copy is hashed with, prepared when it is taken in. */
static IgKeyedHmac *local_hmac[IG_KEYED_MAX_SECRETS];

/* Is c an ASCII letter or digit? */
static inline bool
id_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The value of one hex digit, or -1. */
static int
hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * May the server trust the file's permissions?  As PostgreSQL asks of its
 * SSL key: owned by the server's user and readable by nobody else, or
 * owned by root and readable by at most root's group.
 */
static bool
file_private(const struct stat *st)
{
	if (st->st_uid == geteuid())
		return (st->st_mode & (S_IRWXG | S_IRWXO)) == 0;
	if (st->st_uid == 0)
		return (st->st_mode & (S_IWGRP | S_IXGRP | S_IRWXO)) == 0;
	return false;
}

/*
 * Parse one line, "id secret": the id of 1 to 16 letters and digits, the
 * secret as hex of MIN_SECRET_BYTES to MAX_SECRET_BYTES bytes.  Sets the
 * check's detail and returns false when it is malformed; never shows it.
 */
static bool
parse_line(char *line, int lineno, const char *path, Secret *s)
{
	char	   *p = line;
	int			idlen = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	while (id_char(*p) && idlen <= IG_KEYED_MAX_ID)
		s->id[idlen++] = *p++;
	if (idlen == 0 || idlen > IG_KEYED_MAX_ID || (*p != ' ' && *p != '\t'))
	{
		GUC_check_errdetail("Line %d of \"%s\" does not begin with an id of 1 to %d letters and digits followed by a space.",
							lineno, path, IG_KEYED_MAX_ID);
		return false;
	}
	s->id[idlen] = '\0';
	while (*p == ' ' || *p == '\t')
		p++;
	s->len = 0;
	for (; *p != '\0' && *p != ' ' && *p != '\t'; p += 2)
	{
		int			hi = hex_digit(p[0]);
		int			lo = p[1] == '\0' ? -1 : hex_digit(p[1]);

		if (hi < 0 || lo < 0 || s->len >= MAX_SECRET_BYTES)
		{
			GUC_check_errdetail(s->len >= MAX_SECRET_BYTES ?
								"The secret on line %d of \"%s\" is longer than 128 bytes." :
								"The secret on line %d of \"%s\" is not written in hexadecimal digits, two per byte.",
								lineno, path);
			return false;
		}
		s->key[s->len++] = (uint8) (hi * 16 + lo);
	}
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p != '\0')
	{
		GUC_check_errdetail("Line %d of \"%s\" has more than an id and a secret.",
							lineno, path);
		return false;
	}
	if (s->len < MIN_SECRET_BYTES)
	{
		GUC_check_errdetail("The secret on line %d of \"%s\" has %d bytes; a secret has at least %d (%d hexadecimal digits).",
							lineno, path, s->len, MIN_SECRET_BYTES,
							2 * MIN_SECRET_BYTES);
		return false;
	}
	return true;
}

/*
 * Read and check the secret file into set.  Blank lines and lines
 * beginning with # are skipped.  Returns false with the check's detail.
 */
static bool
read_secrets(const char *path, SecretSet *set)
{
	struct stat st;
	int			fd;
	char	   *buf;
	ssize_t		len;
	char	   *line;
	char	   *next;
	int			lineno = 0;

	memset(set, 0, sizeof(*set));

	/*
	 * Never block: open() of a FIFO waits for a writer, in the postmaster
	 * at a reload and in the DBA's session at ALTER SYSTEM.  Opened without
	 * blocking, whatever the path names (a FIFO, a device, a directory, a
	 * symbolic link to one) is checked through the descriptor, and only a
	 * regular file is read.
	 */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | PG_BINARY, 0);
	if (fd < 0)
	{
		GUC_check_errdetail("Could not open \"%s\": %m.", path);
		return false;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
	{
		close(fd);
		GUC_check_errdetail("\"%s\" is not a regular file.", path);
		return false;
	}
	if (!file_private(&st))
	{
		close(fd);
		GUC_check_errdetail("\"%s\" has group or world access, or belongs to another user.", path);
		GUC_check_errhint("The file must be owned by the database user with permissions u=rw (0600) or less, or by root with u=rw,g=r (0640) or less.");
		return false;
	}
	buf = palloc(MAX_FILE_BYTES + 1);
	len = read(fd, buf, MAX_FILE_BYTES + 1);
	close(fd);
	if (len < 0 || len > MAX_FILE_BYTES)
	{
		GUC_check_errdetail(len < 0 ? "Could not read \"%s\": %m." :
							"\"%s\" is larger than 64 kB.", path);
		pfree(buf);
		return false;
	}
	buf[len] = '\0';

	for (line = buf; line != NULL; line = next)
	{
		char	   *end;
		char	   *p;

		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		lineno++;
		end = line + strlen(line);
		while (end > line && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		for (p = line; *p == ' ' || *p == '\t'; p++)
			;
		if (*p == '\0' || *p == '#')
			continue;
		if (set->n == IG_KEYED_MAX_SECRETS)
		{
			GUC_check_errdetail("\"%s\" lists more than %d secrets.", path,
								IG_KEYED_MAX_SECRETS);
			break;
		}
		if (!parse_line(p, lineno, path, &set->s[set->n]))
			break;
		for (int i = 0; i < set->n; i++)
			if (strcmp(set->s[i].id, set->s[set->n].id) == 0)
			{
				GUC_check_errdetail("Line %d of \"%s\" repeats the id of an earlier line.",
									lineno, path);
				set->n = -1;
				break;
			}
		if (set->n < 0)
			break;
		set->n++;
	}
	explicit_bzero(buf, len);
	pfree(buf);
	if (line != NULL)
	{
		explicit_bzero(set, sizeof(*set));
		return false;
	}
	return true;
}

/*
 * The check of idem_gate.secret_file: read the file it names (none when
 * empty) into the setting's extra.  A failure keeps the secrets in force.
 */
static bool
check_secret_file(char **newval, void **extra, GucSource source)
{
	SecretSet	set;
	SecretSet  *copy;

	if (*newval != NULL && (*newval)[0] != '\0')
	{
		if (read_secrets(*newval, &set))
		{
			/* read and checked */
		}
		else if (defining_for_others)
		{
			/*
			 * PostgreSQL would send the failure, with the file's path, to
			 * the client as a WARNING: to the server log only, and this
			 * session has no secret (a keyed call says so, without the
			 * path).
			 */
			ereport(LOG_SERVER_ONLY,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("idem_gate.secret_file cannot be used in this session"),
					 errdetail_internal("%s", GUC_check_errdetail_string ?
										GUC_check_errdetail_string : "")));
			memset(&set, 0, sizeof(set));
		}
		else
		{
			GUC_check_errcode(ERRCODE_CONFIG_FILE_ERROR);
			return false;
		}
	}
	else
		memset(&set, 0, sizeof(set));

	copy = ig_guc_extra_alloc(sizeof(SecretSet));
	if (copy == NULL)
		return false;
	memcpy(copy, &set, sizeof(SecretSet));
	explicit_bzero(&set, sizeof(set));
	*extra = copy;
	return true;
}

/* Publish a set in shared memory: the postmaster's write, seqlocked. */
static void
publish(const SecretSet *set)
{
	pg_atomic_fetch_add_u64(&shared->generation, 1);	/* odd: writing */
	memcpy(&shared->set, set, sizeof(SecretSet));
	pg_atomic_fetch_add_u64(&shared->generation, 1);	/* even: complete */
}

/*
 * The secrets in force change: in the postmaster, for every backend.  The
 * set they replace is wiped here, since PostgreSQL frees a replaced extra
 * right after this hook without clearing it, and a secret removed from the
 * file must not stay in memory.  Nothing installs a replaced extra of this
 * setting again (it cannot be SET, so it never has a saved value); were
 * it ever, the wiped set lists no secret, and keyed calls refuse (55000)
 * rather than hash under another secret.
 */
static void
assign_secret_file(const char *newval, void *extra)
{
	SecretSet  *old = assigned;

	assigned = (SecretSet *) extra;
	assigned_generation++;
	if (!IsUnderPostmaster && shared != NULL && assigned != NULL)
		publish(assigned);
	if (old != NULL && old != assigned)
		explicit_bzero(old, sizeof(SecretSet));
}

static void
keyed_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(SharedSecrets)));
}

/*
 * Create the shared secrets and publish those in force: the postmaster at
 * start, and again after a crash restart.
 */
static void
keyed_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("idem_gate secrets", sizeof(SharedSecrets), &found);
	if (!found)
	{
		pg_atomic_init_u64(&shared->generation, 0);
		memset(&shared->set, 0, sizeof(SecretSet));
		if (assigned != NULL)
			publish(assigned);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Ask for the shared secrets; called from _PG_init while preloading. */
void
ig_keyed_request_shmem(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = keyed_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = keyed_shmem_startup;
}

/*
 * Define idem_gate.secret_file: superuser-only, set in the configuration
 * file (a session cannot change it), its value hidden from other roles.
 */
void
ig_keyed_init(void)
{
	/*
	 * Without preloading, the library is loaded by a session's first gate
	 * call, whoever makes it, and the value of the setting from the
	 * configuration file is checked then: its failure must not show the
	 * file's path to a role that is not a superuser.
	 */
	defining_for_others = IsUnderPostmaster &&
		!process_shared_preload_libraries_in_progress &&
		IsTransactionState() && !superuser();
	DefineCustomStringVariable("idem_gate.secret_file",
							   "File of the secrets that keyed workflows hash their keys with.",
							   "One \"id secret\" pair a line, the secret as hexadecimal of at least 32 bytes; the first line is current. Read at start and at reload; the file must not be readable by other users.",
							   &secret_file,
							   "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   check_secret_file, assign_secret_file, NULL);
	defining_for_others = false;
}

/*
 * Prepare what this backend hashes with under each secret of its copy,
 * which has just changed: at the first call after start and after each
 * reload.  The states of the secrets before, some of which may have left
 * the file, are wiped and freed first.  One that fails to be prepared
 * stays NULL and is prepared again when it is wanted (hmac_of).
 */
static void
take_in_secrets(void)
{
	for (int i = 0; i < IG_KEYED_MAX_SECRETS; i++)
	{
		IgKeyedHmac *h = local_hmac[i];

		local_hmac[i] = NULL;
		ig_keyed_hmac_free(h);
	}
	for (int i = 0; i < local.n; i++)
		local_hmac[i] = ig_keyed_hmac_create(local.s[i].key, local.s[i].len);
}

/*
 * The secrets in force, in this backend's copy, and their generation: the
 * shared ones when preloaded, else the setting's own.  Copying them over
 * the copy before overwrites the secrets a reload removed.
 */
static const SecretSet *
current_set(uint64 *generation)
{
	uint64		before = local_generation;

	if (shared != NULL)
	{
		uint64		g = pg_atomic_read_u64(&shared->generation);

		while (g != local_generation)
		{
			uint64		again;

			if (g & 1)
			{
				pg_spin_delay();
				g = pg_atomic_read_u64(&shared->generation);
				continue;
			}
			pg_read_barrier();
			memcpy(&local, &shared->set, sizeof(SecretSet));
			pg_read_barrier();
			again = pg_atomic_read_u64(&shared->generation);
			if (again == g)
				local_generation = g;
			g = again;
		}
	}
	else if (local_generation != assigned_generation)
	{
		if (assigned != NULL)
			memcpy(&local, assigned, sizeof(SecretSet));
		else
			memset(&local, 0, sizeof(SecretSet));
		local_generation = assigned_generation;
	}
	if (local_generation != before)
		take_in_secrets();
	*generation = local_generation;
	return &local;
}

/*
 * HMAC-SHA256(secret i of the copy, workflow || 0x00 || key) into mac, from
 * the state prepared when the secret was taken in (keyed_hmac.c), or
 * prepared now if that failed.
 */
static void
hmac_of(int i, const char *workflow, const text *key, uint8 *mac)
{
	if (local_hmac[i] == NULL)
		local_hmac[i] = ig_keyed_hmac_create(local.s[i].key, local.s[i].len);
	ig_keyed_hmac_compute(local_hmac[i],
						  (const uint8 *) workflow, strlen(workflow) + 1,
						  (const uint8 *) VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
						  mac);
}

/* Compute forms from the secrets in force, newest first. */
static void
compute_forms(IgKeyForms *forms)
{
	static const char hex[] = "0123456789abcdef";
	uint64		generation;
	const SecretSet *set = current_set(&generation);

	if (set->n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("workflow \"%s\" is keyed, but idem_gate.secret_file lists no secret",
						ig_display(forms->workflow)),
				 errdetail("The policy of the workflow stores an HMAC of each key in place of the key, which needs a secret."),
				 errhint("Name a file of secrets in idem_gate.secret_file and reload the configuration, or set keyed to false in the workflow's policy before its first claim.")));

	forms->generation = generation;
	forms->n = set->n;
	for (int i = 0; i < set->n; i++)
	{
		uint8		mac[PG_SHA256_DIGEST_LENGTH];
		int			idlen = strlen(set->s[i].id);
		char	   *str = palloc(idlen + 1 + 2 * PG_SHA256_DIGEST_LENGTH + 1);
		char	   *p = str;

		hmac_of(i, forms->workflow, forms->key, mac);
		memcpy(p, set->s[i].id, idlen);
		p += idlen;
		*p++ = ':';
		for (int b = 0; b < PG_SHA256_DIGEST_LENGTH; b++)
		{
			*p++ = hex[mac[b] >> 4];
			*p++ = hex[mac[b] & 0x0f];
		}
		*p = '\0';
		forms->form_str[i] = str;
		forms->form[i] = CStringGetTextDatum(str);
		explicit_bzero(mac, sizeof(mac));
	}
}

/*
 * The stored forms of key in a keyed workflow, one per listed secret,
 * newest first, in the current memory context.  55000 without a secret.
 */
IgKeyForms *
ig_keyed_forms(const char *workflow, text *key)
{
	IgKeyForms *forms = palloc0(sizeof(IgKeyForms));

	forms->workflow = pstrdup(workflow);
	forms->key = key;
	compute_forms(forms);
	return forms;
}

/*
 * Compute the forms again if the secrets changed since they were: a
 * reload rotated them.  Returns whether they did.
 */
bool
ig_keyed_refresh(IgKeyForms *forms)
{
	uint64		generation;

	(void) current_set(&generation);
	if (generation == forms->generation)
		return false;
	compute_forms(forms);
	return true;
}

/* The ids of the listed secrets, newest first; returns how many. */
int
ig_keyed_secret_ids(char ids[][IG_KEYED_MAX_ID + 1])
{
	uint64		generation;
	const SecretSet *set = current_set(&generation);

	for (int i = 0; i < set->n; i++)
		strlcpy(ids[i], set->s[i].id, IG_KEYED_MAX_ID + 1);
	return set->n;
}
