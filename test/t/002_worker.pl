# The background worker: janitor passes, policies, stuck alerts, settings on
# SIGHUP, pg_terminate_backend and kill -9 during a pass, standby and
# promotion, DROP/CREATE EXTENSION while running, a missing database.
# A janitor lives for one pass; the launcher stays.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::RealBin;
use JanitorHold;

my $helpers = q{
CREATE FUNCTION make_claim(k text, w text, st text, age interval) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM idem_claim(k, w);
	IF st = 'completed' THEN PERFORM idem_complete(k, w, NULL, '{"ok": true}');
	ELSIF st = 'failed_retryable' THEN PERFORM idem_fail(k, w, NULL, 'x', true);
	ELSIF st = 'needs_review' THEN PERFORM idem_fail(k, w, NULL, 'x', false);
	END IF;
	UPDATE idem_gate.claims SET created_at = created_at - age, claimed_at = claimed_at - age,
		updated_at = updated_at - age, completed_at = completed_at - age
	 WHERE workflow = w AND key = k;
END $$;
};

sub worker_pid
{
	my ($node, $type) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE backend_type = 'idem_gate $type'");
}

# the nice value of a process (field 19 of /proc/PID/stat)
sub nice_of
{
	my ($pid) = @_;
	my @f = split ' ', (slurp_file("/proc/$pid/stat") =~ s/^.*\)\s//sr);
	return $f[16];
}

sub wait_for_worker
{
	my ($node, $type, $not_pid) = @_;
	$not_pid //= 0;
	return $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem_gate $type' AND pid <> $not_pid");
}

# N completed rows of workflow WF, keys PREFIX1..PREFIXN, expired 40 days
# ago and more, the highest number the oldest
sub expired_rows
{
	my ($node, $wf, $prefix, $n) = @_;
	$node->safe_psql('postgres', qq{
	INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result,
		created_at, claimed_at, updated_at, completed_at)
	SELECT '$wf', '$prefix' || g, 'completed', 1, nextval('idem_gate.token_seq'), '{}',
		now() - interval '40 days' - g * interval '1 second',
		now() - interval '40 days' - g * interval '1 second',
		now() - interval '40 days' - g * interval '1 second',
		now() - interval '40 days' - g * interval '1 second'
	  FROM generate_series(1, $n) g});
}

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
idem_gate.naptime = 1
restart_after_crash = on
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem_gate');
$node->safe_psql('postgres', $helpers);

# the workers appear, named in pg_stat_activity
ok(wait_for_worker($node, 'launcher'), 'the launcher runs');
is($node->safe_psql('postgres',
	"SELECT datname IS NULL FROM pg_stat_activity WHERE backend_type = 'idem_gate launcher'"),
	't', 'connected to no database');
ok($node->poll_query_until('postgres', 'SELECT janitor_passes > 1 FROM idem_gate.stats'),
	'janitor passes run in the database (idem_gate.database empty: every database)');

# retention: old completed and failed rows go, needs_review and young rows stay
$node->safe_psql('postgres', q{
	SELECT make_claim('old_done', 'wf', 'completed', '31 days');
	SELECT make_claim('young_done', 'wf', 'completed', '29 days');
	SELECT make_claim('old_failed', 'wf', 'failed_retryable', '8 days');
	SELECT make_claim('young_failed', 'wf', 'failed_retryable', '6 days');
	SELECT make_claim('old_review', 'wf', 'needs_review', '400 days');
	SELECT make_claim('short_done', 'short', 'completed', '2 hours');
	SELECT make_claim('long_done', 'long', 'completed', '60 days');
	INSERT INTO idem_gate.policies (workflow, retention) VALUES ('short', '1 hour'), ('long', '90 days');
});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM idem_gate.claims WHERE key IN ('old_done', 'old_failed', 'short_done')"),
	'expired completed and failed_retryable rows are deleted');
