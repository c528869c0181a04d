/*-------------------------------------------------------------------------
 *
 * acl.h
 *	  Per-workflow access: the cached decision of which workflows a role
 *	  may use and see, and which patterns it may administer (acl.c).  The
 *	  SQL functions that read and change the grants are in acl_sql.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_ACL_H
#define IDEM_GATE_ACL_H

extern void ig_acl_init(void);
extern void ig_acl_check(Oid caller, Oid owner, const char *workflow);
extern bool ig_acl_visible(Oid role, const char *workflow);
extern void ig_acl_check_administer(Oid caller, Oid owner, const char *pattern,
									const char *verb);

#endif							/* IDEM_GATE_ACL_H */
