# The janitor in every database: several databases served at once, at most
# idem_gate.max_janitors janitors at a time, a database that installs the
# extension later served within one naptime, a plain DROP DATABASE of a
# served database (idle, and in the middle of a pass), the database list on
# SIGHUP, SIGTERM and kill -9 during passes, a standby and its promotion,
# a list naming a missing database, the bounds of max_janitors, templates,
# the time between scans, and a janitor that finds no worker slot.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::RealBin;
use JanitorHold;

# an expired completed claim (40 days old unless told: the default
# retention is 30)
sub old_claim
{
	my ($node, $db, $key, $days) = @_;
	my $at = "now() - interval '" . ($days // 40) . " days'";
	$node->safe_psql($db, qq{
		INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result,
			created_at, claimed_at, updated_at, completed_at)
		VALUES ('wf', '$key', 'completed', 1, nextval('idem_gate.token_seq'), '{}',
			$at, $at, $at, $at)});
}

# many expired rows: with idem_gate.batch_size = 1 a pass over them is long
sub bulk
{
	my ($node, $db, $n) = @_;
	$node->safe_psql($db, qq{
		INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result,
			created_at, claimed_at, updated_at, completed_at)
		SELECT 'bulk', 'b' || g, 'completed', 1, nextval('idem_gate.token_seq'), '{}',
			now() - interval '40 days', now() - interval '40 days',
			now() - interval '40 days', now() - interval '40 days'
		  FROM generate_series(1, $n) g});
}

sub gone
{
	my ($node, $db, $key) = @_;
	return $node->poll_query_until($db,
		"SELECT count(*) = 0 FROM idem_gate.claims WHERE key = '$key'");
}

sub count_rows
{
	my ($node, $db, $where) = @_;
	return $node->safe_psql($db, "SELECT count(*) FROM idem_gate.claims WHERE $where");
}

# a new database with idem_gate installed
sub gate_db
{
	my ($node, $db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION idem_gate');
}

# an expired claim key in db, a day older than old_claim's so that a pass
# meets it first, held (JanitorHold) for as long as the test needs;
# release_hold() lets the pass go on
sub lock_claim
{
	my ($node, $db, $key) = @_;
	old_claim($node, $db, $key, 41);
	hold_pass_on($node, $db, $key);
	return [ $node, $db, $key ];
}

# the pid of a janitor at work in a database, once there is one
sub janitor_in
{
	my ($node, $db) = @_;
	$node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'idem_gate janitor' AND datname = '$db' AND state = 'active'")
	  or return 0;
	return $node->safe_psql('postgres',
		"SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE backend_type = 'idem_gate janitor' AND datname = '$db'");
}

sub set_and_reload
{
	my ($node, $sql) = @_;
	$node->safe_psql('postgres', "$sql; SELECT pg_reload_conf()");
}

# a new backend (and so a new janitor) has the setting once the postmaster
# has reloaded
sub wait_setting
{
	my ($node, $name, $value) = @_;
	$node->poll_query_until('postgres', "SELECT current_setting('$name') = '$value'")
	  or die "$name did not become $value";
}

my $node = PostgreSQL::Test::Cluster->new('many');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
idem_gate.naptime = 1
idem_gate.max_janitors = 2
restart_after_crash = on
});
$node->start;
is($node->safe_psql('postgres', 'SHOW idem_gate.database'), '',
	'idem_gate.database is empty by default: every database');

for my $db (qw(db1 db2 db3))
{
	gate_db($node, $db);
}
$node->safe_psql('postgres', 'CREATE DATABASE plain');

# a database that does not allow connections and a template, each with the
# extension and an expired claim, copied from a database that keeps its
# claim longer: neither ever allows a janitor in while the launcher can
# see it (a database closed after the launcher's last scan would get one
# failed connection)
gate_db($node, 'gate_src');
$node->safe_psql('postgres', "ALTER DATABASE gate_src SET idem_gate.retention = '60d'");
old_claim($node, 'gate_src', 'copied');
$node->safe_psql('postgres', 'CREATE DATABASE closed TEMPLATE gate_src ALLOW_CONNECTIONS false');
$node->safe_psql('postgres', 'CREATE DATABASE tmpl TEMPLATE gate_src IS_TEMPLATE true');
my $closed_offset = -s $node->logfile;

