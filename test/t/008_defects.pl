# Defects of the 1.1 audit that need the background worker: a database
# owner who sets the database's search_path and plants a function does not
# get the janitor to run it (2); the stuck-claim alert tells a role with
# no grant at all nothing it could use (6).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
idem_gate.naptime = 1
});
$node->start;

# 2. the database owner, no superuser, owns neither public nor idem_gate
$node->safe_psql('postgres', q{
CREATE ROLE r02_owner LOGIN;
CREATE DATABASE r02 OWNER r02_owner;
});
$node->safe_psql('r02', q{
ALTER SCHEMA public OWNER TO postgres;
CREATE EXTENSION idem_gate;
CREATE TABLE public.claims_archive (workflow text, key text, archived_at timestamptz);
CREATE FUNCTION public.archive_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.claims_archive VALUES (OLD.workflow, OLD.key, now());
	RETURN OLD;
END $$;
CREATE TRIGGER archive AFTER DELETE ON idem_gate.claims
	FOR EACH ROW EXECUTE FUNCTION public.archive_claim();
INSERT INTO idem_gate.policies (workflow, retention) VALUES ('orders', '1 second');
});
$node->safe_psql('r02', q{
CREATE SCHEMA evil;
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN
	ALTER ROLE r02_owner SUPERUSER;
	RETURN pg_catalog.now();
END $$;
ALTER DATABASE r02 SET search_path = evil, pg_catalog, public;
}, extra_params => [ '-U', 'r02_owner' ]);
$node->safe_psql('r02', q{
SELECT idem_claim('evt_1', 'orders');
SELECT idem_complete('evt_1', 'orders');
});
$node->poll_query_until('r02', 'SELECT count(*) = 1 FROM public.claims_archive')
  or die 'the janitor did not delete the claim';
is($node->safe_psql('r02', "SELECT rolsuper FROM pg_roles WHERE rolname = 'r02_owner'"),
	'f', 'the database owner did not become superuser through the janitor');
is($node->safe_psql('r02', 'SELECT count(*) FROM idem_gate.claims'), '0',
	'and the janitor did its work, running the DBA\'s trigger with a pinned path');

# 6. a role with no privileges listens to the alerts
$node->safe_psql('postgres', q{
CREATE ROLE r05_nobody LOGIN;
CREATE ROLE r05_orders LOGIN;
CREATE DATABASE r05;
});
$node->safe_psql('r05', q{
CREATE EXTENSION idem_gate;
GRANT EXECUTE ON FUNCTION idem_complete(text, text, bigint, jsonb) TO r05_orders;
INSERT INTO idem_gate.policies (workflow, stuck_after) VALUES ('payroll', '1 second');
});
my $owner_token = $node->safe_psql('r05',
	"SELECT token FROM idem_claim_ex('employee-4711-june', 'payroll', NULL, NULL, 'run-1')");
my ($in, $out, $err) = ("LISTEN idem_gate_alert;\nSELECT pg_sleep(4);\n", '', '');
my $h = IPC::Run::run(
	[ 'psql', '-X', '-d', $node->connstr('r05'), '-U', 'r05_nobody' ],
	'<', \$in, '>', \$out, '2>', \$err);
like($out, qr/Asynchronous notification "idem_gate_alert" with payload "(\{[^"]*(?:"[^"]*"[^"]*)*\})"/,
	'a role with no grant receives the alert');
my ($payload) = $out =~ /with payload "(.*)" received/;
like($payload, qr/^\{"workflow":"payroll","reason":"stuck","at":"[0-9T:.+-]+","seq":\d+\}$/,
	'its payload is the workflow, the reason, the time and a number');
unlike($payload =~ s/"seq":\d+//r, qr/employee-4711|"token"|:$owner_token[,}]/, 'no key and no token');
my ($ret, $stdout, $stderr) = $node->psql('r05',
	"SELECT idem_complete('employee-4711-june', 'payroll', NULL, '{}')",
	extra_params => [ '-U', 'r05_orders' ]);
like($stderr, qr/token must not be null/, 'another role cannot complete the claim without the token');
is($node->safe_psql('r05', "SELECT state FROM idem_gate.claims"), 'processing',
	'the owner\'s claim is untouched');

# idem_gate.janitor_run()'s WARNING names only the stuck claims of the
# workflows its caller may see, with per-workflow access on; the others are
# counted (the worker's log line, for the DBA, names any)
#
# The background janitor must not announce these claims first (a stuck
# claim is announced once per grant): it serves only r02 and r05 from here
# on.  The missing database in the list makes the launcher log that it has
# read the new list, so the test knows before it creates jr.
my $list_offset = -s $node->logfile;
$node->append_conf('postgresql.conf',
	"idem_gate.database = 'r02, r05, jr_list_read'\n");
$node->reload;
ok($node->wait_for_log(qr/database "jr_list_read" does not exist; the janitor waits for it/,
	$list_offset), 'the launcher serves only r02 and r05');
$node->safe_psql('postgres', q{
	CREATE DATABASE jr;
});
$node->safe_psql('jr', q{
	CREATE EXTENSION idem_gate;
	CREATE ROLE jr_ops LOGIN;
	GRANT USAGE ON SCHEMA idem_gate TO jr_ops;
	GRANT EXECUTE ON FUNCTION idem_gate.janitor_run() TO jr_ops;
	SELECT idem_gate.grant_workflow('jr_ops', 'ops_%');
	SELECT idem_claim('stuck-visible', 'ops_mine'), idem_claim('stuck-hidden-4711', 'payroll_secret');
	UPDATE idem_gate.claims SET created_at = now() - interval '1 hour',
		claimed_at = now() - interval '1 hour', updated_at = now() - interval '1 hour';
	ALTER ROLE jr_ops SET idem_gate.workflow_acl = on;
});
($ret, $stdout, $stderr) = $node->psql('jr', 'SELECT alerts FROM idem_gate.janitor_run()',
	extra_params => [ '-U', 'jr_ops' ]);
is($stdout, '2', 'janitor_run() alerts every stuck claim');
like($stderr, qr/DETAIL:  workflow "ops_mine" key "stuck-visible" stuck for [^;]*; and 1 more\./,
	"its WARNING names the caller's workflow's claim and counts the other");
unlike($stderr, qr/stuck-hidden|payroll_secret/, "and names nothing of a workflow the caller may not see");

$node->stop;
done_testing();
