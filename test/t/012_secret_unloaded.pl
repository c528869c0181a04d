# Without preloading, the library is loaded by a session's first gate call
# and only then checks idem_gate.secret_file.  Whoever makes that call, a
# file that cannot be used must not be described to a role that is not a
# superuser: no WARNING naming the path reaches that client, the reason
# goes to the server log, and a keyed call says there is no secret.  A
# superuser's session still gets the WARNING with the reason.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('unloaded');
$node->init;
my $path = $node->basedir . '/vault-7f3a/secrets';
mkdir($node->basedir . '/vault-7f3a') or die;
$node->append_conf('postgresql.conf', "idem_gate.secret_file = '$path'");
$node->start;
$node->safe_psql('postgres', q{
	SET client_min_messages = error;
	CREATE EXTENSION idem_gate;
	CREATE ROLE client LOGIN;
	GRANT USAGE ON SCHEMA idem_gate TO client;
	GRANT EXECUTE ON FUNCTION idem_claim(text, text, interval) TO client;
	INSERT INTO idem_gate.policies (workflow, keyed) VALUES ('crm', true);
});

my $offset = -s $node->logfile;
my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT idem_claim('plain-1', 'orders')", extra_params => [ '-U', 'client' ]);
is($out, 'new', "a non-superuser's first call works");
unlike($err, qr/vault-7f3a/, 'and shows that role nothing of the secret file');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT idem_claim('ann\@example.com', 'crm')", extra_params => [ '-U', 'client' ]);
like($err, qr/workflow "crm" is keyed, but idem_gate.secret_file lists no secret/,
	'a keyed call in that session says there is no secret');
unlike($err, qr/vault-7f3a/, 'without the path');
like(slurp_file($node->logfile, $offset),
	qr/idem_gate.secret_file cannot be used in this session.*\n.*vault-7f3a/,
	'the server log has the reason');

($ret, $out, $err) = $node->psql('postgres', "SELECT idem_claim('plain-2', 'orders')");
like($err, qr/invalid value for parameter "idem_gate.secret_file"/,
	"a superuser's session gets the WARNING");

$node->stop;
done_testing();