# several databases served at once
old_claim($node, $_, "old_$_") for qw(db1 db2 db3);
ok(gone($node, $_, "old_$_"), "the janitor serves $_") for qw(db1 db2 db3);
sleep 2;
unlike(slurp_file($node->logfile, $closed_offset), qr/FATAL/,
	'a database that does not allow connections is left alone (no janitor fails to connect)');
is(count_rows($node, 'tmpl', "key = 'copied'"), '1',
	'a template database is left alone (its expired claim stays)');
$node->safe_psql('postgres', 'ALTER DATABASE tmpl IS_TEMPLATE false');
$node->safe_psql('postgres', 'DROP DATABASE tmpl');
$node->safe_psql('postgres', 'DROP DATABASE closed');
$node->safe_psql('postgres', 'DROP DATABASE gate_src');

# at most max_janitors at once: in each of three databases a pass is held
# in its first batch
set_and_reload($node, "ALTER SYSTEM SET idem_gate.naptime = '1h'");
wait_setting($node, 'idem_gate.naptime', '1h');
sleep 1;
my %blockers;
for my $db (qw(db1 db2 db3))
{
	$blockers{$db} = lock_claim($node, $db, 'locked');
}
set_and_reload($node, 'ALTER SYSTEM RESET idem_gate.naptime');
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'idem_gate janitor' AND wait_event = 'PgSleep'"),
	'two passes are held');
my ($most, $samples) = (0, 0);
my $end = time() + 3;
while (time() < $end)
{
	my $n = $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idem_gate janitor'");
	$most = $n if $n > $most;
	$samples++;
	sleep 0.05;
}
is($most, 2, "never more than idem_gate.max_janitors = 2 janitors at once ($samples samples)");
my $waiting = $node->safe_psql('postgres',
	"SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_stat_activity WHERE backend_type = 'idem_gate janitor'");
my ($idle) = grep { $waiting !~ /\b$_\b/ } qw(db1 db2 db3);
ok($idle, "the third database waits for a free janitor ($waiting at work)");
release_hold(@{$blockers{$_}}) for qw(db1 db2 db3);
ok(gone($node, $_, 'locked'), "once released every pass finishes ($_)") for qw(db1 db2 db3);

# a launcher that ends (pg_terminate_backend; the postmaster starts it again
# after 10 s) leaves its janitors at work: the next launcher finds the pass
# in db1 still running in its slot, and starts no second one beside it
set_and_reload($node, "ALTER SYSTEM SET idem_gate.naptime = '1h'");
wait_setting($node, 'idem_gate.naptime', '1h');
sleep 1;	# no pass takes the claim before the lock is held
my $holder1 = lock_claim($node, 'db1', 'locked');
set_and_reload($node, 'ALTER SYSTEM RESET idem_gate.naptime');
my $first = waiting_janitor($node, 'db1', 0);
ok($first, 'a pass in db1 is held');
my $launcher = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem_gate launcher'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem_gate launcher' AND pid <> $launcher"),
	'the launcher is started again');
sleep 3;	# three of the new launcher's naptimes
is($node->safe_psql('postgres',
	"SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE backend_type = 'idem_gate janitor' AND datname = 'db1'"),
	$first, "the new launcher starts no second janitor beside its predecessor's");
release_hold(@{$holder1});
ok(gone($node, 'db1', 'locked'), 'and that pass finishes');

# a database without the extension: nothing logged; installed later, it is
# served within one naptime
my $log = slurp_file($node->logfile);
unlike($log, qr/database "plain"/, 'a database without idem_gate is checked quietly');
my $log_offset = -s $node->logfile;
$node->safe_psql('plain', 'CREATE EXTENSION idem_gate');
old_claim($node, 'plain', 'late');
my $t0 = time();
ok(gone($node, 'plain', 'late'), 'a database that installs idem_gate later is served');
cmp_ok(time() - $t0, '<', 4, 'within one naptime (1 s), plus a pass and a slow machine');
ok($node->wait_for_log(qr/extension idem_gate found in database "plain"; serving it/, $log_offset),
	'with one log line');

