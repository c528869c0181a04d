# The stored form of a keyed key is HMAC-SHA256(secret, workflow || 0x00 ||
# key) byte for byte, though each backend hashes a secret's two pads only
# when it takes the secrets in: compared with pgcrypto's hmac() in another
# session, for secrets of 32, 64, 65, 100 and 128 bytes and keys across
# the SHA-256 block's boundaries, in one session that lives across reloads
# which put a new secret first and remove the older one, and in new
# sessions; preloaded and not.  A secret a reload removed is gone from the
# memory of that session's backend after its next call, and from the
# postmaster's: neither its bytes nor the SHA-256 states of its pads are
# there.
use strict;
use warnings;
use Digest::SHA qw(sha256);
use IPC::Run;
use List::Util qw(min);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('keyed_hmac');
$node->init;
my $secrets = $node->data_dir . '/secrets';
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
idem_gate.naptime = '1h'
idem_gate.secret_file = '$secrets'
});

# write the secret file, mode 0600: [id, secret bytes] pairs, current first
sub write_secrets
{
	open(my $fh, '>', "$secrets.new") or die $!;
	print $fh join('', map { "$_->[0] " . unpack('H*', $_->[1]) . "\n" } @_);
	close($fh);
	chmod(0600, "$secrets.new");
	rename("$secrets.new", $secrets) or die $!;
}
sub reload { $node->reload; sleep 1; }
sub random_bytes { return pack('C*', map { int(rand(256)) } 1 .. $_[0]); }

my %s = map { ("s$_" => random_bytes($_)) } (32, 64, 65, 100, 128);
write_secrets([ 's32', $s{s32} ]);
$node->start;

