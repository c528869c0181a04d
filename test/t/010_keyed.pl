# Keyed keys where a server keeps them: the secret file as PostgreSQL reads
# it (missing at start, refused at reload with the line number and never
# the line), no raw key in any file of the cluster (heap, indexes, WAL,
# statistics) nor in the server log while a plain workflow's keys are
# there, pg_dump and restore with the same secrets, and one owner per key
# while a reload rotates the secrets under concurrent claims.
use strict;
use warnings;
use File::Find;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('keyed');
$node->init;
my $secrets = $node->data_dir . '/secrets';
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate, pg_stat_statements'
idem_gate.naptime = 1
idem_gate.stuck_after = '1s'
idem_gate.secret_file = '$secrets'
# the client's own statement text is the client's: the gate's output alone
log_min_error_statement = panic
log_statement = none
max_connections = 40
});

# write the secret file (mode 0600 unless told) and reload
sub write_secrets
{
	my ($lines, $mode) = @_;
	open(my $fh, '>', "$secrets.new") or die $!;
	print $fh join("\n", @$lines), "\n";
	close($fh);
	chmod($mode // 0600, "$secrets.new");
	rename("$secrets.new", $secrets) or die $!;
}
sub reload { $node->reload; sleep 1; }
sub hex_secret { return unpack('H*', pack('C*', map { int(rand(256)) } 1 .. ($_[0] // 32))); }

# a missing file at start: the server starts, a keyed workflow refuses
my $offset = 0;
$node->start;
like(slurp_file($node->logfile),
	qr/invalid value for parameter "idem_gate.secret_file".*\n.*Could not open/,
	'a missing secret file at start is logged');
$node->safe_psql('postgres', q{
	CREATE EXTENSION idem_gate;
	CREATE EXTENSION pg_stat_statements;
	INSERT INTO idem_gate.policies (workflow, keyed) VALUES ('crm', true);
});
my ($rc, $out, $err) = $node->psql('postgres', "SELECT idem_claim('RAWKEYED_0\@example.com', 'crm', NULL)");
like($err, qr/workflow "crm" is keyed, but idem_gate.secret_file lists no secret/,
	'without a secret a keyed claim is refused (55000), never stored plain');

# the file, then reload
my $s1 = hex_secret();
write_secrets([ "s1 $s1" ]);
reload();
is($node->safe_psql('postgres', "SELECT idem_claim('RAWKEYED_0\@example.com', 'crm', NULL)"),
	'new', 'after the reload the keyed claim works');

# at reload: a group-readable file, a short secret, bad hex: logged with the
# line number, never its content, and the secrets in force stay
my @bad = (
	[ [ "s1 $s1" ], 0640, qr/has group or world access/ ],
	[ [ "s1 $s1", 'short ' . hex_secret(31) ], 0600, qr/The secret on line 2 .* has 31 bytes/ ],
	[ [ '# a comment', '', "bad ZZSECRETCONTENTZZ" . ('0' x 64) ], 0600,
	  qr/The secret on line 3 .* is not written in hexadecimal digits/ ],
	[ [ 'abcdefghijklmnopq ' . hex_secret() ], 0600, qr/Line 1 .* does not begin with an id/ ],
);
for my $case (@bad)
{
	my ($lines, $mode, $detail) = @$case;
	$offset = -s $node->logfile;
	write_secrets($lines, $mode);
	reload();
	my $log = slurp_file($node->logfile, $offset);
	like($log, $detail, "a bad file is logged: $detail");
	unlike($log, qr/ZZSECRETCONTENTZZ|$s1/, 'never with a secret or a line of the file');
	is($node->safe_psql('postgres', "SELECT idem_claim('RAWKEYED_0\@example.com', 'crm', NULL)"),
		'in_flight', 'the last good secrets stay in force');
}
write_secrets([ "s1 $s1" ]);
reload();

# a path that is not a regular file (a FIFO, a directory, a symbolic link
# to a FIFO) is refused without blocking: at reload the postmaster logs it
# and goes on accepting connections, ALTER SYSTEM answers at once, and the
# secrets in force stay
{
	my $fifo = $node->basedir . '/secrets.fifo';
	my $link = $node->basedir . '/secrets.link';
	system('mkfifo', '-m', '600', $fifo) == 0 or die "mkfifo: $!";
	symlink($fifo, $link) or die "symlink: $!";
	for my $path ($fifo, $node->basedir, $link)
	{
		$offset = -s $node->logfile;
		$node->append_conf('postgresql.conf', "idem_gate.secret_file = '$path'");
		$node->reload;
		my ($ret, $out, $err) = $node->psql('postgres', "SELECT 'connected'",
			timeout => 10);
		is($out, 'connected', "after a reload naming $path, the server accepts connections");
		$node->poll_query_until('postgres', "SELECT pg_read_file('" . $node->logfile . "', $offset, 100000) LIKE '%is not a regular file%'")
		  or diag('no refusal logged');
		like(slurp_file($node->logfile, $offset), qr/"\Q$path\E" is not a regular file/,
			"the refusal of $path is logged");
		($ret, $out, $err) = $node->psql('postgres',
			"ALTER SYSTEM SET idem_gate.secret_file = '$path'", timeout => 10);
		like($err, qr/is not a regular file/, "ALTER SYSTEM naming $path is refused at once");
		is($node->safe_psql('postgres', "SELECT idem_claim('RAWKEYED_0\@example.com', 'crm', NULL)"),
			'in_flight', 'the secrets in force stay');
	}
	$node->append_conf('postgresql.conf', "idem_gate.secret_file = '$secrets'");
	reload();
}

# distinctive keys in a keyed and in a plain workflow, through every path
# that writes or logs a key: claims, completions, failures, operators'
# actions, errors, the janitor's stuck alerts, the SQL path as well
$offset = -s $node->logfile;
$node->safe_psql('postgres', q{
	SELECT pg_stat_statements_reset();
	CREATE FUNCTION run(wf text, prefix text) RETURNS void LANGUAGE plpgsql AS $$
	DECLARE
		t bigint;
	BEGIN
		FOR i IN 1..30 LOOP
			SELECT token INTO t FROM idem_claim_ex(prefix || i || '@example.com', wf, NULL, 'fp', 'run');
			IF i % 3 = 0 THEN
				PERFORM idem_complete(prefix || i || '@example.com', wf, t, '{"ok": true}');
			ELSIF i % 3 = 1 THEN
				PERFORM idem_fail(prefix || i || '@example.com', wf, t, 'after', false);
				PERFORM idem_resolve(prefix || i || '@example.com', wf, 'retry', NULL, 'checked', 'ops');
			END IF;
			BEGIN
				PERFORM idem_complete(prefix || i || '@example.com', wf, t + 100000, NULL);
			EXCEPTION WHEN OTHERS THEN NULL;
			END;
			BEGIN
				PERFORM idem_claim_ex(prefix || i || '@example.com', wf, NULL, 'other');
			EXCEPTION WHEN OTHERS THEN NULL;
			END;
		END LOOP;
		PERFORM idem_release(prefix || '30@example.com', wf, 'done', 'ops');
		SET LOCAL idem_gate.direct_writes = off;
		FOR i IN 31..40 LOOP
			SELECT token INTO t FROM idem_claim_ex(prefix || i || '@example.com', wf, NULL, NULL, 'run');
			PERFORM idem_complete(prefix || i || '@example.com', wf, t, NULL);
		END LOOP;
		PERFORM * FROM idem_claim_many(ARRAY[prefix || '50@example.com', prefix || '51@example.com'], wf);
	END $$;
	SELECT run('crm', 'RAWKEYED_');
	SELECT run('plain', 'RAWPLAIN_');
	SELECT count(*) FROM idem_claim_ex('RAWKEYED_0@example.com', 'crm');
	SELECT idem_claim('RAWKEYED_60@example.com', 'crm', NULL), idem_claim('RAWPLAIN_60@example.com', 'plain', NULL);
});
# errors a client sees, and the log records
$node->psql('postgres', "SELECT idem_complete('RAWKEYED_1\@example.com', 'crm', 0, NULL)");
$node->psql('postgres', "SELECT idem_complete('RAWPLAIN_1\@example.com', 'plain', 0, NULL)");
$node->psql('postgres', "SELECT idem_claim_ex('RAWKEYED_2\@example.com', 'crm', NULL, 'other')");
# the janitor alerts the two stuck claims (1 s), naming their keys in the log
ok($node->poll_query_until('postgres', 'SELECT alerts >= 2 FROM idem_gate.stats'),
	'the janitor alerted the stuck claims');
$node->safe_psql('postgres', 'CHECKPOINT');
$node->safe_psql('postgres', 'SELECT pg_switch_wal()');

my %hits = (RAWKEYED => 0, RAWPLAIN => 0);
find({ no_chdir => 1, wanted => sub {
	return unless -f $_;
	my $f = $_;
	return if $f =~ m{/secrets$};
	open(my $fh, '<:raw', $f) or return;
	local $/;
	my $data = <$fh>;
	close($fh);
	for my $k (keys %hits) { $hits{$k}++ if index($data, $k) >= 0; }
} }, $node->data_dir);
is($hits{RAWKEYED}, 0, 'no file of the cluster holds a keyed key (heap, indexes, WAL, statistics)');
cmp_ok($hits{RAWPLAIN}, '>', 1, "the plain workflow's keys are there ($hits{RAWPLAIN} files)");
my $log = slurp_file($node->logfile, $offset);
unlike($log, qr/RAWKEYED/, 'the server log names no keyed key');
like($log, qr/RAWPLAIN_/, "while it names the plain workflow's keys");
like($log, qr/key "s1:[0-9a-f]+/, "and the keyed workflow's as stored");
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_statements WHERE query LIKE '%RAWKEYED%'"),
	'0', 'pg_stat_statements holds no keyed key');
cmp_ok($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_statements WHERE query LIKE '%idem_gate.claims%'"),
	'>', 0, "while it tracks the gate's own statements");

# pg_dump and restore: the same secrets find the restored claims
my $dump = $node->basedir . '/keyed.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ],
	'pg_dump of a database with keyed claims');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('restored'), $dump ], 'pg_restore');
is($node->safe_psql('restored', q{
	SELECT outcome FROM idem_claim_ex('RAWKEYED_3@example.com', 'crm')}),
	'completed', 'a restored keyed claim answers completed with the same secret file');
is($node->safe_psql('restored', q{
	SELECT outcome FROM idem_claim_ex('RAWKEYED_2@example.com', 'crm')}),
	'in_flight', 'and a restored processing claim in_flight');

# concurrent claims while reloads rotate the secrets: one owner per key
$node->safe_psql('postgres', q{
	CREATE TABLE grants (k int);
	INSERT INTO idem_gate.policies (workflow, keyed) VALUES ('rot', true);
});
my $script = $node->basedir . '/rot.sql';
open(my $fh, '>', $script) or die $!;
print $fh q{\set k random(1, 3000)
INSERT INTO grants SELECT :k FROM idem_claim_ex('rot_' || :k, 'rot', NULL, NULL, 'run-' || :client_id || '-' || random()::text) c WHERE c.outcome = 'new';
};
close($fh);
my ($pin, $pout, $perr) = ('', '', '');
# at a set rate, so that the 3000 keys are not all taken under the first
# secret before its rotation takes effect, as a fast machine does unthrottled
my $bench = IPC::Run::start([ 'pgbench', '-n', '-c', '8', '-j', '2', '-T', '25', '-R', '200', '--max-tries=20', '-f', $script,
	$node->connstr('postgres') ], '<', \$pin, '>', \$pout, '2>', \$perr);
my @lines = ("s1 $s1");
# each rotation waits (a while) for a claim under the secret before it, so
# the five rotations fall inside the run however slowly pgbench starts
for my $r (2 .. 6)
{
	my $prev = 's' . ($r - 1);
	for (1 .. 40)
	{
		last if $node->safe_psql('postgres', qq{
			SELECT count(*) FROM idem_gate.claims
			WHERE workflow = 'rot' AND key LIKE '$prev:%'}) > 0;
		select(undef, undef, undef, 0.25);
	}
	unshift @lines, "s$r " . hex_secret();
	write_secrets(\@lines);
	$node->reload;
}
$bench->finish;
like($pout, qr/number of transactions actually processed: \d+/, 'pgbench ran') or diag($perr);
is($node->safe_psql('postgres', 'SELECT count(*) FROM (SELECT k FROM grants GROUP BY k HAVING count(*) > 1) d'),
	'0', 'no key was granted twice while the secrets rotated');
is($node->safe_psql('postgres', q{
	SELECT (SELECT count(DISTINCT k) FROM grants) = (SELECT count(*) FROM idem_gate.claims WHERE workflow = 'rot')}),
	't', 'one row per granted key');
cmp_ok($node->safe_psql('postgres', q{
	SELECT count(DISTINCT split_part(key, ':', 1)) FROM idem_gate.claims WHERE workflow = 'rot'}),
	'>', 1, 'claims were made under several secrets')
  or diag($node->safe_psql('postgres', q{
	SELECT string_agg(s || ' ' || n, ', ') FROM (SELECT split_part(key, ':', 1) s, count(*) n
	FROM idem_gate.claims WHERE workflow = 'rot' GROUP BY 1 ORDER BY 1) d}));

$node->stop;
done_testing();