# a plain DROP DATABASE of a served database, idle
for my $i (1 .. 5)
{
	gate_db($node, 'churn');
	sleep 0.3 * $i;
	my ($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE churn');
	is($ret, 0, "plain DROP DATABASE of a served database succeeds (round $i)")
	  or diag $err;
}

# ... and in the middle of a pass
set_and_reload($node, 'ALTER SYSTEM SET idem_gate.batch_size = 1');
wait_setting($node, 'idem_gate.batch_size', '1');
bulk($node, 'db3', 200000);
$node->poll_query_until('db3', "SELECT count(*) < 200000 FROM idem_gate.claims WHERE workflow = 'bulk'");
ok(janitor_in($node, 'db3'), 'a janitor is at work in db3, in the middle of a long pass');
$log_offset = -s $node->logfile;
$t0 = time();
my ($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE db3');
is($ret, 0, 'a plain DROP DATABASE of it succeeds during the pass') or diag $err;
cmp_ok(time() - $t0, '<', 4, 'without waiting out the 5 s of DROP DATABASE');
ok($node->wait_for_log(qr/ending the janitor's pass in database "db3", which another session needs without connections/,
	$log_offset), 'the launcher says it ended the pass');
set_and_reload($node, 'ALTER SYSTEM RESET idem_gate.batch_size');
wait_setting($node, 'idem_gate.batch_size', '1000');
old_claim($node, 'db1', 'after_drop');
ok(gone($node, 'db1', 'after_drop'), 'the other databases are still served');

# DROP EXTENSION committed in the middle of a pass: the pass ends with the
# "idling" line, not an error
gate_db($node, 'dropx');
set_and_reload($node, "ALTER SYSTEM SET idem_gate.naptime = '1h'");
wait_setting($node, 'idem_gate.naptime', '1h');
sleep 1;
bulk($node, 'dropx', 3000);
my $holder = lock_claim($node, 'dropx', 'locked');
$log_offset = -s $node->logfile;
set_and_reload($node, 'ALTER SYSTEM RESET idem_gate.naptime');
my $dropx_janitor = waiting_janitor($node, 'dropx', 0);
ok($dropx_janitor, 'a pass in dropx is held');
my $dropper = $node->background_psql('dropx');
$dropper->query_until(qr/go/, "\\echo go\nDROP EXTENSION idem_gate CASCADE;\n");
$node->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = 'dropx' AND query LIKE 'DROP EXTENSION%' AND wait_event_type = 'Lock'");
release_hold(@{$holder});
$dropper->quit;
ok($node->wait_for_log(qr/\[$dropx_janitor\] LOG:  idem_gate janitor: extension idem_gate is not installed in database "dropx"; idling/,
	$log_offset), 'DROP EXTENSION during a pass: the janitor says it idles');
unlike(slurp_file($node->logfile, $log_offset), qr/\[$dropx_janitor\] ERROR/, 'without an error');
$node->safe_psql('postgres', 'DROP DATABASE dropx');

# pg_database is read every naptime and at a reload, not at every wake:
# with naptime = 1h and a pass held (the launcher then wakes
# every 250 ms to watch it), a database created after the last scan waits
# for the next reload
set_and_reload($node, "ALTER SYSTEM SET idem_gate.naptime = '1h'");
wait_setting($node, 'idem_gate.naptime', '1h');
gate_db($node, 'nap_a');
$holder = lock_claim($node, 'nap_a', 'locked');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok(waiting_janitor($node, 'nap_a', 0), 'after a reload, a pass in the new database nap_a is held');
gate_db($node, 'nap_b');
old_claim($node, 'nap_b', 'unseen');
sleep 2;
is(count_rows($node, 'nap_b', "key = 'unseen'"), '1',
	'a database created after the scan is not served before the next one');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok(gone($node, 'nap_b', 'unseen'), 'it is at the next reload');
release_hold(@{$holder});
set_and_reload($node, 'ALTER SYSTEM RESET idem_gate.naptime');
ok(gone($node, 'nap_a', 'locked'), 'and the waiting pass finishes');
$node->safe_psql('postgres', "DROP DATABASE $_") for qw(nap_a nap_b);

# a database closed after the scan that listed it: its pass, started later
# from that list (here it waited for the one janitor slot), leaves it alone
# with a LOG line, not a janitor that fails to connect
set_and_reload($node, "ALTER SYSTEM SET idem_gate.naptime = '1h'; ALTER SYSTEM SET idem_gate.max_janitors = 1");
wait_setting($node, 'idem_gate.max_janitors', '1');
gate_db($node, 'hold_a');
$holder = lock_claim($node, 'hold_a', 'locked');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok(waiting_janitor($node, 'hold_a', 0), 'the one janitor slot is taken by a held pass');
gate_db($node, 'late_closed');
old_claim($node, 'late_closed', 'late');
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
$node->wait_for_log(qr/received SIGHUP/, $log_offset);
sleep 3;	# the launcher's scan after the reload lists late_closed, open
$node->safe_psql('postgres', 'ALTER DATABASE late_closed ALLOW_CONNECTIONS false');
release_hold(@{$holder});
ok($node->wait_for_log(qr/LOG:  idem_gate janitor: database "late_closed" no longer allows connections; the janitor skips it/,
	$log_offset), 'a pass started from the older list for a database closed since skips it');
unlike(slurp_file($node->logfile, $log_offset), qr/FATAL/, 'no janitor failed to connect');
$node->safe_psql('postgres', 'ALTER DATABASE late_closed ALLOW_CONNECTIONS true');
is(count_rows($node, 'late_closed', "key = 'late'"), '1', 'and its expired claim is left');
set_and_reload($node, 'ALTER SYSTEM RESET idem_gate.naptime; ALTER SYSTEM RESET idem_gate.max_janitors');
$node->safe_psql('postgres', "DROP DATABASE $_") for qw(hold_a late_closed);

# SIGHUP: a list of databases takes effect without a restart
set_and_reload($node, "ALTER SYSTEM SET idem_gate.database = 'db1'");
wait_setting($node, 'idem_gate.database', 'db1');
sleep 1.5;
old_claim($node, $_, "listed_$_") for qw(db1 db2);
ok(gone($node, 'db1', 'listed_db1'), 'after a reload, the listed database is served');
sleep 2.5;
is(count_rows($node, 'db2', "key = 'listed_db2'"), '1', 'and the others are not');
set_and_reload($node, 'ALTER SYSTEM RESET idem_gate.database');
ok(gone($node, 'db2', 'listed_db2'), 'reset: every database again');
set_and_reload($node, "ALTER SYSTEM SET idem_gate.retention = '20d'");
for my $db (qw(db1 db2))
{
	$node->safe_psql($db, qq{
		INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result,
			created_at, claimed_at, updated_at, completed_at)
		VALUES ('wf', 'd25', 'completed', 1, nextval('idem_gate.token_seq'), '{}',
			now() - interval '25 days', now() - interval '25 days',
			now() - interval '25 days', now() - interval '25 days')});
	ok(gone($node, $db, 'd25'), "a shorter retention applies after a reload ($db)");
}
set_and_reload($node, 'ALTER SYSTEM RESET idem_gate.retention');

# SIGTERM ends a pass at once, even a held one; kill -9 in the
# middle of a pass: crash restart, then every database is served again and
# no batch was half done
set_and_reload($node, "ALTER SYSTEM SET idem_gate.naptime = '1h'");
wait_setting($node, 'idem_gate.naptime', '1h');
sleep 1;
bulk($node, 'db1', 20000);
$node->safe_psql('db2', q{
	INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result,
		created_at, claimed_at, updated_at, completed_at)
	SELECT 'live', 'l' || g, 'completed', 1, nextval('idem_gate.token_seq'), '{}',
		now(), now(), now(), now()
	  FROM generate_series(1, 1000) g});
