# The janitor through a promotion's timeline: no pass while the server is
# read-only for its sessions (default_transaction_read_only from the
# configuration, the database or the worker's role, as an HA manager fences
# a promoted server), one LOG line when that starts and one when passes
# resume, within a naptime of writes being allowed; no janitor on a standby
# or on an old primary rewound into one, and passes on the server promoted
# in its place.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('primary');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
idem_gate.naptime = 1
wal_log_hints = on
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION idem_gate;
INSERT INTO idem_gate.policies (workflow, retention) VALUES ('short', '2 seconds');
});

# a completed claim of the short workflow, expired two seconds later
sub expired_claim
{
	my ($n, $key) = @_;
	$n->safe_psql('postgres', qq{
		SELECT idem_claim('$key', 'short');
		SELECT idem_complete('$key', 'short');
	});
}

sub rows
{
	my ($n, $key) = @_;
	return $n->safe_psql('postgres', "SELECT count(*) FROM idem_gate.claims WHERE key = '$key'");
}

sub count_log
{
	my ($n, $re, $from) = @_;
	my $log = slurp_file($n->logfile, $from);
	my @m = ($log =~ /$re/g);
	return scalar @m;
}

# 1. read-only by the configuration: no pass, one line, no error
expired_claim($node, 'k1');
my $off = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER SYSTEM SET default_transaction_read_only = on');
$node->reload;
sleep 5;
is(rows($node, 'k1'), '1', 'no row is deleted while the server is read-only');
is(count_log($node, qr/database "postgres" is read-only; no janitor pass there/, $off), 1,
	'one LOG line when the janitor meets a read-only server');
is(count_log($node, qr/read-only transaction/, $off), 0, 'and no error at any pass');
my $on = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER SYSTEM RESET default_transaction_read_only');
$node->reload;
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM idem_gate.claims WHERE key = 'k1'")
  or die 'the janitor did not resume';
pass('passes resume once writes are allowed');
is(count_log($node, qr/database "postgres" accepts the janitor's writes again/, $on), 1,
	'with one LOG line');

# 2. read-only by the database, then by the janitor's own role
expired_claim($node, 'k2');
$off = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER DATABASE postgres SET default_transaction_read_only = on');
sleep 5;
is(rows($node, 'k2'), '1', 'read-only by the database: no pass');
is(count_log($node, qr/is read-only; no janitor pass/, $off), 1, 'one line');
$node->safe_psql('postgres',
	'SET default_transaction_read_only = off; ALTER DATABASE postgres RESET default_transaction_read_only');
$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idem_gate.claims WHERE key = 'k2'")
  or die 'the janitor did not resume after the database setting';
pass('passes resume after the database setting is reset');

$node->safe_psql('postgres', 'CREATE ROLE jan LOGIN');
$node->append_conf('postgresql.conf', "idem_gate.worker_role = 'jan'");
$node->reload;
expired_claim($node, 'k3');
$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idem_gate.claims WHERE key = 'k3'")
  or die 'the janitor connecting as jan does not work';
pass('a janitor connecting as a role that is not a superuser works, acting as the owner');
expired_claim($node, 'k4');
$off = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER ROLE jan SET default_transaction_read_only = on');
sleep 5;
is(rows($node, 'k4'), '1', 'read-only by the worker\'s role: no pass');
is(count_log($node, qr/is read-only; no janitor pass/, $off), 1, 'one line');
$node->safe_psql('postgres', 'ALTER ROLE jan RESET default_transaction_read_only');
$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idem_gate.claims WHERE key = 'k4'")
  or die 'the janitor did not resume after the role setting';
pass('passes resume after the role setting is reset');

# 3. a standby, promoted while fenced, then writable; the old primary rewound
$node->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'bk', has_streaming => 1);
$standby->start;
expired_claim($node, 'k5');
$node->wait_for_catchup($standby);
# the old primary is fenced before the claim expires, as a manager does
$node->safe_psql('postgres', 'ALTER SYSTEM SET default_transaction_read_only = on');
$node->reload;
sleep 3;
is($standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idem_gate%'"),
	'0', 'no launcher nor janitor on a standby');

$node->stop('fast');
$standby->append_conf('postgresql.conf', 'default_transaction_read_only = on');
$standby->reload;
$off = -s $standby->logfile;
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'no promotion';
$standby->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem_gate launcher'")
  or die 'no launcher after promotion';
sleep 5;
is(rows($standby, 'k5'), '1', 'promoted but fenced: no pass');
is(count_log($standby, qr/is read-only; no janitor pass/, $off), 1, 'one line');
is(count_log($standby, qr/ERROR/, $off), 0, 'no error while fenced');
$standby->append_conf('postgresql.conf', 'default_transaction_read_only = off');
$standby->reload;
$standby->poll_query_until('postgres', "SELECT count(*) = 0 FROM idem_gate.claims WHERE key = 'k5'")
  or die 'the promoted server\'s janitor did not start working';
pass('writable: the promoted server\'s janitor deletes');

# the old primary, rewound to follow the new one
my $pgdata = $node->data_dir;
command_ok([ 'pg_rewind', '--target-pgdata', $pgdata,
		'--source-server', $standby->connstr('postgres') ],
	'the old primary is rewound');
$node->append_conf('postgresql.conf',
	"primary_conninfo = '" . $standby->connstr . "'");
open(my $sig, '>', "$pgdata/standby.signal") or die;
close($sig);
$node->start;
is($node->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't',
	'the old primary runs as a standby');
sleep 2;
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idem_gate%'"),
	'0', 'and runs no janitor');

$node->stop;
$standby->stop;
done_testing();