is($node->safe_psql('postgres', 'SELECT string_agg(key, \',\' ORDER BY key) FROM idem_gate.claims'),
	'long_done,old_review,young_done,young_failed',
	'needs_review, young rows and rows a policy keeps longer stay');

# a stuck claim: exactly one NOTIFY to a listener and one log line
my $log_offset = -s $node->logfile;
my ($stdout, $stderr);
$node->psql('postgres', undef,
	stdout => \$stdout, stderr => \$stderr,
	extra_params => [
		'-c', 'LISTEN idem_gate_alert',
		'-c', "SELECT make_claim('stuck_1', 'stuck_wf', 'processing', '20 minutes')",
		'-c', 'SELECT pg_sleep(4)' ]);
my @alerts = ($stdout =~ /Asynchronous notification "idem_gate_alert" with payload "([^\n]*"stuck_wf"[^\n]*)" received/g);
is(scalar(@alerts), 1, 'one NOTIFY for the stuck claim, over several passes');
like($alerts[0] // '', qr/^\{"workflow":"stuck_wf","reason":"stuck","at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[^"]*","seq":\d+\}$/,
	'the payload names the workflow, the reason and the time, and nothing secret');
my $log = slurp_file($node->logfile, $log_offset);
my @lines = ($log =~ /(WARNING:  idem_gate: 1 claim stuck in processing\n[^\n]*stuck_1)/g);
is(scalar(@lines), 1, 'one WARNING line for it');
is($node->safe_psql('postgres', 'SELECT alerts FROM idem_gate.stats'), '1', 'and one alert counted');

# stuck_action = review: the claim moves to needs_review
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET idem_gate.stuck_action = 'review';
	SELECT pg_reload_conf();
});
# a claim is announced once per token: a pass that started before the
# reload would alert it under 'alert', and no later pass would move it.
# The claim comes once the setting is in force and a whole pass began
# after it (two more passes end).
$node->poll_query_until('postgres', "SELECT current_setting('idem_gate.stuck_action') = 'review'");
my $passes = $node->safe_psql('postgres', 'SELECT janitor_passes FROM idem_gate.stats');
$node->poll_query_until('postgres', "SELECT janitor_passes >= $passes + 2 FROM idem_gate.stats");
$node->safe_psql('postgres', "SELECT make_claim('stuck_2', 'wf', 'processing', '1 hour')");
ok($node->poll_query_until('postgres',
	"SELECT state = 'needs_review' FROM idem_gate.claims WHERE key = 'stuck_2'"),
	"with stuck_action = 'review' a stuck claim becomes needs_review");
# counted at the end of the pass, after the batch that moved it commits
ok($node->poll_query_until('postgres', 'SELECT escalations = 1 FROM idem_gate.stats'),
	'the escalation is counted');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET idem_gate.stuck_action; SELECT pg_reload_conf()');

# SIGHUP: retention and naptime change without a restart
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET idem_gate.retention = '20d';
	SELECT pg_reload_conf();
});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM idem_gate.claims WHERE key = 'young_done'"),
	'a shorter retention applies after a reload');
my $launcher = worker_pid($node, 'launcher');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idem_gate.naptime = '1h'; SELECT pg_reload_conf()});
sleep 2;
$passes = $node->safe_psql('postgres', 'SELECT janitor_passes FROM idem_gate.stats');
sleep 3;
is($node->safe_psql('postgres', 'SELECT janitor_passes FROM idem_gate.stats'), $passes,
	'a long naptime stops the passes');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idem_gate.naptime = 1; SELECT pg_reload_conf()});
ok($node->poll_query_until('postgres', "SELECT janitor_passes > $passes FROM idem_gate.stats"),
	'a short naptime brings them back');
is(worker_pid($node, 'launcher'), $launcher, 'the same launcher process, no restart');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET idem_gate.retention; SELECT pg_reload_conf()');