old_claim($node, 'db2', 'crash_db2');
my $blocker = lock_claim($node, 'db1', 'locked');
set_and_reload($node, 'ALTER SYSTEM RESET idem_gate.naptime');
my $janitor = waiting_janitor($node, 'db1', 0);
ok($janitor, 'a pass in db1 is held');
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($janitor)");
ok($node->wait_for_log(qr/\[$janitor\] FATAL:  terminating background worker "idem_gate janitor" due to administrator command/,
	$log_offset), 'pg_terminate_backend ends its pass');
my $next = waiting_janitor($node, 'db1', $janitor);
ok($next, 'the next pass comes');
$log_offset = -s $node->logfile;
kill 'KILL', $next;
ok($node->wait_for_log(qr/\(PID $next\) was terminated by signal 9/, $log_offset),
	'kill -9 of a janitor during a pass: the postmaster restarts the cluster');
$node->poll_query_until('postgres', 'SELECT true');	# the restart is over
release_hold(@{$blocker});
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem_gate launcher'"),
	'after the crash restart the launcher is back');
ok(gone($node, 'db2', 'crash_db2'), 'db2 is served again');
ok($node->poll_query_until('db1', "SELECT count(*) = 0 FROM idem_gate.claims WHERE workflow = 'bulk' OR key = 'locked'"),
	'db1 finishes its deletions');