if ($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_available_extensions WHERE name = 'pgcrypto'") ne '1')
{
	$node->stop;
	plan skip_all => 'pgcrypto is not installed';
}

# keys of 1 to 131 bytes and a few others: with "crm" and its 0x00, the
# message fills the inner hash's first block exactly, and crosses it
$node->safe_psql('postgres', q{
	CREATE EXTENSION idem_gate;
	CREATE EXTENSION pgcrypto;
	INSERT INTO idem_gate.policies (workflow, keyed) VALUES ('crm', true);
	CREATE TABLE keys (n serial, k text);
	INSERT INTO keys (k) SELECT 'k' || repeat('x', g) FROM generate_series(0, 130) g;
	INSERT INTO keys (k) VALUES ('ann@example.com'), ('+4915112345678'), ('Ünïcødé ☃'), (' ');
	-- the contract's definition, through pgcrypto
	CREATE FUNCTION definition(id text, secret text, wf text, k text) RETURNS text
	LANGUAGE sql AS $$
		SELECT id || ':' || encode(hmac(convert_to(wf, 'UTF8') || '\x00'::bytea || convert_to(k, 'UTF8'),
									   decode(secret, 'hex'), 'sha256'), 'hex') $$;
});
my $nkeys = $node->safe_psql('postgres', 'SELECT count(*) FROM keys');

# the definition's forms of every key under a secret, in a session of its
# own (the secret's bytes pass through that backend's memory, never through
# the session whose memory is searched below)
sub definition
{
	my ($id) = @_;
	my $hex = unpack('H*', $s{$id});
	return $node->safe_psql('postgres',
		"SELECT string_agg(definition('$id', '$hex', 'crm', k), ',' ORDER BY n) FROM keys");
}

# one session across reloads: psql reading statements from a pipe
my ($in, $out, $err) = ('', '', '');
my $session = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres') ],
	'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
sub in_session
{
	my ($sql) = @_;
	$out = '';
	$in .= "$sql;\n\\echo __done__\n";
	$session->pump until $out =~ /__done__\n/ || $err =~ /ERROR/;
	die "in session: $err" if $err =~ /ERROR/;
	(my $r = $out) =~ s/__done__\n$//;
	chomp $r;
	return $r;
}
# the forms of every key are the definition's (in any order as a set): on
# a difference, the first
sub same_forms
{
	my ($got, $want, $name, $as_set) = @_;
	my @g = split(/[,\n]/, $got);
	my @w = split(/[,\n]/, $want);
	if ($as_set)
	{
		@g = sort @g;
		@w = sort @w;
	}
	my ($i) = grep { ($g[$_] // '') ne ($w[$_] // '') } 0 .. ($#g > $#w ? $#g : $#w);
	ok(!defined($i), $name)
	  or diag("form " . ($i + 1) . " of " . scalar(@w) . ": got " . ($g[$i] // 'none') .
		", the definition " . ($w[$i] // 'none'));
}
my $forms_sql = "SELECT string_agg(idem_key('crm', k), ',' ORDER BY n) FROM keys";
my $outcomes_sql = "SELECT string_agg(DISTINCT r.outcome::text, ',') || ' ' || count(*) FROM keys, idem_claim_ex(k, 'crm') r";
my $pid = in_session('SELECT pg_backend_pid()');

# where: which of the patterns a process's readable memory holds
sub in_memory
{
	my ($pid, @patterns) = @_;
	no warnings 'portable';
	my @found = (0) x @patterns;
	open(my $maps, '<', "/proc/$pid/maps") or die "maps of $pid: $!";
	open(my $mem, '<:raw', "/proc/$pid/mem") or die "memory of $pid: $!";
	while (my $line = <$maps>)
	{
		my ($lo, $hi, $perm, $name) =
		  $line =~ /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/ or next;
		next if $perm !~ /^r/ || $name =~ /^\[(vvar|vsyscall|vvar_vclock)\]/;
		# the program's and libraries' code and constants
		next if $name =~ m{^/} && $perm !~ /w/;
		my ($start, $end) = (hex($lo), hex($hi));
		my $tail = '';
		for (my $off = $start; $off < $end; $off += 1 << 20)
		{
			my $buf;
			sysseek($mem, $off, 0) or last;
			my $n = sysread($mem, $buf, min(1 << 20, $end - $off));
			last unless $n;
			my $hay = $tail . $buf;
			for my $i (0 .. $#patterns)
			{
				$found[$i] = 1 if index($hay, $patterns[$i]) >= 0;
			}
			$tail = substr($hay, -64);
		}
	}
	return join('', @found);
}

# a secret's bytes and the SHA-256 states after its two pads (RFC 2104: a
# key longer than the block hashed first), as OpenSSL keeps them: eight
# 32-bit words in the machine's order
sub traces
{
	my ($key) = @_;
	my @t = ($key);
	$key = sha256($key) if length($key) > 64;
	$key .= "\0" x (64 - length($key));
	for my $pad (0x36, 0x5c)
	{
		my $d = Digest::SHA->new(256);
		$d->add($key ^ (chr($pad) x 64));
		my ($h) = $d->getstate =~ /^H:(\S+)$/m;
		push @t, pack('L8', map { hex } split(/:/, $h));
	}
	return @t;
}
my $with_openssl = $node->config_data('--configure') =~ /--with-(openssl|ssl=openssl)/;

# s32 alone: the session and a new one give the definition's forms, and
# claims store them
same_forms(in_session($forms_sql), definition('s32'), 's32 (32 bytes): the session computes the definition');
same_forms($node->safe_psql('postgres', $forms_sql), definition('s32'), 'and a new session');
is(in_session($outcomes_sql), "new $nkeys", 'every key claimed under s32');
same_forms($node->safe_psql('postgres', "SELECT string_agg(key, ',') FROM idem_gate.claims WHERE workflow = 'crm' AND key LIKE 's32:%'"),
	definition('s32'), 'stored as the definition says', 1);

# s64 first, s32 second: the current form is s64's, and the claims stored
# under s32 are found through the session's form under the older secret
write_secrets([ 's64', $s{s64} ], [ 's32', $s{s32} ]);
reload();
same_forms(in_session($forms_sql), definition('s64'), 's64 (one block) first: the session computes the definition');
is(in_session($outcomes_sql), "in_flight $nkeys", "s32's claims are found under the older secret");
same_forms($node->safe_psql('postgres', $forms_sql), definition('s64'), 'and a new session');

# the session's backend and the postmaster hold s32 while it is listed
my $pm = (split(/\n/, slurp_file($node->data_dir . '/postmaster.pid')))[0];
my @t32 = traces($s{s32});
my $readable = open(my $probe, '<:raw', "/proc/$pid/mem");
SKIP:
{
	skip 'no readable /proc/PID/mem', 2 unless $readable;
	is(in_memory($pid, @t32), $with_openssl ? '111' : '100',
		"while s32 is listed, the session's backend holds it" . ($with_openssl ? ' and its pads\' states' : ''));
	is(in_memory($pm, $t32[0]), '1', 'and the postmaster holds it');
}

# s65 first, s64 second, s32 removed: the session's next call is the
# definition under s65, s32's claims are new again, and s32 is gone
write_secrets([ 's65', $s{s65} ], [ 's64', $s{s64} ]);
reload();
same_forms(in_session($forms_sql), definition('s65'), 's65 first: the session computes the definition');
SKIP:
{
	skip 'no readable /proc/PID/mem', 2 unless $readable;
	is(in_memory($pid, @t32), '000', "after the reload removed s32 and one call, the session's backend holds nothing of it");
	is(in_memory($pm, $t32[0]), '0', 'nor the postmaster');
}
is(in_session($outcomes_sql), "new $nkeys", "s32's claims are no longer found");
same_forms($node->safe_psql('postgres', "SELECT string_agg(key, ',') FROM idem_gate.claims WHERE workflow = 'crm' AND key LIKE 's65:%'"),
	definition('s65'), 'claimed again under s65, stored as the definition says', 1);

# longer than a block: hashed first
write_secrets([ 's100', $s{s100} ], [ 's65', $s{s65} ]);
reload();
same_forms(in_session($forms_sql), definition('s100'), 's100 first: the session computes the definition');
is(in_session($outcomes_sql), "in_flight $nkeys", "s65's claims are found under the older secret");
write_secrets([ 's128', $s{s128} ]);
reload();
same_forms(in_session($forms_sql), definition('s128'), 's128 alone: the session computes the definition');
same_forms($node->safe_psql('postgres', $forms_sql), definition('s128'), 'and a new session');

$in .= "\\q\n";
$session->finish;

# without preloading: the secrets are the setting's own in each backend
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
write_secrets([ 's32', $s{s32} ]);
$node->restart;
same_forms($node->safe_psql('postgres', $forms_sql), definition('s32'), 'not preloaded: s32 gives the definition');
same_forms($node->safe_psql('postgres', qq{
	$forms_sql;
	COPY (SELECT 's100 ' || '@{[ unpack('H*', $s{s100}) ]}' UNION ALL SELECT 's32 ' || '@{[ unpack('H*', $s{s32}) ]}')
	  TO PROGRAM 'cat > $secrets.new && chmod 600 $secrets.new && mv $secrets.new $secrets';
	DO \$\$ BEGIN PERFORM pg_reload_conf(); PERFORM pg_sleep(1); END \$\$;
	$forms_sql}), definition('s32') . "\n" . definition('s100'),
	'and in that session after a reload puts s100 first, the definition under s100');

$node->stop;
done_testing();