# pg_terminate_backend and kill -9 during a pass: the passes go on, and a
# batch is never half done.  A DBA's trigger sleeps while the first batch
# deletes the oldest expired row, for as long as the test needs (a row a
# client locks no longer holds a pass: the janitor skips it).
$node->safe_psql('postgres', q{ALTER SYSTEM SET idem_gate.naptime = '1h'; SELECT pg_reload_conf()});
$node->poll_query_until('postgres', "SELECT current_setting('idem_gate.naptime') = '1h'");
expired_rows($node, 'bulk', 'b', 20000);
$node->safe_psql('postgres', q{
	INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result,
		created_at, claimed_at, updated_at, completed_at)
	SELECT 'bulk', 'live' || g, 'completed', 1, nextval('idem_gate.token_seq'), '{}',
		now(), now(), now(), now()
	  FROM generate_series(1, 1000) g;
});
hold_pass_on($node, 'postgres', 'b20000');
# (the log at DEBUG1 while this pass starts: see the priority below)
my $debug_offset = -s $node->logfile;
$node->safe_psql('postgres',
	q{ALTER SYSTEM SET log_min_messages = debug1; ALTER SYSTEM SET idem_gate.naptime = 1; SELECT pg_reload_conf()});
my $janitor = waiting_janitor($node, 'postgres');
ok($janitor, 'a pass is held in its first batch');

# a pass yields the CPU to the clients: its process runs at nice 10, and
# lowering it reported no failure, even at DEBUG1 (a server already above
# nice 10 keeps its own value: a process may not raise its priority, and
# the janitor says so at DEBUG1)
$node->safe_psql('postgres', 'ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()');
my $server_nice = nice_of($node->{_pid});
is(nice_of($janitor), $server_nice > 10 ? $server_nice : 10,
	'the janitor runs at nice 10, below the server');
if ($server_nice > 10)
{
	like(slurp_file($node->logfile, $debug_offset), qr/could not lower its priority: Permission denied/,
		'raising it was refused, and said so at DEBUG1');
}
else
{
	unlike(slurp_file($node->logfile, $debug_offset), qr/could not lower its priority/,
		'lowering it reported no failure');
}
$node->safe_psql('postgres', "SELECT pg_terminate_backend($janitor)");
my $next = waiting_janitor($node, 'postgres', $janitor);
ok($next, 'pg_terminate_backend ends that pass; the next pass comes');
$log_offset = -s $node->logfile;
kill 'KILL', $next;
ok($node->wait_for_log(qr/\(PID $next\) was terminated by signal 9/, $log_offset),
	'kill -9 of the janitor: the postmaster restarts the cluster');
$node->poll_query_until('postgres', 'SELECT true');	# the restart is over
release_hold($node, 'postgres');
ok($node->poll_query_until('postgres', 'SELECT janitor_passes > 0 FROM idem_gate.stats'),
	'and the passes come back');
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM idem_gate.claims WHERE key LIKE 'b%'"),
	'it finishes the deletions');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM idem_gate.claims WHERE workflow = 'bulk' AND result = '{}' AND state = 'completed'"),
	'1000', 'and every live row is intact');
drop_hold($node, 'postgres');

# a pass finishes its step when the claims stop in the middle of it.
# While the gate is called, batches are a tenth of batch_size; a tenth that
# came back full is not the step's last batch once the calls stop.  A
# trigger holds the first batch of 3,000 expired rows, one claim is made
# meanwhile, and the hold ends: a batch of 1,000, one of 100 while the
# gate was busy, then full batches again, all in the one pass.
$node->safe_psql('postgres', q{ALTER SYSTEM SET idem_gate.naptime = '1h'; SELECT pg_reload_conf()});
$node->poll_query_until('postgres', "SELECT current_setting('idem_gate.naptime') = '1h'");
expired_rows($node, 'lull', 'l', 3000);
hold_pass_on($node, 'postgres', 'l3000');
$passes = $node->safe_psql('postgres', 'SELECT janitor_passes FROM idem_gate.stats');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idem_gate.naptime = 1; SELECT pg_reload_conf()});
$janitor = waiting_janitor($node, 'postgres');
ok($janitor, 'a pass is held in its first batch of the lull workflow');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idem_gate.naptime = '1h'; SELECT pg_reload_conf()});
$node->poll_query_until('postgres', "SELECT current_setting('idem_gate.naptime') = '1h'");
$node->safe_psql('postgres', "SELECT idem_claim('during_pass', 'wf')");
release_hold($node, 'postgres');
ok($node->poll_query_until('postgres', "SELECT janitor_passes = $passes + 1 FROM idem_gate.stats"),
	'the pass ends');