is(count_rows($node, 'db2', "workflow = 'live'"), '1000', 'and every live row is intact');

# a streaming standby runs no worker in any database; after promotion the
# janitors serve them all
set_and_reload($node, "ALTER SYSTEM SET idem_gate.retention = '1000d'");
wait_setting($node, 'idem_gate.retention', '1000d');
sleep 1.5;
old_claim($node, $_, "standby_$_") for qw(db1 db2 plain);
$node->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'bk', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
sleep 3;
is($standby->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idem_gate%'"),
	'0', 'no idem_gate worker on a standby');
is($standby->safe_psql($_, "SELECT count(*) FROM idem_gate.claims WHERE key = 'standby_$_'"),
	'1', "the expired row is still there on the standby ($_)") for qw(db1 db2 plain);
$node->stop;
$standby->promote;
$standby->safe_psql('postgres', 'ALTER SYSTEM RESET idem_gate.retention; SELECT pg_reload_conf()');
ok(gone($standby, $_, "standby_$_"), "after promotion the janitor serves $_") for qw(db1 db2 plain);
$standby->stop;

# a list naming a database that does not exist: one log line, no restart
# loop; a janitor limit refused in postgresql.conf: a warning, the default
my $lonely = PostgreSQL::Test::Cluster->new('lonely');
$lonely->init;
$lonely->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
idem_gate.database = 'postgres, missing_db'
idem_gate.naptime = 1
idem_gate.max_janitors = 0
});
$lonely->start;
$lonely->safe_psql('postgres', 'CREATE EXTENSION idem_gate');
ok($lonely->wait_for_log(qr/idem_gate: database "missing_db" does not exist; the janitor waits for it/),
	'a missing database in the list is reported');
old_claim($lonely, 'postgres', 'listed');
ok(gone($lonely, 'postgres', 'listed'), 'the other listed database is served');
sleep 4;
$log = slurp_file($lonely->logfile);
is(scalar(() = $log =~ /does not exist/g), 1, 'the missing database is reported once');
unlike($log, qr/FATAL|terminated by exit code|exited with exit code 1/, 'without a restart loop');
like($log, qr/WARNING:  0 is outside the valid range for parameter "idem_gate.max_janitors" \(1 \.\. 1024\)/,
	'max_janitors = 0 in postgresql.conf is refused');
is($lonely->safe_psql('postgres', 'SHOW idem_gate.max_janitors'), '3', 'and the default kept');
$log_offset = -s $lonely->logfile;
$lonely->safe_psql('postgres', 'CREATE DATABASE missing_db');
ok($lonely->wait_for_log(qr/extension idem_gate is not installed in database "missing_db"; idling/, $log_offset),
	'once it exists, its janitor comes (and says the extension is missing)');

# a role that does not exist: one log line, the janitors wait for it
$lonely->safe_psql('missing_db', 'CREATE EXTENSION idem_gate');
$log_offset = -s $lonely->logfile;
set_and_reload($lonely, "ALTER SYSTEM SET idem_gate.worker_role = 'janitor_role'");
ok($lonely->wait_for_log(qr/idem_gate: role "janitor_role" does not exist; the janitor waits for it/, $log_offset),
	'a missing worker_role is reported');
old_claim($lonely, 'missing_db', 'no_role');
sleep 3;
is(count_rows($lonely, 'missing_db', "key = 'no_role'"), '1', 'no pass runs without it');
$log = slurp_file($lonely->logfile, $log_offset);
is(scalar(() = $log =~ /does not exist/g), 1, 'it is reported once');
unlike($log, qr/FATAL/, 'and no janitor fails to connect');
$lonely->safe_psql('postgres', 'CREATE ROLE janitor_role SUPERUSER LOGIN');
ok(gone($lonely, 'missing_db', 'no_role'), 'once the role exists the passes run');
ok($lonely->poll_query_until('postgres', 'SELECT janitor_passes > 0 FROM idem_gate.stats'),
	'and are counted');

# the bounds of max_janitors and the syntax of the list
for my $bad ('0', '-1', '100000', '8')
{
	($ret, $out, $err) = $lonely->psql('postgres', "ALTER SYSTEM SET idem_gate.max_janitors = $bad");
	isnt($ret, 0, "max_janitors = $bad is refused");
	like($err, qr/invalid value for parameter "idem_gate.max_janitors"|is outside the valid range/,
		"with the setting's error ($bad)");
}
like($err, qr/max_worker_processes = 8, at most 7 janitors/, 'the detail names max_worker_processes');
($ret, $out, $err) = $lonely->psql('postgres', "ALTER SYSTEM SET idem_gate.max_janitors = 7");
is($ret, 0, 'max_janitors = 7 is accepted with max_worker_processes = 8');
($ret, $out, $err) = $lonely->psql('postgres', q{ALTER SYSTEM SET idem_gate.database = '"unterminated'});
isnt($ret, 0, 'a malformed database list is refused');
($ret, $out, $err) = $lonely->psql('postgres', q{ALTER SYSTEM SET idem_gate.database = 'a', '"Mixed Case"'});
is($ret, 0, 'a list with a quoted name is accepted');
$lonely->stop;

# no worker slot for a janitor (max_worker_processes = 2: the logical
# replication launcher's and idem_gate's):
# the launcher warns at its first failed start, once, and tries again
# every 10 s without warning again
my $crowded = PostgreSQL::Test::Cluster->new('crowded');
$crowded->init;
$crowded->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
max_worker_processes = 2
idem_gate.naptime = 1
});
$crowded->start;
ok($crowded->wait_for_log(qr/WARNING:  idem_gate: could not start a janitor/),
	'a janitor that cannot start is reported');
my $clog = slurp_file($crowded->logfile);
my ($ready) = $clog =~ /^(\S+ \S+) \S+ \[\d+\] LOG:  database system is ready to accept connections/m;
my ($warned) = $clog =~ /^(\S+ \S+) \S+ \[\d+\] WARNING:  idem_gate: could not start a janitor/m;
my $seconds = $crowded->safe_psql('postgres',
	"SELECT extract(epoch FROM '$warned'::timestamp - '$ready'::timestamp)");
cmp_ok($seconds, '<', 8, 'at the first failed start, not at a retry 10 s later');
sleep 11;
$clog = slurp_file($crowded->logfile);
is(scalar(() = $clog =~ /could not start a janitor/g), 1, 'and only once');
$crowded->stop;

done_testing();