is($node->safe_psql('postgres', "SELECT count(*) FROM idem_gate.claims WHERE workflow = 'lull'"),
	'0', 'and deleted every expired row, after the calls stopped too');
is($node->safe_psql('postgres', 'SELECT janitor_passes FROM idem_gate.stats'), $passes + 1,
	'in one pass');
drop_hold($node, 'postgres');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idem_gate.naptime = 1; SELECT pg_reload_conf()});

# DROP EXTENSION while the worker runs: one log line, quiet idle; CREATE
# again: it resumes
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', 'DROP EXTENSION idem_gate CASCADE');
ok($node->wait_for_log(qr/extension idem_gate is not installed in database "postgres"; idling/, $log_offset),
	'after DROP EXTENSION the janitor says it idles');
sleep 3;
$log = slurp_file($node->logfile, $log_offset);
my @idle = ($log =~ /not installed in database/g);
is(scalar(@idle), 1, 'once, not at every pass');
unlike($log, qr/ERROR/, 'and without errors');
$node->safe_psql('postgres', 'CREATE EXTENSION idem_gate');
$node->safe_psql('postgres', $helpers =~ s/CREATE FUNCTION/CREATE OR REPLACE FUNCTION/r);
$node->safe_psql('postgres', "SELECT make_claim('again', 'wf', 'completed', '31 days')");
ok($node->wait_for_log(qr/extension idem_gate found in database "postgres"; resuming/, $log_offset),
	'after CREATE EXTENSION it resumes');
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idem_gate.claims WHERE key = 'again'"),
	'and works again');

# a streaming standby runs no janitor; after promotion it does
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET idem_gate.retention = '1000d'; SELECT pg_reload_conf();
});
$node->safe_psql('postgres', "SELECT make_claim('on_standby', 'wf', 'completed', '40 days')");
$node->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'bk', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
sleep 3;
is($standby->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idem_gate%'"),
	'0', 'no idem_gate worker on a standby');
is($standby->safe_psql('postgres', "SELECT count(*) FROM idem_gate.claims WHERE key = 'on_standby'"),
	'1', 'the expired row is still there on the standby');
$node->stop;
$standby->promote;
$standby->safe_psql('postgres', 'ALTER SYSTEM RESET idem_gate.retention; SELECT pg_reload_conf()');
ok(wait_for_worker($standby, 'launcher'), 'after promotion the launcher starts');
ok($standby->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM idem_gate.claims WHERE key = 'on_standby'"),
	'and deletes the expired row on the new primary');
$standby->stop;

# a database that does not exist: one log line, no restart loop; the
# janitor starts once it exists
my $lonely = PostgreSQL::Test::Cluster->new('lonely');
$lonely->init;
$lonely->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
idem_gate.database = 'gate_db'
idem_gate.naptime = 1
});
$lonely->start;
ok($lonely->wait_for_log(qr/idem_gate: database "gate_db" does not exist; the janitor waits for it/),
	'a missing database is reported');
sleep 4;
$log = slurp_file($lonely->logfile);
is(scalar(() = $log =~ /does not exist/g), 1, 'once');
unlike($log, qr/FATAL|terminated by exit code/, 'without a crash loop');
$lonely->safe_psql('postgres', 'CREATE DATABASE gate_db');
ok($lonely->wait_for_log(qr/extension idem_gate is not installed in database "gate_db"; idling/),
	'the janitor comes once the database exists');
$lonely->stop;

done_testing();
